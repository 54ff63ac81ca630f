/**
 * The dashboard at /_/: a single page that reads and changes plinth only through its
 * documented HTTP endpoints (docs/dashboard.md). This area serves the page's files under a
 * strict Content-Security-Policy, and the service-role endpoints that only the dashboard
 * needed: the first admin's setup, the exposed tables with their policies and grants, the
 * live registry and the read-only settings. DASHBOARD_ENABLED=false registers none of it.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Area, Deps } from '../core/area.ts';
import { AppError, ERRORS } from '../core/errors.ts';
import { sendError, sendJsonText } from '../core/http.ts';
import { checkEmail, checkPassword } from '../auth/validate.ts';
import { hashPassword } from '../auth/passwords.ts';
import { buildAssets, type Assets } from './assets.ts';
import { settings } from './settings.ts';
import { registerSchemaRoutes } from './schema.ts';
import { registerBackupRoutes } from './backups.ts';

export const DASHBOARD_ERRORS = {
  setupLinkInvalid: () => new AppError(400, 'invalid or expired setup link'),
  adminExists: () => new AppError(409, 'an admin account exists already'),
  emailTaken: () => new AppError(409, 'email already registered'),
};

/** Same-origin only, no inline script or style; blob: and data: for image previews. */
const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The setup link's token while no service_role account exists (the same one again on every
 * start until it is used or expires), or null.
 */
export async function setupToken(db: Deps['db']): Promise<string | null> {
  const [row]: [{ token: string | null }?] = await db.sql`select dashboard_private.setup_token(${randomBytes(24).toString('base64url')}) as token`;
  return row?.token ?? null;
}

export const dashboardArea: Area = {
  name: 'dashboard',
  register(app, deps) {
    if (!deps.config.dashboardEnabled) return;
    const { db, credentials } = deps;
    const serviceRole = credentials.requireRole('service_role');

    let assets: Promise<Assets> | null = null;
    const serve = (file: keyof Assets) => async (req: FastifyRequest, reply: FastifyReply) => {
      assets ??= buildAssets().catch((err) => {
        assets = null;
        throw err;
      });
      const a = (await assets)[file];
      reply
        .header('content-security-policy', CSP)
        .header('x-frame-options', 'DENY')
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        .header('cache-control', 'no-cache')
        .header('etag', a.etag);
      if (req.headers['if-none-match'] === a.etag) return reply.code(304).send();
      return reply.code(200).type(a.type).send(a.body);
    };
    app.get('/_', (_req, reply) => reply.redirect('/_/', 308));
    app.get('/_/', serve('index.html'));
    app.get('/_/app.js', serve('app.js'));
    app.get('/_/app.css', serve('app.css'));

    app.post('/api/dashboard/setup', async (req, reply) => {
      const b = req.body as { token?: unknown; email?: unknown; password?: unknown } | null;
      if (!b || typeof b !== 'object' || typeof b.token !== 'string' || typeof b.email !== 'string' || typeof b.password !== 'string') {
        return sendError(reply, ERRORS.invalidBody());
      }
      checkEmail(b.email);
      checkPassword(b.password);
      const hash = await hashPassword(b.password);
      const [r]: [{ status: string; user_json: unknown }?] = await db.sql`select status, user_json from dashboard_private.setup_admin(${b.token}, ${b.email}, ${hash})`;
      switch (r?.status) {
        case 'ok':
          return reply.code(201).send(r.user_json);
        case 'admin_exists':
          return sendError(reply, DASHBOARD_ERRORS.adminExists());
        case 'email_taken':
          return sendError(reply, DASHBOARD_ERRORS.emailTaken());
        default:
          return sendError(reply, DASHBOARD_ERRORS.setupLinkInvalid());
      }
    });

    app.get('/api/tables', { onRequest: serviceRole }, async (_req, reply) => {
      const roles = ['anon', 'authenticated', deps.config.anonymousRole, 'service_role'];
      const [r]: [{ t: string }] = await db.sql`select dashboard_private.tables(${roles})::text as t`;
      return sendJsonText(reply, 200, r.t);
    });

    app.get('/api/live', { onRequest: serviceRole }, async (_req, reply) => {
      const [r]: [{ t: string }] = await db.sql`select dashboard_private.live_registry()::text as t`;
      const registry = JSON.parse(r.t) as { queries: { query_id: string }[]; sockets?: Record<string, number> };
      // WebSocket clients connected to this instance, per query id or channel (the live area's hub).
      const hub = (app as unknown as { live?: { hub: { channels: Map<string, Set<unknown>> } } }).live?.hub;
      const sockets: Record<string, number> = {};
      for (const [id, set] of hub?.channels ?? new Map<string, Set<unknown>>()) if (set.size > 0) sockets[id] = set.size;
      registry.sockets = sockets;
      return reply.send(registry);
    });

    app.get('/api/settings', { onRequest: serviceRole }, async (_req, reply) => reply.send(await settings(deps)));

    // The Logs view's chart: per minute over the last hour, the application's requests or the dashboard's own.
    app.get<{ Querystring: { source?: string } }>('/api/requests/minutes', { onRequest: serviceRole }, async (req, reply) => {
      const source = req.query.source ?? 'app';
      if (source !== 'app' && source !== 'dashboard') throw new AppError(400, 'source must be app or dashboard');
      return reply.header('cache-control', 'no-store').send({ source, minutes: deps.requestLog.minutes.lastHour(source) });
    });
    registerSchemaRoutes(app, deps);
    registerBackupRoutes(app, deps);
  },
};
