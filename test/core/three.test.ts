/**
 * Three instances, each its own process (`node src/main.ts`), behind Debian's HAProxy (round
 * robin, health-checked on /ready) on one database through PgBouncer in transaction mode
 * (LISTEN and the workers on the direct URL): a user signed up on one signs in on another,
 * refresh-token reuse is detected across instances, the auth rate limit counts across them,
 * a table created in SQL is served by all three, a webhook fired through one is delivered
 * once. Then one is killed with SIGKILL while deliveries it took are pending: every one
 * arrives within INSTANCE_DEAD_MS + 30 s, and no request through the proxy fails.
 */
import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '../helpers/database.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';
import { freePort, PGBOUNCER, startPgbouncer } from '../helpers/pgbouncer.ts';
import { startReceiver, waitFor } from '../webhooks/helpers.ts';
import { open } from '../live/helpers.ts';
import type { TestApp } from '../helpers/app.ts';
import { parseConfig, resolveSecrets } from '../../src/core/config.ts';

const HAPROXY = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => existsSync(p));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEAD_MS = 2000;
const RATE = 8;

interface Instance {
  url: string;
  child: ChildProcess;
  out(): string;
}

async function startInstance(t: { teardown(fn: () => unknown): void }, env: Record<string, string>, port: number): Promise<Instance> {
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-three-'));
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env, PORT: String(port), DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`instance on ${port} ready`, async () => {
    if (child.exitCode !== null) throw new Error(`instance exited: ${out}`);
    return (await fetch(url + '/ready').then((r) => r.status, () => 0)) === 200;
  }, 60_000);
  return { url, child, out: () => out };
}

