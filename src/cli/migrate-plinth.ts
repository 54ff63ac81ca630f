/**
 * graphile-worker's schema and plinth's chain, on the database graphile-migrate names in
 * GM_DBURL: the application's shadow database after a reset (src/cli/chains.ts).
 */
import { parseConfig } from '../core/config.ts';
import { createLogger } from '../core/log.ts';
import { runAllMigrations } from '../host/migrate.ts';

const url = process.env.GM_DBURL;
if (!url) {
  process.stderr.write('migrate-plinth: GM_DBURL is not set (graphile-migrate sets it for afterReset)\n');
  process.exit(1);
}
const config = parseConfig(process.env);
await runAllMigrations(url, config.anonymousRole, createLogger(config.logLevel), { appFolder: null });
