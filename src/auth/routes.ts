/**
 * Accounts and sessions over HTTP (docs/api/auth.md without OAuth; docs/api/overview.md).
 *
 * Order of checks on every route: the credential or gate (onRequest: rate limit, anonymous
 * switch, JWT, service role) before the body is even read, then the body schema (any
 * failure: 400 `invalid request body`), then the rules of the fields, then one SQL entry
 * function whose `status` is switched on exhaustively.
 *
 * Level None endpoints never look at Authorization or apikey (docs/api/overview.md).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../core/area.ts';
import type { Credential } from '../core/credentials.ts';
import { ERRORS } from '../core/errors.ts';
import { clientIp } from '../core/http.ts';
import * as q from './db.ts';
import { hashPassword, needsRehash, verifyPassword } from './passwords.ts';
import { registerMfaRoutes } from './mfa.ts';
import { registerPasskeyRoutes } from './flows/passkeys.ts';
import { registerUserUpdateRoutes } from './user-update.ts';
import {
  auditContext,
  completePresignedSession,
  isOkGrant,
  presignSession,
  sessionFragmentUrl,
  sessionFromGrant,
  type OkGrant,
  type Session,
} from './sessions.ts';
import { hashToken, newOpaqueToken, seal } from './tokens.ts';
import { checkEmail, checkPassword, passwordProblem } from './validate.ts';
import { AUTH_ERRORS, MESSAGES } from './errors.ts';

/** Windows of docs/api/overview.md: the auth bucket counts per minute, guests per hour. */
const AUTH_WINDOW_SECONDS = 60;
const ANONYMOUS_WINDOW_SECONDS = 3600;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function unreachable(status: never): never {
  throw new Error(`unexpected status ${String(status)}`);
}

function body<T>(b: T | undefined): T {
  if (b === undefined || b === null || typeof b !== 'object' || Array.isArray(b)) throw ERRORS.invalidBody();
  return b;
}

