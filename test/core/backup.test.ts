/**
 * Backups of the embedded PostgreSQL (docs/operations.md#backups): with BACKUP_DIR set the
 * service archives WAL and takes a base backup; `npm run restore` to a point between two
 * writes gives a data folder on which `npm start` finds the first write and not the second.
 */
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { folderStore, listBackups, openBackupStore, prune, walUploader, type BackupStore } from '../../src/host/backup.ts';
import { createLogger } from '../../src/core/log.ts';
import S3rver from 's3rver';
import { Writable } from 'node:stream';
import { s3Store } from '../../src/host/backup-s3.ts';
import { startS3 } from '../storage/helpers.ts';
import { parseConfig } from '../../src/core/config.ts';
import { freePort } from '../helpers/ports.ts';

// Three cold starts of PostgreSQL (the service, the restore's recovery, the restored service) on a loaded machine.
t.setTimeout(400_000);

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const CHECKOUT = fileURLToPath(new URL('../..', import.meta.url));


interface Run {
  child: ChildProcess;
  out: () => string;
  exit: Promise<number | null>;
}

function run(cmd: string, args: string[], env: Record<string, string>): Run {
  const child = spawn(cmd, args, { cwd: CHECKOUT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env } });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, out: () => out, exit };
}

async function waitFor(check: () => boolean | Promise<boolean>, limitMs: number, what: () => string): Promise<void> {
  const until = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`not met in time: ${what()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Target {
  /** The settings naming where the backups go (and, for S3, the client's). */
  env: Record<string, string>;
  store: BackupStore;
  /** A WAL segment is in the store. */
  archived: (segment: string) => Promise<boolean>;
}

/** Writes, a point in time between them, the service stopped, `npm run restore` to that point, and `npm start` on the restored folder. */
async function pointInTime(t: Test, outer: string, target: Target): Promise<void> {
  const port = String(await freePort());
  const dataDir = join(outer, 'data');
  const first = run(process.execPath, [MAIN], { DATA_DIR: dataDir, PORT: port, ...target.env });
  t.teardown(() => first.child.kill('SIGKILL'));
  await waitFor(() => /SERVICE_ROLE_KEY=\S+\n/.test(first.out()), 120_000, first.out);
  // No base backup yet: the start takes one.
  await waitFor(() => /base backup taken/.test(first.out()), 180_000, first.out);
  const [backup] = await listBackups(target.store);
  t.ok(backup, 'a base backup is recorded');
  t.ok(await target.store.read(`base/${backup.name}/data/backup_label`), 'with its backup label');
  t.ok(await target.store.read(`base/${backup.name}/plinth/postgres.json`), 'and the password of the cluster');
  const url = /plinth listening on (\S+)/.exec(first.out())![1];
  const scrape = await fetch(url + '/metrics', { headers: { authorization: `Bearer ${/SERVICE_ROLE_KEY=(\S+)/.exec(first.out())![1]}` } });
  const last = /^plinth_backup_last_success_timestamp_seconds (\S+)$/m.exec(await scrape.text())?.[1];
  t.equal(Number(last), Date.parse(backup.stopped_at) / 1000, 'plinth_backup_last_success_timestamp_seconds says when it finished');

  const sql = postgres(/DATABASE_URL=(\S+)/.exec(first.out())![1], { max: 1, onnotice: () => {} });
  t.teardown(() => sql.end({ timeout: 1 }));
  await sql`create table public.notes (v text)`;
  await sql`insert into public.notes values ('first')`;
  // The point in time: after the first commit, before the second (PostgreSQL's clock, microseconds).
  const [{ at }] = await sql<Array<{ at: string }>>`select to_char(clock_timestamp() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at`;
  await sql`insert into public.notes values ('second')`;
  const [{ segment }] = await sql<Array<{ segment: string }>>`select pg_walfile_name(pg_switch_wal()) as segment`;
  await waitFor(() => target.archived(segment), 60_000, () => `segment ${segment} not archived`);
  await sql.end({ timeout: 1 });
  first.child.kill('SIGTERM');
  t.equal(await first.exit, 0, 'the service stops cleanly');

  const into = join(outer, 'restored');
  const early = run('npm', ['run', '--silent', 'restore', '--', '--to', '2001-01-01T00:00:00Z', '--into', into], target.env);
  t.equal(await early.exit, 1, 'a time before every base backup: exit 1');
  t.match(early.out(), /restore failed: no base backup in .* finished before 2001-01-01T00:00:00Z/, 'saying so');

  const restore = run('npm', ['run', '--silent', 'restore', '--', '--to', at, '--into', into], target.env);
  t.equal(await restore.exit, 0, `npm run restore exits 0 ${restore.out()}`);
  t.match(restore.out(), `restored to ${at} from the base backup ${backup.name}`);
  t.notOk(existsSync(join(into, 'postgres', 'recovery.signal')), 'the recovery is done');
  t.notOk(existsSync(join(into, 'wal-restore')), 'no fetched WAL is left behind');

  const second = run(process.execPath, [MAIN], { DATA_DIR: into, PORT: port });
  t.teardown(() => second.child.kill('SIGKILL'));
  await waitFor(() => /DATABASE_URL=(\S+)/.test(second.out()), 120_000, second.out);
  const restored = postgres(/DATABASE_URL=(\S+)/.exec(second.out())![1], { max: 1, onnotice: () => {} });
  t.teardown(() => restored.end({ timeout: 1 }));
  t.same(
    (await restored<Array<{ v: string }>>`select v from public.notes order by v`).map((r) => r.v),
    ['first'],
    'npm start on the restored folder finds the first write and not the second',
  );
  await restored.end({ timeout: 1 });
  second.child.kill('SIGTERM');
  t.equal(await second.exit, 0);
}

function tempOuter(t: Test): string {
  const outer = mkdtempSync(join(tmpdir(), 'plinth-backup-'));
  chmodSync(outer, 0o711); // the postgres system user (as root) passes through
  t.teardown(() => rmSync(outer, { recursive: true, force: true }));
  return outer;
}

t.test('BACKUP_DIR: a restore to a point between two writes finds the first and not the second', { timeout: 400_000 }, async (t) => {
  const outer = tempOuter(t);
  const backupDir = join(outer, 'backups');
  await pointInTime(t, outer, {
    env: { BACKUP_DIR: backupDir },
    store: folderStore(backupDir),
    archived: async (segment) => existsSync(join(backupDir, 'wal', segment)),
  });
});

t.test('BACKUP_S3_PREFIX: the same through S3, the WAL uploaded from the spool', { timeout: 400_000 }, async (t) => {
  const outer = tempOuter(t);
  const s3 = await startS3(t);
  const env = {
    BACKUP_S3_PREFIX: 'backups/plinth',
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: 'plinth-test',
    S3_ACCESS_KEY_ID: 'S3RVER',
    S3_SECRET_ACCESS_KEY: 'S3RVER',
    S3_FORCE_PATH_STYLE: 'true',
  };
  const store = (await openBackupStore(parseConfig(env)))!;
  t.teardown(() => store.close());
  t.equal(store.where, 's3://plinth-test/backups/plinth/');
  const spool = join(outer, 'data', 'wal-spool');
  await pointInTime(t, outer, {
    env,
    store,
    // In S3, and gone from the spool.
    archived: async (segment) => (await store.segments()).some((s) => s.name === segment) && !existsSync(join(spool, segment)),
  });
  t.same(readdirSync(spool), [], 'the spool keeps nothing once uploaded, also what PostgreSQL archived as it stopped');
});

/** The retention on a store: three base backups (10, 8 and 2 days old), an unfinished one, and WAL. */
async function retention(t: Test, store: BackupStore): Promise<void> {
  const now = Date.parse('2026-06-30T12:00:00Z');
  const day = 86_400_000;
  const backups = [
    { name: 'a', at: now - 10 * day, wal: '000000010000000000000002' },
    { name: 'b', at: now - 8 * day, wal: '000000010000000000000005' },
    { name: 'c', at: now - 2 * day, wal: '000000010000000000000009' },
  ];
  for (const b of backups) {
    const iso = new Date(b.at).toISOString();
    await store.write(`base/${b.name}/data/PG_VERSION`, '18\n');
    await store.write(`base/${b.name}/backup.json`, JSON.stringify({ started_at: iso, stopped_at: iso, start_wal: b.wal }));
  }
  await store.write('base/d/data/PG_VERSION', '18\n');
  for (const f of ['000000010000000000000001', '000000010000000000000004', '000000010000000000000005', '00000001000000000000000A', '00000002.history', '000000020000000000000003']) {
    await store.write(`wal/${f}`, '');
  }
  t.same(await prune(store, 7, now), { backups: 1, segments: 3 });
  t.same((await store.backups()).sort(), ['b', 'c'], 'the newest base backup before the window stays, older ones and unfinished copies go');
  t.equal(await store.read('base/a/data/PG_VERSION'), null, 'with all their files');
  t.same(
    (await store.segments()).map((s) => s.name).sort(),
    ['000000010000000000000005', '00000001000000000000000A', '00000002.history'],
    'WAL older than the oldest kept base backup goes; history files stay',
  );
}

t.test('retention keeps what a restore inside the window needs, in a folder', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-prune-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  await retention(t, folderStore(dir));
});

t.test('retention keeps what a restore inside the window needs, in S3', async (t) => {
  const s3 = await startS3(t);
  const cfg = { endpoint: s3.endpoint, bucket: 'plinth-test', region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', forcePathStyle: true };
  const store = s3Store(cfg, 'kept/');
  const other = s3Store(cfg, 'kept-not/');
  t.teardown(() => Promise.all([store.close(), other.close()]));
  await other.write('base/a/backup.json', 'x');
  await retention(t, store);
  t.equal(await other.read('base/a/backup.json'), 'x', 'nothing outside the prefix is touched');
});

t.test('the WAL uploader keeps the spool while S3 is unreachable, and empties it once S3 answers', async (t) => {
  const spool = mkdtempSync(join(tmpdir(), 'plinth-spool-'));
  const s3dir = mkdtempSync(join(tmpdir(), 'plinth-s3rver-'));
  t.teardown(() => {
    rmSync(spool, { recursive: true, force: true });
    rmSync(s3dir, { recursive: true, force: true });
  });
  const port = await freePort();
  const store = s3Store({ endpoint: `http://127.0.0.1:${port}`, bucket: 'plinth-test', region: 'us-east-1', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', forcePathStyle: true }, 'w/');
  t.teardown(() => store.close());
  const lines: Array<{ msg: string }> = [];
  const log = createLogger('info', {
    destination: new Writable({
      write(chunk, _enc, done) {
        for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l) as { msg: string });
        done();
      },
    }),
  });
  writeFileSync(join(spool, '000000010000000000000001'), 'one');
  writeFileSync(join(spool, '000000010000000000000002.part'), 'being written');
  const uploader = walUploader(store, spool, log, 50);
  t.teardown(() => uploader.stop());
  await waitFor(() => lines.some((l) => /WAL upload to S3 failed/.test(l.msg)), 30_000, () => JSON.stringify(lines));
  t.ok(existsSync(join(spool, '000000010000000000000001')), 'the segment waits in the spool');

  const server = new S3rver({ address: '127.0.0.1', port, silent: true, directory: s3dir, configureBuckets: [{ name: 'plinth-test' }] });
  await server.run();
  t.teardown(() => server.close());
  await waitFor(() => !existsSync(join(spool, '000000010000000000000001')), 30_000, () => JSON.stringify(lines));
  t.equal(await store.read('wal/000000010000000000000001'), 'one', 'it is in S3 once gone from the spool');
  t.ok(existsSync(join(spool, '000000010000000000000002.part')), 'a copy in progress is left alone');
  t.same((await store.segments()).map((s) => s.name), ['000000010000000000000001']);
  await waitFor(() => lines.some((l) => /WAL uploads to S3 work again/.test(l.msg)), 30_000, () => JSON.stringify(lines));
  t.equal(lines.filter((l) => /WAL upload to S3 failed/.test(l.msg)).length, 1, 'one error line for the outage, not one per try');
});

