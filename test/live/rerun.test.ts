/**
 * What a re-run subscription costs its writers and the machine: a writer's statement reads
 * one small table to decide on a wake-up (live_private.pollers), never the marks, and sends
 * one only while no poller is awake; a poller under a stream of writes steps every
 * LIVE_RERUN_MAX_MS, not back to back, and misses no change, a TRUNCATE included.
 */
import t from 'tap';
import postgres from 'postgres';
import { createTestDatabase } from '../helpers/database.ts';
import { startApp } from '../helpers/app.ts';
import { open, waitFor } from './helpers.ts';

const POLLER = '00000000-0000-4000-8000-0000000000aa';

t.test('a writer wakes the pollers only while none is awake; a claim that finds work records its poller awake', async (t) => {
  const db = await createTestDatabase(t);
  const sql = db.sql;
  await sql.unsafe(`create table public.a (id int primary key); create table public.b (id int primary key, t text not null);
    insert into public.b select g, 'b' || g from generate_series(1, 10) g;
    select live.subscribe('j', 'select a.id, b.t from a join b using (id)');`);
  const [{ channel }] = await sql`select left(channel, 58) || '_wake' as channel from live_private.settings`;
  const listener = postgres(db.url, { max: 1, onnotice: () => {} });
  t.teardown(() => listener.end({ timeout: 1 }));
  const got: string[] = [];
  await listener.listen(channel, (p) => got.push(p));
  // Notifications arrive in commit order: one sent after a write shows what the write sent.
  const fence = async (name: string) => {
    await sql`select pg_notify(${channel}, ${name})`;
    await waitFor(() => got.includes(name), 5000, name);
  };

  await sql`insert into live_private.pollers (instance_id, awake_until) values (${POLLER}, now() + interval '1 minute')`;
  await sql`insert into public.a values (1)`;
  await fence('after the write under an awake poller');
  t.same(got, ['after the write under an awake poller'], 'no wake-up while a poller is awake');
  t.same(await sql`select query_id from live_private.dirty`, [{ query_id: 'j' }], 'the mark is left all the same');

  await sql`update live_private.pollers set awake_until = now() - interval '1 second'`;
  await sql`insert into public.a values (2)`;
  await fence('after the write under an expired poller');
  t.same(got.slice(1), ['', 'after the write under an expired poller'], 'a poller whose promise expired is woken');
  await sql`delete from live_private.pollers`;

  await sql`select * from live_private.claim(${POLLER}, 15000)`;
  const [row] = await sql`select awake_until > clock_timestamp() + interval '500 milliseconds' as awake from live_private.pollers where instance_id = ${POLLER}`;
  t.same(row, { awake: true }, 'a claim that found marks records its poller awake for a while');
  t.same(await sql`select count(*)::int as n from live_private.dirty`, [{ n: 0 }], 'and took the marks');
  await sql`select live_private.rerun_subscription(${POLLER}, 'j')`;
  await sql`select * from live_private.claim(${POLLER}, 15000)`;
  t.same(await sql`select count(*)::int as n from live_private.pollers`, [{ n: 0 }], 'a claim that finds nothing removes the row');
  await sql`insert into public.a values (3)`;
  await fence('after the write under an idle poller');
  t.same(got.slice(3), ['', 'after the write under an idle poller'], 'and the next writer wakes it');
});

