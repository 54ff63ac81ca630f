/**
 * Live queries `as: subscriber`: the query runs as each subscriber's API role with its
 * claims, so RLS applies per subscriber; subscribers whose role and observed claims are
 * equal share one group (one re-run per group per change); re-runs happen off the
 * writer's path, on a poller with a lease in SQL, and every instance forwards a group's
 * deltas in order with no seq gap.
 */
import t from 'tap';
import postgres from 'postgres';
import { SignJWT } from 'jose';
import { startApp, TEST_JWT_SECRET, type TestApp } from '../helpers/app.ts';
import { open, refused, waitFor, type LiveClient } from './helpers.ts';

const KEY = new TextEncoder().encode(TEST_JWT_SECRET);
const sign = (claims: Record<string, unknown>, expiresIn: string | number = '1h') =>
  new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt().setExpirationTime(expiresIn).sign(KEY);
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const userToken = (n: number, expiresIn: string | number = '1h') => sign({ sub: uuid(n), role: 'authenticated', aud: 'authenticated' }, expiresIn);
const AS = '{"as": "subscriber"}';

async function schema(app: TestApp): Promise<void> {
  await app.db.sql.unsafe(`
    create table public.todos (id int primary key, owner uuid not null, title text not null);
    alter table public.todos enable row level security;
    create policy own on public.todos for all to authenticated using (owner = auth.uid()) with check (owner = auth.uid());
    grant select, insert, update, delete on public.todos to authenticated;
    grant select on public.todos to anon;
    create table public.tags (todo_id int not null, tag text not null, owner uuid not null);
    alter table public.tags enable row level security;
    create policy own on public.tags for all to authenticated using (owner = auth.uid());
    grant select on public.tags to authenticated, anon;
    select live.subscribe('todos', 'select id, title from todos', 'delta', null, '${AS}');
    select live.subscribe('tagged', 'select t.id, g.tag from todos t join tags g on g.todo_id = t.id', 'delta', null, '${AS}');`);
}

const rows = (c: LiveClient) => c.messages.filter((m) => m.seq !== undefined);

