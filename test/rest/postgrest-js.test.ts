/**
 * A real client: @supabase/postgrest-js drives select, filters, order, limit, insert,
 * update, delete, embedding, counts, single and rpc against the service (issue 4 §8).
 */
import t from 'tap';
import { PostgrestClient } from '@supabase/postgrest-js';
import { restApp, SEED_SQL, userToken, USER_A } from './helpers.ts';

const app = await restApp(t, {
  sql:
    SEED_SQL +
    `insert into public.notes (owner, body) values ('${USER_A}', 'mine'), (null, 'other');
     insert into public.reviews (id, author_id, reviewer_id, stars) values (1, 1, 2, 5);`,
});
const client = new PostgrestClient(`${app.url}/rest/v1`, { headers: { apikey: app.anonKey, Authorization: `Bearer ${app.anonKey}` } });

t.test('select, filters, order, limit', async (t) => {
  const { data, error, status } = await client.from('authors').select('id,name').eq('active', true).order('id', { ascending: false }).limit(5);
  t.equal(error, null);
  t.equal(status, 200);
  t.same(data, [
    { id: 2, name: 'Italo Calvino' },
    { id: 1, name: 'Ursula Le Guin' },
  ]);
  const f = await client
    .from('authors')
    .select('id')
    .in('id', [1, 2, 3])
    .neq('id', 2)
    .not('born', 'is', null)
    .ilike('name', '%guin%')
    .contains('tags', ['scifi'])
    .gte('born', '1900-01-01');
  t.same(f.data, [{ id: 1 }], 'chained filters');
  const or = await client.from('authors').select('id').or('id.eq.2,born.is.null').order('id');
  t.same(or.data, [{ id: 2 }, { id: 3 }], 'or');
  const range = await client.from('authors').select('id', { count: 'exact' }).order('id').range(1, 2);
  t.same(range.data, [{ id: 2 }, { id: 3 }], 'range');
  t.equal(range.count, 3, 'count from Content-Range');
  const head = await client.from('authors').select('*', { count: 'exact', head: true }).eq('active', true);
  t.equal(head.count, 2, 'head + count');
  t.equal(head.data, null);
  const text = await client.from('authors').select('id').textSearch('search', 'calvino');
  t.same(text.data, [{ id: 2 }], 'textSearch');
  const nulls = await client.from('authors').select('id').order('born', { ascending: true, nullsFirst: true });
  t.same(nulls.data, [{ id: 3 }, { id: 2 }, { id: 1 }], 'nullsFirst');
});

t.test('embedding both ways', async (t) => {
  const down = await client.from('authors').select('name, books(title)').eq('id', 2);
  t.same(down.data, [{ name: 'Italo Calvino', books: [{ title: 'Invisible Cities' }] }]);
  const up = await client.from('books').select('title, authors(name)').eq('id', 3).single();
  t.equal(up.error, null);
  t.same(up.data, { title: 'Invisible Cities', authors: { name: 'Italo Calvino' } }, 'many-to-one with single()');
  const deep = await client.from('authors').select('id, books(id, chapters(id, paragraphs(id)))').eq('id', 3);
  t.same(deep.data, [{ id: 3, books: [] }]);
});

t.test('insert, update, delete', async (t) => {
  const ins = await client.from('books').insert({ title: 'From the client', author_id: 1 }).select().single();
  t.equal(ins.error, null);
  t.equal(ins.status, 201);
  t.equal((ins.data as any).title, 'From the client');
  const id = (ins.data as any).id;

  const many = await client.from('books').insert([{ title: 'A' }, { title: 'B', pages: 2 }]).select('title,pages');
  t.equal(many.status, 201);
  t.same(many.data, [
    { title: 'A', pages: null },
    { title: 'B', pages: 2 },
  ]);
  // Without .select() the client sends no Prefer: return; the interface answers the rows anyway.
  const plain = await client.from('books').insert({ title: 'Plain' });
  t.equal(plain.status, 201);
  t.equal((plain.data as any)[0].title, 'Plain');

  const upd = await client.from('books').update({ pages: 99 }).eq('id', id).select('id,pages');
  t.equal(upd.error, null);
  t.same(upd.data, [{ id, pages: 99 }]);
  const del = await client.from('books').delete().eq('id', id).select('id');
  t.same(del.data, [{ id }]);
  const gone = await client.from('books').select('id').eq('id', id);
  t.same(gone.data, []);

  const dup = await client.from('authors').insert({ name: 'Italo Calvino' });
  t.equal(dup.status, 409);
  t.same(dup.error, { error: 'duplicate value violates unique constraint' });
});

t.test('errors reach the client as {error}', async (t) => {
  const r = await client.from('authors').select('nosuch');
  t.equal(r.status, 400);
  t.same(r.error, { error: 'unknown column in request' });
  const missing = await client.from('nosuch').select();
  t.equal(missing.status, 404);
});

t.test('rpc, POST and GET', async (t) => {
  const p = await client.rpc('add', { a: 20, b: 22 });
  t.equal(p.data, 42);
  const g = await client.rpc('greet', { name: 'client' }, { get: true });
  t.equal(g.data, 'hello, client');
  const arr = await client.rpc('sum_all', { nums: [1, 2, 3] }, { get: true });
  t.equal(arr.data, 6, 'array argument in the query string');
  const set = await client.rpc('authors_born_after', { d: '1925-01-01' });
  t.same((set.data as any[]).map((a) => a.id), [1]);
});

