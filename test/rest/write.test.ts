/**
 * POST, PATCH, DELETE on /rest/v1/{table} (interface §4.3, §7.2; contract §8, §9): one row
 * or an array, return=minimal, 409 on duplicates, on_conflict and merge-duplicates
 * ignored, the required filter, body errors, the database state after each write.
 */
import t from 'tap';
import { restApp, SEED_SQL } from './helpers.ts';

const app = await restApp(t, { sql: SEED_SQL });
const sql = app.db.sql;
const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  app.call(method, path, { apikey: app.anonKey, body, headers });

t.test('POST one object answers 201 with an array of the inserted row', async (t) => {
  const r = await call('POST', '/rest/v1/books', { title: 'Six Memos', author_id: 2, pages: 124 });
  t.equal(r.status, 201);
  t.same(r.body, [{ id: 101, author_id: 2, title: 'Six Memos', pages: 124, published: null }]);
  const [row] = await sql`select title, pages from public.books where id = 101`;
  t.same(row, { title: 'Six Memos', pages: 124 }, 'persisted');
});

t.test('POST an array inserts every row; missing keys are null, defaults for absent columns', async (t) => {
  const r = await call('POST', '/rest/v1/chapters?select=title,position', [
    { book_id: 2, title: 'Anarres', position: 1 },
    { book_id: 2, title: 'Urras', position: 2 },
  ]);
  t.equal(r.status, 201);
  t.same(r.body, [
    { title: 'Anarres', position: 1 },
    { title: 'Urras', position: 2 },
  ], 'select shapes the representation');
  const empty = await call('POST', '/rest/v1/chapters', []);
  t.equal(empty.status, 201);
  t.same(empty.body, [], 'an empty array inserts nothing');
  const defaults = await call('POST', '/rest/v1/authors?select=active,tags', { name: 'Defaulted' });
  t.same(defaults.body, [{ active: true, tags: [] }], 'column defaults apply to absent columns');
});

t.test('POST converts JSON to column types: arrays, jsonb, ranges, enums, domains, dates', async (t) => {
  const r = await call('POST', '/rest/v1/authors?select=name,tags,meta,during,mood,nick,born,rating', {
    name: 'Typed',
    tags: ['a', 'b"c'],
    meta: { x: [1, { y: null }] },
    during: '[2000,2010)',
    mood: 'sad',
    nick: 'short',
    born: '2001-02-03',
    rating: 4.5,
  });
  t.equal(r.status, 201);
  t.same(r.body, [{ name: 'Typed', tags: ['a', 'b"c'], meta: { x: [1, { y: null }] }, during: '[2000,2010)', mood: 'sad', nick: 'short', born: '2001-02-03', rating: 4.5 }]);
});

t.test('POST with embedding in the representation', async (t) => {
  const r = await call('POST', '/rest/v1/books?select=title,authors(name)', { title: 'If on a winter night', author_id: 2 });
  t.equal(r.status, 201);
  t.same(r.body, [{ title: 'If on a winter night', authors: { name: 'Italo Calvino' } }]);
});

t.test('Prefer: return=minimal answers 201 and no body', async (t) => {
  const r = await call('POST', '/rest/v1/books', { title: 'Minimal' }, { prefer: 'return=minimal' });
  t.equal(r.status, 201);
  t.equal(r.text, '');
  const [row] = await sql`select count(*)::int as n from public.books where title = 'Minimal'`;
  t.equal(row.n, 1, 'inserted');
});

t.test('duplicates give 409; on_conflict and merge-duplicates are ignored', async (t) => {
  const dup = await call('POST', '/rest/v1/authors', { name: 'Italo Calvino' });
  t.equal(dup.status, 409);
  t.same(dup.body, { error: 'duplicate value violates unique constraint' });
  const upsert = await call('POST', '/rest/v1/authors?on_conflict=name', { name: 'Italo Calvino', active: false }, { prefer: 'resolution=merge-duplicates' });
  t.equal(upsert.status, 409, 'no upsert');
  t.same(upsert.body, { error: 'duplicate value violates unique constraint' });
  const [row] = await sql`select active from public.authors where name = 'Italo Calvino'`;
  t.equal(row.active, true, 'unchanged');
  const pk = await call('POST', '/rest/v1/books', { id: 1, title: 'Same id' });
  t.equal(pk.status, 409);
  const half = await call('POST', '/rest/v1/authors', [{ name: 'New One' }, { name: 'Ursula Le Guin' }]);
  t.equal(half.status, 409);
  const [none] = await sql`select count(*)::int as n from public.authors where name = 'New One'`;
  t.equal(none.n, 0, 'an array is all or nothing');
});

