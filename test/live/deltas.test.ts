/**
 * Live queries end to end: registration in SQL, deltas, invalidations and overflows on the
 * socket, in order, with seq (contract §5, interface §6.2, §8).
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { open, refused, waitFor } from './helpers.ts';

t.test('deltas, notify mode, overflow, unsubscribe', async (t) => {
  const app = await startApp(t);
  const sql = app.db.sql;
  await sql.unsafe(`create table public.todos (id int primary key, title text, done boolean default false);
    insert into public.todos values (1, 'a', false), (2, 'b', true);
    select live.subscribe('open_todos', 'select id, title from todos where not done');
    select live.subscribe('todo_count', 'select count(*) as n from todos', 'notify');`);
  const key = { token: app.anonKey };

  const c = await open(app, '/ws/open_todos', { query: key });
  const sub = await c.next();
  t.equal(sub.type, 'subscribed');
  t.equal(sub.query_id, 'open_todos');
  t.match(sub.client_id, /^[0-9a-f-]{36}$/, 'a client_id');

  const n = await open(app, '/ws/todo_count', { query: key });
  await n.next((m) => m.type === 'subscribed');

  await sql`insert into public.todos values (3, 'c', false)`;
  t.same(await c.next(), { query_id: 'open_todos', seq: 1, inserted: [{ id: 3, title: 'c' }], deleted: [] }, 'insert → delta seq 1');
  t.same(await n.next(), { type: 'invalidated', query_id: 'todo_count', seq: 1 }, 'notify mode → invalidated');

  await sql`update public.todos set title = 'C' where id = 3`;
  t.same(await c.next(), { query_id: 'open_todos', seq: 2, inserted: [{ id: 3, title: 'C' }], deleted: [{ id: 3, title: 'c' }] }, 'update → deleted old + inserted new');

  await sql`update public.todos set done = true where id = 2`; // leaves the result unchanged
  await sql`delete from public.todos where id = 1`;
  t.same(await c.next(), { query_id: 'open_todos', seq: 3, inserted: [], deleted: [{ id: 1, title: 'a' }] }, 'an unrelated change used no seq');
  t.same(await n.next(), { type: 'invalidated', query_id: 'todo_count', seq: 2 }, 'count unchanged by the update: silent');

  await sql`insert into public.todos select g, repeat('x', 100), false from generate_series(10, 200) g`;
  t.same(await c.next(), { type: 'overflow', query_id: 'open_todos', seq: 4, fetch: true }, 'too large a delta → overflow');

  await sql`select live.unsubscribe('todo_count')`;
  t.equal((await n.closed).code, 1000, 'unsubscribe closes the subscription\'s sockets');
  const r = await refused(app, '/ws/todo_count', { query: key });
  t.same(r, { status: 404, body: { error: 'subscription not found' } });
  c.close();
});

t.test("the query runs with the registering role's rights: subscribers' RLS is not applied", async (t) => {
  const app = await startApp(t);
  const sql = app.db.sql;
  await sql.unsafe(`create table public.secrets (id int primary key, owner text);
    alter table public.secrets enable row level security;
    create policy mine on public.secrets for select to anon, authenticated using (owner = 'nobody');
    create policy ins on public.secrets for insert to anon with check (true);
    grant select, insert on public.secrets to anon;
    select live.subscribe('secrets', 'select id, owner from secrets');`);
  await sql`insert into public.secrets values (0, 'zoe')`;
  // The REST catalog reloads on the DDL notification: wait for the table to appear.
  const rest = await waitFor(async () => {
    const r = await app.call('GET', '/rest/v1/secrets', { apikey: app.anonKey });
    return r.status === 200 ? r : null;
  });
  t.same(rest!.body, [], 'RLS hides the rows from anon over REST');
  const c = await open(app, '/ws/secrets', { query: { apikey: app.anonKey } });
  await c.next();
  const ins = await app.call('POST', '/rest/v1/secrets', { apikey: app.anonKey, body: { id: 1, owner: 'ann' }, headers: { prefer: 'return=minimal' } });
  t.equal(ins.status, 201, 'anon inserts (it needs no rights on live_private)');
  t.same(await c.next((m) => m.inserted?.[0]?.id === 1), { query_id: 'secrets', seq: 2, inserted: [{ id: 1, owner: 'ann' }], deleted: [] }, 'the anon subscriber still gets the row: audience is the only per-client filter');
  c.close();
});

t.test('LIVE_CHANNEL names the NOTIFY channel (and its payload limit)', async (t) => {
  const app = await startApp(t, { env: { LIVE_CHANNEL: 'my_live_channel' }, worker: false });
  const sql = app.db.sql;
  t.same(await sql`select channel from live_private.settings`, [{ channel: 'my_live_channel' }], 'the service records its channel at start');
  t.same(await sql`select live_private.payload_limit('my_live_channel') as l`, [{ l: 8000 - 15 - 100 }], '8000 - 15 - 100');
  await sql.unsafe(`create table public.c (id int primary key, t text); select live.subscribe('c', 'select id, t from c');`);
  const c = await open(app, '/ws/c', { query: { apikey: app.anonKey } });
  await c.next();
  await sql`insert into public.c values (1, 'x')`;
  t.same(await c.next(), { query_id: 'c', seq: 1, inserted: [{ id: 1, t: 'x' }], deleted: [] }, 'deltas arrive on the configured channel');
  // A delta between the two limits: it fits 7897 (lqs) but not 7885.
  const big = 'y'.repeat(7885 - JSON.stringify({ seq: 2, deleted: [], inserted: [{ t: '', id: 2 }], query_id: 'c' }).length - 9);
  await sql`insert into public.c values (2, ${big})`;
  const m = await c.next();
  t.equal(m.type, 'overflow', 'the limit follows the channel name');
  c.send({ type: 'broadcast', payload: 1 });
  t.same(await c.next(), { type: 'broadcast', from: c.messages[0].client_id, payload: 1 }, 'broadcast goes through <LIVE_CHANNEL>_bc');
  c.close();
});

t.test('replacing a subscription: overflow, or closed sockets when its audience changed', async (t) => {
  const app = await startApp(t, { worker: false });
  const sql = app.db.sql;
  await sql.unsafe(`create table public.r (id int primary key); insert into public.r values (1);
    select live.subscribe('r', 'select id from r');`);
  const c = await open(app, '/ws/r', { query: { apikey: app.anonKey } });
  await c.next();
  await sql`insert into public.r values (2)`;
  t.equal((await c.next()).seq, 1);
  await sql`select live.subscribe('r', 'select id, id * 2 as twice from r')`;
  t.same(await c.next(), { type: 'overflow', query_id: 'r', seq: 2, fetch: true }, 'a new query: overflow with the next seq');
  await sql`insert into public.r values (3)`;
  t.same(await c.next(), { query_id: 'r', seq: 3, inserted: [{ id: 3, twice: 6 }], deleted: [] }, 'then deltas of the new query');
  await sql`select live.subscribe('r', 'select id from r', 'delta', '{"role": "authenticated"}')`;
  t.equal((await c.closed).code, 1000, 'a new audience closes the sockets');
  t.same(await refused(app, '/ws/r', { query: { apikey: app.anonKey } }), { status: 401, body: { error: 'authentication required' } }, 'and reconnecting goes through the new check');
});
