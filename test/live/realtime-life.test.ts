/**
 * The life of table subscriptions and presence on /realtime/v1, driven by realtime-js
 * through supabase-js (a real client): a table nobody subscribes to any more loses its
 * internal subscription and triggers after REALTIME_IDLE_MS (also when its subscribers'
 * instance died); a subscription broken by DDL is reported to its channels (CHANNEL_ERROR,
 * and the rejoin is refused while the table is gone); a TRUNCATE sends no postgres_changes
 * (as Supabase Realtime) and changes after it still arrive; an instance that had been
 * declared dead announces its sockets' presence again, so the others see them join again.
 */
import t from 'tap';
import { SignJWT } from 'jose';
import { createClient, type RealtimeChannel, type SupabaseClient } from '@supabase/supabase-js';
import { startApp, TEST_JWT_SECRET, type TestApp } from '../helpers/app.ts';
import { waitFor } from './helpers.ts';

const KEY = new TextEncoder().encode(TEST_JWT_SECRET);
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const userToken = (n: number) =>
  new SignJWT({ sub: uuid(n), role: 'authenticated', aud: 'authenticated' }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt().setExpirationTime('1h').sign(KEY);

async function client(t: { teardown(fn: () => unknown): void }, app: TestApp, token: string | null): Promise<SupabaseClient> {
  const c = createClient(app.url, app.anonKey, { accessToken: async () => token ?? app.anonKey, realtime: { heartbeatIntervalMs: 5000 } as never });
  t.teardown(() => c.removeAllChannels());
  await c.realtime.setAuth();
  return c;
}

/** Subscribes; resolves at SUBSCRIBED. Every status (and its error) is kept in `statuses`. */
function subscribed(ch: RealtimeChannel, statuses: string[] = []): Promise<RealtimeChannel> {
  return new Promise((resolve, reject) => {
    ch.subscribe((status, err) => {
      statuses.push(err === undefined ? status : `${status}: ${err.message}`);
      if (String(status) === 'SUBSCRIBED') resolve(ch);
      else if (statuses.length === 1) reject(new Error(`${status}: ${err?.message ?? ''}`));
    });
  });
}

async function notesTable(app: TestApp): Promise<void> {
  await app.db.sql.unsafe(`
    create table public.notes (id int primary key, owner uuid, body text not null);
    alter table public.notes enable row level security;
    create policy own on public.notes for select to authenticated using (owner = auth.uid());
    grant select on public.notes to authenticated;`);
}

const triggers = async (app: TestApp) =>
  Number((await app.db.sql`select count(*)::int as n from pg_trigger where tgrelid = 'public.notes'::regclass and tgname like '_900_live_%'`)[0].n);
const subscriptions = async (app: TestApp) =>
  Number((await app.db.sql`select count(*)::int as n from live_private.subscriptions where query_id = 'realtime:' || 'public.notes'::regclass::oid`)[0].n);

t.test('a table nobody subscribes to any more loses its subscription and triggers after REALTIME_IDLE_MS', async (t) => {
  const app = await startApp(t, { worker: false, env: { REALTIME_IDLE_MS: '1500' } });
  await notesTable(app);
  const c = await client(t, app, await userToken(1));
  const got: unknown[] = [];
  const ch = await subscribed(c.channel('n').on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'notes', filter: `owner=eq.${uuid(1)}` }, (p) => got.push(p.new)));
  t.equal(await subscriptions(app), 1, 'the table subscription is registered at the first join');
  t.equal(await triggers(app), 4, 'with its triggers');
  await app.db.sql`insert into public.notes values (1, ${uuid(1)}, 'one'), (2, ${uuid(2)}, 'two')`;
  await waitFor(() => got.length > 0, 5000, 'the change');
  await c.removeChannel(ch);
  // The membership goes with the heartbeat (10 s after the join at the earliest), then the grace.
  await waitFor(async () => (await subscriptions(app)) === 0, 30_000, 'the sweep');
  t.equal(await triggers(app), 0, 'the triggers went with it: writes pay nothing');
  t.equal(Number((await app.db.sql`select count(*)::int as n from live_private.changes`)[0].n), 0, 'no change left queued');

  // Subscribed again: registered again, and changes flow.
  const again = await client(t, app, await userToken(1));
  const got2: Array<Record<string, unknown>> = [];
  await subscribed(again.channel('n2').on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'notes' }, (p) => got2.push(p.new)));
  t.equal(await triggers(app), 4, 'the triggers are back');
  await app.db.sql`insert into public.notes values (3, ${uuid(1)}, 'three'), (4, ${uuid(2)}, 'four')`;
  await waitFor(() => got2.length > 0, 5000, 'the change after the rejoin');
  await new Promise((r) => setTimeout(r, 300)); // a change too many would arrive now
  t.same(got2.map((r) => r.id), [3], 'only its own row');
});

