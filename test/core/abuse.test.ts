/**
 * The shell under abuse (issue 18), over real HTTP: client input that would reach
 * PostgreSQL's limits is refused with 400 before it does (select items, JSON nesting,
 * tsquery negations and nesting, array dimensions) in REST, RPC and batch; client errors
 * are logged at info without a stack; replies fastify and Node's HTTP parser build (bad
 * URL, a head over 16 KB, a bad request line, shutting down) have plinth's one shape
 * `{"error": …}` and `Connection: close` where the connection closes.
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import { Agent, request } from 'node:http';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { restApp, SEED_SQL } from '../rest/helpers.ts';
import type { TestApp } from '../helpers/app.ts';
import { jsonDeeperThan } from '../../src/core/http.ts';
import { tsqueryTooComplex, bracesDeeperThan } from '../../src/rest/limits.ts';

const EXTRA_SQL = `
create table public.queries (id int primary key, q tsquery, grid int[]);
grant select, insert, update, delete on public.queries to anon;
create function public.slow(s float8) returns int language sql as 'select pg_sleep(s); select 1';
grant execute on function public.slow(float8) to anon;
`;

/** `levels` nested arrays around 1: `[[1]]` is 2. */
const nest = (levels: number): string => '['.repeat(levels) + '1' + ']'.repeat(levels);
const braces = (levels: number): string => '{'.repeat(levels) + '1' + '}'.repeat(levels);

interface LogLine {
  level: number;
  msg: string;
  [k: string]: unknown;
}

async function app(t: { teardown(fn: () => unknown): void }, lines?: LogLine[]): Promise<TestApp> {
  const log = lines
    ? pino(
        { level: 'info', base: undefined },
        new Writable({
          write(chunk, _enc, cb) {
            for (const l of String(chunk).split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as LogLine);
            cb();
          },
        }),
      )
    : undefined;
  const a = await restApp(t, { log, sql: EXTRA_SQL });
  await a.db.sql.unsafe(SEED_SQL).simple();
  return a;
}

t.test('the scanners themselves', async (t) => {
  t.equal(jsonDeeperThan(nest(128), 128), false, '128 levels pass');
  t.equal(jsonDeeperThan(nest(129), 128), true, '129 levels do not');
  t.equal(jsonDeeperThan(`["${'['.repeat(500)}"]`, 128), false, 'brackets inside strings do not count');
  t.equal(jsonDeeperThan(`["\\\\", ${nest(200)}]`, 128), true, 'an escaped backslash ends its string');
  t.equal(jsonDeeperThan(`["\\"[[[[", ${nest(2)}]`, 3), false, 'an escaped quote does not end its string');
  t.equal(tsqueryTooComplex('!'.repeat(16) + 'fox', 0x21, true), false);
  t.equal(tsqueryTooComplex('! '.repeat(17) + 'fox', 0x21, true), true, 'whitespace does not break a run');
  t.equal(tsqueryTooComplex('!!!!(!!!!(fox & !!!!cat))', 0x21, true), false, 'runs are per operand');
  t.equal(tsqueryTooComplex('('.repeat(33) + 'fox', 0x21, true), true, 'nesting');
  t.equal(bracesDeeperThan(braces(6), 6), false);
  t.equal(bracesDeeperThan(braces(7), 6), true);
  t.equal(bracesDeeperThan('{"{{{{{{{{"}', 6), false, 'quoted elements are skipped');
});

