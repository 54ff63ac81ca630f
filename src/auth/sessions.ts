/**
 * Sessions (docs/api/auth.md): every way of signing in (password, refresh, magic link, OAuth,
 * guest, signup) ends here. SQL opens or rotates the refresh-token family and returns a
 * `SessionGrant`; this module signs the access token and shapes the Session.
 *
 * Stable API for other auth modules (OAuth included):
 * - `issueSession(deps, userId)`: start a family for an existing user → Session.
 * - `newOpaqueToken()` + a SQL entry function that calls `auth.start_session` itself, then
 *   `sessionFromGrant(deps, grant, refreshToken)`, when the session must start in the same
 *   transaction as other work (signup, magic link, guest).
 * - `presignSession` + `completePresignedSession`: password sign-in, which signs the
 *   access token while argon2 runs (see there).
 */
import { randomUUID } from 'node:crypto';
import type { Deps } from '../core/area.ts';
import { AppError } from '../core/errors.ts';
import type { Session, User } from '../shared/wire.ts';
import { startSession, type SessionGrant } from './db.ts';
import { newOpaqueToken, signAccessToken, type AccessTokenClaims, type OpaqueToken } from './tokens.ts';

export type { Session, User };

export type SessionDeps = Pick<Deps, 'config' | 'db'>;

/** A grant whose status is `ok`: the fields SQL returns when a family was opened or rotated. */
export interface OkGrant {
  session_id: string;
  is_anonymous: boolean;
  user_json: User;
}

export function isOkGrant(g: SessionGrant): g is SessionGrant & OkGrant {
  return g.status === 'ok' && g.session_id !== null && g.user_json !== null;
}

/** Sign the access token for a grant and shape the Session around the refresh token. */
export async function sessionFromGrant(deps: Pick<Deps, 'config'>, grant: OkGrant, refreshToken: string): Promise<Session> {
  const { config } = deps;
  const user = grant.user_json;
  const access_token = await signAccessToken(
    config.secret,
    { sub: user.id, role: user.role, email: user.email, session_id: grant.session_id, is_anonymous: grant.is_anonymous },
    config.accessTokenTtl,
  );
  return { access_token, refresh_token: refreshToken, expires_in: config.accessTokenTtl, token_type: 'bearer', user };
}

/** Start a new refresh-token family for `userId` and return the full Session. 404 `user not found` if the user is gone. */
export async function issueSession(deps: SessionDeps, userId: string): Promise<Session> {
  const refresh = newOpaqueToken();
  const grant = await startSession(deps.db.sql, userId, refresh.hash, deps.config.refreshTokenTtl);
  if (!isOkGrant(grant)) throw new AppError(404, 'user not found');
  return sessionFromGrant(deps, grant, refresh.token);
}

/**
 * Password sign-in signs the access token *while* argon2 verifies the password, not after.
 * Both run on libuv's thread pool (jose signs through WebCrypto, whose HMAC is a pool job):
 * signed afterwards, the tiny HMAC job would queue behind other requests' argon2 jobs, and
 * a request would wait for the pool twice, which measurably lowers sign-in throughput
 * under load. So the family id is drawn here, the token signed at once, and the family
 * opened with that id only if the password matched (`completePresignedSession`); a token
 * signed for a wrong password is dropped unused.
 */
export interface PresignedSession {
  claims: AccessTokenClaims;
  refresh: OpaqueToken;
  accessToken: Promise<string>;
}

export function presignSession(
  deps: Pick<Deps, 'config'>,
  user: { id: string; role: string; email: string | null; is_anonymous: boolean },
): PresignedSession {
  const claims: AccessTokenClaims = {
    sub: user.id,
    role: user.role,
    email: user.email,
    session_id: randomUUID(),
    is_anonymous: user.is_anonymous,
  };
  const accessToken = signAccessToken(deps.config.secret, claims, deps.config.accessTokenTtl);
  accessToken.catch(() => {}); // awaited later, or dropped when the password is wrong
  return { claims, refresh: newOpaqueToken(), accessToken };
}

/** Open the family of a presigned session. 404 `user not found` if the user is gone. */
export async function completePresignedSession(deps: SessionDeps, p: PresignedSession): Promise<Session> {
  const grant = await startSession(deps.db.sql, p.claims.sub, p.refresh.hash, deps.config.refreshTokenTtl, p.claims.session_id);
  if (!isOkGrant(grant)) throw new AppError(404, 'user not found');
  const u = grant.user_json;
  if (u.role !== p.claims.role || u.email !== p.claims.email || grant.is_anonymous !== p.claims.is_anonymous) {
    // Changed in the meantime (milliseconds): sign again with what the database says now.
    return sessionFromGrant(deps, grant, p.refresh.token);
  }
  return {
    access_token: await p.accessToken,
    refresh_token: p.refresh.token,
    expires_in: deps.config.accessTokenTtl,
    token_type: 'bearer',
    user: u,
  };
}

/** The `{SITE_URL}#access_token=…` redirect target of magic link and OAuth (docs/api/auth.md). */
export function sessionFragmentUrl(siteUrl: string, s: Session): string {
  const p = new URLSearchParams({
    access_token: s.access_token,
    refresh_token: s.refresh_token,
    token_type: s.token_type,
    expires_in: String(s.expires_in),
  });
  return `${siteUrl}#${p.toString()}`;
}
