/**
 * The client library's channels (docs/client.md#realtime-channels) over /realtime/v1: two
 * signed-in users and an anonymous client on one table under RLS each receive the changes
 * of the rows they may read, with a filter; broadcast with `self` and `ack`; presence; a
 * refreshed token keeps a channel (TOKEN_REFRESHED sends it).
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { waitFor } from '../live/helpers.ts';
import { createClient, type PlinthClient, type PostgresChange, type RealtimeChannel } from '../../src/client/index.ts';

function joined(ch: RealtimeChannel): Promise<RealtimeChannel> {
  return new Promise((resolve, reject) => {
    ch.subscribe((s, err) => (s === 'SUBSCRIBED' ? resolve(ch) : reject(new Error(`${s}: ${err?.message ?? ''}`))));
  });
}

t.test('plinth.channel: postgres_changes under RLS, a filter, broadcast and presence', async (t) => {
  const app = await startApp(t, { env: { ACCESS_TOKEN_TTL: '4', AUTH_RATE_LIMIT: '0' } });
  await app.db.sql.unsafe(`create table public.notes (id int primary key, owner uuid, n int not null default 0);
    alter table public.notes enable row level security;
    create policy own on public.notes for select to authenticated using (owner = auth.uid());
    grant select on public.notes to authenticated, anon;`);
  const clients: PlinthClient[] = [];
  const user = async (name: string) => {
    const c = createClient(app.url, app.anonKey, { auth: { refreshLeadSeconds: 2 } });
    const up = await c.auth.signUp({ email: `${name}-${Date.now()}@example.com`, password: 'correct horse battery' });
    t.equal(up.error, null, `${name} signed up and in`);
    clients.push(c);
    return { c, id: up.data!.user!.id };
  };
  const a = await user('ann');
  const b = await user('bob');
  const anon = createClient(app.url, app.anonKey);
  const got: Record<string, Array<[string, unknown]>> = { a: [], b: [], anon: [], filtered: [] };
  const watch = (c: PlinthClient, key: string, filter?: string) =>
    joined(
      c.channel(`notes-${key}`).on('postgres_changes', { event: '*', schema: 'public', table: 'notes', ...(filter ? { filter } : {}) }, (p: PostgresChange) =>
        got[key].push([p.eventType, p.eventType === 'DELETE' ? p.old : p.new.id]),
      ),
    );
  const channels = [await watch(a.c, 'a'), await watch(b.c, 'b'), await watch(anon, 'anon'), await watch(a.c, 'filtered', 'n=gte.5')];
  t.teardown(() => Promise.all(channels.map((ch) => ch.unsubscribe())));

  await app.db.sql`insert into public.notes values (1, ${a.id}, 1), (2, ${b.id}, 2), (3, ${a.id}, 7)`;
  await app.db.sql`delete from public.notes where id = 2`;
  await waitFor(() => got.a.length >= 2 && got.b.length >= 2 && got.filtered.length >= 1, 10_000, 'the changes');
  t.same(got.a, [['INSERT', 1], ['INSERT', 3]], "ann: her rows");
  t.same(got.b, [['INSERT', 2], ['DELETE', { id: 2 }]], 'bob: his row, and its delete by primary key');
  t.same(got.anon, [], 'anon: nothing');
  t.same(got.filtered, [['INSERT', 3]], 'the filter n=gte.5');

  // The access token expires (ACCESS_TOKEN_TTL 4 s); the refreshed one goes to the channel, which stays.
  const exp = Date.now() + 5000;
  await waitFor(() => Date.now() > exp, 7000, 'the first token to expire');
  await app.db.sql`insert into public.notes values (4, ${a.id}, 0)`;
  await waitFor(() => got.a.some(([, id]) => id === 4), 5000, 'a change after the refresh');
  t.pass('a channel outlives its first access token');

  // Broadcast with self and ack; presence.
  const heard: unknown[] = [];
  const room = await joined(a.c.channel('room', { broadcast: { self: true, ack: true }, presence: { key: 'ann' } }).on('broadcast', { event: 'hi' }, (m) => heard.push(m.payload)));
  const other: unknown[] = [];
  const room2 = await joined(anon.channel('room').on('broadcast', { event: 'hi' }, (m) => other.push(m.payload)).on('presence', { event: 'sync' }, () => {}));
  channels.push(room, room2);
  t.equal(await room.send({ type: 'broadcast', event: 'hi', payload: { x: 1 } }), 'ok', 'acknowledged');
  await waitFor(() => heard.length === 1 && other.length === 1, 5000, 'the broadcast');
  t.same([heard, other], [[{ x: 1 }], [{ x: 1 }]], 'self and the other client receive it');
  t.equal(await room.track({ name: 'Ann' }), 'ok', 'tracked');
  await waitFor(() => room2.presenceState().ann?.[0]?.name === 'Ann', 5000, "ann's presence");
  t.pass('presence reaches the other client');
  for (const c of clients) c.auth.stopAutoRefresh();
});
