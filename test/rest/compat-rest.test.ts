/**
 * SUPABASE_COMPAT=true, REST (docs/api/supabase.md): upsert (`on_conflict`,
 * `Prefer: resolution=merge-duplicates|ignore-duplicates`, `missing=default`, under RLS) and
 * filters, order and paging on embedded resources, `!inner` with a filter, `relation(count)`.
 * Each request goes to both modes: the default keeps the interface's answers (a plain insert,
 * 409 on a duplicate; a dotted key is an unknown column; `rel(count)` an invalid embed).
 */
import t from 'tap';
import { restApp, SEED_SQL, USER_A, USER_B, userToken } from './helpers.ts';
import type { TestApp } from '../helpers/app.ts';

const SQL = `${SEED_SQL}
insert into public.notes (id, owner, body) values (1, '${USER_A}', 'a''s note'), (2, '${USER_B}', 'b''s secret');
select setval(pg_get_serial_sequence('public.notes', 'id'), 100);`;

const env = { REST_AGGREGATES_ENABLED: 'true' };
const plain = await restApp(t, { sql: SQL, env });
const compat = await restApp(t, { sql: SQL, env: { ...env, SUPABASE_COMPAT: 'true' } });

type Tap = typeof t;
async function both(t: Tap, name: string, fn: (t: Tap, app: TestApp, on: boolean) => Promise<void>): Promise<void> {
  await t.test(name, async (t) => {
    await t.test('default', (t2) => fn(t2 as unknown as Tap, plain, false));
    await t.test('SUPABASE_COMPAT=true', (t2) => fn(t2 as unknown as Tap, compat, true));
  });
}

const DUPLICATE = { error: 'duplicate value violates unique constraint' };
const UNKNOWN_COLUMN = { error: 'unknown column in request' };

await both(t, 'upsert: merge-duplicates on on_conflict, one row and an array', async (t, app, on) => {
  const merge = { headers: { prefer: 'resolution=merge-duplicates,return=representation' } };
  const one = await app.call('POST', '/rest/v1/authors?on_conflict=name&select=id,name,rating', { ...merge, token: app.serviceKey, body: { name: 'Italo Calvino', rating: 8.5 } });
  if (on) t.same([one.status, one.body], [200, [{ id: 2, name: 'Italo Calvino', rating: 8.5 }]], 'the row merged: 200 (nothing inserted)');
  else t.same([one.status, one.body], [409, DUPLICATE], 'default: a plain insert, 409');

  const many = await app.call('POST', '/rest/v1/authors?on_conflict=name&select=name,rating', {
    ...merge,
    token: app.serviceKey,
    body: [
      { name: 'Italo Calvino', rating: 7 },
      { name: 'Octavia Butler', rating: 9.9 },
    ],
  });
  if (on) t.same([many.status, many.body], [201, [{ name: 'Italo Calvino', rating: 7 }, { name: 'Octavia Butler', rating: 9.9 }]], 'one merged, one inserted: 201');
  else t.same([many.status, many.body], [409, DUPLICATE]);
  const after = await app.call('GET', '/rest/v1/authors?select=name&name=eq.Octavia Butler', { token: app.serviceKey });
  t.equal(after.body.length, on ? 1 : 0, 'the new row is there only where upsert is');

  const minimal = await app.call('POST', '/rest/v1/authors?on_conflict=name', { headers: { prefer: 'resolution=merge-duplicates,return=minimal' }, token: app.serviceKey, body: { name: 'Italo Calvino', rating: 6 } });
  t.same([minimal.status, minimal.body], on ? [200, ''] : [409, DUPLICATE], 'return=minimal');
  const unknown = await app.call('POST', '/rest/v1/authors?on_conflict=nope', { ...merge, token: app.serviceKey, body: { name: 'x' } });
  if (on) t.same([unknown.status, unknown.body.message], [400, 'unknown column in request'], 'an on_conflict column the table lacks');
  else t.equal(unknown.status, 201, 'default: on_conflict is ignored');
});

