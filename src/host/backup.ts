/**
 * Backups of the embedded PostgreSQL (docs/operations.md#backups), to a folder (BACKUP_DIR)
 * or to S3 (BACKUP_S3_PREFIX in S3_BUCKET, src/host/backup-s3.ts); both are a BackupStore
 * with the same layout: `wal/<segment>` and `base/<time>/{data/…, plinth/…, backup.json}`.
 * - WAL: the embedded server's archive_command copies every finished segment into a local
 *   folder (src/host/embedded.ts, archiveSettings): BACKUP_DIR/wal itself, or for S3 the
 *   spool DATA_DIR/wal-spool, which the service uploads and empties (walUploader);
 * - base backups: every BACKUP_SCHEDULE, `pg_backup_start` / a file-by-file copy of the data
 *   folder / `pg_backup_stop` (the embedded build has no pg_basebackup): `data/` (with its
 *   backup_label), `plinth/` (postgres.json and the development secret, so that a restore
 *   needs nothing else) and, written last, `backup.json`;
 * - retention: base backups that finished more than BACKUP_RETENTION_DAYS ago go, except
 *   the newest of them (a restore to a point inside the window starts from it), and the WAL
 *   segments older than the oldest kept base backup go with them;
 * - restore (`npm run restore`, scripts/restore.ts): the newest base backup finished before
 *   the target, copied into a new data folder with recovery.signal, restore_command and
 *   recovery_target_time, and recovered there once, so that `npm start` starts on it.
 */
