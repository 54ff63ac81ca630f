/**
 * SUPABASE_COMPAT=true: auth as GoTrue answers it, for what auth-js sends (docs/api/supabase.md).
 * Registered before the interface's auth routes, and only under the setting:
 *
 * - hooks on existing routes (an `onRoute` hook attaches them to those routes only):
 *   `grant_type` from the query of POST /token; POST /signup without an address is a guest
 *   sign-in; GET /verify with a `type` verifies and redirects with the session in the
 *   fragment; POST /recover honours `redirect_to`; POST /logout honours `scope`; sessions
 *   and users leave in GoTrue's shape (preSerialization);
 * - two routes of its own: POST /auth/v1/otp and POST /auth/v1/verify.
 * (PUT /auth/v1/user reaches PATCH's route: src/core/http.ts rewrites the method.)
 *
 * The state stays in SQL (sql/fixtures/auth/compat.sql and the one-time tokens).
 */
import { createHash, randomInt } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { ERRORS } from '../../core/errors.ts';
import { clientIp } from '../../core/http.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS } from '../routes.ts';
import { auditContext, isOkGrant, sessionFromGrant, type Session } from '../sessions.ts';
import { hashToken, newOpaqueToken, seal } from '../tokens.ts';
import { checkEmail } from '../validate.ts';
import { compatEndSessions, compatSendLink, compatVerify } from './db.ts';
import { COMPAT_ERRORS, compatFragmentUrl, compatSession, compatUser, errorFragmentUrl, redirectTarget, type GoTrueSession } from './shape.ts';

type Hook = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
type Body = Record<string, unknown>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const AUTH_WINDOW_SECONDS = 60;
/** Wrong or right, codes tried for one address in an hour: a 6-digit code must not be guessable. */
const CODE_TRIES_PER_HOUR = 10;

