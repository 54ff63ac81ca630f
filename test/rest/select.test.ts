/**
 * Issue 17 over HTTP: select aliases, casts and JSON paths (also in filters and order), the
 * `rel!hint` that picks one of several relationships, many-to-many, one-to-one,
 * self-reference, spread embeds, `op(any|all)`, paging by `Range` (206), `Accept:
 * text/csv`, and `Accept-Profile`/`Content-Profile` other than public (406).
 */
import t from 'tap';
import { restApp, SEED_SQL } from './helpers.ts';

const app = await restApp(t, { sql: SEED_SQL });
const get = (path: string, headers: Record<string, string> = {}) => app.call('GET', path, { apikey: app.anonKey, headers });

t.test('aliases and casts', async (t) => {
  const r = await get('/rest/v1/books?select=key:id,author:authors(full:name),title::text,n:pages::text,published::date&id=eq.1');
  t.equal(r.status, 200);
  t.same(r.body, [{ key: 1, author: { full: 'Ursula Le Guin' }, title: 'The Left Hand of Darkness', n: '304', published: '1969-03-01' }]);
  const rating = await get('/rest/v1/authors?select=id,rating::int,active::text&id=eq.1');
  t.same(rating.body, [{ id: 1, rating: 10, active: 'true' }], 'a cast changes the JSON type');
  const bad = await get('/rest/v1/authors?select=id::nosuchtype');
  t.equal(bad.status, 400);
  t.same(bad.body, { error: 'invalid request' });
  const unknown = await get('/rest/v1/authors?select=x:nosuch');
  t.same(unknown.body, { error: 'unknown column in request' }, 'the column behind an alias is checked');
  const failing = await get('/rest/v1/authors?select=name::int');
  t.equal(failing.status, 400, 'a cast that fails on the data is 400');
  t.same(failing.body, { error: 'invalid request' });
  const quoted = await get(`/rest/v1/authors?select=${encodeURIComponent('"a\\"b; drop table authors --":id')}&id=eq.1`);
  t.equal(quoted.status, 200, 'an alias is an output name, quoted');
  t.same(quoted.body, [{ 'a"b; drop table authors --': 1 }]);
});

t.test('JSON paths in select, filters and order', async (t) => {
  const r = await get('/rest/v1/authors?select=id,meta->awards,p:meta->>prolific,first:meta->awards->>0,last:meta->awards->-1&id=eq.1');
  t.same(r.body, [{ id: 1, awards: ['hugo', 'nebula'], p: 'true', first: 'hugo', last: 'nebula' }]);
  const missing = await get('/rest/v1/authors?select=id,meta->>prolific&order=id');
  t.same(missing.body, [
    { id: 1, prolific: 'true' },
    { id: 2, prolific: null },
    { id: 3, prolific: null },
  ]);
  const f = await get('/rest/v1/authors?select=id&meta->>prolific=eq.true');
  t.same(f.body, [{ id: 1 }], '->> compares text');
  const j = await get('/rest/v1/authors?select=id&meta->prolific=eq.true');
  t.same(j.body, [{ id: 1 }], '-> compares jsonb');
  const arr = await get('/rest/v1/authors?select=id&meta->awards=cs.["hugo"]&order=id');
  t.same(arr.body, [{ id: 1 }], 'jsonb containment');
  const isnull = await get('/rest/v1/authors?select=id&meta->>prolific=is.null&order=id');
  t.same(isnull.body, [{ id: 2 }, { id: 3 }]);
  const inList = await get('/rest/v1/authors?select=id&meta->>prolific=in.(true,x)');
  t.same(inList.body, [{ id: 1 }]);
  const grp = await get('/rest/v1/authors?select=id&or=(meta->>prolific.eq.true,id.eq.3)&order=id');
  t.same(grp.body, [{ id: 1 }, { id: 3 }], 'in or=()');
  const ord = await get('/rest/v1/authors?select=id&order=meta->>prolific.asc.nullslast,id.desc');
  t.same(ord.body, [{ id: 1 }, { id: 3 }, { id: 2 }], 'in order');
  const quote = await get(`/rest/v1/authors?select=id,x:meta->>${encodeURIComponent('"a\'b"')}&id=eq.1`);
  t.same(quote.body, [{ id: 1, x: null }], 'a key is a bound value');
  const notJson = await get('/rest/v1/authors?select=name->>a');
  t.equal(notJson.status, 400, 'a JSON path on a column that is not json');
  t.same(notJson.body, { error: 'invalid request' });
  const notJsonFilter = await get('/rest/v1/authors?name->>a=eq.1');
  t.same(notJsonFilter.body, { error: 'invalid request' });
});

