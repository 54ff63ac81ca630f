/**
 * PostgREST behaviour that postgrest-js's own suite exercises, each as a request and its
 * answer against a real plinth: the opt-in features (REST_TX_END with an override, computed
 * fields), `handling=strict` with `max-affected`, `missing=default`, Accept negotiation, RPC
 * outside `public`, two embeds with one output name, and the query string on an RPC result.
 * The defaults (features off) are asserted in read.test.ts, write.test.ts and rpc.test.ts.
 */
import t from 'tap';
import { restApp, SEED_SQL } from './helpers.ts';

const app = await restApp(t, {
  env: { REST_TX_END: 'commit-allow-override', REST_COMPUTED_FIELDS: 'true', REST_PLAN_ENABLED: 'true', REST_AGGREGATES_ENABLED: 'true' },
  sql:
    SEED_SQL +
    `create function public.full_title(public.books) returns text language sql stable
       as $$ select $1.title || ' (' || coalesce($1.pages::text, '?') || ')' $$;
     create function public.is_long(b public.books, threshold int default 300) returns boolean language sql stable
       as $$ select b.pages > threshold $$;
     create function public.books_of(author bigint) returns table (title text, pages int) language sql stable
       as 'select title, pages from public.books where author_id = author order by id';
     grant execute on function public.full_title(public.books), public.is_long(public.books, int), public.books_of(bigint)
       to anon, authenticated, anonymous;`,
});
const key = app.anonKey;
const call = (method: string, path: string, opts: { body?: unknown; headers?: Record<string, string> } = {}) =>
  app.call(method, path, { token: key, apikey: key, ...opts });

async function title(id: number): Promise<string | null> {
  const r = await call('GET', `/rest/v1/books?id=eq.${id}&select=title`);
  return r.body.length === 0 ? null : r.body[0].title;
}

t.test('Prefer: tx=rollback answers the write and keeps nothing', async (t) => {
  const r = await call('PATCH', '/rest/v1/books?id=eq.1', { body: { title: 'Changed' }, headers: { prefer: 'tx=rollback, return=representation' } });
  t.equal(r.status, 200);
  t.same(r.body.map((b: { title: string }) => b.title), ['Changed'], 'the answer shows the write');
  t.equal(r.headers.get('preference-applied'), 'tx=rollback');
  t.equal(await title(1), 'The Left Hand of Darkness', 'rolled back');

  const ins = await call('POST', '/rest/v1/books', { body: { id: 50, title: 'Ephemeral' }, headers: { prefer: 'tx=rollback' } });
  t.equal(ins.status, 201);
  t.equal(await title(50), null, 'the insert rolled back');

  const del = await call('DELETE', '/rest/v1/books?id=eq.2', { headers: { prefer: 'tx=rollback, return=minimal' } });
  t.equal(del.status, 204);
  t.equal(await title(2), 'The Dispossessed', 'the delete rolled back');

  const rpc = await call('POST', '/rest/v1/rpc/new_author', { body: { name: 'Nobody Kept' }, headers: { prefer: 'tx=rollback' } });
  t.equal(rpc.status, 200);
  t.equal(rpc.body.name, 'Nobody Kept');
  const kept = await call('GET', '/rest/v1/authors?name=eq.Nobody%20Kept');
  t.same(kept.body, [], 'the function call rolled back');

  const commit = await call('PATCH', '/rest/v1/books?id=eq.4', { body: { pages: 7 }, headers: { prefer: 'tx=commit' } });
  t.equal(commit.status, 200);
  t.equal(commit.headers.get('preference-applied'), 'tx=commit');
  const after = await call('GET', '/rest/v1/books?id=eq.4&select=pages');
  t.same(after.body, [{ pages: 7 }], 'tx=commit commits');
});

t.test('computed fields: a function of the row type is a column to read, filter and order by', async (t) => {
  const r = await call('GET', '/rest/v1/books?select=id,full_title&id=in.(1,4)&order=id');
  t.equal(r.status, 200);
  t.same(r.body, [
    { id: 1, full_title: 'The Left Hand of Darkness (304)' },
    { id: 4, full_title: 'Orphan Book (7)' },
  ]);
  const aliased = await call('GET', '/rest/v1/books?select=t:full_title,is_long&id=eq.2');
  t.same(aliased.body, [{ t: 'The Dispossessed (387)', is_long: true }], 'aliased; other arguments defaulted');
  const filtered = await call('GET', '/rest/v1/books?select=id&is_long=is.true&order=full_title.asc');
  t.same(filtered.body, [{ id: 2 }, { id: 1 }], 'filter and order');
  const embedded = await call('GET', '/rest/v1/authors?select=name,books(full_title)&id=eq.2');
  t.same(embedded.body, [{ name: 'Italo Calvino', books: [{ full_title: 'Invisible Cities (165)' }] }], 'inside an embed');
  const star = await call('GET', '/rest/v1/books?id=eq.3');
  t.notOk('full_title' in star.body[0], '* is the table columns only');
  const write = await call('PATCH', '/rest/v1/books?id=eq.3', { body: { full_title: 'x' } });
  t.equal(write.status, 400);
  t.same(write.body, { error: 'unknown column in request' }, 'never written');
  const back = await call('PATCH', '/rest/v1/books?id=eq.3&select=full_title', { body: { pages: 166 }, headers: { prefer: 'tx=rollback' } });
  t.same(back.body, [{ full_title: 'Invisible Cities (166)' }], 'in the answer of a write');
});

