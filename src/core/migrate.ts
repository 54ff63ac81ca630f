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
import postgres from 'postgres';
import { deriveLoginPassword, GUEST_LOGIN_ROLE, LOGIN_ROLES } from './db.ts';
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

export interface LoginRoleOptions {
  /** JWT_SECRET: the login roles' passwords are derived from it. */
  secret?: string;
  /** DB_REQUEST_PASSWORD: set, a DBA manages the passwords and this step leaves them alone. */
  requestPassword?: string | null;
}

/**
 * Run every pending migration (which create the request login roles, see
 * sql/fixtures/core/login_roles.sql), then give the login roles their passwords derived from
 * JWT_SECRET, unless DB_REQUEST_PASSWORD says a DBA manages them. Several instances
 * starting at once take turns.
 */
export async function runAllMigrations(
  databaseUrl: string,
  anonymousRole: string,
  log: Logger,
  roles: LoginRoleOptions = {},
): Promise<void> {
  await workerMigrations({ connectionString: databaseUrl, logger: workerLogger(log) });
  await committedMigrations(databaseUrl, anonymousRole, log);
  if (roles.secret !== undefined && !roles.requestPassword) await setLoginPasswords(databaseUrl, roles.secret);
  await warnIfStatementNamesShow(databaseUrl, log);
}

/**
 * The migration that closes `pg_prepared_statements` to the API roles needs a superuser;
 * run by any other owner it revokes nothing (sql/fixtures/core/prepared_statements.sql).
 * graphile-migrate does not pass a migration's warnings on, so this says it at every start.
 * true when the names show.
 */
export async function warnIfStatementNamesShow(databaseUrl: string, log: Logger): Promise<boolean> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const [{ shows }] = await sql<{ shows: boolean }[]>`
      select exists (
        select 1
          from pg_catalog.pg_class c,
               pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault('r', c.relowner))) a
         where c.oid = 'pg_catalog.pg_prepared_statements'::pg_catalog.regclass and a.grantee = 0
      ) as shows`;
    if (shows) {
      log.warn(
        'pg_prepared_statements is readable by every role, so SQL running as an API role could replace a request lane\'s prepared statements: as a superuser, run  revoke select on pg_catalog.pg_prepared_statements from public; revoke execute on function pg_catalog.pg_prepared_statement() from public;  (README, "Login roles, for a DBA")',
      );
    }
    return shows;
  } finally {
    await sql.end({ timeout: 2 });
  }
}

/** `alter role … password` for each login role, with the password derived from the secret. */
export async function setLoginPasswords(databaseUrl: string, secret: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const logins = [...Object.values(LOGIN_ROLES), GUEST_LOGIN_ROLE];
    const existing = await sql<{ rolname: string }[]>`select rolname from pg_catalog.pg_roles where rolname = any(${logins})`;
    for (const { rolname: login } of existing) {
      // base64url: no quote can occur; the statement takes no parameters.
      await sql.unsafe(`alter role ${login} password '${deriveLoginPassword(secret, login)}'`);
    }
  } finally {
    await sql.end({ timeout: 2 });
  }
}

async function committedMigrations(databaseUrl: string, anonymousRole: string, log: Logger): Promise<void> {
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

/**
 * graphile-worker's log lines into ours: its errors and warnings at error and warn, the rest
 * at debug. One warning is a choice made here, not news, and goes to debug: the pool
 * (4 connections) smaller than the concurrency (16 jobs), since a job mostly waits on SMTP
 * or a webhook's endpoint rather than on the database (src/worker/index.ts).
 */
export function workerLogger(log: Logger): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const chosen = message.startsWith('WARNING: having maxPoolSize');
    const l = level === 'error' ? 'error' : level === 'warning' && !chosen ? 'warn' : 'debug';
    log[l]({ scope, ...meta }, message);
  });
}
