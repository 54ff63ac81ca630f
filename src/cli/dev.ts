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
import { runAllMigrations } from '../core/migrate.ts';
import { fileURLToPath } from 'node:url';
import { startFlags } from './start-flags.ts';
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
process.stdout.write(`DATABASE_URL=${dbs.url}\nwatching ${config.migrationsDir}/current.sql\n`);
// The service prints only fingerprints when DATABASE_URL is set, as it is here; the
// developer loop on the embedded database is a development start, so the keys are shown.
if (config.databaseUrl === null) process.stdout.write(`ANON_KEY=${config.anonKey}\nSERVICE_ROLE_KEY=${config.serviceRoleKey}\n`);

const children: ChildProcess[] = [
  spawn(process.execPath, [...startFlags(), '--import', STRIP_TYPES, '--watch', `--watch-path=${SRC}`, MAIN], { stdio: 'inherit', env }),
];

void watch(await chainSettings(dbs, false)).catch((err: unknown) => {
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
