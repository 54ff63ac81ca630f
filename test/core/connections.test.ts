/**
 * The connection budget, counted where PostgreSQL counts it (pg_stat_activity): an idle
 * instance holds at most 3 connections (the listener, the worker, at most one request
 * connection on its way out), one under load at most DB_POOL_SIZE + 3 (DB_POOL_SIZE + 2 open, one backend
 * still exiting after the budget handed its unit on), three instances three
 * times that; periodic work (the live heartbeat every second) lets them idle out; a request
 * that waits for a connection longer than DB_POOL_TIMEOUT_MS gets 503 `database busy` and
 * /health says the instance cannot get its connections.
 */
import t from 'tap';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { userToken } from '../rest/helpers.ts';

const POOL = 10;
const IDLE_MS = 1000;

interface Counts {
  total: number;
  requests: number;
  listener: number;
  worker: number;
}

async function counts(db: TestDatabase): Promise<Counts> {
  const [r] = await db.sql<Counts[]>`
    select count(*)::int as total,
           count(*) filter (where application_name = 'plinth' or application_name like 'plinth-requests-%')::int as requests,
           count(*) filter (where application_name = 'plinth-listener')::int as listener,
           count(*) filter (where application_name = 'plinth-worker')::int as worker
      from pg_catalog.pg_stat_activity
     where datname = current_database() and pid <> pg_catalog.pg_backend_pid() and application_name like 'plinth%'`;
  return r;
}

async function until(db: TestDatabase, ok: (c: Counts) => boolean, what: string, timeoutMs = 30_000): Promise<Counts> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const c = await counts(db);
    if (ok(c)) return c;
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(c)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Mixed requests of every API role on `apps`, `concurrency` at a time; the highest counts seen meanwhile and every status. */
async function load(db: TestDatabase, apps: TestApp[], total: number, concurrency: number): Promise<{ peak: Counts; statuses: Map<number, number> }> {
  const user = await userToken('00000000-0000-4000-8000-0000000000c1');
  const peak: Counts = { total: 0, requests: 0, listener: 0, worker: 0 };
  const statuses = new Map<number, number>();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const c = await counts(db);
      for (const k of Object.keys(peak) as (keyof Counts)[]) peak[k] = Math.max(peak[k], c[k]);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const app = apps[i % apps.length];
      const who = i % 4;
      const r =
        who === 0
          ? await app.call('GET', '/rest/v1/counted?select=id,v&order=id', { apikey: app.anonKey })
          : who === 1
            ? await app.call('GET', '/rest/v1/counted?select=id&id=lt.3', { token: user, apikey: app.anonKey })
            : who === 2
              ? await app.call('POST', '/rest/v1/counted_log', { token: app.serviceKey, apikey: app.serviceKey, body: { n: i } })
              : await app.call('POST', '/api/sql', { token: app.serviceKey, body: { query: 'select pg_sleep(0.01)' } });
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  sampling = false;
  await sampler;
  return { peak, statuses };
}