function isPlainObject(v: unknown): v is Body {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function queryOf(req: FastifyRequest): Record<string, unknown> {
  return (req.query ?? {}) as Record<string, unknown>;
}

/**
 * The 6-digit code's hash: over the address and the code, so that it names one address;
 * after a 0xff byte, which no UTF-8 text holds, so that no token any route hashes
 * (`hashToken`: /magiclink/verify, /recover/confirm, `token_hash`) can ever equal it and
 * reach a code past the per-address limit on tries.
 */
export function codeHash(email: string, code: string): Buffer {
  return createHash('sha256').update(Buffer.from([0xff])).update(`otp:${email.toLowerCase()}:${code}`, 'utf8').digest();
}

/** The one-time token kinds a GoTrue verification `type` may use, in order. */
function kindsOf(type: unknown): ('magic_link' | 'verification' | 'recovery')[] {
  switch (type) {
    case 'magiclink':
    case 'email':
      return ['magic_link'];
    case 'signup':
    case 'invite':
      return ['magic_link', 'verification'];
    case 'recovery':
      return ['recovery'];
    case 'email_change': // plinth changes an address at once: no such token is ever sent
      return [];
    default:
      throw COMPAT_ERRORS.unsupportedType();
  }
}

function sendSession(reply: FastifyReply, s: GoTrueSession): FastifyReply {
  return reply.code(200).header('cache-control', 'no-store').send(s);
}

export function registerSupabaseCompat(app: FastifyInstance, deps: Deps): void {
  const { config, db, credentials } = deps;
  const sql = db.sql;
  const audit = (req: FastifyRequest) => auditContext(req, config);

  async function authRateLimit(req: FastifyRequest): Promise<void> {
    if (config.authRateLimit === 0) return;
    const status = await q.takeRateLimit(sql, 'auth', clientIp(req), config.authRateLimit, AUTH_WINDOW_SECONDS);
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
  }

  /** Use a token of one of `type`'s kinds and open a session; null when none is valid. */
  async function verify(req: FastifyRequest, type: unknown, tokenHash: Buffer): Promise<GoTrueSession | null> {
    const refresh = newOpaqueToken();
    for (const kind of kindsOf(type)) {
      const g = await compatVerify(sql, kind, tokenHash, refresh.hash, config.refreshTokenTtl, audit(req));
      if (g.status === 'ok' && isOkGrant(g)) {
        const method = kind === 'magic_link' ? 'magiclink' : kind === 'recovery' ? 'recovery' : 'otp';
        return compatSession(deps, await sessionFromGrant(deps, g, refresh.token, method));
      }
    }
    return null;
  }

  // ── hooks on the interface's routes ──────────────────────────────────────────────────

  /** POST /token?grant_type=…: auth-js puts the grant type in the query. */
  const grantFromQuery: Hook = async (req) => {
    const g = queryOf(req).grant_type;
    if (typeof g === 'string' && isPlainObject(req.body) && req.body.grant_type === undefined) req.body = { ...req.body, grant_type: g };
  };

  /** POST /signup with neither email nor phone: signInAnonymously. */
  const anonymousSignup: Hook = async (req, reply) => {
    const b = req.body === undefined ? {} : req.body;
    if (!isPlainObject(b)) return;
    if (b.phone !== undefined && b.email === undefined) throw COMPAT_ERRORS.phoneUnsupported();
    if (b.email !== undefined || b.password !== undefined) return;
    if (!config.allowAnonymousSignin) throw AUTH_ERRORS.anonymousDisabled();
    if (config.anonymousRateLimit > 0) {
      const status = await q.takeRateLimit(sql, 'anonymous', clientIp(req), config.anonymousRateLimit, 3600);
      if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
    }
    if (b.data !== undefined && !isPlainObject(b.data)) throw ERRORS.invalidBody();
    const data = b.data ?? null;
    const refresh = newOpaqueToken();
    const r = await q.signInAnonymously(sql, config.anonymousRole, data, refresh.hash, config.refreshTokenTtl, audit(req));
    if (!isOkGrant(r)) throw ERRORS.internal(new Error(`anonymous sign-in: ${r.status}`));
    return sendSession(reply, await compatSession(deps, await sessionFromGrant(deps, r, refresh.token, 'anonymous')));
  };

  /** GET /verify?token=…&type=…&redirect_to=…: the link of a compat mail. */
  const verifyLink: Hook = async (req, reply) => {
    const query = queryOf(req);
    if (query.type === undefined) return; // the interface's email verification
    const target = redirectTarget(config, query.redirect_to);
    const token = query.token;
    const s = typeof token === 'string' && token !== '' ? await verify(req, query.type, hashToken(token)) : null;
    const location =
      s === null ? errorFragmentUrl(target, 'otp_expired', 'Email link is invalid or has expired') : compatFragmentUrl(target, s, typeof query.type === 'string' ? query.type : '');
    return reply.code(303).header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').header('location', location).send();
  };

  /** POST /recover?redirect_to=…: the mail's link opens a session at the redirect (PASSWORD_RECOVERY). */
  const recover: Hook = async (req, reply) => {
    const b = req.body as { email: string };
    checkEmail(b.email);
    const redirect = redirectTarget(config, queryOf(req).redirect_to);
    await sendLink(req, 'recovery', b.email, false, null, redirect);
    return reply.code(200).send({});
  };

  /** POST /logout?scope=global|local|others (auth-js sends global by default). */
  const logout: Hook = async (req, reply) => {
    const scope = queryOf(req).scope;
    if (scope === undefined) return;
    if (scope !== 'global' && scope !== 'local' && scope !== 'others') throw COMPAT_ERRORS.invalidScope();
    const cred = await credentials.user(req);
    const sid = cred.claimsObject.session_id;
    await compatEndSessions(sql, cred.userId, typeof sid === 'string' && UUID.test(sid) ? sid : null, scope, audit(req));
    return reply.code(204).send();
  };

  /** Sessions and users leave in GoTrue's shape. */
  const reshape = async (_req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    if (!isPlainObject(payload) || typeof payload.id !== 'string' && !isPlainObject(payload.user)) return payload;
    if (reply.statusCode === 201) reply.code(200); // GoTrue's sign-ups answer 200
    if (typeof payload.access_token === 'string' && isPlainObject(payload.user)) return compatSession(deps, payload as unknown as Session);
    if (typeof payload.id === 'string' && UUID.test(payload.id) && 'user_metadata' in payload) return (await compatUser(sql, payload.id)) ?? payload;
    return payload;
  };

  const HOOKS: Record<string, Partial<Record<'preValidation' | 'preHandler' | 'preSerialization', unknown>>> = {
    'POST /auth/v1/token': { preValidation: grantFromQuery, preSerialization: reshape },
    'POST /auth/v1/signup': { preValidation: anonymousSignup, preSerialization: reshape },
    'GET /auth/v1/verify': { preHandler: verifyLink },
    'POST /auth/v1/recover': { preHandler: recover },
    'POST /auth/v1/logout': { preHandler: logout },
    'POST /auth/v1/anonymous': { preSerialization: reshape },
    'GET /auth/v1/user': { preSerialization: reshape },
    'PATCH /auth/v1/user': { preSerialization: reshape },
    'POST /auth/v1/factors/:id/verify': { preSerialization: reshape },
  };

  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) {
      const hooks = HOOKS[`${m} ${route.url}`];
      if (hooks === undefined) continue;
      for (const [name, fn] of Object.entries(hooks) as [keyof typeof hooks, unknown][]) {
        const r = route as unknown as Record<string, unknown>;
        const existing = r[name];
        // Before the route's own hooks of that stage: the compat answer comes first.
        r[name] = existing === undefined ? [fn] : [fn, ...(Array.isArray(existing) ? (existing as unknown[]) : [existing])];
      }
    }
  });

  // ── POST /auth/v1/otp and POST /auth/v1/verify ───────────────────────────────────────

  /** Issue a link token and a 6-digit code to `email` (one mail); the status of auth.compat_send_link. */
  async function sendLink(req: FastifyRequest, kind: 'magic_link' | 'recovery', email: string, createUser: boolean, data: Body | null, redirect: string) {
    const link = newOpaqueToken();
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    return compatSendLink(sql, {
      kind,
      email,
      createUser,
      data,
      linkHash: link.hash,
      sealedToken: seal(config.secret, link.token),
      codeHash: codeHash(email, code),
      sealedCode: seal(config.secret, code),
      redirectTo: redirect,
      mailLimit: config.mailRateLimitPerHour,
      context: audit(req),
    });
  }

  app.post('/auth/v1/otp', { onRequest: authRateLimit }, async (req, reply) => {
    const b = req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    if (b.email === undefined && b.phone !== undefined) throw COMPAT_ERRORS.phoneUnsupported();
    if (typeof b.email !== 'string') throw ERRORS.invalidBody();
    if (b.data !== undefined && b.data !== null && !isPlainObject(b.data)) throw ERRORS.invalidBody();
    checkEmail(b.email);
    const redirect = redirectTarget(config, queryOf(req).redirect_to);
    const status = await sendLink(req, 'magic_link', b.email, b.create_user !== false, b.data ?? null, redirect);
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
    const s = await verify(req, b.type, tokenHash);
    if (s === null) throw AUTH_ERRORS.invalidOneTimeToken();
    return sendSession(reply, s);
  });
}
