/**
 * `npm run migrate`: run pending migrations alone (DBA-led operation), against
 * DATABASE_URL or the embedded PostgreSQL.
 */
import { ConfigError, loadConfig } from './core/config.ts';
import { createLogger } from './core/log.ts';
import { runAllMigrations } from './host/migrate.ts';

// As npm start does: as root in a folder the postgres user cannot enter, the embedded data lives elsewhere.
if (!process.env.DATABASE_URL) {
  const moved = (await import('./host/embedded.ts')).rootDataDir(process.env);
  if (moved) process.env.DATA_DIR = moved;
}
let config;
try {
  config = await loadConfig(process.env);
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(err.message + '\n');
    process.exit(1);
  }
  throw err;
}
const log = createLogger(config.logLevel, { format: config.logFormat });
let stop = async () => {};
try {
  let url = config.databaseUrl;
  if (url === null) {
    const { startEmbedded } = await import('./host/embedded.ts');
    const embedded = await startEmbedded(config.dataDir, log);
    stop = () => embedded.stop();
    url = embedded.url;
  }
  await runAllMigrations(config.databaseDirectUrl ?? url, config.anonymousRole, log, { secret: config.secret, requestPassword: config.dbRequestPassword, appFolder: config.migrationsDir });
  process.stdout.write('migrations are up to date\n');
  await stop();
} catch (err) {
  process.stderr.write(`migrate failed: ${err instanceof Error ? err.message : String(err)}\n`);
  await stop().catch(() => {});
  process.exit(1);
}