t.test('backup settings', async (t) => {
  t.throws(() => parseConfig({ BACKUP_DIR: '/b', DATABASE_URL: 'postgres://x@h/db' }), /BACKUP_DIR backs up the embedded PostgreSQL only .*pgBackRest/);
  t.throws(() => parseConfig({ BACKUP_DIR: "/b'; rm -rf /" }), /BACKUP_DIR must not contain quotes/);
  t.equal(parseConfig({}).backupDir, null);
  t.equal(parseConfig({}).backupIntervalMs, 86_400_000, 'daily by default');
  t.equal(parseConfig({ BACKUP_SCHEDULE: 'hourly' }).backupIntervalMs, 3_600_000);
  t.equal(parseConfig({ BACKUP_SCHEDULE: '6h' }).backupIntervalMs, 6 * 3_600_000);
  t.equal(parseConfig({ BACKUP_SCHEDULE: '30m' }).backupIntervalMs, 30 * 60_000);
  t.throws(() => parseConfig({ BACKUP_SCHEDULE: 'weekly' }), /BACKUP_SCHEDULE must be daily, hourly/);
  t.equal(parseConfig({ BACKUP_SCHEDULE: '168h' }).backupIntervalMs, 7 * 86_400_000, 'a week at most');
  t.throws(() => parseConfig({ BACKUP_SCHEDULE: '169h' }), /BACKUP_SCHEDULE must be .* up to a week/);
  t.equal(parseConfig({}).backupRetentionDays, 7);
  const s3 = { S3_BUCKET: 'b', BACKUP_S3_PREFIX: 'backups/plinth' };
  t.equal(parseConfig(s3).backupS3Prefix, 'backups/plinth/', 'a prefix ends with /');
  t.equal(parseConfig(s3).s3?.bucket, 'b', 'the S3 settings are read for the backups alone');
  t.equal(parseConfig(s3).storageBackend, 'database', 'and the storage back end stays as it was');
  t.throws(() => parseConfig({ BACKUP_S3_PREFIX: 'backups/' }), /S3_BUCKET is required when BACKUP_S3_PREFIX is set/);
  t.throws(() => parseConfig({ ...s3, BACKUP_DIR: '/b' }), /BACKUP_S3_PREFIX and BACKUP_DIR name two places for the backups: set one/);
  t.throws(() => parseConfig({ ...s3, DATABASE_URL: 'postgres://x@h/db' }), /BACKUP_S3_PREFIX backs up the embedded PostgreSQL only/);
  for (const bad of ['/abs', 'a/../b', 'a b', "a'b"]) t.throws(() => parseConfig({ ...s3, BACKUP_S3_PREFIX: bad }), /BACKUP_S3_PREFIX must be a key prefix/, bad);
  t.throws(() => parseConfig({ BACKUP_RETENTION_DAYS: '0' }), /BACKUP_RETENTION_DAYS/);
});

