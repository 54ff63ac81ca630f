/**
 * Migrations, in three chains applied in this order, each with its own history:
 *
 * 1. graphile-worker's own schema (it is "managed by other tools", and SQL functions that
 *    enqueue jobs are validated against it);
 * 2. plinth's own chain, the committed files under `sql/committed/`, recorded in
 *    `plinth_migrate.migrations` (applied here, not by graphile-migrate, so that its history
 *    never mixes with the application's);
 * 3. the application's chain: a graphile-migrate folder of the application's
 *    (`MIGRATIONS_DIR`, default `./migrations`) with its own `committed/` and `current.sql`,
 *    recorded in graphile-migrate's own `graphile_migrate.migrations`.
 *
 * Upgrading plinth applies its new files and leaves the application's chain alone; an
 * application's new migration leaves plinth's alone. Only committed migrations run at
 * start: each chain's `current.sql` is for its developer loop.
 *
 * A database migrated before the chains were split holds plinth's files in
 * graphile-migrate's history: the first run moves those rows over (carryOver).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Logger as GraphileLogger } from '@graphile/logger';
import type { Settings } from 'graphile-migrate';
import { runMigrations as workerMigrations } from 'graphile-worker';
import postgres from 'postgres';
import { deriveLoginPassword, GUEST_LOGIN_ROLE, LOGIN_ROLES, SQL_LOGIN_ROLE } from '../core/db.ts';
import { workerLogger, type Logger } from '../core/log.ts';

/** plinth's own migrations: `committed/`, `fixtures/` and `current.sql`. */
export const MIGRATIONS_FOLDER = fileURLToPath(new URL('../../sql', import.meta.url));

/** graphile-migrate's settings for a chain folder (the application's, or plinth's while developing it). */
export function migrateSettings(databaseUrl: string, anonymousRole: string, log: Logger, folder = MIGRATIONS_FOLDER): Settings {
  return {
    connectionString: databaseUrl,
    migrationsFolder: folder,
    placeholders: { ':ANONYMOUS_ROLE': anonymousRole },
    logger: new GraphileLogger((scope) => (level, message) => {
      const name = level as string;
      const l = name === 'error' ? 'error' : name === 'warning' ? 'warn' : 'debug';
      log[l]({ scope }, message);
    }),
  };
}

/** One committed migration file of plinth's chain. */
export interface ChainFile {
  filename: string;
  hash: string;
  previousHash: string | null;
  message: string | null;
  body: string;
  transaction: boolean;
}

/** graphile-migrate's hash: sha1 over the previous hash and the trimmed body. */
export function chainHash(body: string, previousHash: string | null): string {
  return 'sha1:' + createHash('sha1').update(((previousHash ?? '') + '\n' + body.trim()).trim() + '\n').digest('hex');
}

/**
 * plinth's committed files in order, each checked against its `Hash` header and linked to
 * the one before (`Previous`): a file edited after it was committed stops here.
 */
export function plinthChain(folder = MIGRATIONS_FOLDER): ChainFile[] {
  const dir = join(folder, 'committed');
  const files = readdirSync(dir).filter((f) => /^\d{6}(-[\w-]*)?\.sql$/.test(f)).sort();
  const out: ChainFile[] = [];
  let previous: string | null = null;
  for (const real of files) {
    const text = readFileSync(join(dir, real), 'utf8');
    const headers: Record<string, string> = {};
    const lines = text.split('\n');
    let i = 0;
    for (; i < lines.length && lines[i].startsWith('--! '); i++) {
      const m = /^--! ([A-Za-z]+)(?::\s*(.*))?$/.exec(lines[i]);
      if (m) headers[m[1]] = m[2] ?? '';
    }
    const body = lines.slice(i).join('\n').replace(/^\n+/, '');
    const filename = real.slice(0, 6) + '.sql';
    const previousHash = !headers.Previous || headers.Previous === '-' ? null : headers.Previous;
    if (previousHash !== previous) throw new Error(`sql/committed/${real}: its Previous hash does not name the migration before it`);
    if (chainHash(body, previousHash) !== headers.Hash) throw new Error(`sql/committed/${real}: edited after it was committed (its Hash does not match its text)`);
    out.push({ filename, hash: headers.Hash, previousHash, message: headers.Message ?? null, body, transaction: !/^--! no-transaction\b/m.test(body) });
    previous = headers.Hash;
  }
  return out;
}

