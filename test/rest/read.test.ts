/**
 * GET /rest/v1/{table} (interface §4.3, §7.2; contract §8, §9): select and embedding both
 * ways with its depth limit, every filter operator (and `not.`), logic groups, order,
 * paging, counts and Content-Range, singular responses, and every error row.
 */
import t from 'tap';
import { restApp, SEED_SQL } from './helpers.ts';

const app = await restApp(t, { sql: SEED_SQL });
const get = (path: string, headers: Record<string, string> = {}) => app.call('GET', path, { apikey: app.anonKey, headers });

/** ids of the authors a filter query returns, in id order. */
async function authorIds(query: string): Promise<number[] | string> {
  const r = await get(`/rest/v1/authors?select=id&order=id&${query}`);
  if (r.status !== 200) return `${r.status} ${r.text}`;
  return (r.body as { id: number }[]).map((x) => x.id);
}

t.test('select: columns, star, default star', async (t) => {
  const r = await get('/rest/v1/authors?select=id,name&id=eq.2');
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^application\/json/);
  t.same(r.body, [{ id: 2, name: 'Italo Calvino' }]);

  const all = await get('/rest/v1/books?id=eq.3');
  t.same(all.body, [{ id: 3, author_id: 2, title: 'Invisible Cities', pages: 165, published: '1972-11-01' }], 'no select: every column');
  const star = await get('/rest/v1/books?select=*&id=eq.3');
  t.same(star.body, all.body, 'select=* is the same');

  const types = await get('/rest/v1/authors?id=eq.1&select=tags,meta,active,rating,during,mood,born');
  t.same(types.body, [
    {
      tags: ['scifi', 'fantasy'],
      meta: { awards: ['hugo', 'nebula'], prolific: true },
      active: true,
      rating: 9.5,
      during: '[1966,2018)',
      mood: 'happy',
      born: '1929-10-21',
    },
  ], 'JSON built by PostgreSQL keeps arrays, objects, booleans and numbers');

  const none = await get('/rest/v1/authors?id=eq.999');
  t.equal(none.status, 200);
  t.same(none.body, [], 'no rows: []');
  t.equal(none.text, '[]');
});

t.test('views and materialized views are readable', async (t) => {
  const v = await get('/rest/v1/book_titles?id=eq.1');
  t.same(v.body, [{ id: 1, title: 'The Left Hand of Darkness' }]);
  const m = await get('/rest/v1/author_counts?select=n&author_id=eq.1');
  t.equal(m.status, 200);
  t.same(m.body, [], 'materialized view not yet refreshed: empty');
});

t.test('embedding: many-to-one as an object, null when the key is null', async (t) => {
  const r = await get('/rest/v1/books?select=id,authors(name)&order=id');
  t.equal(r.status, 200);
  t.same(r.body, [
    { id: 1, authors: { name: 'Ursula Le Guin' } },
    { id: 2, authors: { name: 'Ursula Le Guin' } },
    { id: 3, authors: { name: 'Italo Calvino' } },
    { id: 4, authors: null },
  ]);
  const star = await get('/rest/v1/books?select=*,authors(*)&id=eq.3');
  t.equal((star.body as any[])[0].authors.name, 'Italo Calvino', 'rel(*)');
  t.equal((star.body as any[])[0].title, 'Invisible Cities');
});

t.test('embedding: one-to-many as an array, [] when none', async (t) => {
  const r = await get('/rest/v1/authors?select=id,books(id,title)&order=id');
  t.equal(r.status, 200);
  const rows = r.body as { id: number; books: { id: number }[] }[];
  t.same(rows.map((a) => [a.id, a.books.map((b) => b.id).sort()]), [
    [1, [1, 2]],
    [2, [3]],
    [3, []],
  ]);
});

t.test('embedding: three levels work, a fourth is 400 invalid embed in request', async (t) => {
  const r = await get('/rest/v1/authors?select=id,books(id,chapters(id,paragraphs(id)))&id=eq.1');
  t.equal(r.status, 200);
  const books = (r.body as any[])[0].books.sort((a: any, b: any) => a.id - b.id);
  t.equal(books[0].chapters.length, 2);
  const ch1 = books[0].chapters.find((c: any) => c.id === 1);
  t.same(ch1.paragraphs.map((p: any) => p.id).sort(), [1, 2]);

  const up = await get('/rest/v1/paragraphs?select=id,chapters(id,books(id,authors(name)))&id=eq.1');
  t.same(up.body, [{ id: 1, chapters: { id: 1, books: { id: 1, authors: { name: 'Ursula Le Guin' } } } }], 'three levels upwards');

  const deep = await get('/rest/v1/authors?select=id,books(id,chapters(id,paragraphs(id,sentences(id))))');
  t.equal(deep.status, 400);
  t.same(deep.body, { error: 'invalid embed in request' });
});

