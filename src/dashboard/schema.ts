/**
 * POST /api/dashboard/schema: the dashboard's schema changes as migrations (docs/dashboard.md).
 * The body's actions (create a table, add, rename or drop a column, enable RLS, a policy from
 * a template, a grant) become SQL text in SQL (dashboard_private.schema_sql, which checks every
 * name, type and default: sql/fixtures/dashboard/schema.sql). The answer always carries that
 * text first; with `"apply": true`:
 * - in development (`npm run dev`: development mode, JWT_SECRET unset, with MIGRATE_ON_START=false
 *   because the migrations watch owns the database) the text is appended to the application's
 *   MIGRATIONS_DIR/current.sql, which the watch applies on save and `npm run db:commit` commits;
 * - otherwise (a production database) nothing is written or run: 409, the SQL is for a migration.
 * The service never runs the text itself.
 */
import { appendFile, mkdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../core/area.ts';
import type { RuntimeConfig } from '../core/config.ts';
import { AppError, ERRORS } from '../core/errors.ts';

type Status = 'ok' | 'invalid_action' | 'invalid_name' | 'invalid_type' | 'invalid_default' | 'invalid_reference' | 'invalid_template' | 'invalid_grant';

export const SCHEMA_ERRORS = {
  problem: (status: Exclude<Status, 'ok'>, index: number) => new AppError(400, `action ${index + 1}: ${MESSAGES[status]}`),
  notDevelopment: () =>
    new AppError(409, 'schema changes are written to migrations/current.sql only in development (npm run dev); against this database, put the SQL in a migration'),
};

const MESSAGES: Record<Exclude<Status, 'ok'>, string> = {
  invalid_action: 'unknown action or missing fields',
  invalid_name: 'names are lower-case letters, digits and _ (at most 63, not starting with a digit)',
  invalid_type: 'unknown type',
  invalid_default: 'a default is a literal, now(), current_date, gen_random_uuid() or auth.uid()',
  invalid_reference: 'a foreign key names a column of a table of public, or auth.users(id)',
  invalid_template: 'policy templates are owner_only and read_all_write_owner',
  invalid_grant: 'grants name anon, authenticated or service_role and select, insert, update or delete',
};

/** Where the dashboard's schema changes go: the watched current.sql under `npm run dev`, nowhere otherwise. */
export function schemaTarget(config: Pick<RuntimeConfig, 'devMode' | 'migrateOnStart' | 'migrationsDir'>): { mode: 'development' | 'production'; file: string | null } {
  if (config.devMode && !config.migrateOnStart) return { mode: 'development', file: join(config.migrationsDir, 'current.sql') };
  return { mode: 'production', file: null };
}

export function registerSchemaRoutes(app: FastifyInstance, { config, db, credentials }: Deps): void {
  const target = schemaTarget(config);
  const shown = target.file === null ? null : relative(process.cwd(), target.file) || target.file;
  // One append at a time: two quick actions land whole and in order.
  let writing: Promise<unknown> = Promise.resolve();

  app.post('/api/dashboard/schema', { onRequest: credentials.requireRole('service_role') }, async (req, reply) => {
    const b = req.body as { actions?: unknown; apply?: unknown } | null;
    if (!b || typeof b !== 'object' || !Array.isArray(b.actions) || (b.apply !== undefined && typeof b.apply !== 'boolean')) throw ERRORS.invalidBody();
    const [r]: [{ status: Status; statement: string | null; failed: number | null }] =
      await db.sql`select status, statement, failed from dashboard_private.schema_sql(${JSON.stringify(b.actions)}::text::jsonb)`;
    if (r.status !== 'ok') throw SCHEMA_ERRORS.problem(r.status, r.failed ?? 0);
    const sql = r.statement!;
    if (b.apply !== true) return reply.send({ sql, mode: target.mode, file: shown });
    if (target.file === null) throw SCHEMA_ERRORS.notDevelopment();
    const file = target.file;
    const done = writing.then(async () => {
      await mkdir(config.migrationsDir, { recursive: true });
      const before = await readFile(file, 'utf8').catch(() => '');
      const gap = before === '' || before.endsWith('\n\n') ? '' : before.endsWith('\n') ? '\n' : '\n\n';
      await appendFile(file, `${gap}-- from the dashboard, ${new Date().toISOString()}\n${sql}\n`);
    });
    writing = done.catch(() => {});
    await done;
    return reply.send({ sql, mode: target.mode, file: shown, appended: true });
  });
}
