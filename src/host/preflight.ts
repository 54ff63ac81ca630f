/**
 * Checks at start that the database is one plinth can serve: the guest role named by
 * ANONYMOUS_ROLE exists (docs/operations.md) and the migrations have run.
 */
import postgres from 'postgres';

export async function checkDatabase(databaseUrl: string, anonymousRole: string): Promise<void> {
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {}, connect_timeout: 10 });
  try {
    const [row] = await sql<{ role: boolean; auth: boolean }[]>`
      select exists (select 1 from pg_catalog.pg_roles where rolname = ${anonymousRole}) as role,
             exists (select 1 from pg_catalog.pg_namespace where nspname = 'auth') as auth`;
    if (!row.auth) throw new Error('the database has not been migrated: run `npm run migrate` or set MIGRATE_ON_START=true');
    if (!row.role) throw new Error(`ANONYMOUS_ROLE: the role "${anonymousRole}" does not exist (it is created when the first migration runs)`);
  } finally {
    await sql.end({ timeout: 2 });
  }
}
