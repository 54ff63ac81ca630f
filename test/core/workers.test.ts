/**
 * WORKERS=2 (src/core/cluster.ts): the real service as `npm start` runs it, two processes on
 * one port. Both serve (the `x-plinth-worker` header over many new connections), one start
 * banner, one connection budget (pg_stat_activity never counts more than DB_POOL_SIZE + 2,
 * + 1 for a request connection's backend still exiting, whatever the load), /metrics sums the
 * processes and lists them, a killed process is replaced while the port goes on answering,
 * and SIGTERM drains a call in flight and exits 0 with every process gone.
 *
 * One LISTEN connection for the instance (src/core/cluster-listener.ts): pg_stat_activity
 * shows one `plinth-listener`; a catalog reload, a live query's delta and a broadcast reach
 * both processes through it; cut away (DATABASE_DIRECT_URL goes through a TCP proxy) it
 * comes back, and both processes notice the gap (an overflow for the delta they missed) and
 * hear again; terminated, it reconnects and they hear again; a replaced process hears its
 * channels again.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/core/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { TEST_JWT_SECRET, type TestApp } from '../helpers/app.ts';
import { startProxy } from '../helpers/proxy.ts';
import { open, type LiveClient } from '../live/helpers.ts';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const POOL = 4;

interface Running {
  child: ChildProcess;
  url: string;
  anonKey: string;
  serviceKey: string;
  stdout(): string;
  exited: Promise<number | null>;
}

async function start(t: { teardown(fn: () => unknown): void }, db: TestDatabase, extraEnv: Record<string, string> = {}): Promise<Running> {
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-workers-'));
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      DATABASE_URL: db.url,
      MIGRATE_ON_START: 'false',
      JWT_SECRET: TEST_JWT_SECRET,
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      DB_POOL_SIZE: String(POOL),
      DB_POOL_TIMEOUT_MS: '20000',
      WORKERS: '2',
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_MS: '0',
      SHUTDOWN_TIMEOUT_MS: '20000',
      ...extraEnv,
    },
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    rmSync(dataDir, { recursive: true, force: true });
  });
  await waitFor(async () => /plinth listening on (\S+)/.test(out) && /SERVICE_ROLE_KEY\b.*\n/.test(out), 120_000, () => `start: ${out}${err}`);
  const config = await loadConfig({ DATA_DIR: dataDir, JWT_SECRET: TEST_JWT_SECRET });
  return { child, url: /plinth listening on (\S+)/.exec(out)![1], anonKey: config.anonKey, serviceKey: config.serviceRoleKey, stdout: () => out, exited };
}

async function waitFor(cond: () => Promise<boolean>, ms = 15000, what: () => string = () => 'condition'): Promise<void> {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`not met in time: ${what()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A GET on a new connection of its own (no keep-alive): the status and the answering process's number. */
function getFresh(url: string, headers: Record<string, string> = {}): Promise<{ status: number; worker: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { connection: 'close', ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, worker: String(res.headers['x-plinth-worker'] ?? ''), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** The processes /metrics lists: worker number → pid. */
async function workerPids(app: Running): Promise<Map<string, number>> {
  const r = await getFresh(app.url + '/metrics', { authorization: `Bearer ${app.serviceKey}`, apikey: app.serviceKey });
  const pids = new Map<string, number>();
  for (const m of r.body.matchAll(/^plinth_worker_info\{worker="(\d+)",pid="(\d+)"\} 1$/gm)) pids.set(m[1], Number(m[2]));
  return pids;
}

/** This service's connections as PostgreSQL counts them (its processes all name themselves plinth…). */
async function connections(db: TestDatabase): Promise<number> {
  const [r] = await db.sql<{ n: number }[]>`
    select count(*)::int as n from pg_catalog.pg_stat_activity
     where datname = current_database() and pid <> pg_catalog.pg_backend_pid() and application_name like 'plinth%'`;
  return r.n;
}

/** The backends of the instance's LISTEN connection(s) on this database. */
async function listenerPids(db: TestDatabase): Promise<number[]> {
  const rows = await db.sql<{ pid: number }[]>`
    select pid from pg_catalog.pg_stat_activity where datname = current_database() and application_name = 'plinth-listener' order by pid`;
  return rows.map((r) => r.pid);
}

/** A live socket on /ws/room on process `worker` (new connections until the kernel hands one to it). */
async function socketOn(app: Running, worker: string): Promise<LiveClient> {
  for (let i = 0; i < 200; i++) {
    const c = await open({ url: app.url } as TestApp, '/ws/room', { query: { apikey: app.anonKey } });
    if (c.upgradeHeaders['x-plinth-worker'] === worker) {
      await c.next((m) => typeof m.client_id === 'string', 20_000);
      return c;
    }
    c.ws.terminate();
  }
  throw new Error(`no socket on process ${worker}`);
}

/** `send` until `to` hears a broadcast whose payload is `tag` (a LISTEN after a reconnection follows the connection by a moment). */
async function broadcastHeard(from: LiveClient, to: LiveClient, tag: string, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    from.send({ type: 'broadcast', payload: tag });
    try {
      await to.next((m) => m.type === 'broadcast' && m.payload === tag, 2000);
      return;
    } catch (err) {
      if (Date.now() > until) throw err;
    }
  }
}

/** Fresh GETs of `path` until every process in `workers` answered `status`; what each last answered. */
async function answeredBy(app: Running, path: string, status: number, workers: string[], ms = 60_000): Promise<void> {
  const seen = new Map<string, number>();
  await waitFor(
    async () => {
      const r = await getFresh(app.url + path, { apikey: app.anonKey });
      seen.set(r.worker, r.status);
      return workers.every((w) => seen.get(w) === status);
    },
    ms,
    () => `${path}: not ${status} from processes ${workers.join(', ')}: ${JSON.stringify(Object.fromEntries(seen))}`,
  );
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

t.test('WORKERS=2', { timeout: 240_000 }, async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`
    create function public.slow(s float8) returns int language sql as 'select pg_sleep(s); select 1';
    grant execute on function public.slow(float8) to anon, authenticated, service_role;
  `).simple();
  // The listener (and the job worker) reach PostgreSQL through a proxy the test can cut.
  const u = new URL(db.url);
  const proxy = await startProxy(u.hostname, Number(u.port));
  t.teardown(() => proxy.close());
  u.port = String(proxy.port);
  const app = await start(t, db, { DATABASE_DIRECT_URL: u.toString() });

  t.equal(app.stdout().match(/plinth listening on /g)?.length, 1, 'one start banner');

  await t.test('both processes serve, the kernel spreading the connections', async (t) => {
    const seen = new Map<string, number>();
    for (let i = 0; i < 200 && seen.size < 2; i++) {
      const r = await getFresh(app.url + '/health');
      t.equal(r.status, 200, 'answered', { diagnostic: false });
      seen.set(r.worker, (seen.get(r.worker) ?? 0) + 1);
    }
    t.same([...seen.keys()].sort(), ['1', '2'], `processes 1 and 2 both answered (${JSON.stringify(Object.fromEntries(seen))})`);
    const pids = await workerPids(app);
    t.equal(pids.size, 2, '/metrics lists two processes');
    t.not(pids.get('1'), pids.get('2'), 'with distinct pids');
    t.not(pids.get('1'), app.child.pid, 'neither is the primary');
  });

  await t.test('one job worker set; each process in the instance registry under a name of its own', async (t) => {
    const port = new URL(app.url).port;
    let rows: { name: string; workers: number }[] = [];
    await waitFor(async () => {
      rows = await db.sql<{ name: string; workers: number }[]>`
        select name, cardinality(worker_ids) as workers from plinth_private.instances order by name`;
      return rows.length === 2 && rows.some((r) => r.workers > 0);
    });
    t.same(
      rows.map((r) => [r.name.replace(/^.*:/, ':'), r.workers > 0]),
      [
        [`:${port}`, true],
        [`:${port}/2`, false],
      ],
      'process 1 registered as host:port with the job worker; process 2 as host:port/2 without',
    );
    const [w] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and application_name = 'plinth-worker'`;
    t.equal(w.n, 1, 'one job worker connection');
  });

  await t.test('one LISTEN connection for the instance, in the parent', async (t) => {
    // Both processes answered /health above: each has started its areas, which listen, and pinged through the listener.
    await waitFor(async () => (await listenerPids(db)).length > 0, 30_000, () => 'no listener connection');
    t.equal((await listenerPids(db)).length, 1, 'one plinth-listener backend for two service processes');
  });

  await t.test('a catalog reload reaches both processes', async (t) => {
    await answeredBy(app, '/rest/v1/fresh_items', 404, ['1', '2']);
    t.pass('both processes answer 404 for a table not created yet');
    // DDL notifies plinth_cache/rest (sql/fixtures/rest/ddl_notify.sql): one NOTIFY, heard through the one connection.
    await db.sql.unsafe(`create table public.fresh_items (id int primary key);
      grant select on public.fresh_items to anon; insert into public.fresh_items values (1)`).simple();
    await answeredBy(app, '/rest/v1/fresh_items', 200, ['1', '2']);
    t.pass('both processes reloaded their catalog and serve the new table');
  });

  let c1!: LiveClient;
  let c2!: LiveClient;
  await t.test('a live delta and a broadcast reach sockets on both processes', async (t) => {
    await db.sql.unsafe(`create table public.msgs (id int primary key, body text);
      select live.subscribe('room', 'select id, body from msgs');`);
    c1 = await socketOn(app, '1');
    c2 = await socketOn(app, '2');
    await db.sql`insert into public.msgs values (1, 'hi')`;
    const delta = { query_id: 'room', seq: 1, inserted: [{ id: 1, body: 'hi' }], deleted: [] };
    t.same(await c1.next((m) => m.query_id === 'room', 20_000), delta, 'the delta on process 1');
    t.same(await c2.next((m) => m.query_id === 'room', 20_000), delta, 'and on process 2');
    await broadcastHeard(c1, c2, 'one to two', 20_000);
    await broadcastHeard(c2, c1, 'two to one', 20_000);
    t.pass('a broadcast from either process reaches the other');
  });

  await t.test('the listener connection cut away: every process notices the gap once it is back, and hears again', async (t) => {
    proxy.cut();
    await waitFor(async () => (await listenerPids(db)).length === 0, 30_000, () => 'the listener connection is still there');
    // Both processes know it is away: /health pings through it.
    await answeredBy(app, '/health', 503, ['1', '2']);
    t.pass('both processes answer /health 503 while it is away');
    await db.sql`insert into public.msgs values (2, 'missed')`;
    // The delta is published (its seq moves) while nothing listens: both processes miss it.
    await waitFor(async () => (await db.sql<{ seq: string }[]>`select seq::text from live_private.subscriptions where query_id = 'room'`)[0].seq === '2', 30_000, () => 'the delta not published');
    proxy.restore();
    const overflow = { type: 'overflow', query_id: 'room', seq: 2, fetch: true };
    t.same(await c1.next((m) => m.query_id === 'room', 30_000), overflow, 'process 1 noticed the gap: an overflow');
    t.same(await c2.next((m) => m.query_id === 'room', 30_000), overflow, 'process 2 too');
    await db.sql`insert into public.msgs values (3, 'after')`;
    const delta = { query_id: 'room', seq: 3, inserted: [{ id: 3, body: 'after' }], deleted: [] };
    t.same(await c1.next((m) => m.query_id === 'room', 20_000), delta, 'deltas reach process 1 again');
    t.same(await c2.next((m) => m.query_id === 'room', 20_000), delta, 'and process 2');
    t.equal((await listenerPids(db)).length, 1, 'one listener connection again');
    await answeredBy(app, '/health', 200, ['1', '2']);
    t.pass('both processes answer /health 200 again');
  });

  await t.test('the listener connection terminated: it reconnects, and both processes hear again', async (t) => {
    const [old] = await listenerPids(db);
    await db.sql`select pg_catalog.pg_terminate_backend(${old})`;
    let now: number[] = [];
    await waitFor(
      async () => {
        now = await listenerPids(db);
        return now.length === 1 && now[0] !== old;
      },
      30_000,
      () => `no new listener connection: ${JSON.stringify(now)}`,
    );
    t.pass('a new listener connection, one');
    await broadcastHeard(c1, c2, 'one to two again');
    await broadcastHeard(c2, c1, 'two to one again');
    t.pass('broadcasts reach both processes again');
    await db.sql.unsafe(`create table public.later_items (id int primary key); grant select on public.later_items to anon`).simple();
    await answeredBy(app, '/rest/v1/later_items', 200, ['1', '2']);
    t.pass('a catalog reload reaches both again');
  });

  await t.test('/metrics sums the processes', async (t) => {
    // Each /health above was counted by the process that answered it: the sum is at least what was asked.
    const before = await getFresh(app.url + '/metrics', { authorization: `Bearer ${app.serviceKey}`, apikey: app.serviceKey });
    const count = (body: string) =>
      [...body.matchAll(/^http_requests_total\{[^}]*route="\/health"[^}]*status="200"[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    const n0 = count(before.body);
    for (let i = 0; i < 20; i++) await getFresh(app.url + '/health');
    const after = await getFresh(app.url + '/metrics', { authorization: `Bearer ${app.serviceKey}`, apikey: app.serviceKey });
    t.equal(count(after.body) - n0, 20, 'twenty more /health answers, whichever process gave them');
    t.match(after.body, /^plinth_db_up 1$/m, 'plinth_db_up stays 1 (not the sum)');
  });

  await t.test('one connection budget under load', async (t) => {
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await connections(db));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    // 16 calls of 1 s at once, over new connections: both processes' request lanes all busy.
    const calls = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        fetch(app.url + '/rest/v1/rpc/slow', {
          method: 'POST',
          headers: { apikey: i % 2 ? app.anonKey : app.serviceKey, authorization: `Bearer ${i % 2 ? app.anonKey : app.serviceKey}`, 'content-type': 'application/json', connection: 'close' },
          body: '{"s": 1}',
        }).then((r) => r.status),
      ),
    );
    sampling = false;
    await sampler;
    t.same(new Set(calls), new Set([200]), 'every call answered 200');
    t.ok(peak >= POOL, `the load used the budget (peak ${peak})`);
    t.ok(peak <= POOL + 3, `the peak, ${peak}, stays within DB_POOL_SIZE + 2 (+ 1 backend exiting) = ${POOL + 3}`);
  });

  await t.test('a killed process is replaced and the port goes on answering', async (t) => {
    const before = await workerPids(app);
    const victim = before.get('1')!;
    process.kill(victim, 'SIGKILL');
    let answered = 0;
    let replaced = 0;
    await waitFor(
      async () => {
        // Every request is answered (one retry: a connection the kernel queued on the dying socket is reset).
        const r = await getFresh(app.url + '/health').catch(() => getFresh(app.url + '/health'));
        if (r.status === 200) answered++;
        const now = await workerPids(app).catch(() => new Map<string, number>());
        replaced = now.get('1') ?? 0;
        return replaced !== 0 && replaced !== victim && now.size === 2;
      },
      60_000,
      () => `process 1 not replaced: ${app.stdout().slice(-2000)}`,
    );
    t.notOk(alive(victim), 'the killed process is gone');
    t.ok(alive(replaced), `process 1 runs again (pid ${replaced})`);
    t.ok(answered > 0, 'the port answered meanwhile');
    t.match(app.stdout(), /service process 1 \(pid \d+\) exited/, 'the primary logs the death');
    t.equal(app.stdout().match(/plinth listening on /g)?.length, 1, 'still one banner');
    const seen = new Set<string>();
    await waitFor(async () => {
      seen.add((await getFresh(app.url + '/health')).worker);
      return seen.size === 2;
    });
    t.pass('both processes serve again');
    t.equal((await listenerPids(db)).length, 1, 'still one listener connection');
    // The new process 1 asked for its channels as it started.
    await db.sql.unsafe(`create table public.replaced_items (id int primary key); grant select on public.replaced_items to anon`).simple();
    await answeredBy(app, '/rest/v1/replaced_items', 200, ['1', '2']);
    t.pass('a catalog reload reaches the new process 1');
    const c3 = await socketOn(app, '1');
    await broadcastHeard(c2, c3, 'to the new process 1', 20_000);
    await broadcastHeard(c3, c2, 'from the new process 1', 20_000);
    t.pass('broadcasts reach the new process 1 and come from it');
    c3.close();
    c2.close();
  });

  await t.test('SIGTERM drains the call in flight and exits 0, every process gone', async (t) => {
    const pids = [...(await workerPids(app)).values()];
    const call = fetch(app.url + '/rest/v1/rpc/slow', {
      method: 'POST',
      headers: { apikey: app.anonKey, 'content-type': 'application/json' },
      body: '{"s": 1}',
    });
    await waitFor(async () => {
      const [r] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
         where datname = current_database() and query like ${'%slow%'} and state = 'active' and query not like '%pg_stat_activity%'`;
      return r.n > 0;
    });
    app.child.kill('SIGTERM');
    const r = await call;
    t.same([r.status, await r.json()], [200, 1], 'the call in flight is answered');
    const code = await Promise.race([app.exited, new Promise<string>((res) => setTimeout(() => res('still running'), 30000))]);
    t.equal(code, 0, 'the primary exits 0');
    for (const pid of pids) t.notOk(alive(pid), `process ${pid} exited`);
    await waitFor(async () => (await connections(db)) === 0, 15000, () => 'connections left open');
    t.pass('no connection left');
  });
});
