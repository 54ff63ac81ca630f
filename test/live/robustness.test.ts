/**
 * Robustness (issue 15, part 4): a database restart mid-stream ends in an overflow (no
 * silent gap); a slow client is closed without slowing the others; pings keep idle
 * connections and drop dead ones; shutdown closes sockets with 1012.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { startProxy } from '../helpers/proxy.ts';
import { open, waitFor } from './helpers.ts';

t.test('the database goes away mid-stream: subscribers get an overflow, then deltas again', async (t) => {
  const owner = await startApp(t, { worker: false });
  await owner.db.sql.unsafe(`create table public.ticks (id int primary key);
    select live.subscribe('ticks', 'select id from ticks');`);
  const u = new URL(owner.db.url);
  const proxy = await startProxy(u.hostname, Number(u.port));
  t.teardown(() => proxy.close());
  u.port = String(proxy.port);
  const app = await startApp(t, { db: owner.db, databaseUrl: u.toString(), worker: false });
  const c = await open(app, '/ws/ticks', { query: { apikey: app.anonKey } });
  await c.next();

  const sql = owner.db.sql;
  await sql`insert into public.ticks values (1)`;
  t.same(await c.next(), { query_id: 'ticks', seq: 1, inserted: [{ id: 1 }], deleted: [] }, 'a delta before the cut');

  proxy.cut();
  await sql`insert into public.ticks values (2)`; // seq 2: sent while the service cannot hear it
  await new Promise((r) => setTimeout(r, 300));
  proxy.restore();
  t.same(await c.next(undefined, 20000), { type: 'overflow', query_id: 'ticks', seq: 2, fetch: true }, 'after the gap: overflow with the current seq');
  await sql`insert into public.ticks values (3)`;
  t.same(await c.next(), { query_id: 'ticks', seq: 3, inserted: [{ id: 3 }], deleted: [] }, 'and deltas flow again');
  t.notOk(c.messages.some((m) => m.seq === 2 && m.inserted), 'the missed delta was never delivered (hence the overflow)');
  c.close();
});

t.test('a slow client is closed; the others keep receiving', async (t) => {
  const app = await startApp(t, { worker: false });
  await app.db.sql.unsafe(`create table public.t (id int); select live.subscribe('flood', 'select id from t');`);
  const q = { query: { apikey: app.anonKey } };
  const fast = await open(app, '/ws/flood', q);
  const slow = await open(app, '/ws/flood', q);
  await fast.next();
  await slow.next();
  (slow.ws as any)._socket.pause(); // stops reading: its data piles up on the server
  // Batches the fast client keeps up with (the clients share this process's event loop).
  // 28 MB in all: more than the kernel's socket buffers (several MB each way on loopback)
  // plus the 4 MiB a client may have unsent.
  const N = 4000;
  for (let b = 0; b < N / 100; b++) {
    await app.db.sql.unsafe(`do $$ begin
      for i in ${b * 100 + 1}..${b * 100 + 100} loop
        perform live_private.broadcast('lqs_bc', 'flood', 'server', jsonb_build_object('i', i, 'pad', repeat('x', 7000)));
      end loop; end $$`);
    await waitFor(() => fast.messages.filter((m) => m.type === 'broadcast').length === (b + 1) * 100, 30000, `the fast client to keep up (batch ${b})`);
  }
  t.pass(`the fast client received all ${N} messages (${Math.round((N * 7000) / 1e6)} MB)`);
  await waitFor(() => app.service.app.live!.hub.channels.get('flood')?.size === 1, 30000, 'the slow client to be dropped');
  t.pass('the slow client was closed');
  (slow.ws as any)._socket.resume();
  await slow.closed;
  t.ok(slow.messages.filter((m) => m.type === 'broadcast').length < N, 'the slow client did not get everything');
  fast.close();
});

t.test('pings keep idle connections open and drop dead ones', async (t) => {
  const app = await startApp(t, { env: { WS_PING_INTERVAL: '1' }, worker: false });
  await app.db.sql.unsafe(`create table public.t (id int); select live.subscribe('idle', 'select id from t');`);
  const q = { query: { apikey: app.anonKey } };
  const idle = await open(app, '/ws/idle', q);
  const dead = await open(app, '/ws/idle', q);
  await idle.next();
  await dead.next();
  let pings = 0;
  idle.ws.on('ping', () => pings++);
  (dead.ws as any)._socket.pause(); // a frozen peer: never answers the pings
  await waitFor(() => app.service.app.live!.hub.channels.get('idle')?.size === 1, 10000, 'the dead client to be dropped');
  t.pass('a client that stops answering pings is closed');
  await waitFor(() => pings >= 3, 10000, 'three pings');
  t.equal(idle.ws.readyState, idle.ws.OPEN, 'an idle client that answers pings stays open');
  idle.close();
  dead.ws.terminate();
});

t.test('shutdown closes sockets with 1012', async (t) => {
  const app = await startApp(t, { worker: false });
  await app.db.sql.unsafe(`create table public.t (id int); select live.subscribe('bye', 'select id from t');`);
  const c = await open(app, '/ws/bye', { query: { apikey: app.anonKey } });
  await c.next();
  c.send({ type: 'presence', state: { here: true } });
  await c.next((m) => m.type === 'presence_join');
  await app.service.close();
  t.equal((await c.closed).code, 1012, 'service restart');
  const [{ n }] = await app.db.sql`select count(*)::int as n from live_private.presence`;
  t.equal(n, 0, 'its presence is gone from the table');
});