t.test('several foreign keys: the error names the hints, a hint picks one', async (t) => {
  await app.db.sql`insert into public.reviews (id, author_id, reviewer_id, stars) values (1, 1, 2, 5), (2, 2, 1, 3)`;
  const amb = await get('/rest/v1/authors?select=id,reviews(id)');
  t.equal(amb.status, 400);
  t.same(amb.body, {
    error: 'invalid embed in request: more than one relationship between authors and reviews; use one of reviews!reviews_author_id_fkey, reviews!reviews_reviewer_id_fkey',
  });
  const byFk = await get('/rest/v1/authors?select=id,reviews!reviews_author_id_fkey(id)&id=eq.1');
  t.same(byFk.body, [{ id: 1, reviews: [{ id: 1 }] }], 'by foreign key name');
  const byCol = await get('/rest/v1/authors?select=id,reviews!reviewer_id(id)&id=eq.1');
  t.same(byCol.body, [{ id: 1, reviews: [{ id: 2 }] }], 'by column');
  const up = await get('/rest/v1/reviews?select=id,author:authors!author_id(name),reviewer:authors!reviewer_id(name)&id=eq.1');
  t.same(up.body, [{ id: 1, author: { name: 'Ursula Le Guin' }, reviewer: { name: 'Italo Calvino' } }], 'both ways, aliased');
  const none = await get('/rest/v1/authors?select=id,reviews!nosuch(id)');
  t.same(none.body, { error: 'invalid embed in request' }, 'a hint that fits nothing');
});

t.test('many-to-many through a junction table', async (t) => {
  const r = await get('/rest/v1/books?select=id,genres(name)&order=id');
  t.equal(r.status, 200);
  const rows = r.body as { id: number; genres: { name: string }[] }[];
  t.same(rows.map((b) => [b.id, b.genres.map((g) => g.name).sort()]), [
    [1, ['science fiction']],
    [2, ['fantasy', 'science fiction']],
    [3, ['fantasy']],
    [4, []],
  ]);
  const back = await get('/rest/v1/genres?select=name,books(id)&id=eq.3');
  t.same(back.body, [{ name: 'poetry', books: [] }], 'the other way, [] when none');
  const hinted = await get('/rest/v1/books?select=id,genres!book_genres(id)&id=eq.3');
  t.same(hinted.body, [{ id: 3, genres: [{ id: 2 }] }], 'the junction as the hint');
  const deep = await get('/rest/v1/authors?select=id,books(id,genres(id,books(id)))&id=eq.2');
  t.equal(deep.status, 200, 'counts as one level: three levels work');
  const tooDeep = await get('/rest/v1/authors?select=id,books(id,genres(id,books(id,authors(id))))');
  t.equal(tooDeep.status, 400);
  t.same(tooDeep.body, { error: 'invalid embed in request' });
  const junction = await get('/rest/v1/books?select=id,book_genres(genre_id)&id=eq.2');
  t.same(junction.body, [{ id: 2, book_genres: [{ genre_id: 1 }, { genre_id: 2 }] }], 'the junction itself is still a one-to-many');
});