t.test('embedding errors', async (t) => {
  const cases: [string, number, string][] = [
    ['/rest/v1/authors?select=books(count)', 400, 'invalid embed in request'],
    ['/rest/v1/authors?select=id,loners(id)', 400, 'invalid embed in request'],
    ['/rest/v1/authors?select=id,nosuchtable(id)', 400, 'invalid embed in request'],
    [
      '/rest/v1/authors?select=id,reviews(id)',
      400,
      'invalid embed in request: more than one relationship between authors and reviews; use one of reviews!reviews_author_id_fkey, reviews!reviews_reviewer_id_fkey',
    ],
    [
      '/rest/v1/reviews?select=id,authors(id)',
      400,
      'invalid embed in request: more than one relationship between reviews and authors; use one of authors!reviews_author_id_fkey, authors!reviews_reviewer_id_fkey',
    ],
    ['/rest/v1/reviews?select=id,authors!nosuchkey(id)', 400, 'invalid embed in request'],
    ['/rest/v1/authors?select=id,...books(id)', 400, 'duplicate output name in select: id; give one an alias'],
    ['/rest/v1/books?select=id,...authors(id)', 400, 'duplicate output name in select: id; give one an alias'],
    ['/rest/v1/authors?select=id,books(nosuchcolumn)', 400, 'unknown column in request'],
    ['/rest/v1/authors?select=id,books(id)&books.title=eq.x', 400, 'unknown column in request'],
  ];
  for (const [path, status, error] of cases) {
    const r = await get(path);
    t.equal(r.status, status, path);
    t.same(r.body, { error }, path);
  }
});

t.test('every filter operator', async (t) => {
  const cases: [string, number[]][] = [
    ['id=eq.2', [2]],
    ['id=neq.2', [1, 3]],
    ['id=gt.1', [2, 3]],
    ['id=gte.2', [2, 3]],
    ['id=lt.2', [1]],
    ['id=lte.2', [1, 2]],
    ['name=like.*Le*', [1]],
    ['name=like.*le*', []],
    ['name=ilike.*LE*', [1]],
    ['born=is.null', [3]],
    ['born=not.is.null', [1, 2]],
    ['active=is.true', [1, 2]],
    ['active=is.false', [3]],
    ['id=in.(1,3)', [1, 3]],
    ['id=in.()', []],
    ['name=in.("Italo Calvino","Ursula Le Guin")', [1, 2]],
    ['tags=cs.{scifi}', [1]],
    ['tags=cd.{scifi,fantasy,horror}', [1, 3]],
    ['tags=ov.{fiction,horror}', [2]],
    ['meta=cs.{"prolific":true}', [1]],
    ['search=fts.guin', [1]],
    ['search=fts(english).calvino', [2]],
    ['name=plfts.italo calvino', [2]],
    ['name=phfts(english).le guin', [1]],
    ['name=wfts.ursula or italo', [1, 2]],
    ['during=sl.[2019,2020)', [1, 2]],
    ['during=sr.[1900,1940)', [1, 2]],
    ['during=nxl.[1950,2020)', [1]],
    ['during=nxr.[1900,1990)', [2]],
    ['during=adj.[1985,1990)', [2]],
    ['during=ov.[1980,1990)', [1, 2]],
    ['mood=eq.ok', [2]],
    ['nick=eq.ursula', [1]],
    ['born=gt.1925-01-01', [1]],
    ['rating=gte.9.2', [1]],
    ['active=eq.false', [3]],
  ];
  for (const [q, ids] of cases) t.same(await authorIds(q), ids, q);
});

t.test('not. negates any operator', async (t) => {
  const cases: [string, number[]][] = [
    ['id=not.eq.2', [1, 3]],
    ['id=not.in.(1,3)', [2]],
    ['name=not.like.*Le*', [2, 3]],
    ['name=not.ilike.*le*', [2, 3]],
    ['tags=not.cs.{scifi}', [2, 3]],
    ['search=not.fts.guin', [2, 3]],
    ['during=not.sl.[2019,2020)', []],
    ['active=not.is.true', [3]],
  ];
  for (const [q, ids] of cases) t.same(await authorIds(q), ids, q);
});

t.test('several filters AND; or/and groups, nested and negated', async (t) => {
  const cases: [string, number[]][] = [
    ['id=gte.1&id=lte.2', [1, 2]],
    ['id=gt.1&active=is.true', [2]],
    ['or=(id.eq.1,id.eq.3)', [1, 3]],
    ['or=(id.eq.1,name.ilike.*calvino*)', [1, 2]],
    ['and=(id.gte.1,id.lte.2)', [1, 2]],
    ['or=(id.eq.3,and(active.is.true,born.gt.1925-01-01))', [1, 3]],
    ['not.or=(id.eq.1,id.eq.2)', [3]],
    ['not.and=(id.gte.1,id.lte.2)', [3]],
    ['or=(id.eq.1,id.eq.2)&id=neq.1', [2]],
    ['or=(name.in.("Italo Calvino",x),id.eq.3)', [2, 3]],
    ['or=(tags.cs.{scifi},during.adj.[1985,1990))', [1, 2]],
    ['or=(id.not.eq.1,born.is.null)', [2, 3]],
    ['or=(id.eq.1)&or=(id.eq.2)', []],
  ];
  for (const [q, ids] of cases) t.same(await authorIds(q), ids, q);
});

