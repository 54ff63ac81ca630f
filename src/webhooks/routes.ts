/**
 * docs/api/webhooks.md (service role only) and the delivery log:
 *   POST   /rest/v1/webhooks                    201 Webhook (no secret)
 *   GET    /rest/v1/webhooks                    200 [Webhook]
 *   DELETE /rest/v1/webhooks/{id}               200 {"message": "webhook deleted"}
 *   GET    /rest/v1/webhooks/{id}/deliveries    200 [Delivery] newest first, ?limit (default 100, 1..1000)
 *   POST   /rest/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver   202 a failed delivery sent once more
 * These static routes win over REST's `/rest/v1/:table` (find-my-way prefers static
 * segments; docs/api/webhooks.md). The service-role check runs before the body is looked at.
 * A URL whose host is a literal address that deliveries would refuse (address.ts) is refused.
 */
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../core/area.ts';
import { AppError, ERRORS, unreachable } from '../core/errors.ts';
import { sendJsonText } from '../core/http.ts';
import { refusal } from './address.ts';
import * as q from './db.ts';

export const WEBHOOK_ERRORS = {
  urlRequired: () => new AppError(400, 'url is required'),
  invalidUrl: () => new AppError(400, 'url must be an http or https URL'),
  /** address.ts: a literal link-local address (cloud metadata), always refused. */
  linkLocalUrl: () => new AppError(400, 'url must not point at a link-local address'),
  /** address.ts: a literal loopback or private address, with WEBHOOK_DENY_PRIVATE=true. */
  privateUrl: () => new AppError(400, 'url must not point at a loopback or private address'),
  invalidEvents: () => new AppError(400, 'events must be an array of INSERT, UPDATE, DELETE or *'),
  /** docs/api/webhooks.md: a table_name that is not a table in public. */
  invalidTable: () => new AppError(400, 'invalid request'),
  invalidId: () => new AppError(400, 'invalid webhook id'),
  invalidLimit: () => new AppError(400, 'limit must be an integer from 1 to 1000'),
  notFound: () => new AppError(404, 'webhook not found'),
  invalidDeliveryId: () => new AppError(400, 'invalid delivery id'),
  deliveryNotFound: () => new AppError(404, 'delivery not found'),
  notFailed: () => new AppError(409, 'only a failed delivery can be redelivered'),
  paused: () => new AppError(409, 'the webhook is paused'),
} as const;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EVENTS: ReadonlySet<string> = new Set(['INSERT', 'UPDATE', 'DELETE', '*']);
const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1000;
const MAX_URL_LENGTH = 2048;

/** An absolute http(s) URL with a host, as given (not normalised). */
export function isHttpUrl(s: string): boolean {
  if (s.length > MAX_URL_LENGTH || !/^https?:\/\/[^/?#\s]+/i.test(s)) return false;
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}

/** The POST body, checked field by field; a field that is present must have its type (null included). */
export function parseCreate(body: unknown): q.CreateHookInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw ERRORS.invalidBody();
  const b = body as Record<string, unknown>;
  if (b.url === undefined) throw WEBHOOK_ERRORS.urlRequired();
  if (typeof b.url !== 'string' || !isHttpUrl(b.url)) throw WEBHOOK_ERRORS.invalidUrl();
  let events: string[] | null = null;
  if (b.events !== undefined) {
    if (!Array.isArray(b.events) || b.events.length === 0 || !b.events.every((e) => typeof e === 'string' && EVENTS.has(e))) {
      throw WEBHOOK_ERRORS.invalidEvents();
    }
    events = b.events as string[];
  }
  let tableName: string | null = null;
  if (b.table_name !== undefined) {
    if (typeof b.table_name !== 'string' || b.table_name === '') throw WEBHOOK_ERRORS.invalidTable();
    tableName = b.table_name;
  }
  let secret: string | null = null;
  if (b.secret !== undefined) {
    if (typeof b.secret !== 'string') throw ERRORS.invalidBody();
    secret = b.secret;
  }
  return { url: b.url, events, tableName, secret };
}

function parseLimit(raw: unknown): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  if (typeof raw !== 'string' || !/^\d{1,4}$/.test(raw)) throw WEBHOOK_ERRORS.invalidLimit();
  const n = Number(raw);
  if (n < 1 || n > MAX_LIMIT) throw WEBHOOK_ERRORS.invalidLimit();
  return n;
}