t.test('two users and anon on one subscription see their own rows only', async (t) => {
  const app = await startApp(t, { worker: false });
  await schema(app);
  const sql = app.db.sql;
  const [a, b, anon] = await Promise.all([
    open(app, '/ws/todos', { query: { token: await userToken(1) } }),
    open(app, '/ws/todos', { query: { token: await userToken(2) } }),
    open(app, '/ws/todos', { query: { apikey: app.anonKey } }),
  ]);
  for (const c of [a, b, anon]) t.equal((await c.next()).type, 'subscribed');
  t.equal((await sql`select count(*)::int as n from live_private.groups`)[0].n, 3, 'three groups: two users and anon');

  await sql`insert into public.todos values (1, ${uuid(1)}, 'ada 1')`;
  t.same(await a.next(), { query_id: 'todos', seq: 1, inserted: [{ id: 1, title: 'ada 1' }], deleted: [] }, 'insert: its owner receives it');
  await sql`insert into public.todos values (2, ${uuid(2)}, 'bob 1')`;
  t.same(await b.next(), { query_id: 'todos', seq: 1, inserted: [{ id: 2, title: 'bob 1' }], deleted: [] }, 'each group has its own seq');
  await sql`update public.todos set title = 'ada 1!' where id = 1`;
  t.same(await a.next(), { query_id: 'todos', seq: 2, inserted: [{ id: 1, title: 'ada 1!' }], deleted: [{ id: 1, title: 'ada 1' }] }, 'update');
  await sql`delete from public.todos where id = 1`;
  t.same(await a.next(), { query_id: 'todos', seq: 3, inserted: [], deleted: [{ id: 1, title: 'ada 1!' }] }, 'delete');
  await sql`insert into public.todos values (3, ${uuid(2)}, 'bob 2')`;
  t.same(await b.next(), { query_id: 'todos', seq: 2, inserted: [{ id: 3, title: 'bob 2' }], deleted: [] }, 'bob again');
  t.same(rows(a).flatMap((m) => [...m.inserted, ...m.deleted]).map((r: any) => r.id), [1, 1, 1, 1], "ada never saw bob's rows");
  t.equal(rows(b).length, 2, "bob never saw ada's");
  t.equal(rows(anon).length, 0, 'the anon key sees nothing of an owner-only table');

  // A join with a second RLS table.
  const [ja, jb] = await Promise.all([
    open(app, '/ws/tagged', { query: { token: await userToken(1) } }),
    open(app, '/ws/tagged', { query: { token: await userToken(2) } }),
  ]);
  await ja.next();
  await jb.next();
  await sql.begin(async (tx) => {
    await tx`insert into public.todos values (10, ${uuid(1)}, 'ada tagged')`;
    await tx`insert into public.tags values (10, 'red', ${uuid(1)}), (3, 'blue', ${uuid(2)}), (3, 'green', ${uuid(1)})`;
  });
  t.same(await ja.next(), { query_id: 'tagged', seq: 1, inserted: [{ id: 10, tag: 'red' }], deleted: [] }, 'join: ada sees her tagged todo');
  t.same(await jb.next(), { query_id: 'tagged', seq: 1, inserted: [{ id: 3, tag: 'blue' }], deleted: [] }, "join: bob his, not ada's tag on his todo");

  // A policy change takes effect on the next change.
  await sql.unsafe(`create policy shared on public.todos for select to authenticated using (title like 'shared%')`);
  await sql`insert into public.todos values (20, ${uuid(1)}, 'shared by ada')`;
  // Changes that commit while a re-run is in flight arrive together in the next delta.
  const insertedIds = (c: LiveClient, fromSeq: number) =>
    rows(c).filter((m) => m.seq >= fromSeq).flatMap((m) => m.inserted.map((r: any) => r.id)).sort((x: number, y: number) => x - y);
  await waitFor(() => insertedIds(a, 4).includes(20) && insertedIds(b, 3).includes(20), 10000, 'the shared row');
  t.same(insertedIds(a, 4), [10, 20], 'the owner: the tagged todo (it is in this subscription too), then the shared one');
  t.same(insertedIds(b, 3), [20], 'and, after the new policy, bob');
  for (const c of [a, b]) t.same(rows(c).map((m) => m.seq), Array.from({ length: rows(c).length }, (_, i) => i + 1), 'seq without a gap');
  t.equal(rows(anon).length, 0, 'still nothing for anon');
  for (const c of [a, b, anon, ja, jb]) c.close();
});

t.test('the token expires: the subscriber is closed with 4001', async (t) => {
  const app = await startApp(t, { worker: false });
  await schema(app);
  const c = await open(app, '/ws/todos', { query: { token: await userToken(7, Math.floor(Date.now() / 1000) + 2) } });
  t.equal((await c.next()).type, 'subscribed');
  t.equal((await c.closed).code, 4001, 'closed at exp with 4001');
});

t.test('an auth message whose claims fall in another group closes the socket with 4001', async (t) => {
  const app = await startApp(t, { worker: false });
  await app.db.sql.unsafe(`create table public.team_notes (id int primary key, team text not null);
    alter table public.team_notes enable row level security;
    create policy team on public.team_notes for select to authenticated using (team = auth.jwt() -> 'app_metadata' ->> 'team');
    grant select on public.team_notes to authenticated;
    select live.subscribe('team_notes', 'select id from team_notes', 'delta', null, '${AS}');`);
  const [s] = await app.db.sql`select observes from live_private.subscriptions where query_id = 'team_notes'`;
  t.equal(s.observes, null, 'auth.jwt() in a policy: the query observes every claim');
  const red = () => sign({ sub: uuid(1), role: 'authenticated', app_metadata: { team: 'red' } });
  const c = await open(app, '/ws/team_notes', { query: { token: await red() } });
  await c.next();
  c.send({ type: 'auth', token: await red() });
  await app.db.sql`insert into public.team_notes values (1, 'red')`;
  t.same(await c.next(), { query_id: 'team_notes', seq: 1, inserted: [{ id: 1 }], deleted: [] }, 'a fresher token of the same group keeps the socket');
  c.send({ type: 'auth', token: await sign({ sub: uuid(1), role: 'authenticated', app_metadata: { team: 'blue' } }) });
  t.equal((await c.closed).code, 4001, 'a token of another team: reconnect into its group');
});