t.test('two embeds with one output name are refused; aliases tell them apart; a column written twice alike is one', async (t) => {
  await app.db.sql`insert into public.reviews (id, author_id, reviewer_id, stars) values (1, 1, 2, 5)`;
  const r = await call('GET', '/rest/v1/reviews?select=authors!author_id(name),authors!reviewer_id(name)');
  t.equal(r.status, 400);
  t.same(r.body, { error: 'duplicate output name in select: authors; give one an alias' });
  const cols = await call('GET', '/rest/v1/reviews?select=stars,stars::text');
  t.same(cols.body, { error: 'duplicate output name in select: stars; give one an alias' }, 'two columns alike');
  const again = await call('GET', '/rest/v1/reviews?select=stars,id,stars');
  t.equal(again.status, 200, 'one column written twice alike');
  t.equal(again.text, '[{"stars":5,"id":1}]', 'is selected once');
  const ok = await call('GET', '/rest/v1/reviews?select=author:authors!author_id(name),reviewer:authors!reviewer_id(name)');
  t.equal(ok.status, 200);
  t.same(ok.body, [{ author: { name: 'Ursula Le Guin' }, reviewer: { name: 'Italo Calvino' } }]);
});

t.test('Prefer: handling=strict with max-affected refuses and rolls back', async (t) => {
  const many = await call('PATCH', '/rest/v1/books?id=in.(1,2,3)', { body: { pages: 1 }, headers: { prefer: 'handling=strict, max-affected=2' } });
  t.equal(many.status, 400);
  t.same(many.body, { error: 'more rows affected than Prefer: max-affected allows' });
  const pages = await call('GET', '/rest/v1/books?id=in.(1,2,3)&select=pages&order=id');
  t.same(pages.body, [{ pages: 304 }, { pages: 387 }, { pages: 165 }], 'nothing changed');
  const minimal = await call('DELETE', '/rest/v1/chapters?book_id=eq.1', { headers: { prefer: 'handling=strict, max-affected=1, return=minimal' } });
  t.equal(minimal.status, 400, 'counted without a body too');
  const kept = await call('GET', '/rest/v1/chapters?book_id=eq.1&select=id');
  t.equal(kept.body.length, 2, 'the delete rolled back');
  const within = await call('PATCH', '/rest/v1/books?id=in.(1,2)', { body: { pages: 305 }, headers: { prefer: 'handling=strict, max-affected=2, return=minimal' } });
  t.equal(within.status, 204, 'within the bound');
  const lenient = await call('PATCH', '/rest/v1/books?id=in.(1,2)', { body: { pages: 306 }, headers: { prefer: 'max-affected=1' } });
  t.equal(lenient.status, 200, 'lenient (the default) ignores it');
  t.equal(lenient.body.length, 2);
  const rpc = await call('POST', '/rest/v1/rpc/author_names', { headers: { prefer: 'handling=strict, max-affected=1' } });
  t.equal(rpc.status, 400, 'RPC: the rows of its result');
  t.same(rpc.body, { error: 'more rows affected than Prefer: max-affected allows' });
});

t.test('Prefer: missing=default fills the keys a row lacks with column defaults', async (t) => {
  const r = await call('POST', '/rest/v1/authors?select=name,active,tags', {
    body: [{ name: 'With All', active: false, tags: ['x'] }, { name: 'With Defaults' }],
    headers: { prefer: 'missing=default' },
  });
  t.equal(r.status, 201);
  t.same(r.body, [
    { name: 'With All', active: false, tags: ['x'] },
    { name: 'With Defaults', active: true, tags: [] },
  ]);
  t.equal(r.headers.get('preference-applied'), 'missing=default');
  const ids = await call('GET', '/rest/v1/authors?name=like.With*&select=id&order=id');
  t.equal(ids.body.length, 2);
  t.ok(ids.body[0].id > 0 && ids.body[1].id > ids.body[0].id, 'identity defaults drawn per row');
  const nulls = await call('POST', '/rest/v1/books?select=title,pages', {
    body: [{ title: 'P', pages: 3, author_id: 1 }, { title: 'Q' }],
    headers: { prefer: 'missing=default' },
  });
  t.same(nulls.body, [{ title: 'P', pages: 3 }, { title: 'Q', pages: null }], 'no default: NULL');
});