t.test('order with direction and nulls placement', async (t) => {
  const names = async (q: string) => ((await get(`/rest/v1/authors?select=id&${q}`)).body as { id: number }[]).map((x) => x.id);
  t.same(await names('order=id.desc'), [3, 2, 1]);
  t.same(await names('order=id.asc'), [1, 2, 3]);
  t.same(await names('order=born'), [2, 1, 3], 'asc by default, nulls last');
  t.same(await names('order=born.asc.nullsfirst'), [3, 2, 1]);
  t.same(await names('order=born.desc'), [3, 1, 2], 'desc puts nulls first');
  t.same(await names('order=born.desc.nullslast'), [1, 2, 3]);
  t.same(await names('order=active.desc,id.desc'), [2, 1, 3], 'several terms');
});

t.test('limit and offset; no limit returns every row', async (t) => {
  const ids = async (q: string) => ((await get(`/rest/v1/authors?select=id&order=id&${q}`)).body as { id: number }[]).map((x) => x.id);
  t.same(await ids('limit=2'), [1, 2]);
  t.same(await ids('limit=2&offset=1'), [2, 3]);
  t.same(await ids('offset=2'), [3]);
  t.same(await ids('limit=0'), []);
  t.same(await ids(''), [1, 2, 3]);
});

t.test('Prefer: count and Content-Range', async (t) => {
  const exact = await get('/rest/v1/authors?select=id&order=id&limit=2', { prefer: 'count=exact' });
  t.equal(exact.status, 200);
  t.equal(exact.headers.get('content-range'), '0-1/3');
  const paged = await get('/rest/v1/authors?select=id&order=id&limit=1&offset=1&active=is.true', { prefer: 'count=exact' });
  t.equal(paged.headers.get('content-range'), '1-1/2', 'the total counts the filtered rows, not the page');
  const empty = await get('/rest/v1/authors?select=id&id=gt.100', { prefer: 'count=exact' });
  t.equal(empty.status, 200);
  t.equal(empty.headers.get('content-range'), '*/0', 'empty result: */<total>');
  const beyond = await get('/rest/v1/authors?select=id&offset=10', { prefer: 'count=exact' });
  t.equal(beyond.status, 200);
  t.equal(beyond.headers.get('content-range'), '*/3');
  const none = await get('/rest/v1/authors?select=id&limit=2');
  t.equal(none.headers.get('content-range'), '0-1/*', 'without a count the total is *');

  const planned = await get('/rest/v1/authors?select=id&limit=1', { prefer: 'count=planned' });
  t.equal(planned.status, 200);
  t.match(planned.headers.get('content-range'), /^0-0\/\d+$/, 'planned: the planner estimate');
  const plannedFiltered = await get('/rest/v1/authors?select=id&id=in.(1,2)&name=like.*', { prefer: 'count=planned' });
  t.equal(plannedFiltered.status, 200, 'planned with bound values');
  t.match(plannedFiltered.headers.get('content-range'), /^0-1\/\d+$/);
  const estimated = await get('/rest/v1/authors?select=id&limit=1&active=is.true', { prefer: 'count=estimated' });
  t.equal(estimated.headers.get('content-range'), '0-0/2', 'estimated: exact while the estimate is small');
  const badPlanned = await get('/rest/v1/authors?select=id&id=eq.abc', { prefer: 'count=planned' });
  t.equal(badPlanned.status, 400, 'a bad value under count=planned is still 400');
  const again = await get('/rest/v1/authors?select=id&id=eq.1', { prefer: 'count=planned' });
  t.equal(again.status, 200, 'and the next planned count on that connection works');
});

t.test('Accept: application/vnd.pgrst.object+json answers one object', async (t) => {
  const accept = 'application/vnd.pgrst.object+json';
  const one = await get('/rest/v1/authors?select=id,name&id=eq.2', { accept });
  t.equal(one.status, 200);
  t.same(one.body, { id: 2, name: 'Italo Calvino' });
  const many = await get('/rest/v1/authors?select=id', { accept });
  t.equal(many.status, 406);
  t.same(many.body, { error: 'JSON object requested, multiple (or no) rows returned' });
  const zero = await get('/rest/v1/authors?select=id&id=eq.99', { accept });
  t.equal(zero.status, 406);
});