t.test('input that would reach PostgreSQL limits is refused with 400', async (t) => {
  const a = await app(t);
  const k = a.anonKey;
  const get = (path: string) => a.call('GET', path, { apikey: k });
  const post = (path: string, body: unknown) => a.call('POST', path, { apikey: k, body });
  const raw = (path: string, text: string) => a.call('POST', path, { apikey: k, raw: text, headers: { 'content-type': 'application/json' } });
  const invalidRequest = { error: 'invalid request' };
  const invalidBody = { error: 'invalid request body' };

  // select items (54011 above 1,664 target entries); each with its own output name
  const items = (n: number) => Array.from({ length: n }, (_, i) => `c${i}:id`).join(',');
  let r = await get('/rest/v1/authors?select=' + items(1700));
  t.same([r.status, r.body], [400, invalidRequest], '1,700 select items');
  r = await get('/rest/v1/authors?select=' + items(301));
  t.same([r.status, r.body], [400, invalidRequest], '301 select items (MAX 300)');
  r = await get('/rest/v1/authors?select=' + items(300) + '&id=eq.1');
  t.equal(r.status, 200, '300 select items are fine');
  r = await get('/rest/v1/authors?select=' + Array(160).fill('*').join(','));
  t.same([r.status, r.body], [400, invalidRequest], '160 stars over 11 columns: wider than 1,664');
  r = await get('/rest/v1/authors?select=id,books(' + Array(300).fill('id').join(',') + ')');
  t.same([r.status, r.body], [400, invalidRequest], 'items inside embeds count');

  // JSON nesting (54001 stack depth): a row, an RPC argument, a whole-body RPC, a batch, auth
  const deep = nest(15000);
  r = await raw('/rest/v1/authors', `{"name": "deep", "meta": ${deep}}`);
  t.same([r.status, r.body], [400, invalidBody], 'a row nested 15,000 levels deep');
  r = await raw('/rest/v1/rpc/echo', `{"payload": ${deep}}`);
  t.same([r.status, r.body], [400, invalidBody], 'an RPC argument');
  r = await raw('/rest/v1/rpc/raw_body', deep);
  t.same([r.status, r.body], [400, invalidBody], 'a whole-body RPC');
  r = await raw('/rest/v1/batch', `{"operations": [{"method": "POST", "path": "/rest/v1/authors", "body": {"name": "b", "meta": ${deep}}}]}`);
  t.same([r.status, r.body], [400, invalidBody], 'a batch body');
  r = await raw('/auth/v1/signup', `{"email": "deep@example.com", "password": "long enough", "data": ${deep}}`);
  t.same([r.status, r.body], [400, invalidBody], 'any JSON endpoint (auth)');
  r = await raw('/rest/v1/authors', `{"name": "d128", "meta": ${nest(127)}}`);
  t.equal(r.status, 201, '128 levels in all (MAX_JSON_DEPTH) are stored');
  r = await raw('/rest/v1/authors', `{"name": "d129", "meta": ${nest(128)}}`);
  t.same([r.status, r.body], [400, invalidBody], '129 are not');
  t.same(await a.db.sql`select name from public.authors where name like 'd1%' or name in ('deep', 'b') order by name`, [{ name: 'd128' }], 'nothing else written');

  // tsquery (XX000 tsquery stack too small; 54001 on deep parentheses)
  r = await get('/rest/v1/authors?search=fts.' + '!'.repeat(33) + 'fox');
  t.same([r.status, r.body], [400, invalidRequest], '33 leading ! in fts');
  r = await get('/rest/v1/authors?search=fts(english).' + '!'.repeat(40) + 'fox');
  t.same([r.status, r.body], [400, invalidRequest], 'with a language');
  r = await get('/rest/v1/authors?or=(search.fts.' + '!'.repeat(40) + 'fox,id.eq.1)');
  t.same([r.status, r.body], [400, invalidRequest], 'inside or()');
  r = await get('/rest/v1/authors?search=wfts.' + encodeURIComponent('- '.repeat(40) + 'fox'));
  t.same([r.status, r.body], [400, invalidRequest], '40 negations in wfts');
  r = await get('/rest/v1/authors?search=fts.' + '('.repeat(5000) + 'fox' + ')'.repeat(5000));
  t.same([r.status, r.body], [400, invalidRequest], 'parentheses 5,000 deep');
  r = await get('/rest/v1/authors?select=id&search=fts.' + '!'.repeat(16) + 'ursula');
  t.same([r.status, r.body], [200, [{ id: 1 }]], '16 negations are fine (an even number: ursula)');
  r = await get('/rest/v1/authors?search=plfts.' + '!'.repeat(40) + 'fox');
  t.equal(r.status, 200, 'plainto_tsquery does not parse operators');
  r = await get('/rest/v1/queries?q=eq.' + '!'.repeat(40) + 'fox');
  t.same([r.status, r.body], [400, invalidRequest], 'a tsquery column');
  r = await post('/rest/v1/queries', { id: 1, q: '!'.repeat(40) + 'fox' });
  t.same([r.status, r.body], [400, invalidBody], 'a tsquery value in a body');

  // array dimensions (54000 above 6)
  r = await get('/rest/v1/authors?tags=cs.' + braces(7));
  t.same([r.status, r.body], [400, invalidRequest], 'a 7-dimensional array literal');
  r = await get('/rest/v1/authors?tags=cs.' + braces(6));
  t.equal(r.status, 200, '6 dimensions are fine');
  r = await post('/rest/v1/queries', { id: 2, grid: JSON.parse(nest(7)) });
  t.same([r.status, r.body], [400, invalidBody], 'a 7-dimensional array in a body');
  r = await post('/rest/v1/queries', { id: 3, grid: braces(7) });
  t.same([r.status, r.body], [400, invalidBody], 'a 7-dimensional array literal in a body');
  r = await a.call('PATCH', '/rest/v1/queries?id=eq.1', { apikey: k, body: { grid: JSON.parse(nest(8)) } });
  t.same([r.status, r.body], [400, invalidBody], 'in a PATCH');
  r = await post('/rest/v1/rpc/sum_all', { nums: JSON.parse(nest(7)) });
  t.same([r.status, r.body], [400, invalidBody], 'an RPC array argument');
  r = await get('/rest/v1/rpc/sum_all?nums=' + braces(7));
  t.same([r.status, r.body], [400, invalidRequest], 'an RPC array argument on GET');
  r = await post('/rest/v1/rpc/sum_all', { nums: [1, 2, 3] });
  t.same([r.status, r.body], [200, 6], 'a plain one works');

  // batch: the same refusals as operations
  r = await post('/rest/v1/batch', {
    operations: [
      { id: 'a', method: 'GET', path: '/rest/v1/authors', query: 'select=' + Array(400).fill('id').join(',') },
    ],
  });
  t.equal(r.status, 422, 'a batch operation with 400 select items fails');
  t.equal(r.body.error, 'operation a failed: invalid request');
  r = await post('/rest/v1/batch', {
    atomic: false,
    operations: [
      { id: 'f', method: 'GET', path: '/rest/v1/authors', query: 'search=fts.' + '!'.repeat(40) + 'x' },
      { id: 'g', method: 'POST', path: '/rest/v1/rpc/sum_all', body: { nums: JSON.parse(nest(7)) } },
      { id: 'h', method: 'GET', path: '/rest/v1/authors', query: 'select=id&id=eq.1' },
    ],
  });
  t.same(
    [r.status, r.body.results],
    [
      207,
      [
        { id: 'f', status: 400, error: 'invalid request' },
        { id: 'g', status: 400, error: 'invalid request body' },
        { id: 'h', status: 200, data: [{ id: 1 }] },
      ],
    ],
    'partial batch',
  );

  // A raised exception stays 500 (interface §7.2).
  r = await post('/rest/v1/rpc/fail', {});
  t.same([r.status, r.body], [500, { error: 'internal database error' }], 'a raised exception is 500');
});

