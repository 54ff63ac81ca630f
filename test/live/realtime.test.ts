/**
 * Supabase Realtime's protocol, driven by realtime-js through supabase-js (a real client):
 * table subscriptions under RLS (two users and anon on one table: each receives only the
 * changes of rows it may read; an UPDATE that takes a row out of a user's view is not sent
 * to it; a DELETE carries the primary key only), a filter, broadcast between two clients
 * with `self` and `ack`, presence across two instances, a token swap and the close at a
 * token's expiry, vsn 1.0.0 as well as 2.0.0, and POST /realtime/v1/api/broadcast.
 */
import t from 'tap';
import { SignJWT } from 'jose';
import { createClient, type RealtimeChannel, type SupabaseClient } from '@supabase/supabase-js';
import { startApp, TEST_JWT_SECRET, type TestApp } from '../helpers/app.ts';
import { waitFor } from './helpers.ts';

const KEY = new TextEncoder().encode(TEST_JWT_SECRET);
const sign = (claims: Record<string, unknown>, expiresIn: string | number = '1h') =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt().setExpirationTime(expiresIn).sign(KEY);
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const userToken = (n: number, expiresIn: string | number = '1h') => sign({ sub: uuid(n), role: 'authenticated', aud: 'authenticated' }, expiresIn);

interface Change {
  eventType: string;
  new: Record<string, unknown>;
  old: Record<string, unknown>;
  table: string;
  schema: string;
  commit_timestamp: string;
  errors: unknown;
}

/**
 * A supabase-js client of `app` whose token is `token()` (the anon key when it returns
 * null), with the token resolved before its first join (as after a sign-in).
 */
async function client(t: { teardown(fn: () => unknown): void }, app: TestApp, token: () => string | null, vsn?: string): Promise<SupabaseClient> {
  const c = createClient(app.url, app.anonKey, {
    accessToken: async () => token() ?? app.anonKey,
    realtime: { ...(vsn === undefined ? {} : { vsn }), heartbeatIntervalMs: 5000 } as never,
  });
  t.teardown(() => c.removeAllChannels());
  await c.realtime.setAuth();
  return c;
}

/** Subscribes and waits for SUBSCRIBED; the statuses it went through are kept in `statuses`. */
async function subscribed(ch: RealtimeChannel, statuses: string[] = []): Promise<RealtimeChannel> {
  await new Promise<void>((resolve, reject) => {
    ch.subscribe((status, err) => {
      statuses.push(status);
      if (String(status) === 'SUBSCRIBED') resolve();
      else if (statuses.length === 1) reject(new Error(`${status}: ${err?.message ?? ''}`));
    });
  });
  return ch;
}

async function schema(app: TestApp): Promise<void> {
  await app.db.sql.unsafe(`
    create table public.notes (id int primary key, owner uuid, body text not null, n int not null default 0);
    alter table public.notes enable row level security;
    create policy own on public.notes for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
    create policy public_rows on public.notes for select to anon, authenticated using (owner is null);
    grant select, insert, update, delete on public.notes to authenticated;
    grant select on public.notes to anon;
    create table public.secret (id int primary key);
    revoke all on public.secret from anon, authenticated;`);
}

