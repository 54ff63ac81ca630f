/**
 * Development-only endpoints (docs/api/admin-and-sql.md), all service_role:
 * - POST /api/sql, only with ENABLE_SQL_ENDPOINT=true: runs the text on a connection that
 *   logged in as plinth_sql (not a superuser, a member of service_role only, CREATE on
 *   public: sql/fixtures/core/sql_role.sql), never as the owner, in one transaction with the simple-query protocol (several statements allowed)
 *   and answers the rows of the last statement.
 * - POST /api/demo, mounted when ENABLE_DEMO_ENDPOINT=true or SERVICE_ROLE_KEY is set
 *   explicitly: inserts, updates or deletes a row of public.demo_items.
 * /api/catalog/refresh belongs to the REST area.
 */
import type { Area } from '../core/area.ts';
import { AppError, ERRORS, pgErrorToAppError } from '../core/errors.ts';
import { sendJsonText } from '../core/http.ts';

interface SqlBody {
  query: string;
}

interface DemoBody {
  action: 'insert' | 'update' | 'delete';
  id?: number;
  title?: string;
}

const sqlSchema = {
  type: 'object',
  required: ['query'],
  properties: { query: { type: 'string', minLength: 1 } },
} as const;

const demoSchema = {
  type: 'object',
  required: ['action'],
  properties: {
    action: { type: 'string', enum: ['insert', 'update', 'delete'] },
    id: { type: 'integer', minimum: 1 },
    title: { type: 'string', maxLength: 1000 },
  },
} as const;

export const devArea: Area = {
  name: 'dev',
  register(app, { config, db, credentials }) {
    if (config.enableSqlEndpoint) {
      app.post<{ Body: SqlBody }>('/api/sql', { schema: { body: sqlSchema }, onRequest: credentials.requireRole('service_role') }, async (req, reply) => {
        if (req.body === undefined) throw ERRORS.invalidBody();
        let result: unknown;
        try {
          result = await db.sqlConsole().begin((tx) => tx.unsafe(req.body.query, [], { prepare: false }).simple());
        } catch (err) {
          throw pgErrorToAppError(err);
        }
        // A multi-statement text answers one result per statement: keep the last.
        const results = Array.isArray(result) ? (result as unknown[]) : [];
        const rows = results.length > 0 && Array.isArray(results[results.length - 1]) ? results[results.length - 1] : result;
        return reply.send(Array.isArray(rows) ? [...(rows as unknown[])] : []);
      });
    }

    if (config.enableDemoEndpoint || config.serviceRoleKeyExplicit) {
      // public.demo_items exists only where this endpoint is used: made at its first call.
      let demoTable: Promise<unknown> | null = null;
      app.post<{ Body: DemoBody }>('/api/demo', { schema: { body: demoSchema }, onRequest: credentials.requireRole('service_role') }, async (req, reply) => {
        const { action, id, title } = req.body ?? ({} as DemoBody);
        if (req.body === undefined) throw ERRORS.invalidBody();
        if (action !== 'insert' && id === undefined) throw ERRORS.invalidBody();
        let rows: { row: string }[];
        try {
          demoTable ??= db.sql`select plinth_private.ensure_demo_items()`.catch((err: unknown) => {
            demoTable = null;
            throw err;
          });
          await demoTable;
          // The row leaves as JSON built by PostgreSQL (bigint ids stay numbers).
          rows =
            action === 'insert'
              ? await db.sql`insert into public.demo_items as d (title) values (${title ?? ''}) returning to_json(d)::text as row`
              : action === 'update'
                ? await db.sql`update public.demo_items as d set title = coalesce(${title ?? null}, title), updated_at = now() where id = ${id!} returning to_json(d)::text as row`
                : await db.sql`delete from public.demo_items as d where id = ${id!} returning to_json(d)::text as row`;
        } catch (err) {
          throw pgErrorToAppError(err);
        }
        if (rows.length === 0) throw new AppError(404, 'not found');
        return sendJsonText(reply, 200, rows[0].row);
      });
    }
  },
};