t.test('constraint and type errors are 400 invalid request', async (t) => {
  const cases: [unknown, string][] = [
    [{ pages: 1 }, 'not null'],
    [{ title: 'x', author_id: 999 }, 'foreign key'],
    [{ title: 'x', pages: 'many' }, 'type'],
    [{ title: 'x', published: 'soon' }, 'date'],
  ];
  for (const [body, what] of cases) {
    const r = await call('POST', '/rest/v1/books', body);
    t.equal(r.status, 400, what);
    t.same(r.body, { error: 'invalid request' }, what);
  }
  const domain = await call('POST', '/rest/v1/authors', { name: 'Domain', nick: 'far too long a nickname' });
  t.equal(domain.status, 400, 'domain check');
  t.same(domain.body, { error: 'invalid request' });
  const generated = await call('POST', '/rest/v1/authors', { name: 'Gen', search: 'x' });
  t.equal(generated.status, 400, 'generated column');
});

t.test('body errors', async (t) => {
  const cases: [string, string | undefined, number, string][] = [
    ['POST', '{"title":', 400, 'invalid request body'],
    ['POST', '"a string"', 400, 'invalid request body'],
    ['POST', '[1, 2]', 400, 'invalid request body'],
    ['POST', '', 400, 'invalid request body'],
    ['POST', '{"nosuch": 1}', 400, 'unknown column in request'],
    ['POST', '[{"title": "a"}, {"nosuch": 1}]', 400, 'unknown column in request'],
    ['PATCH', '[{"title": "a"}]', 400, 'invalid request body'],
    ['PATCH', '{}', 400, 'invalid request body'],
    ['PATCH', '{"nosuch": 1}', 400, 'unknown column in request'],
  ];
  for (const [method, raw, status, error] of cases) {
    const r = await app.call(method, '/rest/v1/books?id=eq.1', { apikey: app.anonKey, raw, headers: { 'content-type': 'application/json' } });
    t.equal(r.status, status, `${method} ${raw}`);
    t.same(r.body, { error }, `${method} ${raw}`);
  }
  const text = await app.call('POST', '/rest/v1/books', { apikey: app.anonKey, raw: 'title=x', headers: { 'content-type': 'text/plain' } });
  t.equal(text.status, 400);
  t.same(text.body, { error: 'invalid request body' }, 'a Content-Type other than JSON');
});

t.test('PATCH changes the filtered rows and answers them', async (t) => {
  const r = await call('PATCH', '/rest/v1/books?author_id=eq.1&select=id,pages', { pages: 500 });
  t.equal(r.status, 200);
  t.same((r.body as any[]).sort((a, b) => a.id - b.id), [
    { id: 1, pages: 500 },
    { id: 2, pages: 500 },
  ]);
  const rows = await sql`select id, pages from public.books where author_id = 1 order by id`;
  t.same(rows.map((x) => x.pages), [500, 500]);
  const other = await sql`select pages from public.books where id = 3`;
  t.equal(other[0].pages, 165, 'other rows untouched');
  const none = await call('PATCH', '/rest/v1/books?id=eq.999', { pages: 1 });
  t.equal(none.status, 200);
  t.same(none.body, [], 'no row matched: []');
  const group = await call('PATCH', '/rest/v1/books?or=(id.eq.1,id.eq.3)&select=id,title', { title: 'Renamed' });
  t.equal((group.body as any[]).length, 2, 'a logic group counts as a filter');
  const several = await call('PATCH', '/rest/v1/authors?id=eq.3&select=meta,tags,active', { meta: { a: 1 }, tags: ['x'], active: true });
  t.same(several.body, [{ meta: { a: 1 }, tags: ['x'], active: true }], 'several columns and types');
  const minimal = await call('PATCH', '/rest/v1/books?id=eq.3', { pages: 1 }, { prefer: 'return=minimal' });
  t.equal(minimal.status, 204);
  t.equal(minimal.text, '');
  t.equal((await sql`select pages from public.books where id = 3`)[0].pages, 1);
});

t.test('PATCH and DELETE without a filter are 400 and change nothing', async (t) => {
  const before = await sql`select count(*)::int as n from public.books`;
  const p = await call('PATCH', '/rest/v1/books', { pages: 0 });
  t.equal(p.status, 400);
  t.same(p.body, { error: 'invalid request' });
  const pq = await call('PATCH', '/rest/v1/books?select=id&order=id', { pages: 0 });
  t.equal(pq.status, 400, 'select and order are not filters');
  const d = await call('DELETE', '/rest/v1/books');
  t.equal(d.status, 400);
  t.same(d.body, { error: 'invalid request' });
  const limited = await call('DELETE', '/rest/v1/books?id=gt.0&limit=1');
  t.equal(limited.status, 400, 'a limited delete is refused, not widened');
  const after = await sql`select count(*)::int as n, count(*) filter (where pages = 0)::int as zero from public.books`;
  t.equal(after[0].n, before[0].n);
  t.equal(after[0].zero, 0);
});