t.test('connections per instance: idle, after every API role, under load, for 1 and 3 instances', async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`
    create table public.counted (id int primary key, v text);
    insert into public.counted select g, 'v' || g from generate_series(1, 20) g;
    create table public.counted_log (id bigint generated always as identity primary key, n int);
    grant select on public.counted to anon, authenticated, service_role;
    grant select, insert on public.counted_log to service_role;
  `);
  const env = { DB_POOL_SIZE: String(POOL), DB_POOL_IDLE_MS: String(IDLE_MS), ENABLE_SQL_ENDPOINT: 'true' };
  const a = await startApp(t, { db, env, worker: true });
  await a.call('POST', '/api/catalog/refresh', { token: a.serviceKey });

  const idle = await until(db, (c) => c.total <= 3, 'one idle instance holds at most 3 connections');
  t.ok(idle.total <= 3, `idle: ${JSON.stringify(idle)}`);
  const one = await until(db, (c) => c.listener === 1 && c.worker <= 1, 'one listener (graphile-worker LISTENs on it too), one worker connection');
  t.equal(one.listener, 1, 'one LISTEN connection for the whole instance');

  const user = await userToken('00000000-0000-4000-8000-0000000000c2');
  t.equal((await a.call('GET', '/rest/v1/counted?id=eq.1', { apikey: a.anonKey })).status, 200, 'anon');
  t.equal((await a.call('GET', '/rest/v1/counted?id=eq.1', { token: user, apikey: a.anonKey })).status, 200, 'authenticated');
  t.equal((await a.call('GET', '/rest/v1/counted?id=eq.1', { token: a.serviceKey, apikey: a.serviceKey })).status, 200, 'service_role');
  const roles = await counts(db);
  t.ok(roles.requests <= POOL && roles.total <= POOL + 2, `after one request of each API role: ${JSON.stringify(roles)}`);

  const single = await load(db, [a], 240, 32);
  t.same([...single.statuses.keys()].sort(), [200, 201], `every request served: ${JSON.stringify([...single.statuses])}`);
  // The budget hands a closed connection's unit on when its socket closes; PostgreSQL may list
  // that backend a moment longer while it exits (as at idle: one on its way out).
  t.ok(single.peak.requests <= POOL + 1, `request connections under load ≤ DB_POOL_SIZE (+ one on its way out): ${JSON.stringify(single.peak)}`);
  t.ok(single.peak.total <= POOL + 3, `one instance under load ≤ DB_POOL_SIZE + 3`);

  // The live heartbeat runs every second meanwhile: it must not keep a request connection open.
  const after = await until(db, (c) => c.total <= 3, 'back to at most 3 after DB_POOL_IDLE_MS');
  t.ok(after.total <= 3, `idle again: ${JSON.stringify(after)}`);

  const b = await startApp(t, { db, env, worker: true });
  const c = await startApp(t, { db, env, worker: true });
  const three = await load(db, [a, b, c], 300, 48);
  t.same([...three.statuses.keys()].sort(), [200, 201], `three instances: every request served: ${JSON.stringify([...three.statuses])}`);
  t.ok(three.peak.total <= 3 * (POOL + 3), `three instances under load ≤ 3 × (DB_POOL_SIZE + 3): ${JSON.stringify(three.peak)}`);
  const idle3 = await until(db, (x) => x.total <= 9, 'three idle instances hold at most 9');
  t.ok(idle3.total <= 9, `three idle: ${JSON.stringify(idle3)}`);
  t.comment(`1 instance idle ${idle.total}, after each role ${roles.total}, peak ${single.peak.total}; 3 instances peak ${three.peak.total}, idle ${idle3.total}`);
});

t.test('a request that cannot get a connection in DB_POOL_TIMEOUT_MS is 503 database busy', async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`create table public.counted (id int primary key); grant select on public.counted to anon;`);
  const app = await startApp(t, { db, worker: false, env: { DB_POOL_SIZE: '1', DB_POOL_TIMEOUT_MS: '300', DB_POOL_IDLE_MS: '300', ENABLE_SQL_ENDPOINT: 'true' } });
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  t.equal((await app.call('GET', '/rest/v1/counted', { apikey: app.anonKey })).status, 200, 'anon served');
  await until(db, (c) => c.requests === 0, 'every request connection idled out');

  // The one connection of the budget runs a 2 s statement on the owner pool.
  const slow = app.call('POST', '/api/sql', { token: app.serviceKey, body: { query: 'select pg_sleep(2)' } });
  await until(db, (c) => c.requests === 1, 'the slow statement holds the one request connection');
  const running = Date.now() + 30_000;
  while ((await db.sql`select 1 from pg_catalog.pg_stat_activity where datname = current_database() and state = 'active' and query like 'select pg_sleep(2)%'`).length === 0) {
    if (Date.now() > running) throw new Error('the slow statement never ran');
    await new Promise((r) => setTimeout(r, 20));
  }
  const busy = await app.call('GET', '/rest/v1/counted', { apikey: app.anonKey });
  t.equal(busy.status, 503);
  t.same(busy.body, { error: 'database busy' });
  const health = await app.call('GET', '/health');
  t.equal(health.status, 503, '/health says the instance cannot get its connections');
  t.same(health.body, { status: 'degraded', pg_connected: true, connections: 'exhausted' });
  t.same(app.service.db.connectionHealth().refusedRecently, true);

  t.equal((await slow).status, 200);
  // The owner pool's now idle connection is asked back for the anon lane: no wait for DB_POOL_IDLE_MS.
  const ok = await app.call('GET', '/rest/v1/counted', { apikey: app.anonKey });
  t.equal(ok.status, 200, 'served once the connection is free');
});
