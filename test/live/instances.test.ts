/**
 * Two service instances on one database (contract §5, design.md "Several instances"):
 * deltas, broadcast and presence reach the clients of both; presence is the union of both
 * instances' clients; an instance that dies stops counting within a few seconds.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { startProxy } from '../helpers/proxy.ts';
import { open, waitFor } from './helpers.ts';

t.test('broadcast, presence and deltas across two instances', async (t) => {
  const a = await startApp(t);
  const b = await startApp(t, { db: a.db });
  await a.db.sql.unsafe(`create table public.msgs (id int primary key, body text);
    select live.subscribe('room', 'select id, body from msgs');`);
  const q = { query: { apikey: a.anonKey } };
  const c1 = await open(a, '/ws/room', q);
  const c2 = await open(b, '/ws/room', { query: { apikey: b.anonKey } });
  const id1 = (await c1.next()).client_id;
  const id2 = (await c2.next()).client_id;
  t.not(id1, id2, 'each client has its own id');

  await a.db.sql`insert into public.msgs values (1, 'hi')`;
  const d1 = await c1.next();
  const d2 = await c2.next();
  t.same(d1, { query_id: 'room', seq: 1, inserted: [{ id: 1, body: 'hi' }], deleted: [] }, 'delta on instance A');
  t.same(d2, d1, 'the same delta on instance B');

  c1.send({ type: 'broadcast', payload: { text: 'hello' }, from: 'spoofed' });
  const expected = { type: 'broadcast', from: id1, payload: { text: 'hello' } };
  t.same(await c1.next((m) => m.type === 'broadcast'), expected, 'the sender receives its broadcast, from its server-given id');
  t.same(await c2.next((m) => m.type === 'broadcast'), expected, 'a client on the other instance receives it');

  c2.send({ type: 'presence', state: { name: 'bob' } });
  const join = { type: 'presence_join', channel: 'room', client_id: id2, state: { name: 'bob' } };
  t.same(await c1.next((m) => m.type === 'presence_join'), join, 'presence_join reaches the other instance');
  t.same(await c2.next((m) => m.type === 'presence_join'), join, 'and the sender');
  c2.send({ type: 'presence', state: { name: 'bob', typing: true } });
  t.same(await c1.next((m) => m.type === 'presence_state'), { type: 'presence_state', channel: 'room', client_id: id2, state: { name: 'bob', typing: true } }, 'a later presence message is presence_state');
  c1.send({ type: 'presence', state: { name: 'ann' } });
  await c2.next((m) => m.type === 'presence_join' && m.client_id === id1);

  const expectedPresence = { [id1]: { name: 'ann' }, [id2]: { name: 'bob', typing: true } };
  for (const app of [a, b]) {
    const p = await app.call('GET', `/ws/_presence/room?apikey=${app.anonKey}`);
    t.same([p.status, p.body], [200, expectedPresence], 'presence is the union of both instances\' clients');
  }

  c2.close();
  t.same(await c1.next((m) => m.type === 'presence_leave'), { type: 'presence_leave', channel: 'room', client_id: id2 }, 'a disconnect is presence_leave');
  t.same((await a.call('GET', `/ws/_presence/room?apikey=${a.anonKey}`)).body, { [id1]: { name: 'ann' } }, 'and it leaves the presence list');

  c1.send({ type: 'broadcast', payload: 'x'.repeat(9000) });
  c1.send({ type: 'broadcast', payload: 42 });
  t.same(await c1.next((m) => m.type === 'broadcast'), { type: 'broadcast', from: id1, payload: 42 }, 'a broadcast too large for NOTIFY is dropped, the next goes through');
  for (let i = 0; i < 50; i++) c1.send({ type: 'broadcast', payload: i });
  for (let i = 0; i < 3; i++) c1.send({ type: 'broadcast', payload: 'same' });
  const burst: unknown[] = [];
  for (let i = 0; i < 53; i++) burst.push((await c1.next((m) => m.type === 'broadcast')).payload);
  t.same(burst, [...Array.from({ length: 50 }, (_, i) => i), 'same', 'same', 'same'], 'a burst arrives whole and in order, equal payloads included');
  c1.send({ type: 'nonsense' });
  c1.ws.send('not json');
  c1.send({ type: 'broadcast', payload: null });
  t.same(await c1.next((m) => m.type === 'broadcast'), { type: 'broadcast', from: id1, payload: null }, 'malformed frames are ignored; the socket stays open');
  c1.close();
});

t.test('an instance that dies stops counting within a few seconds', async (t) => {
  const a = await startApp(t);
  await a.db.sql.unsafe(`create table public.lobby_t (id int); select live.subscribe('lobby', 'select id from lobby_t');`);
  const u = new URL(a.db.url);
  const proxy = await startProxy(u.hostname, Number(u.port));
  t.teardown(() => proxy.close());
  u.port = String(proxy.port);
  const b = await startApp(t, { db: a.db, databaseUrl: u.toString() });

  const ca = await open(a, '/ws/lobby', { query: { apikey: a.anonKey } });
  const cb = await open(b, '/ws/lobby', { query: { apikey: b.anonKey } });
  await ca.next();
  const idb = (await cb.next()).client_id;
  cb.send({ type: 'presence', state: { on: 'b' } });
  await ca.next((m) => m.type === 'presence_join' && m.client_id === idb);

  proxy.cut(); // instance B loses its database: no more heartbeats
  t.same(await ca.next((m) => m.type === 'presence_leave', 15000), { type: 'presence_leave', channel: 'lobby', client_id: idb }, 'the dead instance\'s client leaves');
  t.same((await a.call('GET', `/ws/_presence/lobby?apikey=${a.anonKey}`)).body, {}, 'and is no longer listed');

  proxy.restore(); // B comes back: it announces its clients again
  t.same(await ca.next((m) => m.type === 'presence_join' && m.client_id === idb, 15000), { type: 'presence_join', channel: 'lobby', client_id: idb, state: { on: 'b' } }, 'a returning instance re-announces its clients');
  await waitFor(async () => Object.keys((await a.call('GET', `/ws/_presence/lobby?apikey=${a.anonKey}`)).body).length === 1, 5000, 'listed again');
  ca.close();
  cb.close();
});

t.test('a client that leaves while the database is away is not listed once it is back', async (t) => {
  const owner = await startApp(t, { worker: false });
  await owner.db.sql.unsafe(`create table public.g (id int); select live.subscribe('ghosts', 'select id from g');`);
  const u = new URL(owner.db.url);
  const proxy = await startProxy(u.hostname, Number(u.port));
  t.teardown(() => proxy.close());
  u.port = String(proxy.port);
  const app = await startApp(t, { db: owner.db, databaseUrl: u.toString(), worker: false });
  const watcher = await open(owner, '/ws/ghosts', { query: { apikey: owner.anonKey } });
  await watcher.next();
  const c = await open(app, '/ws/ghosts', { query: { apikey: app.anonKey } });
  const id = (await c.next()).client_id;
  c.send({ type: 'presence', state: { x: 1 } });
  await watcher.next((m) => m.type === 'presence_join' && m.client_id === id);
  proxy.cut();
  c.close();
  await c.closed;
  // The instance has lost its database (it says so): the leave could not be written yet.
  await waitFor(async () => (await app.call('GET', '/health')).status === 503, 10000, 'the instance sees its database gone');
  proxy.restore();
  t.same(await watcher.next((m) => m.type === 'presence_leave', 15000), { type: 'presence_leave', channel: 'ghosts', client_id: id }, 'its leave is announced once the database is back');
  t.same((await owner.call('GET', `/ws/_presence/ghosts?apikey=${owner.anonKey}`)).body, {}, 'and it is no longer listed');
  watcher.close();
});
