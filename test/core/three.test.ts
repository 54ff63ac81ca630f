/**
 * Three instances, each its own process (`node src/main.ts`), behind Debian's HAProxy (round
 * robin, health-checked on /ready) on one database through PgBouncer in transaction mode
 * (LISTEN and the workers on the direct URL): a user signed up on one signs in on another,
 * refresh-token reuse is detected across instances, the auth rate limit counts across them,
 * a table created in SQL is served by all three, a webhook fired through one is delivered
 * once, a live subscriber on one sees writes made through another with no seq gap, broadcast
 * and presence cross instances. Then one (C) is killed with SIGKILL while its drain holds
 * webhook attempts (the receiver answers nothing until after the kill) and subscribers of the
 * client library are connected to it through the proxy: every pending delivery arrives within
 * INSTANCE_DEAD_MS + 30 s (the attempts C held twice, marked repeat_possible), C's subscribers
 * reconnect through the proxy and resume with every change, and no request through the proxy
 * fails.
 */
import t from 'tap';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '../helpers/database.ts';
import { TEST_JWT_SECRET } from '../helpers/app.ts';
import { freePort, PGBOUNCER, startPgbouncer } from '../helpers/pgbouncer.ts';
import WebSocket from 'ws';
import { startReceiver, waitFor, type Received } from '../webhooks/helpers.ts';
import { open } from '../live/helpers.ts';
import type { TestApp } from '../helpers/app.ts';
import { parseConfig, resolveSecrets } from '../../src/core/config.ts';
import { createClient, type LiveOptions, type LiveQuery, type Row } from '../../src/client/index.ts';

const HAPROXY = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => existsSync(p));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DEAD_MS = 3000;
const RATE = 8;

/** A socket of the client library's live query: which server HAProxy sent it to, and its deltas. */
interface Tracked extends WebSocket {
  server?: string;
  deltas: { seq: number; ids: number[] }[];
}

interface Sub {
  q: LiveQuery;
  sockets: Tracked[];
  errors: string[];
}

/** A WebSocket class for `live()` that records each socket it makes in `into`. */
function trackedSocket(into: Tracked[]) {
  return class extends WebSocket {
    server?: string;
    deltas: { seq: number; ids: number[] }[] = [];
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols);
      into.push(this);
      this.on('upgrade', (res) => (this.server = String(res.headers['x-served-by'])));
      this.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString('utf8'));
        if (m.type === undefined && typeof m.seq === 'number') this.deltas.push({ seq: m.seq, ids: (m.inserted ?? []).map((r: Row) => r.id as number) });
      });
    }
  };
}

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
  timeout tunnel 10m
  retries 3
  option redispatch
frontend plinth
  bind 127.0.0.1:${listen}
  default_backend instances
