/**
 * Seeded fuzz of REST, RPC and batch (issue 18): a few thousand requests generated from a
 * fixed seed — grammar pieces, mutated query strings, random and hostile JSON bodies,
 * bad escapes, tokens of every kind — sent over real HTTP on keep-alive connections.
 * It fails on any 5xx other than a raised exception (`rpc/fail`), any error body that is
 * not exactly `{"error": string}` with one of plinth's own messages (so no PostgreSQL text
 * can pass), and any connection error. The seed is printed with every failure; run one
 * again with `FUZZ_SEED=<seed> npx tap test/core/fuzz.test.ts` (`FUZZ_COUNT` sets the size).
 */
import t from 'tap';
import { Agent, request } from 'node:http';
import { restApp, SEED_SQL, userToken, USER_A } from '../rest/helpers.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 18);
const COUNT = Number(process.env.FUZZ_COUNT ?? 3000);
const PARALLEL = 6;
/** Bounds the run on a crowded machine: what is left unsent past it is reported, not failed. */
const BUDGET_MS = Number(process.env.FUZZ_BUDGET_MS ?? 40000);

/** mulberry32: small, fast, good enough to pick test input. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const rand = rng(SEED);
const int = (n: number) => Math.floor(rand() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
const chance = (p: number) => rand() < p;

const TABLES = ['authors', 'books', 'chapters', 'paragraphs', 'sentences', 'notes', 'book_titles', 'author_counts', 'secrets', 'loners', 'reviews', 'nope', 'batch', 'rpc', 'Authors', '', 'authors"', 'pg_class'];
const COLUMNS = ['id', 'name', 'born', 'tags', 'meta', 'active', 'rating', 'during', 'mood', 'nick', 'search', 'title', 'pages', 'author_id', 'published', 'body', 'owner', 'public', 'book_id', 'position', 'nope', 'ID', '"id"', 'authors.id', 'books', 'count', ''];
const OPS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'like', 'ilike', 'is', 'in', 'cs', 'cd', 'ov', 'sl', 'sr', 'nxl', 'nxr', 'adj', 'fts', 'plfts', 'phfts', 'wfts', 'fts(english)', 'fts(nope)', 'wfts(simple)', 'not.eq', 'not.in', 'not.is', 'xx', 'eq(x)', ''];
const FUNCS = ['add', 'greet', 'author_names', 'authors_born_after', 'first_author', 'stats', 'touch', 'new_author', 'fail', 'sum_all', 'echo', 'whoami', 'my_notes', 'all_notes', 'overloaded', 'mood_of', 'not_granted', 'raw_body', 'nope', 'hidden', 'slow'];
const ARGS = ['a', 'b', 'c', 'name', 'greeting', 'd', 'nums', 'payload', 'm', 'x', 'token', ''];

const nest = (n: number, open = '[', close = ']', inner = '1') => open.repeat(n) + inner + close.repeat(n);

function scalar(): string {
  switch (int(24)) {
    case 0: return String(int(1000));
    case 1: return String(-int(1e9));
    case 2: return '9'.repeat(1 + int(400));
    case 3: return '1e400';
    case 4: return pick(['1969-03-01', '2024-02-30', 'infinity', 'epoch', '0000-00-00', 'today']);
    case 5: return pick(['null', 'true', 'false', 'unknown', 'NULL', 'nil']);
    case 6: return pick(['happy', 'sad', 'ok', 'angry']);
    case 7: return pick(['{a,b}', '{}', '{"a b",c}', '{{1,2},{3,4}}', nest(1 + int(10), '{', '}'), '{', '}{']);
    case 8: return pick(['[1,5)', '(,)', 'empty', '[5,1)', '[a,b]', '(', ')']);
    case 9: return '!'.repeat(1 + int(60)) + 'fox';
    case 10: return '('.repeat(int(4000)) + 'fox';
    case 11: return '- '.repeat(int(50)) + 'fox';
    case 12: return pick(['fox & dog', 'fox | !dog', "'quoted'", 'fox:*', 'a <-> b', '&', '|', '!', '<2>', "'", '"']);
    case 13: return pick(['{"a":1}', '[1,2]', nest(int(300)), '{"a":', '"str"']);
    case 14: return pick(['%00', '%ff', '%', '%2', '%e2%82', '\u0000']);
    case 15: return pick(['é', '日本', '\u{1F600}', '\uFFFF', '\uD800']);
    case 16: return pick(['*', '**', '%', '_', '\\', '\\\\', '"', '""', "''", ',', '.', '()', '(a,b)', '("a",b)']);
    case 17: return 'x'.repeat(int(3000));
    case 18: return pick(['NaN', 'Infinity', '-0', '0x10', '1.5', '.5', '1e-400']);
    case 19: return pick(['00000000-0000-4000-8000-00000000000a', 'not-a-uuid']);
    case 20: return '';
    case 21: return pick(['ursula', 'Ursula Le Guin', 'The Dispossessed']);
    case 22: return pick(['1;drop table authors', "1' or '1'='1", '$1', '$$', '::text']);
    default: return String(int(10));
  }
}

function selectList(depth = 0): string {
  if (chance(0.05)) return Array(pick([301, 400, 1700])).fill(pick(COLUMNS.slice(0, 5))).join(',');
  if (chance(0.03)) return Array(100 + int(200)).fill('*').join(',');
  const n = 1 + int(5);
  const items: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = int(10);
    if (r < 5) items.push(pick(COLUMNS));
    else if (r < 7) items.push('*');
    else if (r < 9 && depth < 5) items.push(pick(['books', 'authors', 'chapters', 'paragraphs', 'sentences', 'reviews', 'nope', 'count']) + '(' + selectList(depth + 1) + ')');
    else items.push(pick(['', ' ', '(', ')', 'a(', 'a()', '*(id)', 'id::text', 'alias:id', 'meta->a', 'books!fk(id)', '...books(id)']));
  }
  return items.join(pick([',', ',', ',', ' , ', ',,']));
}

function filterValue(op: string): string {
  if (op.endsWith('in')) return '(' + Array.from({ length: int(5) }, scalar).map((v) => (chance(0.3) ? `"${v}"` : v)).join(',') + pick([')', '', '))']);
  return scalar();
}

function logicGroup(depth = 0): string {
  const terms = Array.from({ length: 1 + int(3) }, () =>
    chance(0.2) && depth < 40 ? pick(['and', 'or', 'not.and', 'not.or']) + logicGroup(depth + 1) : `${pick(COLUMNS)}.${pick(OPS)}.${filterValue('eq')}`,
  );
  return '(' + terms.join(',') + pick([')', ')', '']);
}

/** Percent-encode most of the time; sometimes leave it raw (only bytes Node's client lets through). */
function enc(s: string): string {
  if (chance(0.85)) {
    try {
      return encodeURIComponent(s);
    } catch {
      return s.replace(/[^\x21-\x7e]/g, '');
    }
  }
  return s.replace(/[^\x21-\x7e]/g, '').replace(/#/g, '%23');
}

/** A query that mostly parses and names real columns of authors and books, so the database is reached. */
function plausibleQuery(table: string): string {
  const cols = table === 'authors' ? ['id', 'name', 'born', 'tags', 'meta', 'active', 'rating', 'during', 'mood', 'nick', 'search'] : ['id', 'title', 'pages', 'author_id', 'published'];
  const parts = ['select=' + enc(Array.from({ length: 1 + int(4) }, () => (chance(0.2) ? (table === 'authors' ? 'books(id,title)' : 'authors(name)') : pick(cols))).join(','))];
  const n = int(3);
  for (let i = 0; i < n; i++) {
    const op = pick(OPS.slice(0, 22));
    parts.push(`${pick(cols)}=${enc(`${op}.${filterValue(op)}`)}`);
  }
  if (chance(0.3)) parts.push(`order=${pick(cols)}.desc`, `limit=${int(5)}`);
  return parts.join('&');
}

function queryString(): string {
  const parts: string[] = [];
  const n = int(6);
  for (let i = 0; i < n; i++) {
    switch (int(8)) {
      case 0: parts.push('select=' + enc(selectList())); break;
      case 1: parts.push('order=' + enc(`${pick(COLUMNS)}${pick(['', '.asc', '.desc', '.nullsfirst', '.desc.nullslast', '.up'])}`)); break;
      case 2: parts.push(pick(['limit', 'offset']) + '=' + enc(pick(['0', '1', '10', '-1', 'x', '99999999999999999999', '']))); break;
      case 3: parts.push(pick(['or', 'and', 'not.or', 'not.and']) + '=' + enc(logicGroup())); break;
      default: {
        const op = pick(OPS);
        parts.push(enc(pick(COLUMNS)) + '=' + enc(`${op}.${filterValue(op)}`));
      }
    }
  }
  let q = parts.join('&');
  if (chance(0.15)) q = mutate(q);
  return q;
}

const MUTATION_CHARS = '(),.!*"{}[]%\\&=:;-+ _~\'$#@^|<>?/';
function mutate(s: string): string {
  const a = [...s];
  const n = 1 + int(4);
  for (let i = 0; i < n; i++) {
    const at = int(a.length + 1);
    const c = MUTATION_CHARS[int(MUTATION_CHARS.length)];
    switch (int(3)) {
      case 0: a.splice(at, 0, c); break;
      case 1: a.splice(at, 1); break;
      default: a[at] = c;
    }
  }
  return a.join('').replace(/[^\x21-\x7e]/g, '').replace(/#/g, '%23');
}

function jsonValue(depth = 0): unknown {
  switch (int(depth > 3 ? 6 : 10)) {
    case 0: return int(1000) - 500;
    case 1: return scalar();
    case 2: return null;
    case 3: return chance(0.5);
    case 4: return rand() * 1e308 * (chance(0.5) ? 10 : 1);
    case 5: return pick(['1969-03-01', 'happy', '[1,5)', '{a,b}', '!'.repeat(40) + 'x']);
    case 6: return Array.from({ length: int(4) }, () => jsonValue(depth + 1));
    case 7: return JSON.parse(nest(1 + int(9)));
    case 8: return row(depth + 1);
    default: return { a: jsonValue(depth + 1) };
  }
}

function row(depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const n = int(5);
  for (let i = 0; i < n; i++) out[pick(COLUMNS)] = jsonValue(depth);
  if (chance(0.5)) out.name = 'fuzz ' + int(1e6);
  if (chance(0.3)) out.title = 'fuzz ' + int(1e6);
  if (chance(0.3)) out.body = 'fuzz';
  return out;
}

function plausibleRow(table: string): Record<string, unknown> {
  if (table === 'books') {
    const out: Record<string, unknown> = { title: 'fuzz ' + int(1e6) };
    if (chance(0.5)) out.pages = chance(0.8) ? int(900) : jsonValue(1);
    if (chance(0.3)) out.author_id = chance(0.8) ? 1 + int(4) : jsonValue(1);
    if (chance(0.3)) out.published = chance(0.7) ? '2001-02-03' : scalar();
    return out;
  }
  const out: Record<string, unknown> = { name: 'fuzz ' + int(1e9) };
  if (chance(0.4)) out.tags = chance(0.6) ? ['a', 'b'] : jsonValue(1);
  if (chance(0.4)) out.meta = jsonValue(0);
  if (chance(0.3)) out.during = chance(0.6) ? '[1,5)' : scalar();
  if (chance(0.3)) out.mood = pick(['happy', 'sad', 'ok', 'x']);
  if (chance(0.3)) out.rating = chance(0.6) ? 5.5 : jsonValue(1);
  if (chance(0.2)) out.nick = 'n'.repeat(int(14));
  return out;
}

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** A 500 from a raised exception is the contract here. */
  mayRaise: boolean;
}

function bodyText(value: unknown): string {
  switch (int(30)) {
    case 0: return `{"meta": ${nest(15000)}}`;
    case 1: return nest(129);
    case 2: return '{"a": ';
    case 3: return '';
    case 4: return 'null';
    case 5: return mutate(JSON.stringify(value));
    default: return JSON.stringify(value);
  }
}

function batchOps(): unknown[] {
  const n = chance(0.05) ? 21 + int(5) : int(6);
  const ops: unknown[] = [];
  for (let i = 0; i < n; i++) {
    const rpc = chance(0.3);
    const op: Record<string, unknown> = {
      id: chance(0.9) ? `o${i}` : pick(['o0', '', 'x']),
      method: pick(['GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'get']),
      path: rpc ? '/rest/v1/rpc/' + pick(FUNCS) : pick(['/rest/v1/', '/rest/v1/', '/rest/', '/auth/v1/']) + pick(TABLES) + (chance(0.1) ? '?' + queryString() : ''),
    };
    if (chance(0.6)) op.query = chance(0.2) ? `id=eq.{{o${int(i + 1)}.id}}` : queryString();
    if (chance(0.6)) op.body = chance(0.3) ? [row(), row()] : chance(0.2) ? { name: `{{o${int(i + 1)}.name}}` } : rpc ? argsBody() : row();
    ops.push(op);
  }
  return ops;
}

function argsBody(): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const n = int(4);
  for (let i = 0; i < n; i++) out[pick(ARGS)] = chance(0.2) ? JSON.parse(nest(1 + int(9))) : jsonValue(1);
  return out;
}

function generate(tokens: string[]): Req {
  const headers: Record<string, string> = {};
  const tok = chance(0.85) ? tokens[int(2)] : pick(tokens);
  if (tok !== '') {
    if (chance(0.5) && tok !== tokens[1]) headers.apikey = tok;
    else headers.authorization = chance(0.97) ? `Bearer ${tok}` : tok;
  }
  if (chance(0.2)) headers.prefer = pick(['return=minimal', 'count=exact', 'count=planned', 'count=estimated', 'return=representation, count=exact', 'count=nope']);
  if (chance(0.1)) headers.accept = 'application/vnd.pgrst.object+json';
  const kind = int(20);
  if (kind < 9) {
    const method = pick(['GET', 'GET', 'GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'HEAD']);
    const plausible = chance(0.45);
    const table = plausible ? pick(['authors', 'books']) : chance(0.9) ? pick(TABLES) : pick(['books%ff', '%', '%zz', 'a%2fb', encodeURIComponent('naïve'), 'x'.repeat(1100)]);
    const qs = plausible ? plausibleQuery(table) : queryString();
    const req: Req = { method, path: `/rest/v1/${plausible || chance(0.9) ? enc(table) : table}?${qs}`, headers, mayRaise: false };
    if (method === 'POST' || method === 'PATCH') {
      const mk = plausible ? () => plausibleRow(table) : row;
      req.body = bodyText(chance(0.3) && method === 'POST' ? [mk(), mk(), mk()] : mk());
      headers['content-type'] = chance(0.95) ? 'application/json' : pick(['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx']);
    }
    return req;
  }
  if (kind < 15) {
    const fn = pick(FUNCS);
    const post = chance(0.6);
    const req: Req = { method: post ? 'POST' : 'GET', path: `/rest/v1/rpc/${enc(fn)}`, headers, mayRaise: fn === 'fail' };
    if (post) {
      req.body = bodyText(chance(0.1) ? jsonValue() : argsBody());
      headers['content-type'] = 'application/json';
    } else {
      const qs = Object.entries(argsBody()).map(([k, v]) => `${enc(k)}=${enc(typeof v === 'string' ? v : JSON.stringify(v))}`);
      if (chance(0.1)) qs.push(qs[0] ?? 'a=1');
      req.path += '?' + (chance(0.1) ? mutate(qs.join('&')) : qs.join('&'));
    }
    return req;
  }
  const ops = batchOps();
  const body = chance(0.1) ? pick([{ operations: 'x' }, { atomic: 'yes', operations: [] }, [], { operations: [1, 2] }]) : { atomic: chance(0.7), operations: ops };
  headers['content-type'] = 'application/json';
  return { method: 'POST', path: '/rest/v1/batch', headers, body: bodyText(body), mayRaise: JSON.stringify(body).includes('rpc/fail') };
}

const MESSAGES = new Set([
  'invalid request',
  'invalid request body',
  'relation not found',
  'function not found',
  'unknown column in request',
  'invalid embed in request',
  'method not allowed',
  'permission denied',
  'duplicate value violates unique constraint',
  'JSON object requested, multiple (or no) rows returned',
  'request body too large',
  'not found',
  'invalid or expired token',
  'missing credentials',
  'request header fields too large',
  'none of the accepted media types can be produced',
]);
const PATTERNS = [/^duplicate output name in select: .*; give one an alias$/s, /^operation .* is not allowed: /s, /^duplicate operation id /s, /^too many operations: at most \d+ \(MAX_BATCH_OPERATIONS\)$/, /^unresolved template \{\{/];

function plinthMessage(m: unknown, mayRaise: boolean): boolean {
  if (typeof m !== 'string') return false;
  if (MESSAGES.has(m) || PATTERNS.some((p) => p.test(m))) return true;
  return mayRaise && m === 'internal database error';
}

/** '' when the answer keeps the rules, else what is wrong. */
function judge(req: Req, status: number, text: string): string {
  if (status >= 500 && !(status === 500 && req.mayRaise)) return `status ${status}`;
  if (status < 400 && status !== 207) return '';
  if (req.method === 'HEAD') return '';
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return 'error body is not JSON';
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'error body is not an object';
  const b = body as Record<string, unknown>;
  if (req.path.startsWith('/rest/v1/batch') && (status === 422 || status === 207)) {
    if (!Array.isArray(b.results)) return 'batch without results';
    for (const r of b.results as Array<Record<string, unknown>>) {
      if (r.error !== undefined && !plinthMessage(r.error, req.mayRaise)) return `batch result error ${JSON.stringify(r.error)}`;
      if (typeof r.status === 'number' && r.status >= 500 && !req.mayRaise) return `batch result status ${r.status}`;
    }
    if (status === 422) {
      const m = /^operation .* failed: (.*)$/s.exec(String(b.error));
      if (!m || !plinthMessage(m[1], req.mayRaise)) return `batch error ${JSON.stringify(b.error)}`;
    }
    return '';
  }
  const keys = Object.keys(b);
  if (keys.length !== 1 || keys[0] !== 'error') return `error body keys ${keys.join(',')}`;
  if (!plinthMessage(b.error, req.mayRaise)) return `message ${JSON.stringify(b.error)}`;
  return '';
}

t.test(`fuzz: ${COUNT} requests from seed ${SEED}`, async (t) => {
  // The default budget of the test service (DB_POOL_SIZE 2) for six requests at once over three
  // API roles: lanes, owner pool and transaction pools take connections back from each other.
  const app = await restApp(t);
  await app.db.sql.unsafe(SEED_SQL).simple();
  const port = Number(new URL(app.url).port);
  const user = await userToken(USER_A);
  // The first two are the usual ones (anon key, a user's token in Authorization).
  const tokens = [app.anonKey, user, app.serviceKey, '', 'garbage', app.anonKey.slice(0, -3) + 'abc'];
  const reqs = Array.from({ length: COUNT }, () => generate(tokens));
  const agent = new Agent({ keepAlive: true, maxSockets: PARALLEL });
  t.teardown(() => agent.destroy());

  const send = (r: Req) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const hr = request({ agent, host: '127.0.0.1', port, method: r.method, path: r.path, headers: r.headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      hr.on('error', reject);
      hr.end(r.body);
    });

  const failures: string[] = [];
  const statuses = new Map<number, number>();
  let next = 0;
  const until = Date.now() + BUDGET_MS;
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      while (next < reqs.length && failures.length < 20 && Date.now() < until) {
        const i = next++;
        const r = reqs[i];
        let problem: string;
        let answer = '';
        try {
          const { status, text } = await send(r);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          problem = judge(r, status, text);
          answer = `${status} ${text.slice(0, 300)}`;
        } catch (err) {
          problem = `connection error ${(err as Error).message}`;
        }
        if (problem !== '') {
          failures.push(`seed ${SEED}, request #${i}: ${problem}\n  ${r.method} ${r.path.slice(0, 500)}\n  headers ${JSON.stringify(r.headers).slice(0, 300)}\n  body ${(r.body ?? '').slice(0, 500)}\n  → ${answer}`);
        }
      }
    }),
  );
  if (next < reqs.length && failures.length < 20) t.comment(`time budget of ${BUDGET_MS} ms reached after ${next} of ${reqs.length} requests`);
  t.comment(`seed ${SEED}; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
  for (const f of failures) t.fail(f);
  t.equal(failures.length, 0, `no rule broken (seed ${SEED}; FUZZ_SEED=${SEED} npx tap test/core/fuzz.test.ts)`);
  t.ok((statuses.get(200) ?? 0) > next / 20, 'a fair share of the requests succeed (the generator reaches past the parser)');
  const r = await app.call('GET', '/health');
  t.equal(r.status, 200, 'the service is still healthy');
});