t.test('Accept: a media type plinth cannot produce answers 406', async (t) => {
  for (const accept of ['application/xml', 'application/geo+json', 'text/plain']) {
    const r = await call('GET', '/rest/v1/books?id=eq.1', { headers: { accept } });
    t.equal(r.status, 406, accept);
    t.same(r.body, { error: 'none of the accepted media types can be produced' }, accept);
  }
  const rpc = await call('POST', '/rest/v1/rpc/add', { body: { a: 1, b: 2 }, headers: { accept: 'application/xml' } });
  t.equal(rpc.status, 406, 'RPC too');
  for (const accept of ['application/json', 'application/json; charset=utf-8', '*/*', 'text/html, application/xml;q=0.9, */*;q=0.8', 'text/csv', 'application/vnd.pgrst.object+json']) {
    const r = await call('GET', '/rest/v1/books?id=eq.1', { headers: { accept } });
    t.equal(r.status, 200, accept);
  }
});

t.test('RPC with a profile other than public: 404 function not found; tables keep 406', async (t) => {
  const r = await call('POST', '/rest/v1/rpc/add', { body: { a: 1, b: 2 }, headers: { 'content-profile': 'personal' } });
  t.equal(r.status, 404);
  t.same(r.body, { error: 'function not found' });
  const g = await call('GET', '/rest/v1/rpc/add?a=1&b=2', { headers: { 'accept-profile': 'personal' } });
  t.equal(g.status, 404);
  const pub = await call('POST', '/rest/v1/rpc/add', { body: { a: 1, b: 2 }, headers: { 'content-profile': 'public' } });
  t.equal(pub.status, 200);
  const tbl = await call('GET', '/rest/v1/books', { headers: { 'accept-profile': 'personal' } });
  t.equal(tbl.status, 406);
  t.same(tbl.body, { error: 'only the public schema is exposed' });
});

t.test('the query string shapes a set-returning function\'s result as a table read', async (t) => {
  const post = await call('POST', '/rest/v1/rpc/authors_born_after?id=neq.2&select=name', { body: { d: '1900-01-01' } });
  t.equal(post.status, 200);
  t.same(post.body, [{ name: 'Ursula Le Guin' }], 'POST: filter and select');
  const none = await call('POST', '/rest/v1/rpc/authors_born_after?name=eq.nobody', { body: { d: '1900-01-01' } });
  t.same(none.body, [], 'a filter that matches nothing: []');
  const get = await call('GET', '/rest/v1/rpc/authors_born_after?d=1900-01-01&select=who:name,books(title)&id=eq.2');
  t.same(get.body, [{ who: 'Italo Calvino', books: [{ title: 'Invisible Cities' }] }], 'GET: the function\'s parameter stays a parameter; alias and embed');
  const counted = await call('POST', '/rest/v1/rpc/authors_born_after?select=id&order=id.desc&limit=1', {
    body: { d: '1900-01-01' },
    headers: { prefer: 'count=exact' },
  });
  t.same(counted.body, [{ id: 2 }], 'order and limit');
  t.equal(counted.headers.get('content-range'), '0-0/2', 'count=exact: Content-Range');
  const table = await call('GET', '/rest/v1/rpc/books_of?author=2&select=t:title,pages::text&pages=lt.200');
  t.same(table.body, [{ t: 'Invisible Cities', pages: '165' }], 'returns table (…): its columns');
  const empty = await call('GET', '/rest/v1/rpc/books_of?author=2&pages=gt.200');
  t.same(empty.body, []);
  const unknown = await call('GET', '/rest/v1/rpc/books_of?author=2&nope=eq.1');
  t.equal(unknown.status, 400);
  t.same(unknown.body, { error: 'unknown column in request' });
  const plain = await call('POST', '/rest/v1/rpc/authors_born_after', { body: { d: '1925-01-01' } });
  t.same(plain.body.map((a: { id: number }) => a.id), [1], 'no query string: as before');
  t.equal(plain.headers.get('content-range'), null);
});

t.test('Accept: the plan media type answers the execution plan, and runs nothing', async (t) => {
  const r = await call('GET', '/rest/v1/books?id=eq.1&select=title', { headers: { accept: 'application/vnd.pgrst.plan+json; for="application/json"' } });
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^application\/vnd\.pgrst\.plan\+json; for="application\/json"/);
  t.ok(Array.isArray(r.body) && typeof r.body[0].Plan['Node Type'] === 'string', 'EXPLAIN (FORMAT JSON)');
  const text = await call('PATCH', '/rest/v1/books?id=eq.3', { body: { title: 'Planned only' }, headers: { accept: 'application/vnd.pgrst.plan+text' } });
  t.equal(text.status, 200);
  t.match(text.text, /Update on books/, 'text lines');
  t.equal(await title(3), 'Invisible Cities', 'the write did not run');
  const rpc = await call('POST', '/rest/v1/rpc/books_of?pages=gt.1', { body: { author: 1 }, headers: { accept: 'application/vnd.pgrst.plan+json' } });
  t.equal(rpc.status, 200, 'RPC too');
  t.ok(Array.isArray(rpc.body));
});

