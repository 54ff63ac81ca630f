/**
 * Backups of the embedded PostgreSQL (docs/operations.md#backups), with BACKUP_DIR set:
 * - WAL: the embedded server's archive_command copies every finished segment into
 *   BACKUP_DIR/wal (src/core/embedded.ts, archiveSettings);
 * - base backups: every BACKUP_SCHEDULE, `pg_backup_start` / a file copy of the data folder
 *   / `pg_backup_stop` (the embedded build has no pg_basebackup) into
 *   BACKUP_DIR/base/<time>/: `data/` (with its backup_label), `plinth/` (postgres.json and
 *   the development secret, so that a restore needs nothing else) and `backup.json`;
 * - retention: base backups that finished more than BACKUP_RETENTION_DAYS ago go, except
 *   the newest of them (a restore to a point inside the window starts from it), and the WAL
 *   segments older than the oldest kept base backup go with them;
 * - restore (`npm run restore`, scripts/restore.ts): the newest base backup finished before
 *   the target, copied into a new data folder with recovery.signal, restore_command and
 *   recovery_target_time, and recovered there once, so that `npm start` starts on it.
 */
import { appendFileSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { copyFile, cp, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import type { Logger } from './log.ts';
import { embeddedBinaries, runToReady } from './embedded.ts';

/** What a base backup records next to its copy. */
export interface BackupInfo {
  /** The folder name under BACKUP_DIR/base. */
  name: string;
  started_at: string;
  stopped_at: string;
  /** The first WAL segment a restore from it needs. */
  start_wal: string;
}

/** Files of DATA_DIR/postgres that a base backup leaves out (PostgreSQL's own list), and folders it keeps empty. */
const SKIP_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map', 'pg_internal.init', 'recovery.signal', 'standby.signal']);
const EMPTY_DIRS = new Set(['pg_wal', 'pg_replslot', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_stat_tmp', 'pg_subtrans']);
/** The files of DATA_DIR a restore needs besides the database: its password and port, the development secret and keys. */
const PLINTH_FILES = /^(postgres\.json|jwt-secret\.json|keys-[0-9a-f]+\.json)$/;
const SEGMENT = /^[0-9A-F]{24}(\.partial|\.[0-9A-F]{8}\.backup)?$/;

/** A UTC time as a folder name that sorts in time order: 20261126T011500Z. */
function stamp(d: Date): string {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

/** Copy a folder, tolerating files that PostgreSQL removes meanwhile (the backup's WAL covers them). */
async function copyTree(from: string, to: string, top: boolean, signal?: AbortSignal): Promise<void> {
  signal?.throwIfAborted();
  await mkdir(to, { recursive: true, mode: 0o700 });
  let entries;
  try {
    entries = await readdir(from, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  for (const e of entries) {
    signal?.throwIfAborted();
    const src = join(from, e.name);
    const dst = join(to, e.name);
    if (e.isDirectory()) {
      if (top && EMPTY_DIRS.has(e.name)) await mkdir(dst, { mode: 0o700 });
      else await copyTree(src, dst, false, signal);
    } else if (e.isFile() && !SKIP_FILES.has(e.name) && !e.name.startsWith('pgsql_tmp')) {
      try {
        await copyFile(src, dst);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }
}

/** The base backups of BACKUP_DIR, oldest first (folders without backup.json are unfinished). */
export function listBackups(backupDir: string): BackupInfo[] {
  const base = join(backupDir, 'base');
  if (!existsSync(base)) return [];
  const out: BackupInfo[] = [];
  for (const name of readdirSync(base)) {
    try {
      out.push({ ...(JSON.parse(readFileSync(join(base, name, 'backup.json'), 'utf8')) as BackupInfo), name });
    } catch {
      /* unfinished */
    }
  }
  return out.sort((a, b) => Date.parse(a.stopped_at) - Date.parse(b.stopped_at));
}

export interface BaseBackupOptions {
  backupDir: string;
  /** DATA_DIR: its postgres/ folder is copied, and its plinth files. */
  dataDir: string;
  /** A superuser's URL of the embedded server. */
  adminUrl: string;
  /** Aborts a backup in progress (the service is stopping). */
  signal?: AbortSignal;
}

/** Take one base backup; returns what it recorded. */
export async function baseBackup(o: BaseBackupOptions): Promise<BackupInfo> {
  const started = new Date();
  const name = stamp(started);
  const base = join(o.backupDir, 'base');
  const partial = join(base, `${name}.partial`);
  await rm(partial, { recursive: true, force: true });
  await mkdir(partial, { recursive: true, mode: 0o700 });
  // pg_backup_start and pg_backup_stop must run in the same session (one connection, no
  // transaction around the copy: it would hold back vacuum meanwhile). A session that ends
  // between them ends the backup.
  const sql = postgres(o.adminUrl, { max: 1, onnotice: () => {} });
  // A stop ends the session, which also ends pg_backup_stop's wait for an archive that fails.
  const endSession = () => void sql.end({ timeout: 0 });
  o.signal?.addEventListener('abort', endSession, { once: true });
  try {
    await sql`select pg_backup_start(${`plinth ${name}`}, true)`;
    await copyTree(join(o.dataDir, 'postgres'), join(partial, 'data'), true, o.signal);
    // true: wait until the WAL the backup needs is archived.
    const [info] = await sql<Array<{ labelfile: string }>>`select labelfile from pg_backup_stop(true)`;
    const startWal = /START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)/.exec(info.labelfile)?.[1];
    if (startWal === undefined) throw new Error('base backup: no start WAL location in the backup label');
    await writeFile(join(partial, 'data', 'backup_label'), info.labelfile, { mode: 0o600 });
    await mkdir(join(partial, 'plinth'), { mode: 0o700 });
    for (const f of readdirSync(o.dataDir)) if (PLINTH_FILES.test(f)) await copyFile(join(o.dataDir, f), join(partial, 'plinth', f));
    const recorded: BackupInfo = { name, started_at: started.toISOString(), stopped_at: new Date().toISOString(), start_wal: startWal };
    await writeFile(join(partial, 'backup.json'), JSON.stringify(recorded, null, 2) + '\n', { mode: 0o600 });
    await rm(join(base, name), { recursive: true, force: true });
    await rename(partial, join(base, name));
    return recorded;
  } catch (err) {
    await rm(partial, { recursive: true, force: true });
    throw err;
  } finally {
    o.signal?.removeEventListener('abort', endSession);
    await sql.end({ timeout: 5 });
  }
}

/**
 * Remove what a restore inside the last `days` days does not need: base backups finished
 * before the window except the newest of those, unfinished copies, and WAL segments older
 * than the oldest base backup kept. Returns what went.
 */
export async function prune(backupDir: string, days: number, now = Date.now()): Promise<{ backups: number; segments: number }> {
  const all = listBackups(backupDir);
  const cutoff = now - days * 86_400_000;
  const before = all.filter((b) => Date.parse(b.stopped_at) < cutoff);
  const keep = new Set([...all.filter((b) => Date.parse(b.stopped_at) >= cutoff), ...before.slice(-1)].map((b) => b.name));
  let backups = 0;
  const base = join(backupDir, 'base');
  for (const name of existsSync(base) ? readdirSync(base) : []) {
    if (keep.has(name)) continue;
    await rm(join(base, name), { recursive: true, force: true });
    if (!name.endsWith('.partial')) backups++;
  }
  const oldest = all.find((b) => keep.has(b.name));
  let segments = 0;
  const walDir = join(backupDir, 'wal');
  if (oldest !== undefined && existsSync(walDir)) {
    // Segment order within and across timelines: the log and segment part of the name.
    const from = oldest.start_wal.slice(8);
    for (const f of readdirSync(walDir)) {
      if (SEGMENT.test(f) && f.slice(8, 24) < from) {
        await rm(join(walDir, f), { force: true });
        segments++;
      }
    }
  }
  return { backups, segments };
}

export interface Backups {
  stop(): Promise<void>;
}

/**
 * The schedule: a base backup at start when the newest is older than the interval (or there
 * is none), then one every interval, each followed by the retention's pruning. A failure is
 * logged (error) and the next run comes on schedule.
 */
export function scheduleBackups(
  o: BaseBackupOptions & { intervalMs: number; retentionDays: number; log: Logger; onTaken?: (b: BackupInfo) => void },
): Backups {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let stopped = false;
  const abort = new AbortController();
  const run = async (): Promise<void> => {
    try {
      const b = await baseBackup({ ...o, signal: abort.signal });
      o.onTaken?.(b);
      const pruned = await prune(o.backupDir, o.retentionDays);
      o.log.info({ backup: b.name, start_wal: b.start_wal, pruned }, 'base backup taken');
    } catch (err) {
      if (abort.signal.aborted) o.log.warn('base backup interrupted by the stop');
      else o.log.error({ err }, 'base backup failed; the next one runs on schedule');
    }
  };
  const next = (ms: number) => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = run().finally(() => {
        running = null;
        next(o.intervalMs);
      });
    }, ms);
    timer.unref();
  };
  const newest = listBackups(o.backupDir).at(-1);
  if (newest !== undefined) o.onTaken?.(newest);
  const age = newest === undefined ? Infinity : Date.now() - Date.parse(newest.stopped_at);
  next(Math.max(0, Math.min(o.intervalMs, o.intervalMs - age)));
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      abort.abort();
      await running;
    },
  };
}

/** Remove the recovery settings a restore appended, once the recovery is done. */
const RECOVERY_SETTING = /^(restore_command|recovery_target_time|recovery_target_action) = /;

function chownTree(dir: string, uid: number, gid: number): void {
  chownSync(dir, uid, gid);
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) chownTree(p, uid, gid);
    else if (!lstatSync(p).isSymbolicLink()) chownSync(p, uid, gid);
  }
}

export class RestoreError extends Error {
  override name = 'RestoreError';
}

/**
 * Restore BACKUP_DIR to the time `to` into the new data folder `into`: `into/postgres`
 * recovered up to `to` (the last transaction committed at or before it) and promoted, with
 * the plinth files of that backup. `to` is PostgreSQL's timestamptz text.
 */
export async function restore(backupDir: string, to: string, into: string, log: Logger): Promise<BackupInfo> {
  const target = Date.parse(to);
  if (Number.isNaN(target) || !/^[0-9T:.+\- Z]+$/.test(to)) throw new RestoreError(`--to: not a timestamp: ${to} (for example 2026-11-26T01:30:00Z)`);
  if (existsSync(into) && readdirSync(into).length > 0) throw new RestoreError(`--into: ${into} is not empty; name a new folder`);
  const from = listBackups(backupDir)
    .filter((b) => Date.parse(b.stopped_at) <= target)
    .at(-1);
  if (from === undefined) throw new RestoreError(`no base backup in ${backupDir} finished before ${to}`);
  const { bin, user } = await embeddedBinaries(into);
  mkdirSync(into, { recursive: true, mode: user ? 0o711 : 0o700 });
  const src = join(backupDir, 'base', from.name);
  const databaseDir = join(into, 'postgres');
  await cp(join(src, 'data'), databaseDir, { recursive: true });
  for (const f of readdirSync(join(src, 'plinth'))) await copyFile(join(src, 'plinth', f), join(into, f));
  const walDir = join(backupDir, 'wal');
  // recovery_target_time takes neither the ISO `T` nor the `Z` abbreviation.
  const pgTime = to.replace('T', ' ').replace(/z$/i, '+00');
  appendFileSync(
    join(databaseDir, 'postgresql.auto.conf'),
    `restore_command = 'cp "${walDir}/%f" "%p"'\nrecovery_target_time = '${pgTime}'\nrecovery_target_action = 'promote'\n`,
  );
  writeFileSync(join(databaseDir, 'recovery.signal'), '');
  if (user) chownTree(databaseDir, user.uid, user.gid);
  log.info({ backup: from.name, to }, 'recovering');
  try {
    await runToReady(bin, databaseDir, user, log);
  } catch (err) {
    throw new RestoreError(`the recovery did not reach ${to} (${(err as Error).message}); is the WAL archive complete up to then?`);
  }
  const conf = join(databaseDir, 'postgresql.auto.conf');
  writeFileSync(conf, readFileSync(conf, 'utf8').split('\n').filter((l) => !RECOVERY_SETTING.test(l)).join('\n'));
  return from;
}
