/**
 * `npm run dev`: the developer loop. Starts (or reuses) the database once, applies every
 * chain's committed migrations, then runs graphile-migrate's watch on the application's
 * chain (re-applies MIGRATIONS_DIR/current.sql on every save) beside the service
 * restarting on change (`node --watch`, MIGRATE_ON_START=false), with the runtime flags of
 * `npm start`. Ctrl-C stops all.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { watch } from 'graphile-migrate';
import { appFolder, chainSettings } from './chains.ts';
import { devDatabases } from './dev-env.ts';
import { loadConfig } from '../core/config.ts';
import { createLogger } from '../core/log.ts';
import { runAllMigrations } from '../host/migrate.ts';
import { fileURLToPath } from 'node:url';
import { startFlags } from './start-flags.ts';
import { watchLogger } from './watch-log.ts';
import { join, relative } from 'node:path';
import { STRIP_TYPES } from './chains.ts';

const SRC = fileURLToPath(new URL('..', import.meta.url));
const MAIN = fileURLToPath(new URL('../main.ts', import.meta.url));

const dbs = await devDatabases();
// graphile-worker's schema and the committed migrations first; watch then owns current.sql.
const config = await loadConfig(process.env);
await runAllMigrations(dbs.url, config.anonymousRole, createLogger(config.logLevel), {
  secret: config.secret,
  requestPassword: config.dbRequestPassword,
  appFolder: appFolder(),
});
const env = {
  ...process.env,
  DATABASE_URL: dbs.url,
  SHADOW_DATABASE_URL: dbs.shadowUrl,
  ROOT_DATABASE_URL: dbs.rootUrl,
  MIGRATE_ON_START: 'false',
  // Readable log lines for a developer's terminal, unless asked otherwise.
  LOG_FORMAT: process.env.LOG_FORMAT ?? 'pretty',
};
// The service's banner says the rest: the embedded DATABASE_URL (it knows the database is
// the embedded one, src/host/embedded-url.ts), the keys in development mode, the dashboard.
process.stdout.write(`watching ${config.migrationsDir}/current.sql\n`);

const children: ChildProcess[] = [
  spawn(process.execPath, [...startFlags(), '--import', STRIP_TYPES, '--watch', `--watch-path=${SRC}`, MAIN], { stdio: 'inherit', env }),
];

// One readable line per save of current.sql (src/cli/watch-log.ts), on the terminal.
const current = relative(process.cwd(), join(config.migrationsDir, 'current.sql')) || 'current.sql';
const logger = watchLogger(current, (line) => process.stdout.write(line + '\n'));
void watch({ ...(await chainSettings(dbs, false)), logger }).catch((err: unknown) => {
  process.stderr.write(`migrations: ${err instanceof Error ? err.message : String(err)}\n`);
  void stop();
});

let stopping = false;
async function stop(): Promise<void> {
  if (stopping) return;
  stopping = true;
  for (const c of children) c.kill('SIGTERM');
  await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.on('close', r)))));
  await dbs.stop();
  process.exit(0);
}
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());
for (const c of children) c.on('close', () => void stop());
