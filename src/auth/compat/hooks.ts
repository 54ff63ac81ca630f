/**
 * SUPABASE_COMPAT: the hooks on the interface's auth routes (routes.ts attaches them to
 * those routes only): what each adds to its route, or answers instead of it.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERRORS } from '../../core/errors.ts';
import { clientIp } from '../../core/http.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { isOkGrant, sessionFromGrant, type Session } from '../sessions.ts';
import { hashToken, newOpaqueToken } from '../tokens.ts';
import { checkEmail } from '../validate.ts';
import { compatEndSessions } from './db.ts';
import { COMPAT_ERRORS, compatFragmentUrl, compatSession, compatUser, errorFragmentUrl, redirectTarget, type GoTrueSession } from './shape.ts';
import { isPlainObject, sendSession, UUID } from '../flows/room.ts';
import { queryOf, type Compat, type Hook } from './context.ts';
import { adminHooks } from './admin.ts';
import { codeRedirectUrl, linkFlow, pkceGrant, pkceOf, type LinkFlow } from './pkce.ts';

/** POST /token?grant_type=…: auth-js puts the grant type in the query; `pkce` is answered here (pkce.ts). */
function grantFromQuery(c: Compat): Hook {
  const pkce = pkceGrant(c);
  return async (req, reply) => {
    const g = queryOf(req).grant_type;
    if (!isPlainObject(req.body)) return;
    if (req.body.grant_type === 'pkce' || (g === 'pkce' && req.body.grant_type === undefined)) return pkce(req, reply);
    if (typeof g === 'string' && req.body.grant_type === undefined) req.body = { ...req.body, grant_type: g };
  };
}

/** POST /signup with neither email nor phone: signInAnonymously. */
function anonymousSignup(c: Compat): Hook {
  const { deps, sql } = c;
  const { config } = deps;
  return async (req, reply) => {
    const b = req.body === undefined ? {} : req.body;
    if (!isPlainObject(b)) return;
    if (b.phone !== undefined && b.email === undefined) throw COMPAT_ERRORS.phoneUnsupported();
    if (b.email !== undefined || b.password !== undefined) return;
    if (!config.allowAnonymousSignin) throw AUTH_ERRORS.anonymousDisabled();
    if (config.anonymousRateLimit > 0) {
      const status = await q.takeRateLimit(sql, 'anonymous', clientIp(req, config.trustProxy), config.anonymousRateLimit, 3600);
      if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
    }
    if (b.data !== undefined && !isPlainObject(b.data)) throw ERRORS.invalidBody();
    const refresh = newOpaqueToken();
    const r = await q.signInAnonymously(sql, config.anonymousRole, b.data ?? null, refresh.hash, config.refreshTokenTtl, c.audit(req));
    if (!isOkGrant(r)) throw ERRORS.internal(new Error(`anonymous sign-in: ${r.status}`));
    return sendSession(reply, 200, await compatSession(deps, await sessionFromGrant(deps, r, refresh.token, 'anonymous')));
  };
}

/** c.verify, or `taken`: an email change to an address another account took meanwhile (409; nothing changed). */
async function verifyOrTaken(c: Compat, req: FastifyRequest, type: unknown, token: Buffer): Promise<GoTrueSession | null | 'taken'> {
  try {
    return await c.verify(req, type, token);
  } catch (err) {
    if (err instanceof AppError && err.status === 409) return 'taken';
    throw err;
  }
}