export function registerWebhookRoutes(app: FastifyInstance, deps: Deps): void {
  const { db, credentials } = deps;
  const sql = db.sql;
  const serviceRoleGate = credentials.requireRole('service_role');

  app.post('/rest/v1/webhooks', { onRequest: serviceRoleGate }, async (req, reply) => {
    const input = parseCreate(req.body);
    // A literal address is refused at once; a name is checked at each delivery, once resolved.
    const why = refusal(new URL(input.url).hostname, deps.config.webhookDenyPrivate);
    if (why === 'link-local') throw WEBHOOK_ERRORS.linkLocalUrl();
    if (why === 'private') throw WEBHOOK_ERRORS.privateUrl();
    const r = await q.createHook(sql, input);
    switch (r.status) {
      case 'ok':
        return sendJsonText(reply, 201, r.hook!);
      case 'invalid_url':
        throw WEBHOOK_ERRORS.invalidUrl();
      case 'invalid_events':
        throw WEBHOOK_ERRORS.invalidEvents();
      case 'table_not_found':
        throw WEBHOOK_ERRORS.invalidTable();
      default:
        return unreachable(r.status);
    }
  });

  app.get('/rest/v1/webhooks', { onRequest: serviceRoleGate }, async (_req, reply) => {
    return sendJsonText(reply, 200, await q.listHooks(sql));
  });

  app.delete<{ Params: { id: string } }>('/rest/v1/webhooks/:id', { onRequest: serviceRoleGate }, async (req, reply) => {
    if (!UUID.test(req.params.id)) throw WEBHOOK_ERRORS.invalidId();
    const status = await q.deleteHook(sql, req.params.id);
    switch (status) {
      case 'ok':
        return reply.code(200).send({ message: 'webhook deleted' });
      case 'not_found':
        throw WEBHOOK_ERRORS.notFound();
      default:
        return unreachable(status);
    }
  });

  app.get<{ Params: { id: string }; Querystring: Record<string, unknown> }>(
    '/rest/v1/webhooks/:id/deliveries',
    { onRequest: serviceRoleGate },
    async (req, reply) => {
      if (!UUID.test(req.params.id)) throw WEBHOOK_ERRORS.invalidId();
      const limit = parseLimit(req.query.limit);
      const r = await q.listDeliveries(sql, req.params.id, limit);
      switch (r.status) {
        case 'ok':
          return sendJsonText(reply, 200, r.deliveries!);
        case 'not_found':
          throw WEBHOOK_ERRORS.notFound();
        default:
          return unreachable(r.status);
      }
    },
  );

  app.post<{ Params: { id: string; delivery_id: string } }>(
    '/rest/v1/webhooks/:id/deliveries/:delivery_id/redeliver',
    { onRequest: serviceRoleGate },
    async (req, reply) => {
      if (!UUID.test(req.params.id)) throw WEBHOOK_ERRORS.invalidId();
      if (!UUID.test(req.params.delivery_id)) throw WEBHOOK_ERRORS.invalidDeliveryId();
      const r = await q.redeliver(sql, req.params.id, req.params.delivery_id, req.id);
      switch (r.status) {
        case 'ok':
          return reply.code(202).send({ id: req.params.delivery_id, state: 'pending', attempt: r.attempt });
        case 'webhook_not_found':
          throw WEBHOOK_ERRORS.notFound();
        case 'paused':
          throw WEBHOOK_ERRORS.paused();
        case 'not_found':
          throw WEBHOOK_ERRORS.deliveryNotFound();
        case 'not_failed':
          throw WEBHOOK_ERRORS.notFailed();
        default:
          return unreachable(r.status);
      }
    },
  );
}
