/**
 * `node test/dashboard/watch-once.ts <database url> <migrations folder> <anonymous role>`:
 * what `npm run dev`'s migrations watch does on a save of current.sql (graphile-migrate's
 * watch, run once), in a process of its own so that its connection pool ends with it.
 */
import { watch } from 'graphile-migrate';
import { migrateSettings } from '../../src/host/migrate.ts';
import { createLogger } from '../../src/core/log.ts';

const [url, folder, anonymousRole] = process.argv.slice(2);
await watch(migrateSettings(url, anonymousRole, createLogger('warn'), folder), true);
process.exit(0);
