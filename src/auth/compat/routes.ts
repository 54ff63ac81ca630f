/**
 * SUPABASE_COMPAT=true: auth as GoTrue answers it, for what auth-js sends (docs/api/supabase.md).
 * Registered before the interface's auth routes, and only under the setting:
 *
 * - hooks on existing routes (hooks.ts; an `onRoute` hook attaches them to those routes
 *   only): `grant_type` from the query of POST /token; POST /signup without an address is
 *   a guest sign-in; GET /verify with a `type` verifies and redirects with the session in
 *   the fragment; POST /recover honours `redirect_to`; POST /logout honours `scope`;
 *   sessions and users leave in GoTrue's shape;
 * - two routes of its own: POST /auth/v1/otp and POST /auth/v1/verify;
 * - supabase-js's PKCE flow (pkce.ts): a challenge on /otp and /recover, `?code=` on the
 *   link's redirect, POST /token?grant_type=pkce.
 *
 * The state stays in SQL (sql/fixtures/auth/compat.sql and the one-time tokens).
 */
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { ERRORS } from '../../core/errors.ts';
import { clientIp } from '../../core/http.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { hashToken } from '../tokens.ts';
import { checkEmail } from '../validate.ts';
import { codeHash, compatContext, isPlainObject, queryOf, sendSession } from './context.ts';
import { compatHooks, type HookStage } from './hooks.ts';
import { pkceOf } from './pkce.ts';
import { COMPAT_ERRORS, redirectTarget } from './shape.ts';

const AUTH_WINDOW_SECONDS = 60;
/** Wrong or right, codes tried for one address in an hour: a 6-digit code must not be guessable. */
const CODE_TRIES_PER_HOUR = 10;

export function registerSupabaseCompat(app: FastifyInstance, deps: Deps): void {
  const { config } = deps;
  const c = compatContext(deps);
  const sql = c.sql;

  async function authRateLimit(req: FastifyRequest): Promise<void> {
    if (config.authRateLimit === 0) return;
    const status = await q.takeRateLimit(sql, 'auth', clientIp(req), config.authRateLimit, AUTH_WINDOW_SECONDS);
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
  }

  const hooks = compatHooks(c);
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) {
      const mine = hooks[`${m} ${route.url}`];
      if (mine === undefined) continue;
      const r = route as unknown as Record<string, unknown>;
      for (const [stage, fn] of Object.entries(mine) as [HookStage, unknown][]) {
        const existing = r[stage];
        // Before the route's own hooks of that stage: the compat answer comes first.
        r[stage] = existing === undefined ? [fn] : [fn, ...(Array.isArray(existing) ? (existing as unknown[]) : [existing])];
      }
    }
  });

  app.post('/auth/v1/otp', { onRequest: authRateLimit }, async (req, reply) => {
    const b = req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    if (b.email === undefined && b.phone !== undefined) throw COMPAT_ERRORS.phoneUnsupported();
    if (typeof b.email !== 'string') throw ERRORS.invalidBody();
    if (b.data !== undefined && b.data !== null && !isPlainObject(b.data)) throw ERRORS.invalidBody();
    checkEmail(b.email);
    const pkce = pkceOf(b);
    const redirect = redirectTarget(config, queryOf(req).redirect_to);
    const status = await c.sendLink(req, 'magic_link', b.email, b.create_user !== false, b.data ?? null, redirect, pkce);
    if (status === 'not_found' && b.create_user === false) throw COMPAT_ERRORS.signupsNotAllowedForOtp();
    return reply.code(200).send({});
  });

  app.post('/auth/v1/verify', { onRequest: authRateLimit }, async (req, reply) => {
    const b = req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    let tokenHash: Buffer;
    if (typeof b.token_hash === 'string' && b.token_hash !== '') {
      tokenHash = hashToken(b.token_hash);
    } else if (typeof b.token === 'string' && typeof b.email === 'string') {
      checkEmail(b.email);
      const limit = await q.takeRateLimit(sql, 'otp_code', b.email.toLowerCase(), CODE_TRIES_PER_HOUR, 3600);
      if (limit === 'limited') throw AUTH_ERRORS.tooManyRequests();
      tokenHash = codeHash(b.email, b.token.trim());
    } else {
      throw ERRORS.invalidBody();
    }
    const s = await c.verify(req, b.type, tokenHash);
    if (s === null) throw AUTH_ERRORS.invalidOneTimeToken();
    return sendSession(reply, s);
  });
}