/** `--!include x.sql` lines replaced by the fixture files they name (as graphile-migrate does). */
export function compileIncludes(text: string, folder = MIGRATIONS_FOLDER, seen: ReadonlySet<string> = new Set()): string {
  const fixtures = join(folder, 'fixtures');
  return text.replace(/^--![ \t]*include[ \t]+(.*\.sql)[ \t]*$/gm, (_line, raw: string) => {
    const path = realpathSync(join(fixtures, raw));
    if (relative(realpathSync(fixtures), path).startsWith('..')) throw new Error(`--!include ${raw}: outside ${fixtures}`);
    if (seen.has(path)) throw new Error(`--!include ${raw}: included again (a circle)`);
    return compileIncludes(readFileSync(path, 'utf8'), folder, new Set([...seen, path])).trim();
  });
}

function withPlaceholders(sql: string, anonymousRole: string): string {
  return sql.replace(/:ANONYMOUS_ROLE\b/g, anonymousRole);
}

const HISTORY_DDL = `
  create schema if not exists plinth_migrate;
  comment on schema plinth_migrate is 'plinth: the history of plinth''s own migrations (sql/committed), apart from the application''s (graphile_migrate)';
  create table if not exists plinth_migrate.migrations (
    filename text primary key,
    hash text not null unique,
    previous_hash text references plinth_migrate.migrations (hash),
    applied_at timestamptz not null default now()
  );
  revoke all on schema plinth_migrate from public;`;

/** Serialises plinth's chain across instances starting at once. */
const CHAIN_LOCK = 7_371_000_101;

export interface ChainStatus {
  applied: { filename: string; hash: string; applied_at: Date }[];
  pending: ChainFile[];
}

/** What plinth's chain has applied, and what its files add; a history its files do not begin with stops here. */
export async function plinthStatus(sql: postgres.Sql, files = plinthChain()): Promise<ChainStatus> {
  const [{ exists }] = await sql<{ exists: boolean }[]>`select to_regclass('plinth_migrate.migrations') is not null as exists`;
  const applied = exists
    ? await sql<{ filename: string; hash: string; applied_at: Date }[]>`select filename, hash, applied_at from plinth_migrate.migrations order by filename`
    : [];
  applied.forEach((row, i) => {
    const f = files[i];
    if (!f || f.filename !== row.filename || f.hash !== row.hash) {
      throw new Error(`plinth's migration ${row.filename} in the database is not sql/committed/${f?.filename ?? row.filename} of this checkout (a different or older plinth?)`);
    }
  });
  return { applied: [...applied], pending: files.slice(applied.length) };
}

/**
 * Databases migrated before the chains were split keep plinth's files in graphile-migrate's
 * history: move those rows (same file name, same hash) into plinth's. Rows after them that
 * are not plinth's (an application's migrations committed into plinth's folder) cannot be
 * moved without re-hashing them, and stop the start with what to do.
 */
async function carryOver(sql: postgres.Sql, files: ChainFile[], log: Logger): Promise<void> {
  const [{ old }] = await sql<{ old: boolean }[]>`select to_regclass('graphile_migrate.migrations') is not null as old`;
  if (!old) return;
  const rows = await sql<{ filename: string; hash: string; date: Date }[]>`select filename, hash, date from graphile_migrate.migrations order by filename`;
  let n = 0;
  while (n < rows.length && n < files.length && rows[n].filename === files[n].filename && rows[n].hash === files[n].hash) n++;
  if (n === 0) return; // the application's chain (or nothing): not plinth's
  const ours = rows.slice(0, n);
  const foreign = rows.slice(n);
  if (foreign.length > 0) {
    throw new Error(
      `graphile_migrate.migrations holds migrations after plinth's own that are not plinth's (${foreign.map((r) => r.filename).join(', ')}): ` +
        `an application's migrations belong in its own folder (MIGRATIONS_DIR, ./migrations). Move those files there, renumbered from 000001 ` +
        `(npm run db:commit recommits them), and delete their rows from graphile_migrate.migrations; see docs/operations.md, "Two migration chains"`,
    );
  }
  await sql.begin(async (tx) => {
    for (const [i, r] of ours.entries()) {
      const f = files[i];
      await tx`insert into plinth_migrate.migrations (filename, hash, previous_hash, applied_at) values (${f.filename}, ${f.hash}, ${f.previousHash}, ${r.date}) on conflict do nothing`;
    }
    // Newest first: each row's previous_hash references the one before it.
    for (const r of [...ours].reverse()) await tx`delete from graphile_migrate.migrations where filename = ${r.filename}`;
  });
  log.info({ moved: ours.length }, "plinth's migrations moved from graphile_migrate's history to plinth_migrate.migrations");
}

