/**
 * Migrations: graphile-worker's own schema first (it is "managed by other tools", and SQL
 * functions that enqueue jobs are validated against it), then plinth's committed
 * graphile-migrate migrations under `sql/`, with the `:ANONYMOUS_ROLE` placeholder.
 * Only committed migrations run: `sql/current.sql` is for `npm run dev`.
 */
import { fileURLToPath } from 'node:url';
import { Logger as GraphileLogger } from '@graphile/logger';
import { migrate as gmMigrate, type Settings } from 'graphile-migrate';
import { Logger as WorkerLogger, runMigrations as workerMigrations } from 'graphile-worker';
import type { Logger } from './log.ts';

export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../sql', import.meta.url));

export function migrateSettings(databaseUrl: string, anonymousRole: string, log: Logger): Settings {
  return {
    connectionString: databaseUrl,
    migrationsFolder: MIGRATIONS_FOLDER,
    placeholders: { ':ANONYMOUS_ROLE': anonymousRole },
    logger: new GraphileLogger((scope) => (level, message) => {
      const l = level === 'error' ? 'error' : level === 'warning' ? 'warn' : 'debug';
      log[l]({ scope }, message);
    }),
  };
}

/** Run every pending migration. Several instances starting at once take turns. */
export async function runAllMigrations(databaseUrl: string, anonymousRole: string, log: Logger): Promise<void> {
  await workerMigrations({ connectionString: databaseUrl, logger: workerLogger(log) });
  for (let attempt = 0; ; attempt++) {
    try {
      await gmMigrate(migrateSettings(databaseUrl, anonymousRole, log));
      return;
    } catch (err) {
      // graphile-migrate takes a try-lock; another instance migrating makes it fail at once.
      if (attempt < 60 && err instanceof Error && err.message.includes('exclusive lock')) {
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      throw err;
    }
  }
}

export function workerLogger(log: Logger): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const l = level === 'error' ? 'error' : level === 'warning' ? 'warn' : 'debug';
    log[l]({ scope, ...meta }, message);
  });
}