t.test('under a stream of writes the poller steps every LIVE_RERUN_MAX_MS and misses no change', async (t) => {
  const app = await startApp(t, { worker: false, env: { LIVE_RERUN_MAX_MS: '250' } });
  const sql = app.db.sql;
  await sql.unsafe(`create table public.a (id int primary key); create table public.b (id int primary key, t text not null);
    insert into public.b select g, 'b' || g from generate_series(1, 100000) g;
    select live.subscribe('j', 'select a.id, b.t from a join b using (id)');`);
  const c = await open(app, '/ws/j', { query: { apikey: app.anonKey } });
  t.equal((await c.next()).type, 'subscribed', 'a client of the join');
  const poller = app.service.app.live!.poller;

  // The first write wakes the poller; from its run on, the writes keep marks waiting.
  await sql`insert into public.a values (1)`;
  await c.next((m) => m.inserted?.some((r: any) => r.id === 1));
  const runs = poller.subscriptionRuns;
  const started = Date.now();
  let id = 1;
  while (Date.now() - started < 1500) await sql`insert into public.a values (${++id})`;
  const elapsed = Date.now() - started;
  // Every row inserted is in the result, whatever run took it, and its message reached the
  // client (a delta, or an overflow when a burst does not fit a notification).
  const last = id;
  await waitFor(async () => (await sql`select jsonb_array_length(snapshot) as n from live_private.subscriptions where query_id = 'j'`)[0].n === last, 10_000, 'the last row');
  const [{ seq }] = await sql`select seq::int from live_private.subscriptions where query_id = 'j'`;
  await waitFor(() => c.messages.some((m) => m.seq === seq), 5000, 'the last message');
  t.same(c.messages.filter((m) => m.seq !== undefined && m.type !== 'subscribed').map((m) => m.seq), Array.from({ length: seq }, (_, i) => i + 1), `every one of the ${last} rows in the result, messages 1 to ${seq} in order`);
  const stepped = poller.subscriptionRuns - runs;
  const most = Math.ceil(elapsed / 250) + 2;
  t.ok(stepped <= most, `${stepped} re-runs for ${last - 1} writes in ${elapsed} ms (at most ${most})`);
  t.ok(stepped >= 2, 'the writes were taken by more than one run');
  c.close();
});

t.test('a TRUNCATE that commits while a claim runs re-runs the group: it is never taken as seen without a re-run', async (t) => {
  const db = await createTestDatabase(t);
  const sql = db.sql;
  await sql.unsafe(`create table public.todos (id int primary key, title text not null);
    grant select on public.todos to authenticated;
    select live.subscribe('todos', 'select id, title from todos', 'delta', null, '{"as": "subscriber"}');`);
  const [{ group_id }] = await sql`select group_id from live_private.join_group(${POLLER}, 'todos', 'authenticated', '{"sub": "u1"}')`;
  // A change the group has seen (its claim deletes it) and the group's first result.
  await sql`insert into public.todos values (1, 'one')`;
  await sql`select live_private.init_group(${group_id}, '[{"id": 1, "title": "one"}]', pg_current_snapshot()::text)`;
  // The claim is parked on its delete of that seen change, between its statements, while a
  // TRUNCATE commits (a row trigger of this test waits on an advisory lock the test holds).
  await sql.unsafe(`create function public.park() returns trigger language plpgsql as $$
    begin perform pg_advisory_lock(4242); perform pg_advisory_unlock(4242); return old; end $$;
    create trigger park before delete on live_private.changes for each row execute function public.park();`);
  const [holder, claimer] = [postgres(db.url, { max: 1 }), postgres(db.url, { max: 1 })];
  t.teardown(() => Promise.all([holder.end({ timeout: 1 }), claimer.end({ timeout: 1 })]));
  await holder`select pg_advisory_lock(4242)`;
  const claimed = claimer`select group_id, fast from live_private.claim(${POLLER}, 15000)`.execute();
  await waitFor(async () => (await sql`select count(*)::int as n from pg_stat_activity
    where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'advisory' and query like '%live_private.claim%'`)[0].n === 1, 10_000, 'the claim to park');
  await sql`truncate public.todos`;
  await holder`select pg_advisory_unlock(4242)`;
  t.same((await claimed).map((r) => ({ ...r })), [{ group_id, fast: false }], 'the group is re-run, not fed the rows after the TRUNCATE');
  await sql.unsafe('drop trigger park on live_private.changes');
  const [{ n }] = await sql`select count(*)::int as n from live_private.changes c, live_private.groups g
    where c.ins is null and not pg_visible_in_snapshot(c.xid, g.snap)`;
  t.equal(n, 1, 'until its re-run is published, the TRUNCATE stays unseen by the group');
});
