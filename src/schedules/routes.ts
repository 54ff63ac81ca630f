/**
 * Schedules, queues and the run log over HTTP (service role only; docs/api/schedules.md):
 *   GET    /api/schedules                 200 [Schedule] by name
 *   POST   /api/schedules                 201 Schedule (new name) / 200 (changed): an upsert
 *   DELETE /api/schedules/{name}          200 {"message": "schedule deleted"}
 *   POST   /api/schedules/{name}/run      202 {"job_id": "…"}: one run now
 *   POST   /api/schedules/{name}/pause    200 Schedule, paused (no tick until resumed)
 *   POST   /api/schedules/{name}/resume   200 Schedule, armed for its next tick
 *   POST   /api/queues/{queue}            202 {"job_id": "…"}: body {"payload": …, "options": {…}}
 *   GET    /api/runs                      200 [Run] newest first; ?name ?kind ?outcome ?before ?limit
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../core/area.ts';
import { AppError, ERRORS, unreachable } from '../core/errors.ts';
import { sendJsonText } from '../core/http.ts';
import * as q from './db.ts';

export const SCHEDULE_ERRORS = {
  invalidName: () => new AppError(400, 'invalid name'),
  invalidCron: () => new AppError(400, 'invalid cron expression'),
  invalidTarget: () => new AppError(400, 'target must be sql:<schema>.<function> or function:<name>'),
  targetNotFound: () => new AppError(400, 'target function not found'),
  invalidOptions: () => new AppError(400, 'invalid options'),
  scheduleNotFound: () => new AppError(404, 'schedule not found'),
  queueNotFound: () => new AppError(404, 'queue not found'),
  invalidLimit: () => new AppError(400, 'limit must be an integer from 1 to 1000'),
  invalidKind: () => new AppError(400, 'kind must be schedule or queue'),
  invalidOutcome: () => new AppError(400, 'outcome must be succeeded, retrying or failed'),
  invalidBefore: () => new AppError(400, 'before must be a run id'),
} as const;

const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$/;
const OUTCOMES: ReadonlySet<string> = new Set(['succeeded', 'retrying', 'failed']);

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw ERRORS.invalidBody();
  return body as Record<string, unknown>;
}

function upsertError(status: Exclude<q.UpsertStatus, 'ok'>): AppError {
  switch (status) {
    case 'invalid_name':
      return SCHEDULE_ERRORS.invalidName();
    case 'invalid_cron':
      return SCHEDULE_ERRORS.invalidCron();
    case 'invalid_target':
      return SCHEDULE_ERRORS.invalidTarget();
    case 'target_not_found':
      return SCHEDULE_ERRORS.targetNotFound();
    case 'invalid_options':
      return SCHEDULE_ERRORS.invalidOptions();
    default:
      return unreachable(status);
  }
}

function one(raw: unknown): string | null {
  if (raw === undefined) return null;
  if (typeof raw !== 'string') throw ERRORS.invalidBody();
  return raw;
}

function parseRunFilter(query: Record<string, unknown>): q.RunFilter {
  const limitRaw = one(query.limit);
  let limit = 100;
  if (limitRaw !== null) {
    if (!/^\d{1,4}$/.test(limitRaw) || Number(limitRaw) < 1 || Number(limitRaw) > 1000) throw SCHEDULE_ERRORS.invalidLimit();
    limit = Number(limitRaw);
  }
  const kind = one(query.kind);
  if (kind !== null && kind !== 'schedule' && kind !== 'queue') throw SCHEDULE_ERRORS.invalidKind();
  const outcome = one(query.outcome);
  if (outcome !== null && !OUTCOMES.has(outcome)) throw SCHEDULE_ERRORS.invalidOutcome();
  const before = one(query.before);
  if (before !== null && !/^[1-9]\d{0,17}$/.test(before)) throw SCHEDULE_ERRORS.invalidBefore();
  return { name: one(query.name), kind, outcome, before, limit };
}

export function registerScheduleRoutes(app: FastifyInstance, deps: Deps): void {
  const { db, credentials } = deps;
  const sql = db.sql;
  const serviceRoleGate = credentials.requireRole('service_role');

  app.get('/api/schedules', { onRequest: serviceRoleGate }, async (_req, reply) => sendJsonText(reply, 200, await q.listSchedules(sql)));

  app.post('/api/schedules', { onRequest: serviceRoleGate }, async (req, reply) => {
    const b = object(req.body);
    if (typeof b.name !== 'string') throw SCHEDULE_ERRORS.invalidName();
    if (typeof b.cron !== 'string') throw SCHEDULE_ERRORS.invalidCron();
    if (typeof b.target !== 'string') throw SCHEDULE_ERRORS.invalidTarget();
    if (b.options !== undefined && (typeof b.options !== 'object' || b.options === null || Array.isArray(b.options))) {
      throw SCHEDULE_ERRORS.invalidOptions();
    }
    const r = await q.upsertSchedule(sql, { name: b.name, cron: b.cron, target: b.target, payload: b.payload, options: b.options });
    if (r.status !== 'ok') throw upsertError(r.status);
    return sendJsonText(reply, r.created ? 201 : 200, r.schedule!);
  });

  app.delete<{ Params: { name: string } }>('/api/schedules/:name', { onRequest: serviceRoleGate }, async (req, reply) => {
    if (!NAME.test(req.params.name)) throw SCHEDULE_ERRORS.scheduleNotFound();
    const status = await q.deleteSchedule(sql, req.params.name);
    switch (status) {
      case 'ok':
        return reply.code(200).send({ message: 'schedule deleted' });
      case 'not_found':
        throw SCHEDULE_ERRORS.scheduleNotFound();
      default:
        return unreachable(status);
    }
  });

  app.post<{ Params: { name: string } }>('/api/schedules/:name/run', { onRequest: serviceRoleGate }, async (req, reply) => {
    if (!NAME.test(req.params.name)) throw SCHEDULE_ERRORS.scheduleNotFound();
    const id = await q.runNow(sql, req.params.name);
    if (id === null) throw SCHEDULE_ERRORS.scheduleNotFound();
    return reply.code(202).send({ job_id: id });
  });

  for (const verb of ['pause', 'resume'] as const) {
    app.post<{ Params: { name: string } }>(`/api/schedules/:name/${verb}`, { onRequest: serviceRoleGate }, async (req, reply) => {
      if (!NAME.test(req.params.name)) throw SCHEDULE_ERRORS.scheduleNotFound();
      const status = await q.pauseSchedule(sql, req.params.name, verb === 'pause');
      if (status === 'not_found') throw SCHEDULE_ERRORS.scheduleNotFound();
      const all = JSON.parse(await q.listSchedules(sql)) as { name: string }[];
      return reply.code(200).send(all.find((s) => s.name === req.params.name));
    });
  }

  app.post<{ Params: { queue: string } }>('/api/queues/:queue', { onRequest: serviceRoleGate }, async (req, reply) => {
    if (!NAME.test(req.params.queue)) throw SCHEDULE_ERRORS.queueNotFound();
    const b = req.body === undefined ? {} : object(req.body);
    const r = await q.enqueue(sql, req.params.queue, b.payload ?? {}, b.options ?? {});
    switch (r.status) {
      case 'ok':
        return reply.code(202).send({ job_id: r.job_id });
      case 'queue_not_found':
        throw SCHEDULE_ERRORS.queueNotFound();
      case 'invalid_options':
        throw SCHEDULE_ERRORS.invalidOptions();
      default:
        return unreachable(r.status);
    }
  });

  app.get<{ Querystring: Record<string, unknown> }>('/api/runs', { onRequest: serviceRoleGate }, async (req, reply) => {
    return sendJsonText(reply, 200, await q.listRuns(sql, parseRunFilter(req.query)));
  });
}