t.test('many-to-many both ways through one junction', async (t) => {
  await app.db.sql`insert into public.people (id, name) values (1, 'ann'), (2, 'bob'), (3, 'cy');
    insert into public.follows (follower_id, followee_id) values (1, 2), (1, 3), (3, 1)`.simple();
  const amb = await get('/rest/v1/people?select=name,people(name)');
  t.same(amb.body, {
    error: 'invalid embed in request: more than one relationship between people and people; use one of people!follows_followee_id_fkey, people!follows_follower_id_fkey',
  });
  const follows = await get('/rest/v1/people?select=name,follows:people!follows_follower_id_fkey(name)&id=eq.1');
  const names = (follows.body as { follows: { name: string }[] }[])[0].follows.map((p) => p.name).sort();
  t.same(names, ['bob', 'cy'], 'whom ann follows');
  const followers = await get('/rest/v1/people?select=name,followers:people!follows_followee_id_fkey(name)&id=eq.1');
  t.same(followers.body, [{ name: 'ann', followers: [{ name: 'cy' }] }], 'who follows ann');
});

t.test('one-to-one: an object, not an array', async (t) => {
  const r = await get('/rest/v1/authors?select=id,author_profiles(bio)&order=id');
  t.same(r.body, [
    { id: 1, author_profiles: { bio: 'Wrote Earthsea.' } },
    { id: 2, author_profiles: null },
    { id: 3, author_profiles: null },
  ]);
  const back = await get('/rest/v1/author_profiles?select=bio,authors(name)');
  t.same(back.body, [{ bio: 'Wrote Earthsea.', authors: { name: 'Ursula Le Guin' } }]);
});

t.test('self-reference: children without a hint, either way with one', async (t) => {
  const r = await get('/rest/v1/collections?select=id,collections(id)&order=id');
  t.equal(r.status, 200);
  t.same(r.body, [
    { id: 1, collections: [{ id: 2 }, { id: 3 }] },
    { id: 2, collections: [{ id: 4 }] },
    { id: 3, collections: [] },
    { id: 4, collections: [] },
  ]);
  const parent = await get('/rest/v1/collections?select=id,parent:collections!parent_id(name)&order=id');
  t.same(parent.body, [
    { id: 1, parent: null },
    { id: 2, parent: { name: 'root' } },
    { id: 3, parent: { name: 'root' } },
    { id: 4, parent: { name: 'left' } },
  ], 'the column hint: the parent');
  const children = await get('/rest/v1/collections?select=id,kids:collections!collections_parent_fk(id)&id=eq.2');
  t.same(children.body, [{ id: 2, kids: [{ id: 4 }] }], 'the key hint: the children');
  const tree = await get('/rest/v1/collections?select=name,collections(name,collections(name))&id=eq.1');
  t.same(tree.body, [{ name: 'root', collections: [{ name: 'left', collections: [{ name: 'leaf' }] }, { name: 'right', collections: [] }] }]);
});

t.test('!inner keeps rows with a related row; !left is the default', async (t) => {
  const inner = await get('/rest/v1/authors?select=id,books!inner(id)&order=id', { prefer: 'count=exact' });
  t.equal(inner.status, 200);
  t.same((inner.body as { id: number }[]).map((a) => a.id), [1, 2], 'the author without books is left out');
  t.equal(inner.headers.get('content-range'), '0-1/2', 'and not counted');
  const left = await get('/rest/v1/authors?select=id,books!left(id)&order=id');
  t.same((left.body as { id: number }[]).map((a) => a.id), [1, 2, 3]);
  const up = await get('/rest/v1/books?select=id,authors!author_id!inner(name)&order=id');
  t.same((up.body as { id: number }[]).map((b) => b.id), [1, 2, 3], 'with a hint; the orphan book is left out');
  const nested = await get('/rest/v1/authors?select=id,books(id,chapters!inner(id))&id=eq.1');
  t.same(nested.body, [{ id: 1, books: [{ id: 1, chapters: [{ id: 1 }, { id: 2 }] }] }], 'inside an embed it narrows the embedded rows');
  const both = await get('/rest/v1/authors?select=id,books!left!inner(id)');
  t.equal(both.status, 400);
  t.same(both.body, { error: 'invalid embed in request' });
});