t.test('the plan media type\'s options: verbose, analyze, buffers, wal (only with analyze), unknown names ignored', async (t) => {
  const plain = await call('GET', '/rest/v1/books?id=eq.1&select=title', { headers: { accept: 'application/vnd.pgrst.plan+json' } });
  t.notOk('Output' in plain.body[0].Plan, 'without verbose: no output columns');
  t.notOk('Actual Rows' in plain.body[0].Plan, 'without analyze: nothing ran');
  const verbose = await call('GET', '/rest/v1/books?id=eq.1&select=title', { headers: { accept: 'application/vnd.pgrst.plan+json; options=verbose|settings|nonsense; for="application/json"' } });
  t.equal(verbose.status, 200);
  t.ok(Array.isArray(verbose.body[0].Plan.Output), 'verbose: the output columns');
  const analyzed = await call('GET', '/rest/v1/books?id=eq.1&select=title', { headers: { accept: 'application/vnd.pgrst.plan+json; options=analyze|buffers|wal' } });
  t.equal(analyzed.status, 200);
  t.equal(analyzed.body[0].Plan['Actual Rows'], 1, 'analyze: the statement ran, one row');
  t.ok('Shared Hit Blocks' in analyzed.body[0].Plan, 'buffers');
  const walAlone = await call('GET', '/rest/v1/books?id=eq.1', { headers: { accept: 'application/vnd.pgrst.plan+text; options=wal' } });
  t.equal(walAlone.status, 200, 'wal without analyze is dropped, not an error');
  t.notMatch(walAlone.text, /actual time/);
});

t.test('aggregates: count() and col.sum() … grouped by the other columns', async (t) => {
  const grouped = await call('GET', '/rest/v1/chapters?select=book_id,count(),position.max()&order=book_id');
  t.equal(grouped.status, 200);
  t.same(grouped.body, [
    { book_id: 1, count: 2, max: 2 },
    { book_id: 3, count: 1, max: 1 },
  ]);
  const all = await call('GET', '/rest/v1/chapters?select=total:count(),position.sum()::text,position.avg()::int');
  t.same(all.body, [{ total: 3, sum: '4', avg: 1 }], 'one group; alias and casts');
  const filtered = await call('GET', '/rest/v1/chapters?select=count()&book_id=eq.1');
  t.same(filtered.body, [{ count: 2 }], 'after the filters');
  const star = await call('GET', '/rest/v1/chapters?select=*,count()');
  t.equal(star.status, 400, '* cannot be grouped');
  t.same(star.body, { error: 'invalid request' });
  const twice = await call('GET', '/rest/v1/chapters?select=id.max(),position.max()');
  t.same(twice.body, { error: 'duplicate output name in select: max; give one an alias' });
  const embedded = await call('GET', '/rest/v1/books?select=id,chapters(count())&id=in.(1,2)&order=id');
  t.same(embedded.body, [{ id: 1, chapters: [{ count: 2 }] }, { id: 2, chapters: [{ count: 0 }] }], 'inside an embed');
  const spread = await call('GET', '/rest/v1/books?select=count(),...authors(name)&author_id=not.is.null');
  t.equal(spread.status, 200, spread.text);
  const byName = await app.db.sql<{ name: string; count: number }[]>`
    select a.name, count(*)::int as count from public.books b join public.authors a on a.id = b.author_id group by a.name order by a.name`;
  t.ok(byName.length >= 2, 'two authors with books');
  t.same(
    (spread.body as { name: string; count: number }[]).sort((a, b) => a.name.localeCompare(b.name)),
    byName.map((r) => ({ count: r.count, name: r.name })),
    'a to-one spread beside an aggregate: grouped by its columns',
  );
  const inEmbed = await call('GET', '/rest/v1/authors?select=id,books(count(),...authors(name))&id=eq.2');
  t.same(inEmbed.body, [{ id: 2, books: [{ count: byName.find((r) => r.name === 'Italo Calvino')!.count, name: 'Italo Calvino' }] }], 'inside an embed too');
  const many = await call('GET', '/rest/v1/authors?select=count(),...books(title)');
  t.equal(many.status, 400, 'a to-many spread beside an aggregate is not grouped');
  t.same(many.body, { error: 'invalid request' });
});