t.test('client errors are logged at info without a stack; a raised exception at error', async (t) => {
  const lines: LogLine[] = [];
  const a = await app(t, lines);
  const k = a.anonKey;
  let r = await a.call('GET', '/rest/v1/authors?select=' + Array(1700).fill('id').join(','), { apikey: k });
  t.equal(r.status, 400);
  r = await a.call('POST', '/rest/v1/authors', { apikey: k, raw: `{"meta": ${nest(15000)}}`, headers: { 'content-type': 'application/json' } });
  t.equal(r.status, 400);
  r = await a.call('GET', '/rest/v1/authors?nope=eq.1', { apikey: k });
  t.equal(r.status, 400);
  r = await a.call('POST', '/rest/v1/rpc/fail', { apikey: k, body: {} });
  t.equal(r.status, 500);
  // The error lines (each request also has its request line, msg `request`).
  const client = lines.filter((l) => l.status === 400 && l.msg !== 'request');
  t.equal(client.length, 3, 'one line per client error');
  for (const l of client) {
    t.equal(l.level, 30, `${l.msg}: info`);
    t.notOk('err' in l || 'stack' in l, `${l.msg}: no stack`);
    t.notOk(JSON.stringify(l).includes('idid') || JSON.stringify(l).length > 1000, 'the input is not echoed');
  }
  const raised = lines.filter((l) => l.status === 500 && l.msg !== 'request');
  t.equal(raised.length, 1);
  t.equal(raised[0].level, 50, 'a raised exception is an error');
  t.equal(raised[0].code, 'P0001', 'with its SQLSTATE');
  t.notOk(JSON.stringify(raised[0]).includes('    at '), 'without a driver stack');
  t.notOk(lines.some((l) => l.level >= 50 && l.status !== 500), 'nothing else at error level');
});

