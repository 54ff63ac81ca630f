/**
 * Operators' endpoints: `GET /metrics` (Prometheus text; the service-role key, or no
 * credential on the METRICS_PORT listener) and `GET /api/requests` (the last requests, for
 * the dashboard; the service-role key).
 */
import type { Area } from '../core/area.ts';
import { AppError } from '../core/errors.ts';

export const opsArea: Area = {
  name: 'ops',
  register(app, { credentials, metrics, requestLog, db }) {
    // Gauges read at each scrape, from memory (and one `select 1`).
    metrics.onCollect(async () => {
      metrics.dbUp.set((await db.ping(1000)) ? 1 : 0);
      for (const s of db.laneStats()) {
        metrics.dbConnections.set({ pool: s.role, state: 'open' }, s.open);
        metrics.dbConnections.set({ pool: s.role, state: 'in_use' }, s.inUse);
        metrics.dbWaiting.set({ pool: s.role }, s.waiting);
      }
    });

    const serviceRoleGate = credentials.requireRole('service_role');
    app.get('/metrics', { onRequest: serviceRoleGate }, async (_req, reply) => {
      const m = await metrics.scrape();
      return reply.header('cache-control', 'no-store').type(m.contentType).send(m.body);
    });

    app.get<{ Querystring: { limit?: string } }>('/api/requests', { onRequest: serviceRoleGate }, async (req, reply) => {
      const raw = req.query.limit;
      let limit = requestLog.size;
      if (raw !== undefined) {
        if (!/^\d{1,9}$/.test(raw)) throw new AppError(400, 'invalid limit');
        limit = Number(raw);
      }
      return reply.header('cache-control', 'no-store').send({ size: requestLog.size, requests: requestLog.latest(limit) });
    });
  },
};