/** GET /verify?token=…&type=…&redirect_to=…: the link of a compat mail; the redirect is checked first. */
function verifyLink(c: Compat): Hook {
  return async (req, reply) => {
    const query = queryOf(req);
    if (query.type === undefined) return; // the interface's email verification
    const target = redirectTarget(c.deps.config, query.redirect_to);
    const token = typeof query.token === 'string' && query.token !== '' ? hashToken(query.token) : null;
    // An email change's link is not a one-time token of a PKCE flow: always the implicit flow.
    const link: LinkFlow = token === null ? { flow: 'invalid' } : query.type === 'email_change' ? { flow: 'implicit' } : await linkFlow(c, query.type, token);
    let location: string;
    if (link.flow === 'pkce') {
      location = codeRedirectUrl(target, link.code); // the auth code on the query: exchangeCodeForSession
    } else {
      const s = link.flow === 'implicit' ? await verifyOrTaken(c, req, query.type, token!) : null;
      const type = typeof query.type === 'string' ? query.type : '';
      if (s === 'taken') location = errorFragmentUrl(target, 'email_exists', 'A user with this email address has already been registered');
      else location = s === null ? errorFragmentUrl(target, 'otp_expired', 'Email link is invalid or has expired') : compatFragmentUrl(target, s, type);
    }
    return reply.code(303).header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').header('location', location).send();
  };
}

/** POST /recover?redirect_to=…: the mail's link opens a session at the redirect (PASSWORD_RECOVERY). */
function recover(c: Compat): Hook {
  return async (req, reply) => {
    const b = req.body as { email: string };
    checkEmail(b.email);
    const pkce = pkceOf(b);
    const redirect = redirectTarget(c.deps.config, queryOf(req).redirect_to);
    await c.sendLink(req, 'recovery', b.email, false, null, redirect, pkce); // the same answer whatever the status
    return reply.code(200).send({});
  };
}

/** POST /logout?scope=global|local|others (auth-js sends global by default). */
function logout(c: Compat): Hook {
  return async (req, reply) => {
    const scope = queryOf(req).scope;
    if (scope === undefined) return;
    if (scope !== 'global' && scope !== 'local' && scope !== 'others') throw COMPAT_ERRORS.invalidScope();
    const cred = await c.deps.credentials.user(req);
    const sid = cred.claimsObject.session_id;
    await compatEndSessions(c.sql, cred.userId, typeof sid === 'string' && UUID.test(sid) ? sid : null, scope, c.audit(req));
    return reply.code(204).send();
  };
}

/** Sessions and users leave in GoTrue's shape (preSerialization: object payloads only). */
function reshape(c: Compat) {
  return async (_req: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
    if (!isPlainObject(payload) || (typeof payload.id !== 'string' && !isPlainObject(payload.user))) return payload;
    if (reply.statusCode === 201) reply.code(200); // GoTrue's sign-ups answer 200
    if (typeof payload.access_token === 'string' && isPlainObject(payload.user)) return compatSession(c.deps, payload as unknown as Session);
    if (typeof payload.id === 'string' && UUID.test(payload.id) && 'user_metadata' in payload) return (await compatUser(c.sql, payload.id)) ?? payload;
    return payload;
  };
}

export type HookStage = 'preValidation' | 'preHandler' | 'preSerialization';

/** `METHOD url` of an interface route → its compat hooks. */
export function compatHooks(c: Compat): Record<string, Partial<Record<HookStage, unknown>>> {
  const shaped = reshape(c);
  return {
    'POST /auth/v1/token': { preValidation: grantFromQuery(c), preSerialization: shaped },
    'POST /auth/v1/signup': { preValidation: anonymousSignup(c), preSerialization: shaped },
    'GET /auth/v1/verify': { preHandler: verifyLink(c) },
    'POST /auth/v1/recover': { preHandler: recover(c) },
    'POST /auth/v1/logout': { preHandler: logout(c) },
    'POST /auth/v1/anonymous': { preSerialization: shaped },
    'GET /auth/v1/user': { preSerialization: shaped },
    'PATCH /auth/v1/user': { preSerialization: shaped },
    'PUT /auth/v1/user': { preSerialization: shaped }, // auth-js's updateUser (flows/user.ts registers PUT beside PATCH)
    'POST /auth/v1/factors/:id/verify': { preSerialization: shaped },
    'GET /auth/v1/admin/users/:id': { preSerialization: shaped },
    'PUT /auth/v1/admin/users/:id': { preSerialization: shaped },
    'POST /auth/v1/invite': { preSerialization: shaped },
    ...adminHooks(c),
  };
}
