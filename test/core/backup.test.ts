/**
 * Backups of the embedded PostgreSQL (docs/operations.md#backups): with BACKUP_DIR set the
 * service archives WAL and takes a base backup; `npm run restore` to a point between two
 * writes gives a data folder on which `npm start` finds the first write and not the second.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer } from 'node:net';
import postgres from 'postgres';
import { listBackups, prune } from '../../src/core/backup.ts';
import { parseConfig } from '../../src/core/config.ts';

// Three cold starts of PostgreSQL (the service, the restore's recovery, the restored service) on a loaded machine.
t.setTimeout(400_000);

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const CHECKOUT = fileURLToPath(new URL('../..', import.meta.url));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

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

t.test('a restore to a point between two writes finds the first and not the second', { timeout: 400_000 }, async (t) => {
  const outer = mkdtempSync(join(tmpdir(), 'plinth-backup-'));
  chmodSync(outer, 0o711); // the postgres system user (as root) passes through
  t.teardown(() => rmSync(outer, { recursive: true, force: true }));
  const backupDir = join(outer, 'backups');
  const port = String(await freePort());

  const first = run(process.execPath, [MAIN], { DATA_DIR: join(outer, 'data'), BACKUP_DIR: backupDir, PORT: port });
  t.teardown(() => first.child.kill('SIGKILL'));
  await waitFor(() => /SERVICE_ROLE_KEY=\S+\n/.test(first.out()), 120_000, first.out);
  // No base backup yet: the start takes one.
  await waitFor(() => /base backup taken/.test(first.out()), 120_000, first.out);
  const [backup] = listBackups(backupDir);
  t.ok(backup, 'a base backup is recorded');
  t.ok(existsSync(join(backupDir, 'base', backup.name, 'data', 'backup_label')), 'with its backup label');
  t.ok(existsSync(join(backupDir, 'base', backup.name, 'plinth', 'postgres.json')), 'and the password of the cluster');
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
  await waitFor(
    async () => ((await sql<Array<{ w: string | null }>>`select last_archived_wal as w from pg_stat_archiver`)[0].w ?? '') >= segment,
    60_000,
    () => `segment ${segment} not archived`,
  );
  t.ok(existsSync(join(backupDir, 'wal', segment)), 'the WAL with both writes is archived in BACKUP_DIR/wal');
  await sql.end({ timeout: 1 });
  first.child.kill('SIGTERM');
  t.equal(await first.exit, 0, 'the service stops cleanly');

  const into = join(outer, 'restored');
  const early = run('npm', ['run', '--silent', 'restore', '--', '--to', '2001-01-01T00:00:00Z', '--into', into], { BACKUP_DIR: backupDir });
  t.equal(await early.exit, 1, 'a time before every base backup: exit 1');
  t.match(early.out(), /restore failed: no base backup in .* finished before 2001-01-01T00:00:00Z/, 'saying so');

  const restore = run('npm', ['run', '--silent', 'restore', '--', '--to', at, '--into', into], { BACKUP_DIR: backupDir });
  t.equal(await restore.exit, 0, `npm run restore exits 0 ${restore.out()}`);
  t.match(restore.out(), `restored to ${at} from the base backup ${backup.name}`);
  t.notOk(existsSync(join(into, 'postgres', 'recovery.signal')), 'the recovery is done');

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
});

t.test('retention keeps what a restore inside the window needs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-prune-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const now = Date.parse('2026-06-30T12:00:00Z');
  const day = 86_400_000;
  const backups = [
    { name: 'a', at: now - 10 * day, wal: '000000010000000000000002' },
    { name: 'b', at: now - 8 * day, wal: '000000010000000000000005' },
    { name: 'c', at: now - 2 * day, wal: '000000010000000000000009' },
  ];
  for (const b of backups) {
    mkdirSync(join(dir, 'base', b.name), { recursive: true });
    const iso = new Date(b.at).toISOString();
    writeFileSync(join(dir, 'base', b.name, 'backup.json'), JSON.stringify({ started_at: iso, stopped_at: iso, start_wal: b.wal }));
  }
  mkdirSync(join(dir, 'base', 'd.partial'));
  mkdirSync(join(dir, 'wal'));
  for (const f of ['000000010000000000000001', '000000010000000000000004', '000000010000000000000005', '00000001000000000000000A', '00000002.history', '000000020000000000000003']) {
    writeFileSync(join(dir, 'wal', f), '');
  }
  t.same(await prune(dir, 7, now), { backups: 1, segments: 3 });
  t.same(readdirSync(join(dir, 'base')).sort(), ['b', 'c'], 'the newest base backup before the window stays, older ones and unfinished copies go');
  t.same(readdirSync(join(dir, 'wal')).sort(), ['000000010000000000000005', '00000001000000000000000A', '00000002.history'], 'WAL older than the oldest kept base backup goes; history files stay');
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
  ];
  for (const [env, args, expected] of cases) {
    const r = run('npm', ['run', '--silent', 'restore', '--', ...args], env);
    t.equal(await r.exit, 1, `exit 1: ${args.join(' ')}`);
    t.match(r.out(), expected);
    t.equal(r.out().trim().split('\n').length, 1, 'one line, no stack');
  }
  t.notOk(existsSync(join(dir, 'new')), 'nothing was created');
});