await both(t, 'upsert: ignore-duplicates on the primary key, missing=default', async (t, app, on) => {
  const ign = await app.call('POST', '/rest/v1/genres', { headers: { prefer: 'resolution=ignore-duplicates,return=representation' }, token: app.serviceKey, body: [{ id: 1, name: 'changed' }, { id: 9, name: 'essays' }] });
  if (on) t.same([ign.status, ign.body], [201, [{ id: 9, name: 'essays' }]], 'the duplicate skipped, the new row answered');
  else t.same([ign.status, ign.body], [409, DUPLICATE]);
  const g1 = await app.call('GET', '/rest/v1/genres?id=eq.1', { token: app.serviceKey });
  t.equal(g1.body[0].name, 'science fiction', 'the existing row unchanged');

  // Rows with different keys: each missing one takes its default (tags not null default '{}').
  const md = await app.call('POST', '/rest/v1/authors?on_conflict=name&select=name,tags,active', {
    headers: { prefer: 'resolution=merge-duplicates,missing=default,return=representation' },
    token: app.serviceKey,
    body: [{ name: 'Ursula Le Guin', active: false }, { name: 'Ted Chiang', tags: ['sf'] }],
  });
  if (on) t.same([md.status, md.body], [201, [{ name: 'Ursula Le Guin', tags: [], active: false }, { name: 'Ted Chiang', tags: ['sf'], active: true }]]);
  else t.same([md.status, md.body], [409, DUPLICATE]);
});

await both(t, 'upsert under RLS: the insert and the update policies both apply', async (t, app, on) => {
  const a = await userToken(USER_A);
  const b = await userToken(USER_B);
  const merge = { headers: { prefer: 'resolution=merge-duplicates,return=representation' } };
  const own = await app.call('POST', '/rest/v1/notes?select=id,body', { ...merge, token: a, body: { id: 1, body: 'edited by a' } });
  if (on) t.same([own.status, own.body], [200, [{ id: 1, body: 'edited by a' }]], 'a merges her own note');
  else t.same([own.status, own.body], [409, DUPLICATE]);
  const theirs = await app.call('POST', '/rest/v1/notes?select=id,body', { ...merge, token: b, body: { id: 1, body: 'taken by b' } });
  if (on) t.same([theirs.status, theirs.body], [403, { code: '42501', message: 'permission denied', details: null, hint: null }], "b cannot merge into a's note");
  else t.same([theirs.status, theirs.body], [409, DUPLICATE]);
  const ignored = await app.call('POST', '/rest/v1/notes?select=id,body', { headers: { prefer: 'resolution=ignore-duplicates,return=representation' }, token: b, body: { id: 1, body: 'taken by b' } });
  if (on) t.same([ignored.status, ignored.body], [201, []], "ignore-duplicates: a's note neither changed nor shown");
  else t.same([ignored.status, ignored.body], [409, DUPLICATE]);
  const note = await app.call('GET', '/rest/v1/notes?id=eq.1&select=body', { token: app.serviceKey });
  t.same(note.body, [{ body: on ? 'edited by a' : "a's note" }], "a's note only ever changed by a");
});

await both(t, 'embedded filters, order, limit and offset', async (t, app, on) => {
  const eq = await app.call('GET', '/rest/v1/authors?select=name,books(title)&books.title=eq.Invisible Cities&id=lt.3&order=id', { token: app.serviceKey });
  if (on) t.same([eq.status, eq.body], [200, [{ name: 'Ursula Le Guin', books: [] }, { name: 'Italo Calvino', books: [{ title: 'Invisible Cities' }] }]]);
  else t.same([eq.status, eq.body], [400, UNKNOWN_COLUMN], 'default: a dotted key is a column');

  const paged = await app.call('GET', '/rest/v1/authors?id=eq.1&select=name,books(title)&books.order=title.desc&books.limit=1&books.offset=1', { token: app.serviceKey });
  if (on) t.same([paged.status, paged.body], [200, [{ name: 'Ursula Le Guin', books: [{ title: 'The Dispossessed' }] }]]);
  else t.same([paged.status, paged.body], [400, { error: 'invalid request' }], 'default: `books.order` is a filter without an operator');

  const or = await app.call('GET', '/rest/v1/authors?id=eq.1&select=books(title,chapters(title))&books.or=(pages.gt.350,title.like.*Left*)&books.chapters.position=eq.2&books.order=id', { token: app.serviceKey });
  if (on) t.same(or.body, [{ books: [{ title: 'The Left Hand of Darkness', chapters: [{ title: 'The Place Inside the Blizzard' }] }, { title: 'The Dispossessed', chapters: [] }] }], 'or, and a second level');
  else t.equal(or.status, 400);

  const inner = await app.call('GET', '/rest/v1/authors?select=name,books!inner(title)&books.title=eq.Invisible Cities', { token: app.serviceKey });
  if (on) t.same([inner.status, inner.body], [200, [{ name: 'Italo Calvino', books: [{ title: 'Invisible Cities' }] }]], '!inner with a filter filters the parents');
  else t.same([inner.status, inner.body], [400, UNKNOWN_COLUMN]);

  const toOne = await app.call('GET', '/rest/v1/books?select=title,authors(name)&authors.name=eq.Italo Calvino&id=lt.4&order=id', { token: app.serviceKey });
  if (on) t.same(toOne.body.map((b: { authors: unknown }) => b.authors), [null, null, { name: 'Italo Calvino' }], 'a to-one embed that fails its filter is null');
  else t.equal(toOne.status, 400);

  const stray = await app.call('GET', '/rest/v1/authors?select=name&books.title=eq.x', { token: app.serviceKey });
  if (on) t.same([stray.status, stray.body.message], [400, 'invalid embed in request'], 'a filter on a level not embedded');
  else t.same([stray.status, stray.body], [400, UNKNOWN_COLUMN]);
});