t.test('DELETE removes the filtered rows and answers them', async (t) => {
  await sql`insert into public.books (id, title) values (200, 'Doomed'), (201, 'Doomed too'), (202, 'Kept')`;
  const r = await call('DELETE', '/rest/v1/books?id=in.(200,201)&select=id,title&order=id');
  t.equal(r.status, 200);
  t.same((r.body as any[]).sort((a, b) => a.id - b.id), [
    { id: 200, title: 'Doomed' },
    { id: 201, title: 'Doomed too' },
  ]);
  const left = await sql`select id from public.books where id >= 200 order by id`;
  t.same(left.map((x) => String(x.id)), ['202'], 'only the filtered rows went');
  const minimal = await call('DELETE', '/rest/v1/books?id=eq.202', undefined, { prefer: 'return=minimal' });
  t.equal(minimal.status, 204);
  t.same(await sql`select id from public.books where id = 202`, []);
  const fk = await call('DELETE', '/rest/v1/authors?id=eq.2');
  t.equal(fk.status, 400, 'a foreign key violation is 400 invalid request');
  t.same(fk.body, { error: 'invalid request' });
});

t.test('Prefer: count on writes answers Content-Range', async (t) => {
  const r = await call('POST', '/rest/v1/loners', [{ id: 1 }, { id: 2 }], { prefer: 'count=exact' });
  t.equal(r.status, 403, 'loners is read-only for anon');
  const s = await app.call('POST', '/rest/v1/loners', { token: app.serviceKey, body: [{ id: 1 }, { id: 2 }], headers: { prefer: 'count=exact' } });
  t.equal(s.status, 201);
  t.equal(s.headers.get('content-range'), '0-1/2');
});

t.test('Accept: object on writes: one row or 406 and nothing changes', async (t) => {
  const accept = 'application/vnd.pgrst.object+json';
  const one = await call('POST', '/rest/v1/books?select=title', { title: 'Single' }, { accept });
  t.equal(one.status, 201);
  t.same(one.body, { title: 'Single' });
  await sql`insert into public.books (id, title, pages) values (300, 'Pair', 7), (301, 'Pair', 7)`;
  const two = await call('PATCH', '/rest/v1/books?title=eq.Pair', { pages: 8 }, { accept });
  t.equal(two.status, 406);
  t.same(two.body, { error: 'JSON object requested, multiple (or no) rows returned' });
  t.same((await sql`select distinct pages from public.books where title = 'Pair'`).map((x) => x.pages), [7], 'rolled back');
});

t.test('views: writable views accept writes, others 405', async (t) => {
  const v = await call('POST', '/rest/v1/book_titles', { title: 'Through a view' });
  t.equal(v.status, 201);
  t.equal((v.body as any[])[0].title, 'Through a view');
  const m = await app.call('POST', '/rest/v1/author_counts', { token: app.serviceKey, body: { n: 1 } });
  t.equal(m.status, 405);
  t.same(m.body, { error: 'method not allowed' });
});

t.test('writes without a grant are 403', async (t) => {
  const r = await call('POST', '/rest/v1/secrets', { id: 1, value: 'x' });
  t.equal(r.status, 403);
  t.same(r.body, { error: 'permission denied' });
  const d = await call('DELETE', '/rest/v1/reviews?id=eq.1');
  t.equal(d.status, 403);
  t.same(d.body, { error: 'permission denied' });
});

t.test('the opt-in features are off by default: tx=rollback commits, no computed fields, aggregates or plans', async (t) => {
  const r = await call('PATCH', '/rest/v1/books?id=eq.4', { pages: 41 }, { prefer: 'tx=rollback' });
  t.equal(r.status, 200);
  t.equal(r.headers.get('preference-applied'), null, 'not applied');
  const [row] = await sql`select pages from public.books where id = 4`;
  t.equal(row.pages, 41, 'committed (REST_TX_END=commit)');

  await sql.unsafe(`create function public.shout(public.books) returns text language sql stable as 'select upper($1.title)';
    grant execute on function public.shout(public.books) to anon`);
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const computed = await call('GET', '/rest/v1/books?select=shout&id=eq.4');
  t.equal(computed.status, 400);
  t.same(computed.body, { error: 'unknown column in request' }, 'REST_COMPUTED_FIELDS=false');

  const agg = await call('GET', '/rest/v1/books?select=count()');
  t.equal(agg.status, 400, 'REST_AGGREGATES_ENABLED=false');
  t.same(agg.body, { error: 'aggregate functions are not enabled' });

  const plan = await call('GET', '/rest/v1/books?id=eq.4', undefined, { accept: 'application/vnd.pgrst.plan+json' });
  t.equal(plan.status, 406, 'REST_PLAN_ENABLED=false');
  t.same(plan.body, { error: 'none of the accepted media types can be produced' });
});
