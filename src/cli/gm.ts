/**
 * `npm run db:commit | db:uncommit | db:reset | db:status`: graphile-migrate on the
 * application's chain (MIGRATIONS_DIR), with the developer databases (the embedded
 * PostgreSQL started when needed). `-- --plinth` works on plinth's own chain instead
 * (src/cli/chains.ts). `db:status` shows both histories.
 */
import postgres from 'postgres';
import { commit, reset, status, uncommit } from 'graphile-migrate';
import { parseConfig } from '../core/config.ts';
import { createLogger } from '../core/log.ts';
import { plinthChain, plinthStatus, runAllMigrations } from '../host/migrate.ts';
import { devDatabases } from './dev-env.ts';
import { chainSettings } from './chains.ts';

const args = process.argv.slice(2);
const plinth = args.includes('--plinth');
const [command] = args.filter((a) => !a.startsWith('--'));
const message = (() => {
  const i = args.indexOf('--message');
  return i >= 0 ? (args[i + 1] ?? null) : null;
})();

const dbs = await devDatabases();
let code = 0;
try {
  if (!plinth && command !== 'status') {
    // The application's SQL builds on plinth's schemas: the development database gets plinth's
    // chain first, as `plinth dev` does (committed migrations only; a no-op when up to date).
    const config = parseConfig(process.env);
    await runAllMigrations(dbs.url, config.anonymousRole, createLogger(config.logLevel), { appFolder: null });
  }
  const settings = await chainSettings(dbs, plinth, command !== 'status');
  switch (command) {
    case 'commit':
      await commit(settings, message);
      break;
    case 'uncommit':
      await uncommit(settings);
      break;
    case 'reset':
      await reset(settings, false);
      break;
    case 'status': {
      const sql = postgres(dbs.url, { max: 1, onnotice: () => {} });
      try {
        const p = await plinthStatus(sql, plinthChain());
        const last = p.applied.at(-1);
        process.stdout.write(`plinth (sql/committed, history plinth_migrate.migrations): ${p.applied.length} applied${last ? `, last ${last.filename}` : ''}; ${p.pending.length} pending${p.pending.length ? ` (${p.pending.map((f) => f.filename).join(', ')})` : ''}\n`);
      } finally {
        await sql.end();
      }
      const a = await status(await chainSettings(dbs, false, false));
      const remaining = a.remainingMigrations ?? [];
      process.stdout.write(`application (${parseConfig(process.env).migrationsDir}, history graphile_migrate.migrations): ${remaining.length} pending${remaining.length ? ` (${remaining.join(', ')})` : ''}; current.sql ${a.hasCurrentMigration ? 'holds work in progress' : 'is empty'}\n`);
      break;
    }
    default:
      process.stderr.write('usage: plinth db commit [--message M] | uncommit | reset | status  [--plinth]\n');
      code = 2;
  }
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  code = 1;
} finally {
  await dbs.stop();
}
process.exit(code);
