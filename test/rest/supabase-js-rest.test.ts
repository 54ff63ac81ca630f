/**
 * `@supabase/supabase-js` (current 2.x), unchanged, against SUPABASE_COMPAT=true: `upsert`
 * with both resolutions (one row and an array, `onConflict`, `defaultToNull: false`) under
 * RLS as a signed-in user, and filters, order and limits on embedded resources,
 * `!inner` with a filter and `relation(count)` (docs/api/supabase.md).
 */
import t from 'tap';
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import { restApp, SEED_SQL, USER_A, USER_B, userToken } from './helpers.ts';

const SQL = `${SEED_SQL}
insert into public.notes (id, owner, body) values (1, '${USER_A}', 'a''s note'), (2, '${USER_B}', 'b''s secret');
select setval(pg_get_serial_sequence('public.notes', 'id'), 100);`;

const app = await restApp(t, { sql: SQL, env: { SUPABASE_COMPAT: 'true', REST_AGGREGATES_ENABLED: 'true' } });

function client(token?: string): SupabaseClient {
  return createClient(app.url, app.anonKey, {
    auth: { persistSession: false, autoRefreshToken: false, detectSessionInUrl: false },
    ...(token === undefined ? {} : { global: { headers: { Authorization: `Bearer ${token}` } } }),
  });
}

t.test('upsert: merge-duplicates and ignore-duplicates', async (t) => {
  const sb = client(app.serviceKey);
  const merged = await sb.from('authors').upsert({ name: 'Italo Calvino', rating: 8.5 }, { onConflict: 'name' }).select('id, name, rating');
  t.same([merged.error, merged.status, merged.data], [null, 200, [{ id: 2, name: 'Italo Calvino', rating: 8.5 }]], 'one row merged');
  const bulk = await sb
    .from('authors')
    .upsert([{ name: 'Italo Calvino', rating: 7 }, { name: 'Octavia Butler' }], { onConflict: 'name', defaultToNull: false })
    .select('name, rating, tags');
  t.same([bulk.error, bulk.status, bulk.data], [null, 201, [{ name: 'Italo Calvino', rating: 7, tags: ['fiction'] }, { name: 'Octavia Butler', rating: null, tags: [] }]], 'an array, missing keys to their defaults');
  const ignored = await sb.from('genres').upsert([{ id: 1, name: 'changed' }, { id: 7, name: 'essays' }], { ignoreDuplicates: true }).select();
  t.same([ignored.error, ignored.status, ignored.data], [null, 201, [{ id: 7, name: 'essays' }]], 'ignore-duplicates: the duplicate skipped');
  const { data: g } = await sb.from('genres').select('name').eq('id', 1).single();
  t.same(g, { name: 'science fiction' });
  const plain = await sb.from('genres').insert({ id: 1, name: 'again' });
  t.same([plain.status, plain.error?.code], [409, '23505'], 'insert without upsert: still 23505');
});

t.test('upsert under RLS, as the signed-in users', async (t) => {
  const a = client(await userToken(USER_A));
  const b = client(await userToken(USER_B));
  const mine = await a.from('notes').upsert({ id: 1, body: 'edited by a' }).select('id, body').single();
  t.same([mine.error, mine.data], [null, { id: 1, body: 'edited by a' }], 'a merges her own note');
  const theirs = await b.from('notes').upsert({ id: 1, body: 'taken by b' }).select();
  t.same([theirs.status, theirs.error?.code, theirs.error?.message], [403, '42501', 'permission denied'], "b cannot merge into a's note");
  t.notMatch(JSON.stringify(theirs.error), /edited by a|notes|insert|select/, 'neither the row nor SQL in the error');
  const skip = await b.from('notes').upsert({ id: 1, body: 'taken by b' }, { ignoreDuplicates: true }).select();
  t.same([skip.error, skip.data], [null, []], 'ignore-duplicates: nothing of a shown');
  const { data } = await client(app.serviceKey).from('notes').select('body').eq('id', 1).single();
  t.same(data, { body: 'edited by a' });
});

t.test('embedded filters, order, limit; !inner; relation(count)', async (t) => {
  const sb = client(app.serviceKey);
  const filtered = await sb.from('authors').select('name, books(title)').eq('books.title', 'Invisible Cities').lt('id', 3).order('id');
  t.same(filtered.data, [{ name: 'Ursula Le Guin', books: [] }, { name: 'Italo Calvino', books: [{ title: 'Invisible Cities' }] }], '.eq on an embed');
  const ordered = await sb.from('authors').select('name, books(title)').eq('id', 1).order('title', { referencedTable: 'books', ascending: false }).limit(1, { referencedTable: 'books' });
  t.same(ordered.data, [{ name: 'Ursula Le Guin', books: [{ title: 'The Left Hand of Darkness' }] }], 'order and limit on an embed');
  const ranged = await sb.from('authors').select('name, books(title)').eq('id', 1).order('title', { referencedTable: 'books' }).range(1, 1, { referencedTable: 'books' });
  t.same(ranged.data, [{ name: 'Ursula Le Guin', books: [{ title: 'The Left Hand of Darkness' }] }], 'range on an embed');
  const inner = await sb.from('authors').select('name, books!inner(title)').eq('books.title', 'Invisible Cities');
  t.same(inner.data, [{ name: 'Italo Calvino', books: [{ title: 'Invisible Cities' }] }], '!inner with a filter filters the parents');
  const counted = await sb.from('authors').select('name, books(count)').eq('id', 1);
  t.same(counted.data, [{ name: 'Ursula Le Guin', books: [{ count: 2 }] }], 'relation(count)');
  const bad = await sb.from('authors').select('name').eq('books.title', 'x');
  t.same([bad.status, bad.error?.code], [400, 'PGRST200'], 'a filter on a level not embedded');
});
