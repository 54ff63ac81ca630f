/**
 * GET /health (docs/api/overview.md): 200 `{status: ok, pg_connected: true}`, or 503
 * `{status: degraded, pg_connected: false}` when the database does not answer within 2 s.
 * The pool reconnects by itself, so the same process turns healthy again.
 */
import type { Area } from '../core/area.ts';

export const healthArea: Area = {
  name: 'health',
  register(app, { db }) {
    app.get('/health', async (_req, reply) => {
      const ok = await db.ping(2000);
      return reply
        .code(ok ? 200 : 503)
        .header('cache-control', 'no-store')
        .send(ok ? { status: 'ok', pg_connected: true } : { status: 'degraded', pg_connected: false });
    });
  },
};