async function startHaproxy(t: { teardown(fn: () => unknown): void }, ports: number[]): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-haproxy-'));
  const listen = await freePort();
  writeFileSync(
    join(dir, 'haproxy.cfg'),
    `global
  maxconn 2000
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  retries 3
  option redispatch
frontend plinth
  bind 127.0.0.1:${listen}
  default_backend instances
backend instances
  balance roundrobin
  option httpchk GET /ready
  retry-on conn-failure empty-response response-timeout
${ports.map((p, i) => `  server i${i} 127.0.0.1:${p} check inter 300 fall 2 rise 2`).join('\n')}
`,
  );
  const child = spawn(HAPROXY!, ['-db', '-f', join(dir, 'haproxy.cfg')], { stdio: 'ignore' });
  t.teardown(async () => {
    if (child.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${listen}`;
  await waitFor('haproxy', async () => (await fetch(url + '/ready').then((r) => r.status, () => 0)) === 200, 20_000);
  return url;
}

const skip =
  (PGBOUNCER === undefined || HAPROXY === undefined) && process.env.CI === undefined ? 'pgbouncer or haproxy is not installed (.ci/run installs both)' : false;

t.test('three instances behind HAProxy through PgBouncer; one killed', { skip, timeout: 180_000 }, async (t) => {
  t.ok(spawnSync(HAPROXY!, ['-v']).status === 0, 'haproxy runs');
  const db = await createTestDatabase(t);
  const direct = new URL(db.url);
  const bouncer = await startPgbouncer(t, direct.hostname, Number(direct.port || 5432));
  const pooled = new URL(db.url);
  pooled.port = String(bouncer);
  const env = {
    DATABASE_URL: pooled.toString(),
    DATABASE_DIRECT_URL: db.url,
    DB_POOLER: 'transaction',
    MIGRATE_ON_START: 'false',
    JWT_SECRET: TEST_JWT_SECRET,
    HOST: '127.0.0.1',
    DB_POOL_SIZE: '4',
    LOG_LEVEL: 'warn',
    INSTANCE_DEAD_MS: String(DEAD_MS),
    AUTH_RATE_LIMIT: String(RATE),
    SHUTDOWN_GRACE_MS: '0',
  };
  const config = await resolveSecrets(parseConfig({ ...env, PORT: '0' }));
  const ports = [await freePort(), await freePort(), await freePort()];
  const [a, b, c] = await Promise.all(ports.map((p) => startInstance(t, env, p)));
  const proxy = await startHaproxy(t, ports);
  const call = async (base: string, method: string, path: string, body?: unknown, token = config.anonKey) => {
    const r = await fetch(base + path, {
      method,
      headers: { apikey: config.anonKey, authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    let parsed: any;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: r.status, body: parsed };
  };

  // Auth across instances.
  const up = await call(a.url, 'POST', '/auth/v1/signup', { email: 'three@example.test', password: 'correct horse battery' });
  t.equal(up.status, 201, 'sign-up on A');
  const inB = await call(b.url, 'POST', '/auth/v1/token', { grant_type: 'password', email: 'three@example.test', password: 'correct horse battery' });
  t.equal(inB.status, 200, 'sign-in on B');
  const fresh = await call(a.url, 'POST', '/auth/v1/token', { grant_type: 'refresh_token', refresh_token: inB.body.refresh_token });
  t.equal(fresh.status, 200, 'refresh on A');
  const reuse = await call(c.url, 'POST', '/auth/v1/token', { grant_type: 'refresh_token', refresh_token: inB.body.refresh_token });
  t.equal(reuse.status, 401, 'the old refresh token replayed on C: reuse detected');
  t.match(reuse.body.error, /reuse detected/);
  const after = await call(b.url, 'POST', '/auth/v1/token', { grant_type: 'refresh_token', refresh_token: fresh.body.refresh_token });
  t.equal(after.status, 401, 'and the session ended for every instance: the new token is refused on B');

  // The auth rate limit counts across instances: RATE requests in a minute from this address
  // in all, not RATE per instance. Five were made above.
  const statuses: number[] = [];
  for (let i = 0; i < RATE; i++) {
    const inst = [a, b, c][i % 3];
    statuses.push((await call(inst.url, 'POST', '/auth/v1/token', { grant_type: 'password', email: 'three@example.test', password: 'wrong' })).status);
  }
  t.ok(statuses.includes(429), `429 before ${RATE} more requests over three instances: ${statuses.join(',')}`);
  t.ok(statuses.indexOf(429) <= RATE - 5, 'exactly where the shared count runs out');

  // A table created in SQL is served by all three.
  await db.sql.unsafe(`
    create table public.things (id int primary key, v text);
    grant select, insert on public.things to anon, service_role;
    notify plinth_cache, 'rest';
  `);
  for (const [name, inst] of [['A', a], ['B', b], ['C', c]] as const) {
    await waitFor(`${name} serves the new table`, async () => (await call(inst.url, 'GET', '/rest/v1/things')).status === 200, 20_000);
  }
  t.pass('the new table is served by A, B and C');

  // A webhook fired through A: delivered exactly once.
  const rx = await startReceiver(t);
  const hook = await call(a.url, 'POST', '/rest/v1/webhooks', { url: rx.url, table_name: 'things', events: ['INSERT'] }, config.serviceRoleKey);
  t.equal(hook.status, 201, 'webhook registered');
  t.equal((await call(a.url, 'POST', '/rest/v1/things', { id: 1, v: 'one' })).status, 201, 'a write through A');
  await waitFor('the delivery', () => rx.received.length >= 1, 30_000);
  await waitFor('no webhook job left', async () => {
    const [{ n }] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from graphile_worker._private_jobs j join graphile_worker._private_tasks k on k.id = j.task_id
       where k.identifier = 'webhooks__deliver'`;
    return n === 0;
  }, 30_000);
  t.equal(rx.received.length, 1, 'delivered exactly once by three workers');

  // Live queries, broadcast and presence across the three.
  await db.sql.unsafe(`select live.subscribe('room', 'select id, v from things')`);
  const ws = (inst: Instance) => open({ url: inst.url } as TestApp, '/ws/room', { query: { apikey: config.anonKey } });
  const [la, lb, lc] = [await ws(a), await ws(b), await ws(c)];
  const [ida, , idc] = [(await la.next()).client_id, (await lb.next()).client_id, (await lc.next()).client_id];
  for (let i = 10; i < 13; i++) t.equal((await call(c.url, 'POST', '/rest/v1/things', { id: i, v: 'live' })).status, 201);
  // Deltas may carry one write or several (a rerun that saw more than one commit): gathered until all three are in.
  const deltas = [];
  const ids: number[] = [];
  while (ids.length < 3) {
    const d = await lb.next((m) => m.query_id === 'room' && m.inserted?.some((r: { v: string }) => r.v === 'live'), 15_000);
    deltas.push(d);
    ids.push(...d.inserted.map((r: { id: number }) => r.id));
  }
  t.same(ids, [10, 11, 12], 'a subscriber on B sees the writes made through C, in order');
  const seqs = deltas.map((d) => d.seq as number);
  t.same(seqs, seqs.map((_, i) => seqs[0] + i), 'with no seq gap');
  la.send({ type: 'broadcast', payload: 'from A' });
  for (const [name, l] of [['B', lb], ['C', lc]] as const) {
    t.same(await l.next((m) => m.type === 'broadcast', 15_000), { type: 'broadcast', from: ida, payload: 'from A' }, `a broadcast from A reaches ${name}`);
  }
  lc.send({ type: 'presence', state: { name: 'cee' } });
  for (const [name, l] of [['A', la], ['B', lb]] as const) {
    const j = await l.next((m) => m.type === 'presence_join' && m.client_id === idc, 15_000);
    t.same(j.state, { name: 'cee' }, `presence from C reaches ${name}`);
  }
  lb.close();

  // C takes writes whose deliveries are pending, then dies.
  const before = rx.received.length;
  for (let i = 2; i <= 6; i++) await call(c.url, 'POST', '/rest/v1/things', { id: i, v: 'pending' });
  c.child.kill('SIGKILL');
  const killedAt = Date.now();
  // Through the proxy: no request fails (a refused connection is retried on another instance).
  const through: number[] = [];
  for (let i = 0; i < 30; i++) through.push((await call(proxy, 'GET', '/rest/v1/things?select=id')).status);
  t.same(through, Array(30).fill(200), 'every request through the proxy answered 200 after the kill');
  // C's clients see their socket end; A's client sees C's presence leave once C is declared dead.
  await lc.closed;
  t.pass('the killed instance\'s subscriber is disconnected');
  await la.next((m) => m.type === 'presence_leave' && m.client_id === idc, DEAD_MS + 30_000);
  t.pass('its presence leaves once it is declared dead');
  la.close();
  await waitFor('every pending delivery', () => new Set(rx.received.slice(before).map((r) => r.headers['x-webhook-id'])).size >= 5, DEAD_MS + 30_000);
  t.ok(Date.now() - killedAt <= DEAD_MS + 30_000, 'within INSTANCE_DEAD_MS + 30 s');
});
