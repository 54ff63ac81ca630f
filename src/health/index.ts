/**
 * GET /health (docs/api/overview.md): 200 `{status: ok, pg_connected: true}`, or 503
 * `{status: degraded, pg_connected: false}` when the database does not answer within 2 s,
 * or 503 `{status: degraded, pg_connected: true, connections: "exhausted"}` when it answers
 * but this instance cannot get its request connections (`Db.connectionHealth`: a request
 * waited in vain for one, or the database refused a new one, within the last
 * DB_POOL_TIMEOUT_MS, at least 5 s). The pools reconnect by themselves, so the same process
 * turns healthy again.
 *
 * GET /ready (readiness): 200 `{status: ready, checks}` when plinth's migrations are applied,
 * the database answers and the instance is not draining (and every other check registered
 * with addReadinessCheck passes, the connection budget's among them); otherwise 503
 * `{status: not ready, reason, checks}`.
 */
import type { Area } from '../core/area.ts';
import { plinthStatus } from '../host/migrate.ts';
import { addReadinessCheck, readiness } from '../core/readiness.ts';

export const healthArea: Area = {
  name: 'health',
  register(app, { db, lifecycle }) {
    app.get('/health', async (_req, reply) => {
      const ok = await db.ping(2000);
      const connections = ok ? db.connectionHealth() : null;
      const body = !ok
        ? { status: 'degraded', pg_connected: false }
        : connections!.ok
          ? { status: 'ok', pg_connected: true }
          : { status: 'degraded', pg_connected: true, connections: 'exhausted' };
      return reply
        .code(body.status === 'ok' ? 200 : 503)
        .header('cache-control', 'no-store')
        .send(body);
    });

    addReadinessCheck(app, 'draining', () => (lifecycle.draining ? 'service shutting down' : null));
    addReadinessCheck(app, 'database', async () => ((await db.ping(2000)) ? null : 'database unavailable'));
    addReadinessCheck(app, 'connections', () => (db.connectionHealth().ok ? null : 'database connections exhausted'));
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