t.test('postgres_changes under RLS: two users and anon each receive what they may read', async (t) => {
  const app = await startApp(t, { worker: false });
  await schema(app);
  const [t1, t2] = [await userToken(1), await userToken(2)];
  const got: Record<string, Change[]> = { u1: [], u2: [], anon: [], filtered: [] };
  const watch = (c: SupabaseClient, name: string, key: string, filter?: Record<string, string>) =>
    subscribed(
      c
        .channel(name)
        .on('postgres_changes', { event: '*', schema: 'public', table: 'notes', ...filter } as never, (p: Change) => got[key].push(p)),
    );
  const c1 = await client(t, app, () => t1);
  const c2 = await client(t, app, () => t2);
  const anon = await client(t, app, () => null);
  await watch(c1, 'u1', 'u1');
  await watch(c2, 'u2', 'u2');
  await watch(anon, 'anon', 'anon');
  await subscribed(
    c1.channel('filtered').on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'notes', filter: 'n=gt.5' }, (p: Change) => got.filtered.push(p)),
  );

  await app.db.sql`insert into public.notes (id, owner, body, n) values (1, ${uuid(1)}, 'one', 1), (2, ${uuid(2)}, 'two', 2), (3, null, 'public', 3), (4, ${uuid(1)}, 'big', 9)`;
  await app.db.sql`update public.notes set body = 'ONE' where id = 1`;
  await app.db.sql`update public.notes set owner = ${uuid(2)} where id = 4`; // leaves u1's view, enters u2's
  await app.db.sql`delete from public.notes where id = 2`;
  await app.db.sql`insert into public.notes (id, owner, body) values (5, ${uuid(1)}, 'last')`;

  await waitFor(() => got.u1.some((c) => c.new.id === 5) && got.u2.length >= 4 && got.anon.length >= 1, 10_000, 'the changes');
  const brief = (cs: Change[]) => cs.map((c) => [c.eventType, c.eventType === 'DELETE' ? c.old : c.new.id]);
  t.same(brief(got.u1), [['INSERT', 1], ['INSERT', 3], ['INSERT', 4], ['UPDATE', 1], ['INSERT', 5]], 'user 1: its own rows and the public one, not the update that took row 4 away');
  t.same(brief(got.u2), [['INSERT', 2], ['INSERT', 3], ['UPDATE', 4], ['DELETE', { id: 2 }]], 'user 2: its own rows and the public one, row 4 when it became its, the delete by primary key');
  t.same(brief(got.anon), [['INSERT', 3]], 'anon: the public row only');
  t.same(brief(got.filtered), [['INSERT', 4]], 'the filter n=gt.5 and event INSERT');
  const first = got.u1[0];
  t.match(first, { schema: 'public', table: 'notes', eventType: 'INSERT', new: { id: 1, owner: uuid(1), body: 'one', n: 1 }, old: {}, errors: null }, "Supabase's payload shape");
  t.ok(!Number.isNaN(Date.parse(first.commit_timestamp)), 'commit_timestamp is a timestamp');
  t.same(got.u1.find((c) => c.eventType === 'UPDATE')!.old, { id: 1 }, "an UPDATE's old row is its primary key");
  t.same(got.u2.find((c) => c.eventType === 'DELETE')!.new, {}, 'a DELETE has no new row');

  // Refusals come back as the join's error: CHANNEL_ERROR with the reason.
  const refusals: Array<[Record<string, string>, RegExp]> = [
    [{ event: '*', schema: 'public', table: 'secret' }, /permission denied for table secret/],
    [{ event: '*', schema: 'public', table: 'nope' }, /table nope not found/],
    [{ event: '*', schema: 'auth', table: 'users' }, /only the public schema/],
    [{ event: 'INSERT', schema: 'public', table: 'notes', filter: 'missing=eq.1' }, /column missing does not exist/],
    [{ event: 'INSERT', schema: 'public', table: 'notes', filter: 'n=like.1' }, /invalid filter operator: like/],
  ];
  for (const [f, reason] of refusals) {
    const err = await subscribed(c1.channel(`bad-${JSON.stringify(f)}`).on('postgres_changes', f as never, () => {})).then(
      () => null,
      (e: Error) => e.message,
    );
    t.match(err, reason, `refused: ${JSON.stringify(f)}`);
  }
});

t.test('limits: subscriptions per socket and conditions per filter', async (t) => {
  const app = await startApp(t, { worker: false, env: { REALTIME_MAX_SUBSCRIPTIONS: '2', REALTIME_MAX_FILTERS: '2' } });
  await schema(app);
  const c = await client(t, app, () => null);
  const on = (ch: RealtimeChannel, filter?: string) => ch.on('postgres_changes', { event: '*', schema: 'public', table: 'notes', ...(filter === undefined ? {} : { filter }) }, () => {});
  const err = (ch: RealtimeChannel) => subscribed(ch).then(() => 'SUBSCRIBED', (e: Error) => e.message);
  t.match(await err(on(c.channel('f'), 'n=gt.1,n=lt.5,id=eq.1')), /more than 2 conditions \(REALTIME_MAX_FILTERS\)/, 'REALTIME_MAX_FILTERS');
  t.equal(await err(on(on(c.channel('two')), 'n=gt.1,n=lt.5')), 'SUBSCRIBED', 'two subscriptions and two conditions pass');
  t.match(await err(on(c.channel('three'))), /REALTIME_MAX_SUBSCRIPTIONS is 2/, 'REALTIME_MAX_SUBSCRIPTIONS');
});

for (const vsn of ['2.0.0', '1.0.0']) {
  t.test(`broadcast between two clients with self and ack (vsn ${vsn}), and over HTTP`, async (t) => {
    const app = await startApp(t, { worker: false });
    const a = await client(t, app, () => null, vsn);
    const b = await client(t, app, () => null, vsn);
    const seen: Record<string, unknown[]> = { a: [], b: [], quiet: [] };
    const chA = await subscribed(a.channel('room', { config: { broadcast: { self: true, ack: true } } }).on('broadcast', { event: 'say' }, (m) => seen.a.push(m.payload)));
    await subscribed(b.channel('room').on('broadcast', { event: 'say' }, (m) => seen.b.push(m.payload)));
    const quiet = await subscribed(b.channel('room2', { config: { broadcast: { self: false, ack: true } } }).on('broadcast', { event: 'say' }, (m) => seen.quiet.push(m.payload)));
    t.equal(await chA.send({ type: 'broadcast', event: 'say', payload: { text: 'hé 😀' } }), 'ok', 'ack: the send is acknowledged');
    await waitFor(() => seen.a.length === 1 && seen.b.length === 1, 5000, 'the broadcast');
    t.same(seen.a, [{ text: 'hé 😀' }], 'self: the sender receives its own broadcast');
    t.same(seen.b, [{ text: 'hé 😀' }], 'the other client receives it');
    t.equal(await quiet.send({ type: 'broadcast', event: 'say', payload: 1 }), 'ok', 'acknowledged without self');
    const r = await app.call('POST', '/realtime/v1/api/broadcast', { apikey: app.anonKey, body: { messages: [{ topic: 'room2', event: 'say', payload: 2 }] } });
    t.equal(r.status, 202, 'POST /realtime/v1/api/broadcast answers 202');
    await waitFor(() => seen.quiet.length > 0, 5000, 'the HTTP broadcast');
    t.same(seen.quiet, [2], 'without self the sender does not receive its own; the HTTP one arrives');
    const bad = await app.call('POST', '/realtime/v1/api/broadcast', { apikey: app.anonKey, body: { messages: [{ topic: '' }] } });
    t.same([bad.status, bad.body], [400, { error: 'each message needs a topic and an event' }], 'a bad message is refused');
  });
}