/** No mark pending, no group dirty or leased: every run the last changes asked for is done. */
async function settled(sql: TestApp['db']['sql'], what: string): Promise<void> {
  await waitFor(
    async () => (await sql`select (select count(*) from live_private.dirty) + (select count(*) from live_private.groups where dirty or lease_owner is not null) as n`)[0].n === '0',
    30000,
    what,
  );
}

t.test('1000 subscribers of 100 users, joining at different times with different iat, share 100 groups: one re-run per group per change', async (t) => {
  const app = await startApp(t, { worker: false, env: { WS_MAX_CONNECTIONS_PER_IP: '2000' } });
  await schema(app);
  const sql = app.db.sql;
  const now = Math.floor(Date.now() / 1000);
  // Subscriber i is user i % 100, with a token of its own: `iat` (and so `exp`) differ.
  const token = (i: number) =>
    new SignJWT({ sub: uuid(100 + (i % 100)), role: 'authenticated', aud: 'authenticated' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt(now - i).setExpirationTime(now - i + 3600).sign(KEY);
  const clients: LiveClient[] = [];
  const join = async (from: number, to: number) => {
    for (let i = from; i < to; i += 100) {
      const batch = await Promise.all(Array.from({ length: 100 }, async (_, j) => open(app, '/ws/tagged', { query: { token: await token(i + j) } })));
      await Promise.all(batch.map((c) => c.next(undefined, 30000)));
      clients.push(...batch);
    }
  };
  const groups = async () => (await sql`select count(*)::int as n from live_private.groups where query_id = 'tagged'`)[0].n;
  const poller = app.service.app.live!.poller;
  const inGroupOf = (u: number) => clients.filter((_, i) => i % 100 === u);

  await join(0, 500);
  t.equal(await groups(), 100, 'the first 500 subscribers: 100 groups');
  await settled(sql, 'the first runs of the new groups');
  let before = poller.groupRuns;
  await sql.begin(async (tx) => {
    await tx`insert into public.todos values (1, ${uuid(100)}, 'user 0')`;
    await tx`insert into public.tags values (1, 'red', ${uuid(100)})`;
  });
  for (const c of inGroupOf(0)) t.same(await c.next(undefined, 30000), { query_id: 'tagged', seq: 1, inserted: [{ id: 1, tag: 'red' }], deleted: [] });
  await settled(sql, 'the re-runs of the first change');
  t.equal(poller.groupRuns - before, 100, 'one change: one re-run per group');

  // 500 more join later, with other tokens of the same users: they join the 100 groups.
  await join(500, 1000);
  t.equal(await groups(), 100, '1000 subscribers of 100 users: still 100 groups');
  await settled(sql, 'nothing to re-run for sockets joining existing groups');
  before = poller.groupRuns;
  await sql`insert into public.tags values (1, 'blue', ${uuid(100)})`;
  for (const c of inGroupOf(0)) t.match(await c.next((m) => m.seq !== undefined, 30000), { query_id: 'tagged', inserted: [{ id: 1, tag: 'blue' }], deleted: [] });
  await settled(sql, 'the re-runs of the second change');
  t.equal(poller.groupRuns - before, 100, 'another change: one re-run per group again');
  t.equal(clients.filter((c) => rows(c).length > 0).length, 10, "only user 0's ten sockets received anything");
  t.same(inGroupOf(0).slice(5).map((c) => rows(c).map((m) => m.seq)), Array(5).fill([2]), 'a later joiner starts at its group\'s seq');
  for (const c of clients) c.ws.terminate();
  await waitFor(async () => (await sql`select count(*)::int as n from live_private.groups`)[0].n === 0, 30000, 'empty groups to go');
  t.pass('groups nobody is in go');
});

t.test('the fast path applies per group: the transition rows filtered under each group\'s role and claims', async (t) => {
  const app = await startApp(t, { worker: false });
  await schema(app);
  const sql = app.db.sql;
  await sql.unsafe(`select live.subscribe('mine', 'select id, title from todos where owner = auth.uid()', 'delta', null, '${AS}');
    create table public.notes (id int primary key, body text not null);
    grant select on public.notes to authenticated;
    select live.subscribe('notes', 'select id, body from notes where id < 100', 'delta', null, '${AS}');`);
  const subs = await sql`select query_id, fast_table is not null as fast from live_private.subscriptions order by query_id`;
  t.same(subs.map((r) => [r.query_id, r.fast]), [['mine', true], ['notes', true], ['tagged', false], ['todos', true]], 'one-table filters are on the fast path, the join is not');
  // Two sockets per user, with tokens of different iat; and the anon key.
  const now = Math.floor(Date.now() / 1000);
  const tokenOf = (u: number, age: number) =>
    new SignJWT({ sub: uuid(u), role: 'authenticated' }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt(now - age).setExpirationTime(now + 3600).sign(KEY);
  const [a1, a2, b1, b2, anon, mineA, notesA] = await Promise.all([
    open(app, '/ws/todos', { query: { token: await tokenOf(1, 0) } }),
    open(app, '/ws/todos', { query: { token: await tokenOf(1, 60) } }),
    open(app, '/ws/todos', { query: { token: await tokenOf(2, 0) } }),
    open(app, '/ws/todos', { query: { token: await tokenOf(2, 60) } }),
    open(app, '/ws/todos', { query: { apikey: app.anonKey } }),
    open(app, '/ws/mine', { query: { token: await tokenOf(1, 0) } }),
    open(app, '/ws/notes', { query: { token: await tokenOf(1, 0) } }),
  ]);
  for (const c of [a1, a2, b1, b2, anon, mineA, notesA]) t.equal((await c.next()).type, 'subscribed');
  t.same(await refused(app, '/ws/notes', { query: { apikey: app.anonKey } }), { status: 403, body: { error: 'permission denied for this live query' } }, 'anon may not read notes');
  t.equal((await sql`select count(*)::int as n from live_private.groups where query_id = 'todos'`)[0].n, 3, 'todos: two users and anon, three groups');
  await settled(sql, 'the groups to settle');
  const poller = app.service.app.live!.poller;
  const runs = poller.groupRuns;
  const deltas = poller.groupDeltas;

  await sql`insert into public.todos values (1, ${uuid(1)}, 'ada 1'), (2, ${uuid(2)}, 'bob 1')`;
  const ada1 = { query_id: 'todos', seq: 1, inserted: [{ id: 1, title: 'ada 1' }], deleted: [] };
  t.same(await a1.next(), ada1, 'insert: the owner receives her row only');
  t.same(await a2.next(), ada1, 'on both of her sockets');
  t.same(await b1.next(), { query_id: 'todos', seq: 1, inserted: [{ id: 2, title: 'bob 1' }], deleted: [] }, 'and bob his');
  t.same(await mineA.next(), { query_id: 'mine', seq: 1, inserted: [{ id: 1, title: 'ada 1' }], deleted: [] }, 'auth.uid() in the query reads the group\'s claims');
  await sql`update public.todos set title = 'ada 1!' where id = 1`;
  t.same(await a1.next(), { query_id: 'todos', seq: 2, inserted: [{ id: 1, title: 'ada 1!' }], deleted: [{ id: 1, title: 'ada 1' }] }, 'update');
  // An update that moves a row out of a group's sight is a delete for it, an insert for the other.
  await sql`update public.todos set owner = ${uuid(1)} where id = 2`;
  t.same(await b1.next(), { query_id: 'todos', seq: 2, inserted: [], deleted: [{ id: 2, title: 'bob 1' }] }, 'moved away: deleted for bob');
  t.same(await a1.next(), { query_id: 'todos', seq: 3, inserted: [{ id: 2, title: 'bob 1' }], deleted: [] }, 'moved in: inserted for ada');
  await sql`delete from public.todos where id = 1`;
  t.same(await a1.next(), { query_id: 'todos', seq: 4, inserted: [], deleted: [{ id: 1, title: 'ada 1!' }] }, 'delete');
  await sql`update public.todos set title = title where id = 2`;
  await sql`insert into public.notes values (1, 'n1'), (200, 'n200')`;
  t.same(await notesA.next(), { query_id: 'notes', seq: 1, inserted: [{ id: 1, body: 'n1' }], deleted: [] }, 'a table without RLS: the query\'s filter alone');
  await settled(sql, 'the deltas to be applied');
  t.equal(poller.groupRuns - runs, 0, 'no group was re-run: every change went through the fast path');
  t.ok(poller.groupDeltas - deltas >= 4, `fast-path deltas computed per group (${poller.groupDeltas - deltas})`);
  t.same(a2.messages.filter((m) => m.seq !== undefined).map((m) => m.seq), [1, 2, 3, 4], 'an unchanged row sends nothing; seq without a gap');
  t.equal(rows(anon).length, 0, 'the anon key sees nothing of an owner-only table');
  // The anon key's refused join left a group without a result for a while (its membership
  // is kept 10 s, as for a socket on its way): the rows wait for it, then go.
  await waitFor(async () => (await sql`select count(*)::int as n from live_private.changes`)[0].n === 0, 30000, 'the queued rows every group applied to go');
  t.pass('the queued rows every group applied are gone');

  // A policy change applies to the next change; a TRUNCATE re-runs the groups.
  await sql.unsafe(`create policy shared on public.todos for select to authenticated using (title like 'shared%')`);
  await sql`insert into public.todos values (3, ${uuid(1)}, 'shared by ada')`;
  t.same(await b2.next((m) => m.seq === 3), { query_id: 'todos', seq: 3, inserted: [{ id: 3, title: 'shared by ada' }], deleted: [] }, 'the new policy, on the fast path');
  t.same(await a1.next((m) => m.seq === 5), { query_id: 'todos', seq: 5, inserted: [{ id: 3, title: 'shared by ada' }], deleted: [] }, 'and its owner');
  await sql`truncate public.todos`;
  // A TRUNCATE re-runs every group of the table: on a loaded machine that takes longer than the default 5 s.
  const cleared = await a1.next((m) => m.seq === 6, 30_000);
  cleared.deleted.sort((x: { id: number }, y: { id: number }) => x.id - y.id);
  t.same(cleared, { query_id: 'todos', seq: 6, inserted: [], deleted: [{ id: 2, title: 'bob 1' }, { id: 3, title: 'shared by ada' }] }, 'truncate: re-run, everything deleted');
  t.equal(rows(anon).length, 0, 'still nothing for anon');
  for (const c of [a1, a2, b1, b2, anon, mineA, notesA]) c.close();
});

t.test('the fast path per group checks the role\'s privileges: a role that lost them loses its group', async (t) => {
  const app = await startApp(t, { worker: false });
  await schema(app);
  const sql = app.db.sql;
  const c = await open(app, '/ws/todos', { query: { token: await userToken(1) } });
  t.equal((await c.next()).type, 'subscribed');
  await settled(sql, 'the group to settle');
  await sql.unsafe('revoke select on public.todos from authenticated');
  await sql`insert into public.todos values (1, ${uuid(1)}, 'ada 1')`;
  t.same(await c.next(), { type: 'error', query_id: 'todos', error: 'permission denied for this live query' }, 'told');
  t.equal((await c.closed).code, 4002, 'and closed with 4002');
  t.equal(rows(c).length, 0, 'the row never reached it');
});

t.test('two instances: one re-run per group, deltas in order on both, no seq gap', async (t) => {
  const a = await startApp(t, { worker: false });
  const b = await startApp(t, { db: a.db, worker: false });
  await schema(a);
  const token = await userToken(1);
  const ca = await open(a, '/ws/todos', { query: { token } });
  const cb = await open(b, '/ws/todos', { query: { token } });
  await ca.next();
  await cb.next();
  const runs = () => [a, b].reduce((n, x) => n + x.service.app.live!.poller.groupRuns + x.service.app.live!.poller.groupDeltas, 0);
  const before = runs();
  const sql = a.db.sql;
  // Concurrent writers, bursts: re-runs coalesce, seq stays contiguous.
  await Promise.all(Array.from({ length: 4 }, async (_, w) => {
    for (let i = 0; i < 10; i++) await sql`insert into public.todos values (${w * 100 + i}, ${uuid(1)}, ${`w${w} ${i}`})`;
  }));
  const all = (c: LiveClient) => rows(c).flatMap((m) => m.inserted).length;
  await waitFor(() => all(ca) === 40 && all(cb) === 40, 20000, 'all 40 rows on both instances');
  const seqs = (c: LiveClient) => rows(c).map((m) => m.seq);
  t.same(seqs(ca), Array.from({ length: rows(ca).length }, (_, i) => i + 1), 'instance A: seq 1, 2, 3… without a gap');
  t.same(seqs(cb), seqs(ca), 'instance B: the same messages in the same order');
  t.same(rows(cb), rows(ca), 'with the same content');
  t.ok(runs() - before <= 40, `runs not repeated per instance (${runs() - before} group runs for 40 commits, ${rows(ca).length} deltas)`);
  ca.close();
  cb.close();
});

t.test('limits and the anon-key warning', async (t) => {
  const app = await startApp(t, { worker: false, env: { LIVE_MAX_GROUPS: '2', LIVE_MAX_ROWS: '3' } });
  await schema(app);
  const sql = app.db.sql;
  await open(app, '/ws/todos', { query: { token: await userToken(1) } }).then((c) => c.next());
  await open(app, '/ws/todos', { query: { token: await userToken(2) } }).then((c) => c.next());
  t.same(await refused(app, '/ws/todos', { query: { token: await userToken(3) } }), { status: 503, body: { error: 'live query group limit reached' } }, 'LIVE_MAX_GROUPS');
  await sql`insert into public.todos select g, ${uuid(4)}, 'x' from generate_series(100, 104) g`;
  await sql`select live.subscribe('todos4', 'select id from todos', 'delta', null, ${AS}::text::jsonb)`;
  t.same(await refused(app, '/ws/todos4', { query: { token: await userToken(4) } }), { status: 413, body: { error: 'live query result too large' } }, 'LIVE_MAX_ROWS for a group');
  await t.rejects(sql`select live.subscribe('big', 'select id from todos')`, /live query result has more than 3 rows \(LIVE_MAX_ROWS\)/, 'LIVE_MAX_ROWS at registration');
  await t.rejects(sql`select live.subscribe('bad', 'select 1 from todos', 'delta', null, '{"as": "nobody"}')`, /options must be an object whose "as" is "registrant" or "subscriber"/, 'an unknown option');

  const notices: string[] = [];
  const own = postgres(app.db.url, { max: 1, onnotice: (n) => notices.push(n.message) });
  t.teardown(() => own.end({ timeout: 1 }));
  await own`select live.subscribe('open_todos', 'select id from todos where id < 0')`;
  t.match(notices.join('\n'), /live query open_todos reads todos with row level security/, 'registering over an RLS table in the default mode warns');
  notices.length = 0;
  await own`select live.subscribe('own_todos', 'select id from todos where id < 0', 'delta', null, ${AS}::text::jsonb)`;
  t.equal(notices.length, 0, 'as: subscriber does not');
});