t.test('a user JWT through the client gets its RLS view', async (t) => {
  const token = await userToken(USER_A);
  const user = new PostgrestClient(`${app.url}/rest/v1`, { headers: { apikey: app.anonKey, Authorization: `Bearer ${token}` } });
  const r = await user.from('notes').select('body');
  t.same(r.data, [{ body: 'mine' }]);
  const anon = await client.from('notes').select('body');
  t.same(anon.data, []);
});

t.test('what postgrest-js users write every day (issue 17)', async (t) => {
  const alias = await client.from('books').select('id, author:authors(name)').eq('id', 3).single();
  t.equal(alias.error, null);
  t.same(alias.data, { id: 3, author: { name: 'Italo Calvino' } }, "select('id, author:authors(name)')");

  const cast = await client.from('books').select('id, pages::text, title').eq('id', 3);
  t.same(cast.data, [{ id: 3, pages: '165', title: 'Invisible Cities' }], 'a cast');

  const json = await client.from('authors').select('id, meta->awards, prolific:meta->>prolific').eq('meta->>prolific', 'true').order('meta->>prolific');
  t.same(json.data, [{ id: 1, awards: ['hugo', 'nebula'], prolific: 'true' }], 'JSON paths in select, filter and order');

  const page = await client.from('authors').select('id', { count: 'exact' }).order('id').range(0, 1);
  t.equal(page.error, null);
  t.same(page.data, [{ id: 1 }, { id: 2 }], '.range(0, 1)');
  t.equal(page.count, 3);
  const tenth = await client.from('authors').select('id').order('id').range(0, 9);
  t.same(tenth.data, [{ id: 1 }, { id: 2 }, { id: 3 }], '.range(0, 9)');

  const csv = await client.from('authors').select('id, name').order('id').csv();
  t.equal(csv.error, null);
  t.equal(csv.data, 'id,name\n1,"Ursula Le Guin"\n2,"Italo Calvino"\n3,"Anonymous Writer"', '.csv()');

  const hint = await client.from('authors').select('id, reviews!reviews_author_id_fkey(stars)').eq('id', 1).single();
  t.same(hint.data, { id: 1, reviews: [{ stars: 5 }] }, 'a foreign-key hint');
  const ambiguous = await client.from('authors').select('id, reviews(stars)');
  t.equal(ambiguous.status, 400);
  t.match((ambiguous.error as any).error, /^invalid embed in request: .*reviews!reviews_reviewer_id_fkey/, 'the error names the candidates');

  const m2m = await client.from('books').select('id, genres(name)').eq('id', 3).single();
  t.same(m2m.data, { id: 3, genres: [{ name: 'fantasy' }] }, 'many-to-many');
  const one = await client.from('authors').select('id, author_profiles(bio)').eq('id', 1).single();
  t.same(one.data, { id: 1, author_profiles: { bio: 'Wrote Earthsea.' } }, 'one-to-one as an object');
  const children = await client.from('collections').select('*, collections(*)').eq('id', 2).single();
  t.same(children.data, { id: 2, parent_id: 1, name: 'left', collections: [{ id: 4, parent_id: 2, name: 'leaf' }] }, 'self-reference: the children');
  const parent = await client.from('collections').select('id, parent:collections!parent_id(name)').eq('id', 4).single();
  t.same(parent.data, { id: 4, parent: { name: 'left' } }, 'self-reference with a hint: the parent');
  const byColumn = await client.from('collections').select('*, parent_id(*)').eq('id', 2).single();
  t.same(byColumn.data, { id: 2, parent_id: { id: 1, parent_id: null, name: 'root' }, name: 'left' }, "select('*, parent_id(*)')");
  const inner = await client.from('authors').select('id, books!inner(id)').order('id');
  t.same((inner.data ?? []).map((a: any) => a.id), [1, 2], '!inner');
  const left = await client.from('authors').select('id, books!left(id)').order('id');
  t.same((left.data ?? []).map((a: any) => a.id), [1, 2, 3], '!left');
  const spread = await client.from('books').select('title, ...authors(name)').eq('id', 3).single();
  t.same(spread.data, { title: 'Invisible Cities', name: 'Italo Calvino' }, 'a spread embed');

  const ids = (r: { data: unknown }) => ((r.data ?? []) as { id: number }[]).map((x) => x.id);
  t.same(ids(await client.from('authors').select('id').likeAnyOf('name', ['Ur*', 'It*']).order('id')), [1, 2], 'likeAnyOf');
  t.same(ids(await client.from('authors').select('id').likeAllOf('name', ['*Le*', '*Guin']).order('id')), [1], 'likeAllOf');
  t.same(ids(await client.from('authors').select('id').ilikeAnyOf('name', ['%CALVINO', 'anon%']).order('id')), [2, 3], 'ilikeAnyOf');
  t.same(ids(await client.from('authors').select('id').ilikeAllOf('name', ['%u%', '%LE%']).order('id')), [1], 'ilikeAllOf');

  const other = await client.schema('other' as any).from('authors').select('id');
  t.equal(other.status, 406, '.schema() naming another schema');
  t.same(other.error, { error: 'only the public schema is exposed' });
  const otherRpc = await client.schema('other' as any).rpc('hidden');
  t.equal(otherRpc.status, 404, 'a function outside public is not found');
  t.same(otherRpc.error, { error: 'function not found' });
});