t.test('presence join and leave across two instances', async (t) => {
  const a = await startApp(t, { worker: false });
  const b = await startApp(t, { worker: false, db: a.db });
  const ca = await client(t, a, () => null);
  const cb = await client(t, b, () => null);
  const joins: string[] = [];
  const leaves: string[] = [];
  const chA = ca.channel('lobby', { config: { presence: { key: 'ann' } } });
  chA.on('presence', { event: 'join' }, ({ key }) => joins.push(key)).on('presence', { event: 'leave' }, ({ key }) => leaves.push(key));
  await subscribed(chA);
  await chA.track({ name: 'Ann' });
  const chB = await subscribed(cb.channel('lobby', { config: { presence: { key: 'bob' } } }).on('presence', { event: 'sync' }, () => {}));
  await chB.track({ name: 'Bob' });
  await waitFor(() => joins.includes('bob'), 5000, "bob's join on the other instance");
  await waitFor(() => Object.keys(chB.presenceState()).sort().join() === 'ann,bob', 5000, "bob's state");
  t.match(chB.presenceState().ann, [{ name: 'Ann' }], 'the instance joined later has the state of the first');
  await cb.removeChannel(chB);
  await waitFor(() => leaves.includes('bob'), 5000, "bob's leave");
  t.same(Object.keys(chA.presenceState()), ['ann'], 'bob left the state');
});

t.test('access_token swaps the token of an open channel; its expiry closes the channel', async (t) => {
  const app = await startApp(t, { worker: false });
  await schema(app);
  let token = await userToken(1, '3s');
  const c = await client(t, app, () => token);
  const got: number[] = [];
  const statuses: string[] = [];
  const systems: string[] = [];
  await subscribed(
    c
      .channel('mine')
      .on('postgres_changes', { event: 'INSERT', schema: 'public', table: 'notes' }, (p: Change) => got.push(p.new.id as number))
      .on('system', {}, (p: { message?: string }) => systems.push(p.message ?? '')),
    statuses,
  );
  token = await userToken(1, '1h');
  await c.realtime.setAuth();
  const exp = Date.now() + 3000;
  await waitFor(() => Date.now() > exp + 500, 6000, 'the first token to expire');
  await app.db.sql`insert into public.notes (id, owner, body) values (1, ${uuid(1)}, 'after')`;
  await waitFor(() => got.includes(1), 5000, 'a change after the first token expired');
  t.same(statuses, ['SUBSCRIBED'], 'the channel stayed open past the first token');

  // Another user's token: the channel now receives that user's rows, and no longer the first's.
  token = await userToken(2);
  await c.realtime.setAuth();
  await waitFor(async () => (await app.db.sql`select count(distinct g.role || g.claims::text) as n from live_private.groups g join live_private.group_members m on m.group_id = g.id where g.claims ->> 'sub' = ${uuid(2)}`)[0].n === '1', 5000, "the channel in user 2's group");
  await app.db.sql`insert into public.notes (id, owner, body) values (2, ${uuid(1)}, 'u1'), (3, ${uuid(2)}, 'u2')`;
  await waitFor(() => got.includes(3), 5000, "user 2's row");
  t.same(got, [1, 3], "after the swap: user 2's rows only");

  // A token that does not verify closes the channel.
  await c.realtime.setAuth('not-a-token');
  await waitFor(() => systems.includes('invalid token') && statuses.includes('CLOSED'), 5000, 'the close');
  t.pass('a token that does not verify closes the channel, with a system message saying why');

  // A token that expires with no swap: the channel is closed at its exp.
  let shortToken = await userToken(3, '2s');
  const d = await client(t, app, () => shortToken);
  const told: string[] = [];
  const dStatuses: string[] = [];
  await subscribed(d.channel('short').on('system', {}, (p: { message?: string }) => told.push(p.message ?? '')), dStatuses);
  shortToken = await userToken(3, '2s'); // what a refresh would fetch: not used before the expiry
  await waitFor(() => told.includes('token expired') && dStatuses.includes('CLOSED'), 6000, 'the expiry');
  t.pass('at its exp the channel is told its token expired and closed');
});