import { appendFileSync, chownSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { copyFile, cp, mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import postgres from 'postgres';
import type { Config } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { embeddedBinaries, runToReady } from './embedded.ts';
import { eachLimit, type BackupStore } from './backup-store.ts';

export type { BackupStore };

/** What a base backup records next to its copy. */
export interface BackupInfo {
  /** The folder name under base/. */
  name: string;
  started_at: string;
  stopped_at: string;
  /** The first WAL segment a restore from it needs. */
  start_wal: string;
  /** The folders of the data folder (a store without folders, S3, keeps no empty one). */
  directories?: string[];
}

const isGone = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

/** A folder: BACKUP_DIR. */
export function folderStore(dir: string): BackupStore {
  const names = async (sub: string) => {
    try {
      return await readdir(join(dir, sub));
    } catch (err) {
      if (isGone(err)) return [];
      throw err;
    }
  };
  return {
    where: dir,
    localWal: join(dir, 'wal'),
    backups: () => names('base'),
    async segments() {
      const out = [];
      for (const name of await names('wal')) {
        const st = await stat(join(dir, 'wal', name));
        out.push({ name, stored: st.mtimeMs, bytes: st.size });
      }
      return out;
    },
    async bytes(key) {
      const walk = async (path: string): Promise<number> => {
        let st;
        try {
          st = await stat(path);
        } catch (err) {
          if (isGone(err)) return 0;
          throw err;
        }
        if (!st.isDirectory()) return st.size;
        let n = 0;
        for (const e of await readdir(path)) n += await walk(join(path, e));
        return n;
      };
      return walk(join(dir, key));
    },
    async read(key) {
      try {
        return await readFile(join(dir, key), 'utf8');
      } catch (err) {
        if (isGone(err)) return null;
        throw err;
      }
    },
    async write(key, text) {
      await mkdir(dirname(join(dir, key)), { recursive: true, mode: 0o700 });
      await writeFile(join(dir, key), text, { mode: 0o600 });
    },
    async putFile(key, path) {
      await mkdir(dirname(join(dir, key)), { recursive: true, mode: 0o700 });
      try {
        await copyFile(path, join(dir, key));
        return true;
      } catch (err) {
        if (isGone(err)) return false;
        throw err;
      }
    },
    remove: (key) => rm(join(dir, key), { recursive: true, force: true }),
    fetchTree: (key, into) => cp(join(dir, key), into, { recursive: true }),
    async close() {},
  };
}

/** The store the settings name (null: no backups). The S3 client is loaded only for S3. */
export async function openBackupStore(config: Pick<Config, 'backupDir' | 'backupS3Prefix' | 's3'>): Promise<BackupStore | null> {
  if (config.backupDir !== null) return folderStore(config.backupDir);
  if (config.backupS3Prefix !== null && config.s3 !== null) return (await import('./backup-s3.ts')).s3Store(config.s3, config.backupS3Prefix);
  return null;
}

/** The spool of WAL segments waiting for their upload to S3. */
export const walSpool = (dataDir: string) => join(dataDir, 'wal-spool');

/** Files of DATA_DIR/postgres that a base backup leaves out (PostgreSQL's own list), and folders it keeps empty. */
const SKIP_FILES = new Set(['postmaster.pid', 'postmaster.opts', 'backup_label', 'tablespace_map', 'pg_internal.init', 'recovery.signal', 'standby.signal']);
const EMPTY_DIRS = new Set(['pg_wal', 'pg_replslot', 'pg_dynshmem', 'pg_notify', 'pg_serial', 'pg_snapshots', 'pg_stat_tmp', 'pg_subtrans']);
/** The files of DATA_DIR a restore needs besides the database: its password and port, the development secret and keys. */
const PLINTH_FILES = /^(postgres\.json|jwt-secret\.json|keys-[0-9a-f]+\.json)$/;
const SEGMENT = /^[0-9A-F]{24}(\.partial|\.[0-9A-F]{8}\.backup)?$/;
/** Files stored at once during a base backup or a restore from S3. */
const PARALLEL = 8;

/** A UTC time as a folder name that sorts in time order: 20261126T011500Z. */
function stamp(d: Date): string {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

/** The files and folders of the data folder to copy, relative, tolerating what PostgreSQL removes meanwhile (the backup's WAL covers it). */
async function dataTree(root: string, rel = '', out: { files: string[]; dirs: string[] } = { files: [], dirs: [] }) {
  let entries;
  try {
    entries = await readdir(join(root, rel), { withFileTypes: true });
  } catch (err) {
    if (isGone(err)) return out;
    throw err;
  }
  for (const e of entries) {
    const path = rel === '' ? e.name : `${rel}/${e.name}`;
    if (e.isDirectory()) {
      out.dirs.push(path);
      if (!(rel === '' && EMPTY_DIRS.has(e.name))) await dataTree(root, path, out);
    } else if (e.isFile() && !SKIP_FILES.has(e.name) && !e.name.startsWith('pgsql_tmp')) {
      out.files.push(path);
    }
  }
  return out;
}

/** The finished base backups of a store, oldest first (those without backup.json are unfinished). */
export async function listBackups(store: BackupStore): Promise<BackupInfo[]> {
  const out: BackupInfo[] = [];
  for (const name of await store.backups()) {
    const text = await store.read(`base/${name}/backup.json`);
    if (text === null) continue;
    try {
      out.push({ ...(JSON.parse(text) as BackupInfo), name });
    } catch {
      /* unfinished */
    }
  }
  return out.sort((a, b) => Date.parse(a.stopped_at) - Date.parse(b.stopped_at));
}

export interface BaseBackupOptions {
  store: BackupStore;
  /** DATA_DIR: its postgres/ folder is copied, and its plinth files. */
  dataDir: string;
  /** A superuser's URL of the embedded server. */
  adminUrl: string;
  /** Aborts a backup in progress (the service is stopping). */
  signal?: AbortSignal;
  /** Makes the archived WAL reach the store (S3: uploads the spool), before the backup counts as finished. */
  flushWal?: () => Promise<void>;
}

/** Take one base backup; returns what it recorded. */
export async function baseBackup(o: BaseBackupOptions): Promise<BackupInfo> {
  const started = new Date();
  const name = stamp(started);
  const at = `base/${name}/`;
  await o.store.remove(at);
  // pg_backup_start and pg_backup_stop must run in the same session (one connection, no
  // transaction around the copy: it would hold back vacuum meanwhile). A session that ends
  // between them ends the backup.
  const sql = postgres(o.adminUrl, { max: 1, onnotice: () => {} });
  // A stop ends the session, which also ends pg_backup_stop's wait for an archive that fails.
  const endSession = () => void sql.end({ timeout: 0 });
  o.signal?.addEventListener('abort', endSession, { once: true });
  try {
    await sql`select pg_backup_start(${`plinth ${name}`}, true)`;
    const source = join(o.dataDir, 'postgres');
    const tree = await dataTree(source);
    await eachLimit(tree.files, PARALLEL, (f) => o.store.putFile(`${at}data/${f}`, join(source, f)), o.signal);
    // true: wait until the WAL the backup needs is archived.
    const [info] = await sql<Array<{ labelfile: string }>>`select labelfile from pg_backup_stop(true)`;
    const startWal = /START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)/.exec(info.labelfile)?.[1];
    if (startWal === undefined) throw new Error('base backup: no start WAL location in the backup label');
    await o.store.write(`${at}data/backup_label`, info.labelfile);
    for (const f of readdirSync(o.dataDir)) if (PLINTH_FILES.test(f)) await o.store.putFile(`${at}plinth/${f}`, join(o.dataDir, f));
    await o.flushWal?.();
    const recorded: BackupInfo = { name, started_at: started.toISOString(), stopped_at: new Date().toISOString(), start_wal: startWal, directories: tree.dirs };
    await o.store.write(`${at}backup.json`, JSON.stringify(recorded, null, 2) + '\n');
    return recorded;
  } catch (err) {
    await o.store.remove(at).catch(() => {});
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
export async function prune(store: BackupStore, days: number, now = Date.now()): Promise<{ backups: number; segments: number }> {
  const all = await listBackups(store);
  const cutoff = now - days * 86_400_000;
  const before = all.filter((b) => Date.parse(b.stopped_at) < cutoff);
  const keep = new Set([...all.filter((b) => Date.parse(b.stopped_at) >= cutoff), ...before.slice(-1)].map((b) => b.name));
  const finished = new Set(all.map((b) => b.name));
  let backups = 0;
  for (const name of await store.backups()) {
    if (keep.has(name)) continue;
    await store.remove(`base/${name}/`);
    if (finished.has(name)) backups++;
  }
  const oldest = all.find((b) => keep.has(b.name));
  let segments = 0;
  if (oldest !== undefined) {
    // Segment order within and across timelines: the log and segment part of the name.
    const from = oldest.start_wal.slice(8);
    const old = (await store.segments()).filter((s) => SEGMENT.test(s.name) && s.name.slice(8, 24) < from);
    await eachLimit(old, PARALLEL, (s) => store.remove(`wal/${s.name}`));
    segments = old.length;
  }
  return { backups, segments };
}

/**
 * With S3: the spool's segments uploaded in name order, each removed once stored; every
 * `everyMs`, and on `flush()` (a base backup's end). A failed upload is logged and retried.
 */
export function walUploader(store: BackupStore, spool: string, log: Logger, everyMs = 2000, onFailed?: (err: unknown) => void): { flush(): Promise<void>; stop(): Promise<void> } {
  let chain: Promise<void> = Promise.resolve();
  let failing = false;
  const once = async () => {
    const files = (await readdir(spool)).filter((f) => !f.endsWith('.part')).sort();
    for (const f of files) {
      if (await store.putFile(`wal/${f}`, join(spool, f))) await rm(join(spool, f), { force: true });
    }
  };
  const flush = () => {
    // After a failed run the chain is rejected: the next run starts anyway.
    chain = chain.catch(() => {}).then(once).then(
      () => {
        if (failing) log.info('WAL uploads to S3 work again');
        failing = false;
      },
      (err) => {
        if (!failing) log.error({ err }, 'WAL upload to S3 failed; retrying (the segments wait in DATA_DIR/wal-spool)');
        onFailed?.(err);
        failing = true;
        throw err;
      },
    );
    return chain;
  };
  // A tick while a run is still going (a slow upload) adds none: the runs never queue up.
  let runs = 0;
  const timer = setInterval(() => {
    if (runs > 0) return;
    runs++;
    void flush()
      .catch(() => {})
      .finally(() => runs--);
  }, everyMs);
  timer.unref();
  return {
    flush,
    async stop() {
      clearInterval(timer);
      await flush().catch(() => {});
    },
  };
}

export interface Backups {
  /** Ends the schedule (a base backup in progress is abandoned). */
  stop(): Promise<void>;
  /** After PostgreSQL stopped: what it archived last goes to S3 too (what cannot waits in the spool for the next start), and the store closes. */
  close(): Promise<void>;
}

/**
 * The schedule: a base backup at start when the newest is older than the interval (or there
 * is none), then one every interval, each followed by the retention's pruning. A failure is
 * logged (error) and the next run comes on schedule. With `spool` (S3), the WAL uploader runs too.
 */
export function scheduleBackups(
  o: Omit<BaseBackupOptions, 'flushWal' | 'signal'> & { spool: string | null; intervalMs: number; retentionDays: number; log: Logger; onTaken?: (b: BackupInfo) => void; onFailed?: (err: unknown) => void },
): Backups {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let stopped = false;
  const abort = new AbortController();
  const uploader = o.spool === null ? null : walUploader(o.store, o.spool, o.log, 2000, (err) => o.onFailed?.(new Error(`WAL upload failed: ${(err as Error).message}`)));
  const run = async (): Promise<void> => {
    try {
      const b = await baseBackup({ ...o, signal: abort.signal, flushWal: uploader ? () => uploader.flush() : undefined });
      o.onTaken?.(b);
      const pruned = await prune(o.store, o.retentionDays);
      o.log.info({ backup: b.name, start_wal: b.start_wal, pruned }, 'base backup taken');
    } catch (err) {
      if (abort.signal.aborted) o.log.warn('base backup interrupted by the stop');
      else {
        o.log.error({ err }, 'base backup failed; the next one runs on schedule');
        o.onFailed?.(err);
      }
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
  const first = listBackups(o.store).then(
    (all) => {
      const newest = all.at(-1);
      if (newest !== undefined) o.onTaken?.(newest);
      const age = newest === undefined ? Infinity : Date.now() - Date.parse(newest.stopped_at);
      next(Math.max(0, Math.min(o.intervalMs, o.intervalMs - age)));
    },
    (err) => {
      o.log.error({ err }, `backups: cannot list ${o.store.where}; trying again in an interval`);
      next(o.intervalMs);
    },
  );
  return {
    async stop() {
      stopped = true;
      await first;
      if (timer) clearTimeout(timer);
      abort.abort();
      await running;
    },
    async close() {
      await uploader?.stop();
      await o.store.close();
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
 * With a store without a local WAL folder (S3): the segments a recovery from `from` to
 * `target` reads, fetched into `dir`: every timeline history file, and the segments from the
 * backup's first one on, in order, up to the first one stored after the target (the one
 * that holds it; later ones are not read).
 */
async function fetchWal(store: BackupStore, from: BackupInfo, target: number, dir: string): Promise<void> {
  const all = await store.segments();
  const start = from.start_wal.slice(8);
  const wanted = all.filter((s) => s.name.endsWith('.history'));
  const segments = all
    .filter((s) => /^[0-9A-F]{24}$/.test(s.name) && s.name.slice(8) >= start)
    .sort((a, b) => a.name.slice(8).localeCompare(b.name.slice(8)) || a.name.localeCompare(b.name));
  for (const s of segments) {
    wanted.push(s);
    if (s.stored > target) break;
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await eachLimit(wanted, PARALLEL, (s) => store.fetchTree(`wal/${s.name}`, join(dir, s.name)));
}

/**
 * Restore a store to the time `to` into the new data folder `into`: `into/postgres`
 * recovered up to `to` (the last transaction committed at or before it) and promoted, with
 * the plinth files of that backup. `to` is PostgreSQL's timestamptz text.
 */
export async function restore(store: BackupStore, to: string, into: string, log: Logger): Promise<BackupInfo> {
  const target = Date.parse(to);
  if (Number.isNaN(target) || !/^[0-9T:.+\- Z]+$/.test(to)) throw new RestoreError(`--to: not a timestamp: ${to} (for example 2026-11-26T01:30:00Z)`);
  if (existsSync(into) && readdirSync(into).length > 0) throw new RestoreError(`--into: ${into} is not empty; name a new folder`);
  if (/['"\\$`\n]/.test(into)) throw new RestoreError(`--into: ${into} must not contain quotes, backslashes, $ or backquotes`);
  const from = (await listBackups(store)).filter((b) => Date.parse(b.stopped_at) <= target).at(-1);
  if (from === undefined) throw new RestoreError(`no base backup in ${store.where} finished before ${to}`);
  const { bin, user } = await embeddedBinaries(into);
  mkdirSync(into, { recursive: true, mode: user ? 0o711 : 0o700 });
  const databaseDir = join(into, 'postgres');
  await mkdir(databaseDir, { mode: 0o700 });
  await store.fetchTree(`base/${from.name}/data/`, databaseDir);
  for (const d of from.directories ?? []) await mkdir(join(databaseDir, d), { recursive: true, mode: 0o700 });
  await store.fetchTree(`base/${from.name}/plinth/`, into);
  // S3: the WAL the recovery reads, fetched into the folder first (removed after the recovery).
  const fetched = store.localWal === null ? join(into, 'wal-restore') : null;
  if (fetched !== null) await fetchWal(store, from, target, fetched);
  const walDir = fetched ?? store.localWal!;
  // recovery_target_time takes neither the ISO `T` nor the `Z` abbreviation.
  const pgTime = to.replace('T', ' ').replace(/z$/i, '+00');
  appendFileSync(
    join(databaseDir, 'postgresql.auto.conf'),
    `restore_command = 'cp "${walDir}/%f" "%p"'\nrecovery_target_time = '${pgTime}'\nrecovery_target_action = 'promote'\n`,
  );
  writeFileSync(join(databaseDir, 'recovery.signal'), '');
  if (user) {
    chownTree(databaseDir, user.uid, user.gid);
    if (fetched !== null) chownTree(fetched, user.uid, user.gid);
  }
  log.info({ backup: from.name, to }, 'recovering');
  try {
    await runToReady(bin, databaseDir, user, log);
  } catch (err) {
    throw new RestoreError(`the recovery did not reach ${to} (${(err as Error).message}); is the WAL archive complete up to then?`);
  } finally {
    if (fetched !== null) await rm(fetched, { recursive: true, force: true });
  }
  const conf = join(databaseDir, 'postgresql.auto.conf');
  writeFileSync(conf, readFileSync(conf, 'utf8').split('\n').filter((l) => !RECOVERY_SETTING.test(l)).join('\n'));
  return from;
}