t.test('an embed named by a foreign key: its column or its name', async (t) => {
  const col = await get('/rest/v1/collections?select=id,parent_id(name)&id=eq.4');
  t.same(col.body, [{ id: 4, parent_id: { name: 'left' } }], 'parent_id(…): the parent');
  const fk = await get('/rest/v1/books?select=id,books_author_id_fkey(name)&id=eq.3');
  t.same(fk.body, [{ id: 3, books_author_id_fkey: { name: 'Italo Calvino' } }], 'by the key name');
  const back = await get('/rest/v1/authors?select=id,list:books_author_id_fkey(id)&id=eq.2');
  t.same(back.body, [{ id: 2, list: [{ id: 3 }] }], "another table's key by its name: one-to-many");
  const no = await get('/rest/v1/books?select=id,title(id)');
  t.same(no.body, { error: 'invalid embed in request' }, 'a column that is no key');
});

t.test('spread embeds flatten a to-one relationship', async (t) => {
  const r = await get('/rest/v1/books?select=id,...authors(author:name,born)&order=id');
  t.same(r.body, [
    { id: 1, author: 'Ursula Le Guin', born: '1929-10-21' },
    { id: 2, author: 'Ursula Le Guin', born: '1929-10-21' },
    { id: 3, author: 'Italo Calvino', born: '1923-10-15' },
    { id: 4, author: null, born: null },
  ]);
  const nested = await get('/rest/v1/chapters?select=id,...books(title,...authors(name))&id=eq.3');
  t.same(nested.body, [{ id: 3, title: 'Invisible Cities', name: 'Italo Calvino' }], 'nested spreads');
  const inEmbed = await get('/rest/v1/authors?select=id,books(id,...authors(name))&id=eq.2');
  t.same(inEmbed.body, [{ id: 2, books: [{ id: 3, name: 'Italo Calvino' }] }], 'inside an embed');
  const toMany = await get('/rest/v1/authors?select=id,...books(title,pages)&id=in.(1,3)&order=id');
  t.equal(toMany.status, 200, 'a to-many spread: each column an array');
  t.same(toMany.body, [
    { id: 1, title: ['The Left Hand of Darkness', 'The Dispossessed'], pages: [304, 387] },
    { id: 3, title: [], pages: [] },
  ]);
  const empty = await get('/rest/v1/authors?select=id,books!inner()&order=id');
  t.same(empty.body, [{ id: 1 }, { id: 2 }], 'an empty !inner embed narrows the rows and adds no key');
  const emptyLeft = await get('/rest/v1/authors?select=id,books()&order=id');
  t.same(emptyLeft.body, [{ id: 1 }, { id: 2 }, { id: 3 }], 'an empty embed without !inner changes nothing');
  const counted = await get('/rest/v1/books?select=id,...authors(name)&order=id&limit=2', { prefer: 'count=exact' });
  t.equal(counted.headers.get('content-range'), '0-1/4', 'counts are unchanged by the spread');
});

