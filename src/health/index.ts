/**
 * GET /health (docs/api/overview.md): 200 `{status: ok, pg_connected: true}`, or 503
 * `{status: degraded, pg_connected: false}` when the database does not answer within 2 s,
 * or 503 `{status: degraded, pg_connected: true, connections: "exhausted"}` when it answers
 * but this instance cannot get its request connections (`Db.connectionHealth`: a request
 * waited in vain for one, or the database refused a new one, within the last
 * DB_POOL_TIMEOUT_MS, at least 5 s). The pools reconnect by themselves, so the same process
 * turns healthy again.
 */
import type { Area } from '../core/area.ts';

export const healthArea: Area = {
  name: 'health',
  register(app, { db }) {
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
  },
};