t.test('error rows', async (t) => {
  const cases: [string, number, string][] = [
    ['/rest/v1/nosuchtable', 404, 'relation not found'],
    ['/rest/v1/authors?select=nosuch', 400, 'unknown column in request'],
    ['/rest/v1/authors?nosuch=eq.1', 400, 'unknown column in request'],
    ['/rest/v1/authors?order=nosuch', 400, 'unknown column in request'],
    ['/rest/v1/authors?or=(nosuch.eq.1,id.eq.1)', 400, 'unknown column in request'],
    ['/rest/v1/authors?books.title=eq.x', 400, 'unknown column in request'],
    ['/rest/v1/authors?id=foo.1', 400, 'invalid request'],
    ['/rest/v1/authors?id=eq.abc', 400, 'invalid request'],
    ['/rest/v1/authors?born=gt.notadate', 400, 'invalid request'],
    ['/rest/v1/authors?mood=eq.angry', 400, 'invalid request'],
    ['/rest/v1/authors?id=is.maybe', 400, 'invalid request'],
    ['/rest/v1/authors?tags=cs.scifi', 400, 'invalid request'],
    ['/rest/v1/authors?during=sl.5', 400, 'invalid request'],
    ['/rest/v1/authors?id=in.(1,2', 400, 'invalid request'],
    ['/rest/v1/authors?or=(id.eq.1', 400, 'invalid request'],
    ['/rest/v1/authors?limit=abc', 400, 'invalid request'],
    ['/rest/v1/authors?offset=-1', 400, 'invalid request'],
    ['/rest/v1/authors?order=id.sideways', 400, 'invalid request'],
    ['/rest/v1/authors?search=fts(nosuchlang).x', 400, 'invalid request'],
    ['/rest/v1/authors?meta=eq.{bad', 400, 'invalid request'],
    ['/rest/v1/authors?id=like.1*', 400, 'invalid request'],
    ['/rest/v1/secrets', 403, 'permission denied'],
  ];
  for (const [path, status, error] of cases) {
    const r = await get(path);
    t.equal(r.status, status, path);
    t.same(r.body, { error }, path);
  }
});

t.test('service routes win over tables of their names', async (t) => {
  for (const name of ['batch', 'webhooks', 'rpc', 'rls-debug']) {
    const r = await app.call('PATCH', `/rest/v1/${name}?id=eq.1`, { apikey: app.anonKey, body: { id: 2 } });
    t.equal(r.status, 404, `${name} is not a table`);
    t.same(r.body, { error: 'relation not found' });
  }
  const w = await get('/rest/v1/webhooks');
  t.same([w.status, w.body], [403, { error: 'service role required' }], 'GET /rest/v1/webhooks is the webhooks route (service role), not the table');
  const b = await get('/rest/v1/batch');
  t.equal(b.status, 404);
});

t.test('HEAD answers the headers of GET', async (t) => {
  const r = await app.fetch('/rest/v1/authors?select=id&limit=1', { method: 'HEAD', headers: { apikey: app.anonKey, prefer: 'count=exact' } });
  t.equal(r.status, 200);
  t.equal(r.headers.get('content-range'), '0-0/3');
  t.equal(await r.text(), '');
});

t.test('the same shape with other values reuses the statement and stays correct', async (t) => {
  for (let i = 1; i <= 3; i++) {
    for (let k = 0; k < 3; k++) {
      const r = await get(`/rest/v1/authors?select=id&id=eq.${i}`);
      t.same(r.body, [{ id: i }], `id ${i}, round ${k}`);
    }
  }
  const lists = [['1'], ['1', '2'], ['1', '2', '3']];
  for (const l of lists) {
    const r = await get(`/rest/v1/authors?select=id&order=id&id=in.(${l.join(',')})`);
    t.same((r.body as any[]).map((x) => String(x.id)), l, `in list of ${l.length}`);
  }
});

t.test('values are parameters: quotes and SQL in values are data', async (t) => {
  const r = await get(`/rest/v1/authors?select=id&name=eq.${encodeURIComponent("x' or '1'='1")}`);
  t.equal(r.status, 200);
  t.same(r.body, []);
  const q = await get(`/rest/v1/authors?select=id&name=in.(${encodeURIComponent('"a\\"b",x')})`);
  t.equal(q.status, 200);
  t.same(q.body, []);
  const quotedCol = await get(`/rest/v1/authors?select=${encodeURIComponent('"id"')}&id=eq.1`);
  t.same(quotedCol.body, [{ id: 1 }], 'a quoted name is a catalog name too');
  const injCol = await get(`/rest/v1/authors?select=${encodeURIComponent('"id\\" from pg_roles --"')}`);
  t.equal(injCol.status, 400);
  t.same(injCol.body, { error: 'unknown column in request' });
});