/** Logout and anonymous sign-in accept an absent body (docs/api/auth.md); a present one must be an object. */
function optionalBody<T extends object>(b: unknown): Partial<T> {
  if (b === undefined) return {};
  return body(b as T);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function grant(g: q.SessionGrant): OkGrant {
  if (!isOkGrant(g)) throw new Error(`session grant without session: ${g.status}`);
  return g;
}

function sendSession(reply: FastifyReply, status: number, session: Session): FastifyReply {
  // RFC 6749 §5.1: token responses must not be cached.
  return reply.code(status).header('cache-control', 'no-store').send(session);
}

// ── body schemas (ajv; coercion off, so a wrong JSON type fails) ─────────────────────────

const str = { type: 'string' } as const;
const obj = { type: 'object' } as const;

const signupSchema = { type: 'object', required: ['email', 'password'], properties: { email: str, password: str, data: obj } } as const;
const tokenSchema = {
  type: 'object',
  required: ['grant_type'],
  properties: { grant_type: { type: 'string', enum: ['password', 'refresh_token'] }, email: str, password: str, refresh_token: str },
} as const;
const emailSchema = { type: 'object', required: ['email'], properties: { email: str } } as const;
const recoverConfirmSchema = { type: 'object', required: ['token', 'password'], properties: { token: str, password: str } } as const;
const adminCreateSchema = {
  type: 'object',
  required: ['email'],
  properties: {
    email: str,
    password: str,
    role: { type: 'string', enum: ['anon', 'authenticated', 'service_role'] },
    email_confirm: { type: 'boolean' },
  },
} as const;

interface SignupBody {
  email: string;
  password: string;
  data?: Record<string, unknown>;
}
interface TokenBody {
  grant_type: 'password' | 'refresh_token';
  email?: string;
  password?: string;
  refresh_token?: string;
}
interface AnonymousBody {
  data?: Record<string, unknown>;
}
interface EmailBody {
  email: string;
}
interface RecoverConfirmBody {
  token: string;
  password: string;
}
interface AdminCreateBody {
  email: string;
  password?: string;
  role?: 'anon' | 'authenticated' | 'service_role';
  email_confirm?: boolean;
}
interface TokenQuery {
  token?: unknown;
}

export function registerAuthRoutes(app: FastifyInstance, deps: Deps): void {
  const { config, db, credentials, log } = deps;
  const sql = db.sql;
  const users = new WeakMap<FastifyRequest, Credential & { userId: string }>();
  const audit = (req: FastifyRequest) => auditContext(req, config);

  // ── gates (onRequest: before the body is read or validated) ───────────────────────────

  /** AUTH_RATE_LIMIT per client IP and minute, summed over signup, token, recover, magiclink. */
  async function authRateLimit(req: FastifyRequest): Promise<void> {
    if (config.authRateLimit === 0) return;
    const status = await q.takeRateLimit(sql, 'auth', clientIp(req, config.trustProxy), config.authRateLimit, AUTH_WINDOW_SECONDS);
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
  }

  /** ALLOW_ANONYMOUS_SIGNIN, then ANONYMOUS_RATE_LIMIT per client IP and hour. */
  async function anonymousGate(req: FastifyRequest): Promise<void> {
    if (!config.allowAnonymousSignin) throw AUTH_ERRORS.anonymousDisabled();
    if (config.anonymousRateLimit === 0) return;
    const status = await q.takeRateLimit(sql, 'anonymous', clientIp(req, config.trustProxy), config.anonymousRateLimit, ANONYMOUS_WINDOW_SECONDS);
    if (status === 'limited') throw AUTH_ERRORS.tooManyRequests();
  }

  async function userGate(req: FastifyRequest): Promise<void> {
    users.set(req, await credentials.user(req));
  }

  function userOf(req: FastifyRequest): Credential & { userId: string } {
    const cred = users.get(req);
    if (cred === undefined) throw ERRORS.invalidToken();
    return cred;
  }

  const serviceRoleGate = credentials.requireRole('service_role');

  // ── signup and sign-in ─────────────────────────────────────────────────────────────────

  app.post<{ Body: SignupBody }>('/auth/v1/signup', { schema: { body: signupSchema }, onRequest: authRateLimit }, async (req, reply) => {
    const b = body(req.body);
    checkEmail(b.email);
    checkPassword(b.password);
    const passwordHash = await hashPassword(b.password);
    let verification: { hash: Buffer; sealed: string } | null = null;
    let refresh: ReturnType<typeof newOpaqueToken> | null = null;
    if (config.requireEmailVerification) {
      const t = newOpaqueToken();
      verification = { hash: t.hash, sealed: seal(config.secret, t.token) };
    } else {
      refresh = newOpaqueToken();
    }
    const r = await q.signUp(sql, {
      email: b.email,
      passwordHash,
      userMetadata: b.data ?? null,
      verification,
      refreshHash: refresh?.hash ?? null,
      refreshTtl: config.refreshTokenTtl,
      context: audit(req),
    });
    switch (r.status) {
      case 'ok':
        return sendSession(reply, 201, await sessionFromGrant(deps, grant(r), refresh!.token, 'password'));
      case 'confirmation_sent':
        return reply.code(200).send({ message: MESSAGES.confirmationSent });
      case 'email_taken':
        throw AUTH_ERRORS.emailTaken();
      default:
        return unreachable(r.status);
    }
  });

  app.post<{ Body: TokenBody }>('/auth/v1/token', { schema: { body: tokenSchema }, onRequest: authRateLimit }, async (req, reply) => {
    // grant_type comes from the JSON body only; a query parameter of that name is ignored.
    const b = body(req.body);
    switch (b.grant_type) {
      case 'password': {
        if (typeof b.email !== 'string' || typeof b.password !== 'string') throw ERRORS.invalidBody();
        const c = await q.passwordCredentials(sql, b.email);
        const hash = c.status === 'ok' ? c.password_hash : null;
        // Known account: sign its access token while argon2 runs (see presignSession).
        const presigned =
          c.user_id !== null && c.role !== null && c.is_anonymous !== null && c.app_metadata !== null
            ? presignSession(deps, { id: c.user_id, role: c.role, email: c.user_email, is_anonymous: c.is_anonymous, app_metadata: c.app_metadata })
            : null;
        // Unknown address or no password: a dummy verification of the same cost (no enumeration).
        const matches = await verifyPassword(hash, b.password);
        // Awaiting confirmation answers 403 whatever the password (docs/api/auth.md, condition
        // "any"); the hash was verified all the same, so the timing tells nothing more.
        if (presigned !== null && config.requireEmailVerification && c.email_confirmed !== true) throw AUTH_ERRORS.emailNotVerified();
        if (!matches || presigned === null || hash === null) {
          await q.recordFailedSignIn(sql, b.email, audit(req));
          throw AUTH_ERRORS.invalidCredentials();
        }
        // The user may be deleted between the two calls: that answers 404 `user not found`.
        const session = await completePresignedSession(deps, presigned, audit(req));
        if (needsRehash(hash)) {
          const userId = presigned.claims.sub;
          const password = b.password;
          void hashPassword(password)
            .then((h) => q.rehashPassword(sql, userId, hash, h))
            .catch((err: unknown) => log.warn({ err }, 'password rehash failed'));
        }
        return sendSession(reply, 200, session);
      }
      case 'refresh_token': {
        if (typeof b.refresh_token !== 'string') throw ERRORS.invalidBody();
        const next = newOpaqueToken();
        const r = await q.rotateRefreshToken(sql, hashToken(b.refresh_token), next.hash, config.refreshTokenTtl, audit(req));
        switch (r.status) {
          case 'ok':
            return sendSession(reply, 200, await sessionFromGrant(deps, grant(r), next.token, 'token_refresh'));
          case 'invalid':
          case 'revoked':
            throw AUTH_ERRORS.invalidRefreshToken();
          case 'reuse_detected':
            throw AUTH_ERRORS.refreshTokenReuse();
          case 'expired':
            throw AUTH_ERRORS.refreshTokenExpired();
          default:
            return unreachable(r.status);
        }
      }
      default:
        return unreachable(b.grant_type);
    }
  });

  app.post<{ Body: AnonymousBody | undefined }>(
    '/auth/v1/anonymous',
    // No body schema: fastify would refuse an absent body, which this endpoint accepts.
    { onRequest: anonymousGate },
    async (req, reply) => {
      const b = optionalBody<AnonymousBody>(req.body);
      if (b.data !== undefined && !isPlainObject(b.data)) throw ERRORS.invalidBody();
      const refresh = newOpaqueToken();
      const r = await q.signInAnonymously(sql, config.anonymousRole, b.data ?? null, refresh.hash, config.refreshTokenTtl, audit(req));
      switch (r.status) {
        case 'ok':
          return sendSession(reply, 201, await sessionFromGrant(deps, grant(r), refresh.token, 'anonymous'));
        default:
          return unreachable(r.status);
      }
    },
  );

  // ── the signed-in user ────────────────────────────────────────────────────────────────

  app.get('/auth/v1/user', { onRequest: userGate }, async (req, reply) => {
    const r = await q.getUser(sql, userOf(req).userId);
    switch (r.status) {
      case 'ok':
        return reply.send(r.user_json);
      case 'not_found':
        throw AUTH_ERRORS.userNotFound();
      default:
        return unreachable(r.status);
    }
  });

  registerUserUpdateRoutes(app, deps, { userGate, userOf, audit });

  app.post('/auth/v1/logout', { onRequest: userGate }, async (req, reply) => {
    const cred = userOf(req);
    optionalBody(req.body); // absent or an object ({} is what clients send)
    const sessionId = cred.claimsObject.session_id;
    // A token without a session (made by hand with the secret) has no family to end.
    if (typeof sessionId === 'string' && UUID.test(sessionId)) {
      const status = await q.endSession(sql, sessionId, cred.userId, audit(req));
      switch (status) {
        case 'ok':
        case 'not_found': // already ended: logging out twice is not an error
          break;
        default:
          return unreachable(status);
      }
    }
    return reply.code(204).send();
  });

  // ── password recovery ─────────────────────────────────────────────────────────────────

  app.post<{ Body: EmailBody }>('/auth/v1/recover', { schema: { body: emailSchema }, onRequest: authRateLimit }, async (req, reply) => {
    const b = body(req.body);
    checkEmail(b.email);
    const t = newOpaqueToken();
    const status = await q.requestRecovery(sql, b.email, t.hash, seal(config.secret, t.token), config.mailRateLimitPerHour, audit(req));
    switch (status) {
      case 'sent':
      case 'not_found': // the same answer either way (no enumeration)
      case 'limited': // and silently nothing over MAIL_RATE_LIMIT_PER_HOUR
        return reply.code(200).send({ message: MESSAGES.recoverySent });
      default:
        return unreachable(status);
    }
  });

  app.post<{ Body: RecoverConfirmBody }>('/auth/v1/recover/confirm', { schema: { body: recoverConfirmSchema } }, async (req, reply) => {
    const b = body(req.body);
    const tokenHash = hashToken(b.token);
    const problem = passwordProblem(b.password);
    if (problem) {
      // A used or expired token answers `invalid or expired token` whatever the password (docs/api/auth.md).
      if ((await q.checkRecoveryToken(sql, tokenHash)) === 'invalid') throw AUTH_ERRORS.invalidOneTimeToken();
      throw problem;
    }
    const status = await q.confirmRecovery(sql, tokenHash, await hashPassword(b.password), audit(req));
    switch (status) {
      case 'ok':
        return reply.code(200).send({ message: MESSAGES.passwordUpdated });
      case 'invalid':
        throw AUTH_ERRORS.invalidOneTimeToken();
      default:
        return unreachable(status);
    }
  });

  // ── magic link and email verification ────────────────────────────────────────────────

  app.post<{ Body: EmailBody }>('/auth/v1/magiclink', { schema: { body: emailSchema }, onRequest: authRateLimit }, async (req, reply) => {
    const b = body(req.body);
    checkEmail(b.email);
    const t = newOpaqueToken();
    const status = await q.requestMagicLink(sql, b.email, t.hash, seal(config.secret, t.token), config.mailRateLimitPerHour);
    switch (status) {
      case 'sent':
      case 'not_found': // sent only to registered addresses; the same answer either way
      case 'limited': // and silently nothing over MAIL_RATE_LIMIT_PER_HOUR
        return reply.code(200).send({ message: MESSAGES.magicLinkSent });
      default:
        return unreachable(status);
    }
  });

  // No automatic HEAD route: a HEAD (link preview, mail scanner) must not use the token.
  app.get<{ Querystring: TokenQuery }>('/auth/v1/magiclink/verify', { exposeHeadRoute: false }, async (req, reply) => {
    const token = req.query.token;
    if (typeof token !== 'string' || token === '') throw AUTH_ERRORS.invalidOneTimeToken();
    const refresh = newOpaqueToken();
    const r = await q.verifyMagicLink(sql, hashToken(token), refresh.hash, config.refreshTokenTtl, audit(req));
    switch (r.status) {
      case 'ok': {
        const session = await sessionFromGrant(deps, grant(r), refresh.token, 'magiclink');
        return reply
          .code(302)
          .header('cache-control', 'no-store')
          .header('referrer-policy', 'no-referrer')
          .header('location', sessionFragmentUrl(config.siteUrl, session))
          .send();
      }
      case 'invalid':
        throw AUTH_ERRORS.invalidOneTimeToken();
      default:
        return unreachable(r.status);
    }
  });

  app.get<{ Querystring: TokenQuery }>('/auth/v1/verify', { exposeHeadRoute: false }, async (req, reply) => {
    const token = req.query.token;
    if (typeof token !== 'string' || token === '') throw AUTH_ERRORS.invalidOneTimeToken();
    const status = await q.verifyEmail(sql, hashToken(token));
    switch (status) {
      case 'ok':
        return reply.code(200).send({ message: MESSAGES.emailVerified });
      case 'invalid':
        throw AUTH_ERRORS.invalidOneTimeToken();
      default:
        return unreachable(status);
    }
  });

  // ── admin (service_role) ─────────────────────────────────────────────────────────────

  app.get('/auth/v1/admin/users', { onRequest: serviceRoleGate }, async (_req, reply) => {
    return reply.code(200).type('application/json; charset=utf-8').send(await q.listUsers(sql));
  });

  app.post<{ Body: AdminCreateBody }>(
    '/auth/v1/admin/users',
    { schema: { body: adminCreateSchema }, onRequest: serviceRoleGate },
    async (req, reply) => {
      // Unknown fields (user_metadata, data …) are ignored: the admin API has no metadata field.
      const b = body(req.body);
      checkEmail(b.email);
      if (b.password !== undefined) checkPassword(b.password);
      const r = await q.adminCreateUser(sql, {
        email: b.email,
        passwordHash: b.password === undefined ? null : await hashPassword(b.password),
        role: b.role ?? 'authenticated',
        emailConfirm: b.email_confirm === true,
        context: audit(req),
      });
      switch (r.status) {
        case 'ok':
          return reply.code(201).send(r.user_json);
        case 'email_taken':
          throw AUTH_ERRORS.emailTaken();
        default:
          return unreachable(r.status);
      }
    },
  );

  app.delete<{ Params: { id: string } }>('/auth/v1/admin/users/:id', { onRequest: serviceRoleGate }, async (req, reply) => {
    if (!UUID.test(req.params.id)) throw AUTH_ERRORS.invalidUserId();
    const status = await q.deleteUser(sql, req.params.id, audit(req));
    switch (status) {
      case 'ok':
        return reply.code(204).send();
      case 'not_found':
        throw AUTH_ERRORS.userNotFound();
      default:
        return unreachable(status);
    }
  });

  registerMfaRoutes(app, deps, { userGate, userOf, serviceRoleGate, audit });
  registerPasskeyRoutes(app, deps);
}