t.test('npm run restore refuses, in one line, what it cannot do', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-restore-args-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'kept'), '');
  const cases: Array<[Record<string, string>, string[], RegExp]> = [
    [{}, ['--to', '2026-01-01T00:00:00Z', '--into', join(dir, 'new')], /^restore failed: invalid configuration: BACKUP_DIR is not set/],
    [{ BACKUP_DIR: dir }, ['--to', 'yesterday', '--into', join(dir, 'new')], /^restore failed: --to: not a timestamp: yesterday/],
    [{ BACKUP_DIR: dir }, ['--to', '2026-01-01T00:00:00Z', '--into', dir], /^restore failed: --into: .* is not empty; name a new folder/],
    [{ BACKUP_DIR: dir }, ['--into', join(dir, 'new')], /^usage: npm run restore -- --to <timestamp> --into <new folder>/],
    [
      { BACKUP_S3_PREFIX: 'b/', S3_BUCKET: 'x', S3_ENDPOINT: `http://127.0.0.1:${await freePort()}`, S3_ACCESS_KEY_ID: 'k', S3_SECRET_ACCESS_KEY: 's', S3_FORCE_PATH_STYLE: 'true' },
      ['--to', '2026-01-01T00:00:00Z', '--into', join(dir, 'new')],
      /^restore failed: S3: connect ECONNREFUSED 127\.0\.0\.1:\d+$/m,
    ],
  ];
  for (const [env, args, expected] of cases) {
    const r = run('npm', ['run', '--silent', 'restore', '--', ...args], env);
    t.equal(await r.exit, 1, `exit 1: ${args.join(' ')}`);
    t.match(r.out(), expected);
    t.equal(r.out().trim().split('\n').length, 1, 'one line, no stack');
  }
  t.notOk(existsSync(join(dir, 'new')), 'nothing was created');
});