/** Apply plinth's pending committed migrations, each in its own transaction with its history row. */
export async function plinthMigrations(databaseUrl: string, anonymousRole: string, log: Logger, folder = MIGRATIONS_FOLDER): Promise<number> {
  const files = plinthChain(folder);
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql`select pg_advisory_lock(${CHAIN_LOCK})`;
    try {
      await sql.unsafe(HISTORY_DDL);
      await carryOver(sql, files, log);
      const { pending } = await plinthStatus(sql, files);
      for (const f of pending) {
        const text = withPlaceholders(f.body, anonymousRole);
        if (f.transaction) {
          await sql.begin(async (tx) => {
            await tx.unsafe(text).simple();
            await tx`insert into plinth_migrate.migrations (filename, hash, previous_hash) values (${f.filename}, ${f.hash}, ${f.previousHash})`;
          });
        } else {
          await sql.unsafe(text).simple();
          await sql`insert into plinth_migrate.migrations (filename, hash, previous_hash) values (${f.filename}, ${f.hash}, ${f.previousHash})`;
        }
        log.info({ migration: f.filename, message: f.message }, 'plinth migration applied');
      }
      return pending.length;
    } finally {
      await sql`select pg_advisory_unlock(${CHAIN_LOCK})`.catch(() => {});
    }
  } finally {
    await sql.end({ timeout: 2 });
  }
}

/**
 * plinth's `sql/current.sql` (work in progress on plinth itself) applied as one script, with
 * its includes, on top of the committed chain: the test template does this, and nothing
 * at start does.
 */
export async function applyPlinthCurrent(databaseUrl: string, anonymousRole: string): Promise<void> {
  const text = withPlaceholders(compileIncludes(readFileSync(join(MIGRATIONS_FOLDER, 'current.sql'), 'utf8')), anonymousRole);
  if (!/\S/.test(text.replace(/--.*$/gm, ''))) return;
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    await sql.begin((tx) => tx.unsafe(text).simple());
  } finally {
    await sql.end({ timeout: 2 });
  }
}

/** The application's migrations folder, when it has one. */
export function appMigrationsFolder(dir: string): string | null {
  return existsSync(join(dir, 'committed')) || existsSync(join(dir, 'current.sql')) ? dir : null;
}

export interface LoginRoleOptions {
  /** JWT_SECRET: the login roles' passwords are derived from it. */
  secret?: string;
  /** DB_REQUEST_PASSWORD: set, a DBA manages the passwords and this step leaves them alone. */
  requestPassword?: string | null;
  /** The application's migrations folder (MIGRATIONS_DIR); null or absent: none. */
  appFolder?: string | null;
  /** plinth's own folder (tests install an older level of it). */
  plinthFolder?: string;
}

/**
 * Run every pending migration of the three chains (plinth's create the request login roles, see
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
  await plinthMigrations(databaseUrl, anonymousRole, log, roles.plinthFolder);
  const app = roles.appFolder ? appMigrationsFolder(roles.appFolder) : null;
  if (app) await appMigrations(databaseUrl, anonymousRole, log, app);
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
    const logins = [...Object.values(LOGIN_ROLES), GUEST_LOGIN_ROLE, SQL_LOGIN_ROLE];
    const existing = await sql<{ rolname: string }[]>`select rolname from pg_catalog.pg_roles where rolname = any(${logins})`;
    for (const { rolname: login } of existing) {
      // base64url: no quote can occur; the statement takes no parameters.
      await sql.unsafe(`alter role ${login} password '${deriveLoginPassword(secret, login)}'`);
    }
  } finally {
    await sql.end({ timeout: 2 });
  }
}

/** The application's committed migrations, by graphile-migrate, in its own history. */
export async function appMigrations(databaseUrl: string, anonymousRole: string, log: Logger, folder: string): Promise<void> {
  // Loaded here, not at start: a service that does not migrate never needs it.
  const { migrate: gmMigrate } = await import('graphile-migrate');
  for (let attempt = 0; ; attempt++) {
    try {
      await gmMigrate(migrateSettings(databaseUrl, anonymousRole, log, folder));
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