t.test('like / ilike / comparisons with (any) and (all)', async (t) => {
  const ids = async (q: string) => {
    const r = await get(`/rest/v1/authors?select=id&order=id&${q}`);
    return r.status === 200 ? (r.body as { id: number }[]).map((x) => x.id) : `${r.status} ${r.text}`;
  };
  t.same(await ids('name=like(any).{*Le*,*Cal*}'), [1, 2]);
  t.same(await ids('name=like(all).{*Le*,*Cal*}'), []);
  t.same(await ids('name=ilike(all).{*u*,*GUIN}'), [1]);
  t.same(await ids('name=ilike(any).{ITALO*,anon*}'), [2, 3]);
  t.same(await ids('name=not.like(any).{Ur*,It*}'), [3]);
  t.same(await ids('id=eq(any).{1,3}'), [1, 3]);
  t.same(await ids('id=gt(all).{1,2}'), [3]);
  t.same(await ids('or=(name.like(any).{Ur*,It*},id.eq.3)'), [1, 2, 3], 'in or=()');
  t.same(await ids(`name=like(any).${encodeURIComponent('{"a,b",*Guin}')}`), [1], 'quoted elements');
  t.same(await ids('name=like(any).x'), '400 {"error":"invalid request"}');
  t.same(await ids('id=eq(any).{x}'), '400 {"error":"invalid request"}');
});

t.test('Range header: 206 with Content-Range when partial', async (t) => {
  const page = await get('/rest/v1/authors?select=id&order=id', { range: '0-1', 'range-unit': 'items', prefer: 'count=exact' });
  t.equal(page.status, 206);
  t.equal(page.headers.get('content-range'), '0-1/3');
  t.same(page.body, [{ id: 1 }, { id: 2 }]);
  const open = await get('/rest/v1/authors?select=id&order=id', { range: '1-', prefer: 'count=exact' });
  t.equal(open.status, 206);
  t.equal(open.headers.get('content-range'), '1-2/3');
  const whole = await get('/rest/v1/authors?select=id&order=id', { range: '0-9', prefer: 'count=exact' });
  t.equal(whole.status, 200, 'the whole result: 200');
  t.equal(whole.headers.get('content-range'), '0-2/3');
  const noCount = await get('/rest/v1/authors?select=id&order=id', { range: '0-0' });
  t.equal(noCount.status, 200, 'without a count the total is unknown: 200');
  t.equal(noCount.headers.get('content-range'), '0-0/*');
  t.same(noCount.body, [{ id: 1 }]);
  const both = await get('/rest/v1/authors?select=id&order=id&limit=2', { range: '1-5', prefer: 'count=exact' });
  t.same(both.body, [{ id: 2 }], 'limit/offset and Range intersect');
  t.equal(both.headers.get('content-range'), '1-1/3');
  const beyond = await get('/rest/v1/authors?select=id', { range: '10-20', prefer: 'count=exact' });
  t.equal(beyond.status, 200, 'past the end: 200 []');
  t.same(beyond.body, []);
  t.equal(beyond.headers.get('content-range'), '*/3');
  const otherUnit = await get('/rest/v1/authors?select=id', { range: '0-0', 'range-unit': 'bytes' });
  t.equal((otherUnit.body as unknown[]).length, 3, 'another unit is not ours: ignored');
  for (const bad of ['x', '5-2', '-3', '1-2-3']) {
    const r = await get('/rest/v1/authors?select=id', { range: bad });
    t.equal(r.status, 400, `Range: ${bad}`);
    t.same(r.body, { error: 'invalid request' });
  }
  const patch = await app.call('PATCH', '/rest/v1/books?id=eq.999', { apikey: app.anonKey, body: { pages: 1 }, headers: { range: '0-0' } });
  t.equal(patch.status, 200, 'Range means nothing to a write');
});

