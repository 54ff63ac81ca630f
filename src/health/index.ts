/**
 * GET /health (interface §4.1, liveness): 200 `{status: ok, pg_connected: true}`, or 503
 * `{status: degraded, pg_connected: false}` when the database does not answer within 2 s.
 * The pool reconnects by itself, so the same process turns healthy again.
 *
 * GET /ready (readiness): 200 `{status: ready, checks}` when plinth's migrations are applied,
 * the database answers and the instance is not draining (and every other check registered
 * with addReadinessCheck passes); otherwise 503 `{status: not ready, reason, checks}`.
 */
import type { Area } from '../core/area.ts';
import { plinthStatus } from '../core/migrate.ts';
import { addReadinessCheck, readiness } from '../core/readiness.ts';

export const healthArea: Area = {
  name: 'health',
  register(app, { db, lifecycle }) {
    app.get('/health', async (_req, reply) => {
      const ok = await db.ping(2000);
      return reply
        .code(ok ? 200 : 503)
        .header('cache-control', 'no-store')
        .send(ok ? { status: 'ok', pg_connected: true } : { status: 'degraded', pg_connected: false });
    });

    addReadinessCheck(app, 'draining', () => (lifecycle.draining ? 'service shutting down' : null));
    addReadinessCheck(app, 'database', async () => ((await db.ping(2000)) ? null : 'database unavailable'));
    // Once applied, the migrations stay applied for this process: checked until they are.
    let migrated = false;
    addReadinessCheck(app, 'migrations', async () => {
      if (migrated) return null;
      let pending;
      try {
        ({ pending } = await plinthStatus(db.sql));
      } catch {
        return 'migrations not readable';
      }
      if (pending.length > 0) return `${pending.length} migrations pending`;
      migrated = true;
      return null;
    });

    app.get('/ready', async (_req, reply) => {
      const r = await readiness(app);
      return reply
        .code(r.ready ? 200 : 503)
        .header('cache-control', 'no-store')
        .send(r.ready ? { status: 'ready', checks: r.checks } : { status: 'not ready', reason: r.reason, checks: r.checks });
    });
  },
};