/** Write raw bytes, collect everything until the server closes the connection. */
function rawExchange(port: number, text: string | string[], opts: { timeoutMs?: number } = {}): Promise<{ data: string; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect(port, '127.0.0.1');
    let data = '';
    let ended = false;
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ data, ended });
    }, opts.timeoutMs ?? 10000);
    s.on('data', (d) => (data += d));
    s.on('end', () => (ended = true));
    s.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ data, ended });
    });
    for (const chunk of Array.isArray(text) ? text : [text]) s.write(chunk);
  });
}

function parseResponses(data: string): Array<{ status: number; headers: Record<string, string>; body: string }> {
  const out = [];
  let rest = data;
  while (rest.startsWith('HTTP/1.1 ')) {
    const headEnd = rest.indexOf('\r\n\r\n');
    const head = rest.slice(0, headEnd).split('\r\n');
    const headers: Record<string, string> = {};
    for (const h of head.slice(1)) {
      const i = h.indexOf(':');
      headers[h.slice(0, i).toLowerCase()] = h.slice(i + 1).trim();
    }
    const len = Number(headers['content-length'] ?? 0);
    out.push({ status: Number(head[0].split(' ')[1]), headers, body: rest.slice(headEnd + 4, headEnd + 4 + len) });
    rest = rest.slice(headEnd + 4 + len);
  }
  return out;
}