t.test('Accept: text/csv', async (t) => {
  await app.db.sql`insert into public.collections (id, parent_id, name) values (9, null, ${'say "hi", then\r\nleave'})`;
  const r = await get('/rest/v1/collections?select=id,parent_id,name&order=id', { accept: 'text/csv' });
  t.equal(r.status, 200);
  t.match(r.headers.get('content-type'), /^text\/csv/);
  t.equal(r.text, 'id,parent_id,name\n1,,root\n2,1,left\n3,1,right\n4,2,leaf\n9,,"say ""hi"", then\r\nleave"');
  await app.db.sql`insert into public.collections (id, parent_id, name) values (10, null, ''), (11, null, '(x)'), (12, null, ${'a\tb'})`;
  const quoted = await get('/rest/v1/collections?select=name&id=gte.10&order=id', { accept: 'text/csv' });
  t.equal(quoted.text, 'name\n""\n"(x)"\n"a\tb"', 'an empty field, parentheses and white space are quoted, as PostgREST quotes them');
  const star = await get('/rest/v1/authors?id=eq.1&select=*,books(id)', { accept: 'text/csv' });
  const [header, row] = star.text.split('\n');
  t.equal(header, 'id,name,born,tags,meta,active,rating,during,mood,nick,search,books', 'the header names every column');
  // Arrays, JSON and embeds are their JSON text; a field with a quote, comma, white space or line break is quoted.
  t.match(row, /^1,"Ursula Le Guin",1929-10-21,"\[""scifi"",""fantasy""\]","\{""awards"": \[""hugo"", ""nebula""\], ""prolific"": true\}",true,9.5,"\[1966,2018\)",happy,ursula,/);
  const empty = await get('/rest/v1/authors?select=id,x:name&id=eq.99', { accept: 'text/csv', prefer: 'count=exact' });
  t.equal(empty.text, 'id,x', 'no rows: the header alone');
  t.equal(empty.headers.get('content-range'), '*/0');
  const spread = await get('/rest/v1/books?select=id,...authors(name)&id=eq.3', { accept: 'text/csv' });
  t.equal(spread.text, 'id,name\n3,"Italo Calvino"');
  const ranged = await get('/rest/v1/authors?select=id&order=id', { accept: 'text/csv', range: '0-0', prefer: 'count=exact' });
  t.equal(ranged.status, 206);
  t.equal(ranged.text, 'id\n1');
});

t.test('Accept-Profile / Content-Profile other than public: 406 for tables, 404 for RPC', async (t) => {
  for (const [method, header] of [
    ['GET', 'accept-profile'],
    ['POST', 'content-profile'],
  ] as const) {
    const r = await app.call(method, '/rest/v1/authors?select=id', { apikey: app.anonKey, headers: { [header]: 'other' }, body: method === 'POST' ? { name: 'x' } : undefined });
    t.equal(r.status, 406, `${method} ${header}`);
    t.same(r.body, { error: 'only the public schema is exposed' });
  }
  const rpc = await app.call('POST', '/rest/v1/rpc/add', { apikey: app.anonKey, headers: { 'content-profile': 'other' }, body: { a: 1, b: 2 } });
  t.equal(rpc.status, 404);
  t.same(rpc.body, { error: 'function not found' });
  const pub = await get('/rest/v1/authors?select=id&id=eq.1', { 'accept-profile': 'public' });
  t.same(pub.body, [{ id: 1 }], 'public is fine');
  const n = await app.db.sql`select count(*)::int as n from public.authors where name = 'x'`;
  t.equal(n[0].n, 0, 'nothing written');
});

t.test('writes answer with aliases, JSON paths and spreads too', async (t) => {
  const ins = await app.call('POST', '/rest/v1/books?select=t:title,...authors(name)', { apikey: app.anonKey, body: { title: 'New', author_id: 2 } });
  t.equal(ins.status, 201);
  t.same(ins.body, [{ t: 'New', name: 'Italo Calvino' }]);
  const upd = await app.call('PATCH', '/rest/v1/authors?select=id,x:meta->>prolific&meta->>prolific=eq.true', { apikey: app.anonKey, body: { rating: 9.6 } });
  t.same(upd.body, [{ id: 1, x: 'true' }]);
  const ignored = await app.call('POST', '/rest/v1/books?select=title,k:author_id::text&id=eq.1', { apikey: app.anonKey, body: { title: 'Other', author_id: 1 } });
  t.same(ignored.body, [{ title: 'Other', k: '1' }], 'POST ignores filters, binds only what select needs');
});
