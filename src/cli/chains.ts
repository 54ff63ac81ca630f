/**
 * graphile-migrate settings for the two chains a developer commits to:
 *
 * - the application's (`MIGRATIONS_DIR`, default `./migrations`): `npm run dev` watches its
 *   `current.sql`, `npm run db:commit` commits it. Its shadow database is reset with
 *   graphile-worker's schema and plinth's whole chain first, so the application's SQL can
 *   use `auth.uid()`, the API roles and the rest.
 * - plinth's own (`sql/`, with `--plinth`): for work on plinth itself. It runs against a
 *   database of its own (`<db>_plinthdev`), never the application's: there graphile-migrate's
 *   history holds plinth's chain, which is what committing it needs.
 */
import { mkdirSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import type { Settings } from 'graphile-migrate';
import { parseConfig } from '../core/config.ts';
import { createLogger, workerLogger } from '../core/log.ts';
import { runMigrations as workerMigrations } from 'graphile-worker';
import { MIGRATIONS_FOLDER, migrateSettings } from '../host/migrate.ts';
import type { DevDatabases } from './dev-env.ts';

const MIGRATE_PLINTH = fileURLToPath(new URL('./migrate-plinth.ts', import.meta.url));
/** Loads plinth's TypeScript where Node does not strip types itself (under node_modules). */
export const STRIP_TYPES = new URL('../../bin/strip-types.js', import.meta.url).href;

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** A shell word for a path (the afterReset command runs in a shell). */
const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The application's migrations folder, created with an empty current.sql when missing. */
export function appFolder(): string {
  const dir = parseConfig(process.env).migrationsDir;
  if (!existsSync(join(dir, 'current.sql'))) {
    mkdirSync(join(dir, 'committed'), { recursive: true });
    writeFileSync(join(dir, 'current.sql'), '-- Your migration in progress: plinth dev applies it on every save; plinth db commit commits it.\n');
  }
  return dir;
}

export async function chainSettings(dbs: DevDatabases, plinth: boolean, create = true): Promise<Settings> {
  const config = parseConfig(process.env);
  const log = createLogger(config.logLevel);
  if (plinth) {
    const db = `${new URL(dbs.url).pathname.slice(1) || 'postgres'}_plinthdev`;
    const root = postgres(dbs.rootUrl, { max: 1, onnotice: () => {} });
    try {
      const [exists] = await root`select 1 from pg_database where datname = ${db}`;
      if (!exists) await root`create database ${root(db)}`;
    } finally {
      await root.end();
    }
    const url = withDatabase(dbs.url, db);
    // plinth's functions that enqueue jobs are checked against graphile-worker's schema.
    await workerMigrations({ connectionString: url, logger: workerLogger(log) });
    return {
      ...migrateSettings(url, config.anonymousRole, log, MIGRATIONS_FOLDER),
      shadowConnectionString: withDatabase(dbs.url, `${db}_shadow`),
      rootConnectionString: dbs.rootUrl,
      afterReset: [{ _: 'command', command: `graphile-worker --schema-only -c "$GM_DBURL"` }],
    };
  }
  return {
    ...migrateSettings(dbs.url, config.anonymousRole, log, create ? appFolder() : config.migrationsDir),
    shadowConnectionString: dbs.shadowUrl,
    rootConnectionString: dbs.rootUrl,
    afterReset: [{ _: 'command', command: `${quote(process.execPath)} --import ${quote(STRIP_TYPES)} ${quote(MIGRATE_PLINTH)}` }],
  };
}