backend instances
  balance roundrobin
  option httpchk GET /ready
  retry-on conn-failure empty-response response-timeout
  http-response set-header x-served-by %s
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
    // Held attempts (below) wait for the receiver's answer until the test releases them.
    WEBHOOK_TIMEOUT_MS: '60000',
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
  await waitFor('no webhook attempt left', async () => {
    const [{ n }] = await db.sql<{ n: number }[]>`
      select ((select count(*) from webhooks_private.outbox) + (select count(*) from webhooks_private.batches))::int as n`;
    return n === 0;
  }, 30_000);
  t.equal(rx.received.length, 1, 'delivered exactly once by three drains');

  // Live queries, broadcast and presence across the three.
  await db.sql.unsafe(`select live.subscribe('room', 'select id, v from things')`);
  const ws = (inst: Instance) => open({ url: inst.url } as TestApp, '/ws/room', { query: { apikey: config.anonKey } });
  const [la, lb, lc] = [await ws(a), await ws(b), await ws(c)];
  const [ida, , idc] = [(await la.next()).client_id, (await lb.next()).client_id, (await lc.next()).client_id];
  for (let i = 10; i < 13; i++) t.equal((await call(c.url, 'POST', '/rest/v1/things', { id: i, v: 'live' })).status, 201, `write ${i} through C`);
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

  // Subscribers through the proxy, with the client library (its reconnect and resume): opened
  // until one lands on C. HAProxy names the server that answered each upgrade.
  const proxied: string[] = [];
  const client = createClient(proxy, config.anonKey, {
    auth: { persistSession: false },
    fetch: async (input, init) => {
      const r = await fetch(input, init);
      proxied.push(`${init?.method ?? 'GET'} ${r.url} ${r.status}`);
      return r;
    },
  });
  const subs: Sub[] = [];
  while (!subs.some((s) => s.sockets[0].server === 'i2')) {
    if (subs.length === 6) throw new Error(`no subscriber through the proxy landed on C: ${subs.map((s) => s.sockets[0].server).join(',')}`);
    const sockets: Tracked[] = [];
    const q = client.live('room', {
      refetch: () => client.from('things').select('id, v'),
      minDelayMs: 50,
      maxDelayMs: 500,
      WebSocket: trackedSocket(sockets) as unknown as LiveOptions['WebSocket'],
    });
    const sub = { q, sockets, errors: [] as string[] };
    q.on('error', (e) => sub.errors.push(e.message));
    subs.push(sub);
    await waitFor('a subscriber through the proxy loaded', () => q.status === 'subscribed' && q.snapshots === 1 && q.rows.length > 0, 20_000);
    // The next one lands one server further: each subscriber takes two turns (upgrade,
    // presence; its result comes on the socket), two more requests make four.
    for (let i = 0; i < 2; i++) t.equal((await call(proxy, 'GET', '/ready')).status, 200, 'a request through the proxy between subscribers');
  }
  const subC = subs.find((s) => s.sockets[0].server === 'i2')!;
  const survivors = subs.filter((s) => s !== subC);
  t.ok(survivors.length > 0, `subscribers through the proxy on ${subs.map((s) => s.sockets[0].server).join(', ')}`);

  // C takes deliveries that it still holds when it dies: the receiver answers nothing, and C
  // takes writes until its drain holds a batch of their attempts.
  const cName = `${hostname()}:${ports[2]}`;
  // Registered by the instance's heartbeats (its first one at its start, then every DEAD_MS / 5).
  const cWorkers = await waitFor("C's worker in the registry", async () => {
    const [r] = await db.sql<{ worker_ids: string[] }[]>`select worker_ids from plinth_private.instances where name = ${cName}`;
    return r !== undefined && r.worker_ids.length > 0 ? r.worker_ids : null;
  }, 10_000).catch(() => [] as string[]);
  t.ok(cWorkers.length > 0, "C's worker is registered");
  const lockedByC = () => db.sql<{ id: string; payload: { items: { d: string }[] } }[]>`
    select b.id, jsonb_build_object('items', b.items) as payload from webhooks_private.batches b
      join plinth_private.instances i on i.id = b.instance_id where i.name = ${cName}`;
  const bodyId = (r: Received) => (r.body as { record?: { id?: number } }).record?.id;
  rx.answer = () => 'hang';
  const written: number[] = [];
  let next = 100;
  for (;;) {
    if (next === 130) throw new Error("C's drain took none of 30 deliveries");
    const id = next++;
    t.equal((await call(c.url, 'POST', '/rest/v1/things', { id, v: 'held' })).status, 201, `write ${id} through C`);
    written.push(id);
    await waitFor(`the delivery of ${id} is held by the receiver`, () => rx.received.some((r) => bodyId(r) === id), 30_000);
    if ((await lockedByC()).length > 0) break;
  }
  const held = await lockedByC();
  t.ok(held.length > 0, `C's drain holds ${held.length} batch(es) of attempts right before the kill`);
  const heldDeliveries = new Set(held.flatMap((j) => j.payload.items.map((i) => i.d)));
  const exited = new Promise((r) => c.child.once('exit', r));
  c.child.kill('SIGKILL');
  await exited;
  const killedAt = Date.now();
  // The receiver answers again: the attempts A and B hold succeed; C's died with it.
  rx.answer = () => 200;
  rx.release(200);

  // C's subscriber through the proxy loses its socket, reconnects through the proxy to A or B
  // and resumes. Meanwhile writes and reads go through the proxy: every one answers 2xx (a
  // request sent to the dead C is retried on another server). The outage lasts until the
  // subscriber is back and C is declared dead; five more writes follow.
  const through: number[] = [];
  const write = async (v: string) => {
    const id = next++;
    const r = await call(proxy, 'POST', '/rest/v1/things', { id, v });
    through.push(r.status);
    if (r.status === 201) written.push(id);
    through.push((await call(proxy, 'GET', '/rest/v1/things?select=id&limit=1')).status);
  };
  const cGone = async () => (await db.sql`select 1 from plinth_private.instances where name = ${cName}`).length === 0;
  const resumed = () => subC.sockets.length >= 2 && subC.q.status === 'subscribed' && subC.q.snapshots >= 2;
  for (;;) {
    await write('outage');
    if (resumed() && (await cGone())) break;
    if (Date.now() > killedAt + DEAD_MS + 30_000) throw new Error(`the outage did not end: resumed ${resumed()}, sockets ${subC.sockets.length}`);
  }
  for (let i = 0; i < 5; i++) await write('after');
  t.ok(through.length >= 12, `${through.length} requests through the proxy during and after the outage`);
  t.same(
    through.filter((s) => s < 200 || s > 299),
    [],
    'every request through the proxy answered 2xx',
  );
  t.same(
    proxied.filter((p) => !/ 2\d\d$/.test(p)),
    [],
    "and every request of the client library's subscribers (presence)",
  );

  // C's raw subscriber saw its socket end; A's sees C's presence leave once C is declared dead.
  await lc.closed;
  t.pass("the killed instance's subscriber is disconnected");
  await la.next((m) => m.type === 'presence_leave' && m.client_id === idc, DEAD_MS + 30_000);
  t.pass('its presence leaves once it is declared dead');
  la.close();

  // Every subscriber ends with every change, in order, with no seq gap.
  const expected = async () => (await db.sql<{ id: number; v: string }[]>`select id, v from things order by id`).map((r) => ({ ...r }));
  const want = await expected();
  t.ok(written.every((id) => want.some((r) => r.id === id)), 'every write is in the table');
  const sorted = (rows: Row[]) => [...rows].sort((x, y) => (x.id as number) - (y.id as number));
  const idsOf = (rows: Row[]) => rows.map((r) => r.id as number);
  for (const sub of subs) {
    const name = sub === subC ? "C's subscriber" : `the subscriber on ${sub.sockets[0].server}`;
    // Every change is there (a lost one never comes: the wait times out and the rows show it).
    await waitFor(`${name} has every change`, () => want.every((r) => idsOf(sub.q.rows).includes(r.id)) && sub.q.status === 'subscribed', 30_000).catch((e: Error) =>
      t.fail(e.message, { rows: idsOf(sorted(sub.q.rows)), snapshots: sub.q.snapshots, refetches: sub.q.refetches, sockets: sub.sockets.map((k) => ({ server: k.server, deltas: k.deltas })) }),
    );
    const unique = sorted(sub.q.rows).filter((r, i, all) => i === 0 || all[i - 1].id !== r.id);
    t.same(unique, want, `${name}: every row of the table, as it is`);
    // The resume loads the stored result with the seq it is at: a delta it already holds,
    // however late it reaches the socket, is dropped by its seq (decision 0300).
    t.same(sorted(sub.q.rows), want, `${name}: no row twice`);
    const last = sub.sockets.at(-1)!;
    const seqs = last.deltas.map((d) => d.seq);
    t.ok(seqs.length > 0, `${name}: deltas on its ${sub === subC ? 'resumed ' : ''}socket`);
    t.same(seqs, seqs.map((_, i) => seqs[0] + i), `${name}: no seq gap`);
    const got = last.deltas.flatMap((d) => d.ids);
    t.same(got, [...got].sort((x, y) => x - y), `${name}: changes in order`);
    t.same(got, written.filter((id) => id >= got[0]), `${name}: every change since its first delta, once`);
  }
  t.not(subC.sockets.at(-1)!.server, 'i2', "C's subscriber reconnected through the proxy to A or B");
  t.equal(subC.q.snapshots, 2, "C's subscriber loaded once more at its resume, and never for a gap");
  for (const s of subs) t.equal(s.q.refetches, 0, 'the results came on the socket: never a refetch over REST');
  for (const s of survivors) {
    t.equal(s.sockets.length, 1, 'a subscriber on A or B kept its socket');
    t.equal(s.q.snapshots, 1, 'and never loaded again');
    t.same(s.errors, [], 'and saw no error');
  }
  for (const s of subs) s.q.close();

  // Every pending delivery arrives within INSTANCE_DEAD_MS + 30 s of the kill: each write's at
  // least once; those C held when it died twice (C's cut attempt, then the retry), marked
  // repeat_possible in the delivery log; no other attempt is.
  const log = async () => {
    const r = await call(proxy, 'GET', `/rest/v1/webhooks/${hook.body.id}/deliveries?limit=1000`, undefined, config.serviceRoleKey);
    if (r.status !== 200) throw new Error(`deliveries: ${r.status}`);
    return r.body as { id: string; state: string; attempts: { attempt: number; status: number | null; repeat_possible: boolean }[] }[];
  };
  const writtenIds = new Set(written);
  await waitFor(
    'every pending delivery',
    async () => {
      if (!written.every((id) => rx.received.some((r) => bodyId(r) === id))) return false;
      const mine = (await log()).filter((d) => d.state !== 'delivered');
      return mine.length === 0;
    },
    Math.max(1, killedAt + DEAD_MS + 30_000 - Date.now()),
  );
  t.pass('every pending delivery arrived within INSTANCE_DEAD_MS + 30 s of the kill');
  const deliveriesLog = await log();
  const count = (d: string) => rx.received.filter((r) => r.headers['x-webhook-id'] === d).length;
  for (const d of heldDeliveries) {
    const entry = deliveriesLog.find((e) => e.id === d);
    t.ok(entry, `delivery ${d} held by C is in the log`);
    t.same(
      entry?.attempts.map((a) => [a.attempt, a.status, a.repeat_possible]),
      [[1, 200, true]],
      'the attempt C held ran again on a survivor, marked repeat_possible',
    );
    t.equal(count(d), 2, 'the receiver saw it twice (the attempt cut by the kill, then its retry)');
  }
  const others = deliveriesLog.filter((e) => !heldDeliveries.has(e.id));
  t.same(others.filter((e) => e.attempts.some((a) => a.repeat_possible)), [], 'no other attempt is marked repeat_possible');
  t.ok(
    [...writtenIds].every((id) => rx.received.some((r) => bodyId(r) === id)),
    'each write delivered at least once',
  );
});