await both(t, 'relation(count)', async (t, app, on) => {
  const r = await app.call('GET', '/rest/v1/authors?select=name,books(count)&order=id&id=lt.4', { token: app.serviceKey });
  if (on) {
    t.same([r.status, r.body], [200, [{ name: 'Ursula Le Guin', books: [{ count: 2 }] }, { name: 'Italo Calvino', books: [{ count: 1 }] }, { name: 'Anonymous Writer', books: [{ count: 0 }] }]]);
    const f = await app.call('GET', '/rest/v1/authors?select=name,books(count)&books.pages=gt.350&id=eq.1', { token: app.serviceKey });
    t.same(f.body, [{ name: 'Ursula Le Guin', books: [{ count: 1 }] }], 'counted after the embedded filter');
  } else t.same([r.status, r.body], [400, { error: 'invalid embed in request' }]);
});

await both(t, "PostgREST's statuses: void RPC, writes without return=, partial counts, ambiguous embeds", async (t, app, on) => {
  const v = await app.call('POST', '/rest/v1/rpc/touch', { token: app.serviceKey, body: {} });
  t.same([v.status, v.text], on ? [204, ''] : [200, 'null'], 'a void function');
  const ins = await app.call('POST', '/rest/v1/genres', { token: app.serviceKey, body: { id: 50, name: 'drama' } });
  t.same([ins.status, ins.text === '' ? null : ins.body], on ? [201, null] : [201, [{ id: 50, name: 'drama' }]], 'an insert without Prefer: return=');
  const upd = await app.call('PATCH', '/rest/v1/genres?id=eq.50', { token: app.serviceKey, body: { name: 'comedy' } });
  t.same([upd.status, upd.text === '' ? null : upd.body], on ? [204, null] : [200, [{ id: 50, name: 'comedy' }]], 'an update without Prefer: return=');
  const rep = await app.call('PATCH', '/rest/v1/genres?id=eq.50', { headers: { prefer: 'return=representation' }, token: app.serviceKey, body: { name: 'tragedy' } });
  t.same([rep.status, rep.body], [200, [{ id: 50, name: 'tragedy' }]], 'return=representation: the rows in both');
  const page = await app.call('GET', '/rest/v1/books?select=id&order=id&limit=2', { headers: { prefer: 'count=exact' }, token: app.serviceKey });
  t.same([page.status, page.headers.get('content-range')], [on ? 206 : 200, '0-1/4'], 'a partial page of a counted read');
  const amb = await app.call('GET', '/rest/v1/reviews?select=authors(name)', { token: app.serviceKey });
  if (on) {
    t.equal(amb.status, 300, 'an ambiguous embed: 300');
    t.match(amb.body, { code: 'PGRST201', message: "Could not embed because more than one relationship was found for 'reviews' and 'authors'" });
    t.same(amb.body.details.map((d: { cardinality: string }) => d.cardinality), ['many-to-one', 'many-to-one']);
    t.match(amb.body.hint, /^Try changing 'authors' to one of the following: 'authors!/);
  } else t.same([amb.status, amb.body.error.startsWith('invalid embed in request: more than one relationship')], [400, true]);
  const single = await app.call('GET', '/rest/v1/books?select=id', { headers: { accept: 'application/vnd.pgrst.object+json' }, token: app.serviceKey });
  if (on) t.same([single.status, single.body.code, single.body.details], [406, 'PGRST116', 'The result contains 4 rows']);
  else t.same([single.status, single.body], [406, { error: 'JSON object requested, multiple (or no) rows returned' }]);
  const col = await app.call('GET', '/rest/v1/books?select=nope', { token: app.serviceKey });
  t.same([col.status, on ? col.body.message : col.body.error], [400, on ? 'column books.nope does not exist' : 'unknown column in request'], 'an unknown column');
  const rel = await app.call('GET', '/rest/v1/books?select=nothing(*)', { token: app.serviceKey });
  t.same([rel.status, on ? rel.body.message : rel.body.error], [400, on ? "Could not find a relationship between 'books' and 'nothing' in the schema cache" : 'invalid embed in request']);
});

t.test('embedded filters meet the limits of the top level (400, never a database 500)', async (t) => {
  const deep = '{'.repeat(8) + 'a' + '}'.repeat(8);
  const arr = await compat.call('GET', `/rest/v1/books?select=title,authors(name)&authors.tags=cs.${encodeURIComponent(deep)}`, { token: compat.serviceKey });
  t.same([arr.status, arr.body.message], [400, 'invalid request'], 'an array value deeper than PostgreSQL takes');
  const fts = await compat.call('GET', `/rest/v1/books?select=title,authors(name)&authors.name=fts.${encodeURIComponent('!'.repeat(40) + 'a')}`, { token: compat.serviceKey });
  t.same([fts.status, fts.body.message], [400, 'invalid request'], 'a tsquery too complex for its parser');
});

t.test('a write answering no rows still takes the values only its answer would have read', async (t) => {
  const r = await compat.call('PATCH', '/rest/v1/authors?id=eq.3&select=name,books(title)&books.title=eq.x', { token: compat.serviceKey, body: { rating: 5 } });
  t.same([r.status, r.text], [204, ''], 'compat: no return= is return=minimal');
  const p = await plain.call('PATCH', '/rest/v1/authors?id=eq.3&select=m:meta->>a', { headers: { prefer: 'return=minimal' }, token: plain.serviceKey, body: { rating: 4 } });
  t.same([p.status, p.text], [204, ''], 'default: return=minimal with a JSON key in select');
});

await both(t, 'a merging upsert given one key twice: 400 with PostgREST\'s code and hint, nothing written', async (t, app, on) => {
  const r = await app.call('POST', '/rest/v1/genres', {
    headers: { prefer: 'resolution=merge-duplicates' },
    token: app.serviceKey,
    body: [{ id: 70, name: 'one' }, { id: 70, name: 'two' }],
  });
  if (on) {
    t.equal(r.status, 400, 'the request\'s mistake: not a 500');
    t.same(r.body, {
      code: '21000',
      message: 'ON CONFLICT DO UPDATE command cannot affect row a second time',
      details: null,
      hint: 'Ensure that no rows proposed for insertion within the same command have duplicate constrained values.',
    });
  } else t.same([r.status, r.body], [409, DUPLICATE], 'default: a plain insert of a duplicate');
  const after = await app.call('GET', '/rest/v1/genres?id=eq.70', { token: app.serviceKey });
  t.same(after.body, [], 'nothing written');
});

await both(t, 'Preference-Applied names the preferences PostgREST names', async (t, app, on) => {
  const up = await app.call('POST', '/rest/v1/genres?on_conflict=id', {
    headers: { prefer: 'resolution=merge-duplicates, missing=default, return=representation, count=exact, handling=lenient, consistency=strong' },
    token: app.serviceKey,
    body: [{ id: 71, name: 'seventy-one' }],
  });
  t.equal(up.status, 201);
  t.equal(
    up.headers.get('preference-applied'),
    on ? 'resolution=merge-duplicates, missing=default, return=representation, count=exact, handling=lenient' : 'missing=default',
  );
  const patch = await app.call('PATCH', '/rest/v1/genres?id=eq.71', {
    headers: { prefer: 'return=minimal, handling=strict, max-affected=1' },
    token: app.serviceKey,
    body: { name: 'renamed' },
  });
  t.equal(patch.status, 204);
  t.equal(patch.headers.get('preference-applied'), on ? 'return=minimal, handling=strict, max-affected=1' : null);
  const get = await app.call('GET', '/rest/v1/genres?select=id&limit=1', { headers: { prefer: 'count=exact, return=minimal' }, token: app.serviceKey });
  t.equal(get.headers.get('preference-applied'), on ? 'count=exact' : null, 'a read: count only (return= is for writes)');
  const none = await app.call('GET', '/rest/v1/genres?select=id&limit=1', { token: app.serviceKey });
  t.equal(none.headers.get('preference-applied'), null, 'no Prefer: no header');
});