t.test("fastify's and Node's own replies have plinth's shape", async (t) => {
  const a = await app(t);
  const port = Number(new URL(a.url).port);

  let r = await a.call('GET', '/rest/v1/books%ff', { apikey: a.anonKey });
  t.same([r.status, r.body], [400, { error: 'invalid request' }], 'a bad percent-escape in the path');
  t.notOk(/books|FST_|statusCode/.test(r.text), 'no echo, no internal code');
  r = await a.call('GET', '/rest/v1/' + 'x'.repeat(1200), { apikey: a.anonKey });
  t.same([r.status, r.body], [400, { error: 'invalid request' }], 'a path parameter over its limit');
  r = await a.call('POST', '/rest/v1/authors', { apikey: a.anonKey, raw: '{}', headers: { 'content-type': 'text/xml' } });
  t.same([r.status, r.body], [400, { error: 'invalid request body' }], 'an unsupported content type');

  let x = await rawExchange(port, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`);
  let [res] = parseResponses(x.data);
  t.equal(res?.status, 431, 'a head over 16 KB: 431');
  t.same(JSON.parse(res.body), { error: 'request header fields too large' });
  t.equal(res.headers.connection, 'close', 'Connection: close');
  t.match(res.headers['content-type'], /^application\/json/);
  t.ok(x.ended, 'and the server closes');

  x = await rawExchange(port, 'BREW /health HTTP/1.1\r\nHost: x\r\n\r\n');
  [res] = parseResponses(x.data);
  t.same([res?.status, JSON.parse(res.body), res.headers.connection], [400, { error: 'invalid request' }, 'close'], 'a bad method');

  x = await rawExchange(port, 'POST /rest/v1/authors HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n{}');
  [res] = parseResponses(x.data);
  t.same([res?.status, JSON.parse(res.body), res.headers.connection], [400, { error: 'invalid request' }, 'close'], 'a bad Content-Length');
  t.notOk(x.data.includes('12x'), 'not echoed');

  x = await rawExchange(port, `POST /rest/v1/authors HTTP/1.1\r\nHost: x\r\napikey: ${a.anonKey}\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n{"name": "`);
  [res] = parseResponses(x.data);
  t.same([res?.status, JSON.parse(res.body), res.headers.connection], [413, { error: 'request body too large' }, 'close'], 'a body over MAX_BODY_BYTES');

  // A keep-alive client mixing requests the parser refuses with normal ones never sees a reset.
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  t.teardown(() => agent.destroy());
  const one = (i: number) =>
    new Promise<number>((resolve, reject) => {
      const big = i % 3 === 0;
      const req = request(
        { agent, host: '127.0.0.1', port, path: '/rest/v1/authors?select=id&id=eq.1', headers: { apikey: a.anonKey, ...(big ? { 'x-big': 'b'.repeat(17000) } : {}) } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end();
    });
  const statuses = new Map<number, number>();
  let errors = 0;
  await Promise.all(
    [0, 1, 2, 3].map(async (w) => {
      for (let i = w; i < 600; i += 4) {
        try {
          const s = await one(i);
          statuses.set(s, (statuses.get(s) ?? 0) + 1);
        } catch {
          errors++;
        }
      }
    }),
  );
  t.equal(errors, 0, 'no ECONNRESET in 600 keep-alive requests');
  t.same(Object.fromEntries(statuses), { 200: 400, 431: 200 }, 'every answer as expected');
});

t.test('shutting down: requests in flight finish with Connection: close; later ones get 503 in the one shape', async (t) => {
  const a = await app(t);
  const port = Number(new URL(a.url).port);
  const open = (first: string) => {
    const s = connect(port, '127.0.0.1');
    const st = { data: '', closed: new Promise<void>((resolve) => s.on('close', () => resolve())) };
    s.on('data', (d) => (st.data += d));
    s.write(first);
    return { s, st };
  };
  const body = '{"s": 1}';
  // A: a slow request in flight. B: a request whose head is still arriving.
  const A = open(`POST /rest/v1/rpc/slow HTTP/1.1\r\nHost: x\r\napikey: ${a.anonKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  const B = open('GET /health HTTP/1.1\r\nHost: x\r\n');
  await waitFor(async () => (await a.db.sql`select 1 from pg_stat_activity where datname = current_database() and query like '%slow%' and state = 'active' and pid <> pg_backend_pid()`).length > 0);
  // Both connections must be accepted before the server stops listening: one still in the
  // kernel's backlog then would be reset, which is not what this test is about.
  const server = a.service.app.server;
  await waitFor(() => new Promise<boolean>((resolve) => server.getConnections((err, n) => resolve(!err && n >= 2))));
  const closing = a.service.close();
  await waitFor(async () => !a.service.app.server.listening);
  B.s.write('\r\n');
  await Promise.all([A.st.closed, B.st.closed, closing]);
  const [done] = parseResponses(A.st.data);
  t.same([done?.status, done?.headers.connection], [200, 'close'], 'the request in flight is finished, and its connection closes');
  const [late] = parseResponses(B.st.data);
  t.equal(late?.status, 503, 'a request arriving after is refused');
  t.same(JSON.parse(late.body), { error: 'service shutting down' });
  t.equal(late.headers.connection, 'close');
});

async function waitFor(cond: () => Promise<boolean>, ms = 10000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
