/**
 * POST /auth/v1/token (docs/api/auth.md): the password grant (sign-in) and the refresh
 * grant (rotation, with reuse detection in SQL). `grant_type` comes from the JSON body only;
 * a query parameter of that name is ignored (SUPABASE_COMPAT reads it: compat/hooks.ts).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../../core/area.ts';
import { ERRORS, unreachable } from '../../core/errors.ts';
import * as q from '../db.ts';
import { AUTH_ERRORS } from '../errors.ts';
import { hashPassword, needsRehash, verifyPassword } from '../passwords.ts';
import { completePresignedSession, presignSession, sessionFromGrant } from '../sessions.ts';
import { hashToken, newOpaqueToken } from '../tokens.ts';
import { authRoom, body, grant, sendSession, str, type AuthRoom } from './room.ts';

const tokenSchema = {
  type: 'object',
  required: ['grant_type'],
  properties: { grant_type: { type: 'string', enum: ['password', 'refresh_token'] }, email: str, password: str, refresh_token: str },
} as const;

interface TokenBody {
  grant_type: 'password' | 'refresh_token';
  email?: string;
  password?: string;
  refresh_token?: string;
}

type TokenRequest = FastifyRequest<{ Body: TokenBody }>;

async function passwordGrant(room: AuthRoom, req: TokenRequest, reply: FastifyReply, b: TokenBody): Promise<FastifyReply> {
  const { deps, config, sql, audit } = room;
  const log = deps.log;
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

async function refreshGrant(room: AuthRoom, req: TokenRequest, reply: FastifyReply, b: TokenBody): Promise<FastifyReply> {
  const { deps, config, sql, audit } = room;
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

async function token(room: AuthRoom, req: TokenRequest, reply: FastifyReply): Promise<FastifyReply> {
  // grant_type comes from the JSON body only; a query parameter of that name is ignored.
  const b = body(req.body);
  switch (b.grant_type) {
    case 'password':
      return passwordGrant(room, req, reply, b);
    case 'refresh_token':
      return refreshGrant(room, req, reply, b);
    default:
      return unreachable(b.grant_type);
  }
}

export function registerTokenRoutes(app: FastifyInstance, deps: Deps): void {
  const room = authRoom(deps);
  app.post<{ Body: TokenBody }>('/auth/v1/token', { schema: { body: tokenSchema }, onRequest: room.authRateLimit }, (req, reply) =>
    token(room, req, reply),
  );
}
