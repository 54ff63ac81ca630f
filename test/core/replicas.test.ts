/**
 * Read replicas (DATABASE_READ_URL) against a real streaming replica: a `pg_basebackup -R` of
 * the test cluster into a temporary folder, started with pg_ctl on a free port (as the
 * postgres user when run as root) and stopped at the end. With the replica's replay paused,
 * a write is visible on the primary only, so every read shows where it was served: REST GET
 * and GET of a stable function from the replica; `Prefer: consistency=strong`, the write's
 * mark (header, cookie, the client library) and POST from the primary; a replica lagging past
 * REPLICA_MAX_LAG_MS or down is skipped, never an error.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase, serverUrl } from '../helpers/database.ts';
import { waitFor } from '../webhooks/helpers.ts';
import { createClient } from '../../src/client/index.ts';

const asRoot = process.getuid?.() === 0;

function run(cmd: string, args: string[]): { status: number | null; out: string } {
  const r = asRoot ? spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { encoding: 'utf8' }) : spawnSync(cmd, args, { encoding: 'utf8' });
  return { status: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** The test cluster accepts a replication connection from loopback (added to its pg_hba.conf when missing). */
async function ensureReplicationAccess(): Promise<void> {
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  try {
    const [{ n }] = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_catalog.pg_hba_file_rules
       where 'replication' = any(database) and type in ('host', 'local') and auth_method = 'trust'`;
    if (n > 0) return;
    const [{ hba }] = await admin<{ hba: string }[]>`select current_setting('hba_file') as hba`;
    appendFileSync(hba, '\n# streaming replicas of the test cluster (test/core/replicas.test.ts)\nhost replication all 127.0.0.1/32 trust\n');
    await admin`select pg_catalog.pg_reload_conf()`;
  } finally {
    await admin.end();
  }
}

/** A streaming replica of the test cluster; stopped and removed when `t` ends. */
async function startReplica(t: { teardown(fn: () => unknown): void }): Promise<{ port: number; stop(): void }> {
  // pg_ctl of the test server's own major version (Debian: /usr/lib/postgresql/<major>/bin).
  const admin = postgres(serverUrl(), { max: 1, onnotice: () => {} });
  const [{ major }] = await admin<{ major: string }[]>`select (current_setting('server_version_num')::int / 10000)::text as major`;
  await admin.end();
  const BIN = `/usr/lib/postgresql/${major}/bin`;
  const dir = mkdtempSync(join(tmpdir(), 'plinth-replica-'));
  if (asRoot) chownSync(dir, Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim()), -1);
  chmodSync(dir, 0o700);
  const data = join(dir, 'data');
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    run(join(BIN, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']);
  };
  t.teardown(() => {
    stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const { hostname, port: primaryPort } = new URL(serverUrl());
  const backup = run('pg_basebackup', ['-h', hostname, '-p', primaryPort || '5432', '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '-c', 'fast']);
  if (backup.status !== 0) throw new Error(`pg_basebackup failed: ${backup.out}`);
  // Debian keeps the configuration outside the data folder: the replica gets its own.
  writeFileSync(join(data, 'postgresql.conf'), 'hot_standby = on\nmax_connections = 100\nshared_buffers = 16MB\nfsync = off\n');
  writeFileSync(join(data, 'pg_hba.conf'), 'local all all trust\nhost all all 127.0.0.1/32 trust\n');
  if (asRoot) spawnSync('chown', ['postgres', join(data, 'postgresql.conf'), join(data, 'pg_hba.conf')]);
  const port = await freePort();
  const started = run(join(BIN, 'pg_ctl'), ['-D', data, '-l', join(dir, 'log'), '-w', '-t', '60', '-o', `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir}`, 'start']);
  if (started.status !== 0) throw new Error(`the replica did not start: ${started.out}`);
  return { port, stop };
}

const pgOk = spawnSync('pg_basebackup', ['--version']).status === 0;
const skip = !pgOk && process.env.CI === undefined ? 'pg_basebackup is not installed' : false;

t.test('reads served by a real streaming replica, by the consistency rules', { skip, timeout: 120_000 }, async (t) => {
  await ensureReplicationAccess();
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`
    create table public.items (id int generated by default as identity primary key, v text);
    grant select, insert on public.items to anon, service_role;
    create function public.fresh_count() returns bigint language sql stable as $$ select count(*) from public.items where v = 'fresh' $$;
    create function public.fresh_count_now() returns bigint language sql volatile as $$ select count(*) from public.items where v = 'fresh' $$;
    grant execute on function public.fresh_count(), public.fresh_count_now() to anon;
  `);
  const replica = await startReplica(t);
  const replicaUrl = `postgres://postgres@127.0.0.1:${replica.port}/${db.name}`;
  const rsql = postgres(replicaUrl, { max: 1, onnotice: () => {} });
  t.teardown(() => rsql.end({ timeout: 1 }).catch(() => {}));
  await waitFor('the replica to have the table', async () => (await rsql`select to_regclass('public.items') is not null as ok`.catch(() => [{ ok: false }]))[0].ok, 30_000);
  // A replica behind the primary measures its lag from the last transaction it replayed, and
  // one that replayed none since it started has no lag to show (it serves no read). The table
  // came with the base backup: a transaction replayed now, unless the cluster's other
  // databases made one meanwhile (on a quiet machine they may not have).
  await db.sql`create table public.replayed ()`;
  await waitFor('the replica to replay a transaction', async () => (await rsql`select pg_catalog.pg_last_xact_replay_timestamp() is not null as ok`.catch(() => [{ ok: false }]))[0].ok, 30_000);
  // Replay paused: what is written now reaches the primary only.
  await rsql`select pg_catalog.pg_wal_replay_pause()`;

  const env = { DATABASE_READ_URL: replicaUrl, REPLICA_MAX_LAG_MS: '600000', READ_YOUR_WRITES_MS: '60000', DB_POOL_SIZE: '4' };
  const app = await startApp(t, { db, worker: false, env });
  const get = (a: TestApp, path: string, headers: Record<string, string> = {}) => a.call('GET', path, { apikey: a.anonKey, headers });

  const w = await app.call('POST', '/rest/v1/items', { token: app.serviceKey, apikey: app.anonKey, body: { v: 'fresh' } });
  t.equal(w.status, 201, 'the write goes to the primary');
  const mark = w.headers.get('plinth-wrote');
  t.match(mark, /^\d+$/, 'the write answers its mark');
  t.match(w.headers.get('set-cookie'), /^plinth_wrote=\d+; Path=\/; Max-Age=60; HttpOnly; SameSite=Lax$/, 'and sets it as a cookie');

  // The replica's lag is measured in the background: the first reads may go to the primary.
  await waitFor('a GET served by the replica (the fresh row not there)', async () => {
    const r = await get(app, '/rest/v1/items?v=eq.fresh');
    return r.status === 200 && r.text === '[]';
  });
  t.pass('REST GET is served by the replica');
  t.equal((await get(app, '/rest/v1/rpc/fresh_count')).text, '0', 'GET of a stable function: the replica');
  t.equal((await app.call('HEAD', '/rest/v1/items?v=eq.fresh', { apikey: app.anonKey, headers: { prefer: 'count=exact' } })).headers.get('content-range'), '*/0', 'HEAD: the replica');
  t.equal((await get(app, '/rest/v1/rpc/fresh_count_now')).text, '1', 'GET of a volatile function: the primary');
  t.equal((await app.call('POST', '/rest/v1/rpc/fresh_count', { apikey: app.anonKey, body: {} })).text, '1', 'POST of a function: the primary');
  t.equal((await get(app, '/rest/v1/items?v=eq.fresh&select=v', { prefer: 'consistency=strong' })).text, '[{"v":"fresh"}]', 'Prefer: consistency=strong reads the primary');
  t.equal((await get(app, '/rest/v1/items?v=eq.fresh&select=v', { 'plinth-wrote': mark! })).text, '[{"v":"fresh"}]', 'a client that wrote (header) reads the primary');
  t.equal((await get(app, '/rest/v1/items?v=eq.fresh&select=v', { cookie: `a=b; plinth_wrote=${mark}` })).text, '[{"v":"fresh"}]', 'a client that wrote (cookie) reads the primary');
  const old = String(Date.now() - 120_000);
  t.equal((await get(app, '/rest/v1/items?v=eq.fresh&select=v', { 'plinth-wrote': old })).text, '[]', 'a write older than READ_YOUR_WRITES_MS: the replica again');

  // The client library carries the mark of its own writes.
  const client = createClient(app.url, app.anonKey);
  const before = await client.from('items').select('v').eq('v', 'fresh');
  t.same(before.data, [], 'the client before it wrote: the replica');
  const ins = await client.from('items').insert({ v: 'fresh' });
  t.equal(ins.error, null, 'the client writes');
  const after = await client.from('items').select('v').eq('v', 'fresh');
  t.same(after.data, [{ v: 'fresh' }, { v: 'fresh' }], 'and then reads its writes from the primary');

  // A replica further behind than REPLICA_MAX_LAG_MS is skipped.
  const strict = await startApp(t, { db, worker: false, env: { ...env, REPLICA_MAX_LAG_MS: '1' } });
  for (let i = 0; i < 5; i++) {
    const r = await get(strict, '/rest/v1/items?v=eq.fresh&select=v');
    t.same(JSON.parse(r.text), [{ v: 'fresh' }, { v: 'fresh' }], `lagging replica skipped (read ${i + 1})`);
  }

  // A replica that is down is skipped: every read answers, from the primary.
  replica.stop();
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) {
    const r = await get(app, '/rest/v1/items?v=eq.fresh&select=v');
    statuses.push(r.status);
    if (i === 9) t.same(JSON.parse(r.text), [{ v: 'fresh' }, { v: 'fresh' }], 'the primary serves the reads');
  }
  t.same(statuses, Array(10).fill(200), 'no read failed while the replica was down');
  t.equal((await get(app, '/rest/v1/rpc/fresh_count')).text, '2', 'a stable function too');
});