t.test("a table subscription whose subscribers' instance died is swept", async (t) => {
  const app = await startApp(t, { worker: false, env: { REALTIME_IDLE_MS: '500' } });
  await notesTable(app);
  // A dead instance's membership (no heartbeat): what a killed instance leaves behind.
  const dead = '99999999-9999-4999-8999-999999999999';
  await app.db.sql`select * from live_private.realtime_join(${dead}, 'notes', 'authenticated', ${JSON.stringify({ sub: uuid(1), role: 'authenticated' })}::text::jsonb, null)`;
  t.equal(await triggers(app), 4, 'registered by the dead instance');
  await waitFor(async () => (await subscriptions(app)) === 0, 20_000, 'the sweep');
  t.equal(await triggers(app), 0, 'its triggers went');
});

t.test('a subscription broken by DDL is reported to its channel; TRUNCATE sends nothing', async (t) => {
  const app = await startApp(t, { worker: false });
  await notesTable(app);
  const c = await client(t, app, await userToken(1));
  const got: Array<Record<string, unknown>> = [];
  const statuses: string[] = [];
  const systems: Array<{ status?: string; message?: string }> = [];
  await subscribed(
    c
      .channel('b')
      .on('postgres_changes', { event: '*', schema: 'public', table: 'notes' }, (p) => got.push({ type: p.eventType, id: (p.new as { id?: number }).id }))
      .on('system', {}, (p: { status?: string; message?: string }) => systems.push(p)),
    statuses,
  );
  await app.db.sql`insert into public.notes values (1, ${uuid(1)}, 'one')`;
  await app.db.sql`truncate public.notes`;
  await app.db.sql`insert into public.notes values (2, ${uuid(1)}, 'two')`;
  await waitFor(() => got.length >= 2, 5000, 'the changes around the TRUNCATE');
  await new Promise((r) => setTimeout(r, 300));
  t.same(got, [{ type: 'INSERT', id: 1 }, { type: 'INSERT', id: 2 }], 'the TRUNCATE sends no postgres_changes; the changes after it arrive');

  await app.db.sql`drop table public.notes`;
  await waitFor(() => statuses.some((s) => s.startsWith('CHANNEL_ERROR')), 5000, 'CHANNEL_ERROR');
  t.match(systems.find((s) => s.status === 'error'), { status: 'error', message: /table subscription broken: notes/ }, 'a system error says why');
  // realtime-js rejoins: refused while the table is gone.
  await waitFor(() => statuses.filter((s) => s.includes('table notes not found')).length > 0, 15_000, 'the refused rejoin');
  t.pass('the rejoin is refused: table notes not found');
});

t.test('an instance declared dead announces its presence again; the other sees it join again, once', async (t) => {
  const a = await startApp(t, { worker: false });
  const b = await startApp(t, { worker: false, db: a.db });
  const ca = await client(t, a, null);
  const cb = await client(t, b, null);
  const chA = await subscribed(ca.channel('lobby', { config: { presence: { key: 'ann' } } }));
  await chA.track({ name: 'Ann' });
  const joins: string[] = [];
  const leaves: string[] = [];
  const chB = cb.channel('lobby', { config: { presence: { key: 'bob' } } });
  chB.on('presence', { event: 'join' }, ({ key }) => joins.push(key)).on('presence', { event: 'leave' }, ({ key }) => leaves.push(key));
  await subscribed(chB);
  await waitFor(() => joins.includes('ann'), 5000, "ann's state on the other instance");
  const [{ id: deadId }] = await a.db.sql<{ id: string }[]>`select instance_id::text as id from live_private.presence where client_id like 'ann#%'`;
  const [{ id: otherId }] = await a.db.sql<{ id: string }[]>`select id::text from live_private.heartbeats where id <> ${deadId} limit 1`;
  // Instance A declared dead (as when it stalls past the TTL): B's beat removes its presence and announces the leave.
  await a.db.sql.begin(async (tx) => {
    await tx`delete from live_private.heartbeats where id = ${deadId}`;
    await tx`select live_private.heartbeat(${otherId}, ${`${a.config.liveChannel.slice(0, 60)}_bc`}, 5)`;
  });
  await waitFor(() => leaves.includes('ann'), 5000, "ann's leave");
  // A's next beat finds itself new: its sockets' presence is announced again.
  await waitFor(() => joins.filter((k) => k === 'ann').length === 2, 5000, "ann's second join");
  await waitFor(() => (chB.presenceState().ann ?? []).length === 1, 5000, "ann's state");
  t.match(chB.presenceState().ann, [{ name: 'Ann' }], 'ann is in the state again, once, with its state');
  t.equal(Number((await a.db.sql`select count(*)::int as n from live_private.presence where client_id like 'ann#%'`)[0].n), 1, 'one presence row, no stale entry');
});
