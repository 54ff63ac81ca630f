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
 *
 * Every access token carries `aal` and `amr` from the session (types.sql) and the user's
 * `app_metadata` (admin_users.sql), which RLS policies read through auth.jwt(). When
 * AUTH_HOOK_CUSTOM_ACCESS_TOKEN names a SQL function, the claims pass through it before
 * they are signed (hook.sql holds the rules; this module holds the 2-second limit).
 */
import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Deps } from '../core/area.ts';
import type { RuntimeConfig } from '../core/config.ts';
import { AppError } from '../core/errors.ts';
import { clientIp } from '../core/http.ts';
import { ownRequestId } from '../core/request-log.ts';
import type { Session, User } from '../shared/wire.ts';
import { runAccessTokenHook, startSession, type AmrEntry, type AuditContext, type SessionGrant } from './db.ts';
import { accessTokenClaims, newOpaqueToken, signAccessToken, signClaims, type AccessTokenClaims, type OpaqueToken } from './tokens.ts';

export type { Session, User };

export type SessionDeps = Pick<Deps, 'config' | 'db' | 'log'>;

/** A grant whose status is `ok`: the fields SQL returns when a family was opened or rotated. */
export interface OkGrant {
  session_id: string;
  is_anonymous: boolean;
  user_json: User;
  aal: 'aal1' | 'aal2';
  amr: AmrEntry[];
  app_metadata: Record<string, unknown>;
}

export function isOkGrant(g: SessionGrant): g is SessionGrant & OkGrant {
  return g.status === 'ok' && g.session_id !== null && g.user_json !== null && g.aal !== null && g.amr !== null && g.app_metadata !== null;
}

/** What the audit log keeps of a request: the client IP, the user agent and the request id. */
export function auditContext(req: FastifyRequest, config: Pick<RuntimeConfig, 'trustProxy'>): AuditContext {
  const ua = req.headers['user-agent'];
  // The caller may choose X-Request-Id: it never becomes the id of its own audit entries.
  const ids = ownRequestId(req);
  const al = req.headers['accept-language'];
  return {
    ip: clientIp(req, config.trustProxy), user_agent: typeof ua === 'string' ? ua : null, request_id: ids.own, client_request_id: ids.client,
    accept_language: typeof al === 'string' ? al.slice(0, 200) : null,
  };
}

/** The access-token hook gets this long; a slower one refuses the token (fails closed). */
export const HOOK_TIMEOUT_MS = 2000;

export const HOOK_ERRORS = {
  refused: (message: string | null, status = 403) => new AppError(status, message || 'the access token hook refused the sign-in'),
  failed: () => new AppError(500, 'the access token hook failed'),
  timedOut: () => new AppError(500, 'the access token hook timed out'),
} as const;

/**
 * The claims through the hook: GoTrue's event {user_id, claims, authentication_method}.
 * A hook that raises or answers an error refuses the sign-in (4xx, with its message); one
 * that takes longer than HOOK_TIMEOUT_MS is cancelled and refuses it too (500); a change of
 * a claim it may not touch is undone in SQL and logged here.
 */
async function throughHook(
  deps: SessionDeps,
  hook: string,
  claims: Record<string, unknown>,
  method: string,
): Promise<Record<string, unknown>> {
  const q = runAccessTokenHook(deps.db.sql, hook, { user_id: claims.sub, claims, authentication_method: method });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void q.cancel();
  }, HOOK_TIMEOUT_MS);
  let rows;
  try {
    rows = await q;
  } catch (err) {
    if (timedOut) {
      deps.log.error({ hook, timeoutMs: HOOK_TIMEOUT_MS }, 'auth: the access token hook took too long; the sign-in is refused');
      throw HOOK_ERRORS.timedOut();
    }
    deps.log.error({ hook, err }, 'auth: the access token hook failed; the sign-in is refused');
    throw HOOK_ERRORS.failed();
  } finally {
    clearTimeout(timer);
  }
  const r = rows[0];
  switch (r.status) {
    case 'ok':
      if (r.refused !== null && r.refused.length > 0) {
        deps.log.warn({ hook, refused: r.refused }, 'auth: the access token hook may not change these claims; they keep their values');
      }
      return r.claims ?? claims;
    case 'raised':
      deps.log.info({ hook, message: r.message }, 'auth: the access token hook raised; the sign-in is refused');
      throw HOOK_ERRORS.refused(r.message);
    case 'refused':
      throw HOOK_ERRORS.refused(r.message, r.http_code ?? 403);
    case 'invalid':
      deps.log.error({ hook, problem: r.message }, 'auth: the access token hook is unusable; the sign-in is refused');
      throw HOOK_ERRORS.failed();
    default:
      throw new Error(`unexpected hook status ${String(r.status satisfies never)}`);
  }
}

/** Sign the access token for a grant and shape the Session around the refresh token. */
export async function sessionFromGrant(deps: SessionDeps, grant: OkGrant, refreshToken: string, method: string): Promise<Session> {
  const { config } = deps;
  const user = grant.user_json;
  const claims: AccessTokenClaims = {
    sub: user.id,
    role: user.role,
    email: user.email,
    ...(user.phone === undefined ? {} : { phone: user.phone }),
    session_id: grant.session_id,
    is_anonymous: grant.is_anonymous,
    aal: grant.aal,
    amr: grant.amr,
    app_metadata: grant.app_metadata,
  };
  let access_token: string;
  if (config.authHookCustomAccessToken === null) {
    access_token = await signAccessToken(config.secret, claims, config.accessTokenTtl);
  } else {
    const payload = accessTokenClaims(claims, config.accessTokenTtl);
    access_token = await signClaims(config.secret, await throughHook(deps, config.authHookCustomAccessToken, payload, method));
  }
  return { access_token, refresh_token: refreshToken, expires_in: config.accessTokenTtl, token_type: 'bearer', user };
}

/** Start a new refresh-token family for `userId` and return the full Session. 404 `user not found` if the user is gone. */
export async function issueSession(deps: SessionDeps, userId: string, method: string, context: AuditContext | null): Promise<Session> {
  const refresh = newOpaqueToken();
  const grant = await startSession(deps.db.sql, userId, refresh.hash, deps.config.refreshTokenTtl, null, method, context);
  if (!isOkGrant(grant)) throw new AppError(404, 'user not found');
  return sessionFromGrant(deps, grant, refresh.token, method);
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
  user: { id: string; role: string; email: string | null; is_anonymous: boolean; app_metadata: Record<string, unknown> },
): PresignedSession {
  const claims: AccessTokenClaims = {
    sub: user.id,
    role: user.role,
    email: user.email,
    session_id: randomUUID(),
    is_anonymous: user.is_anonymous,
    aal: 'aal1',
    amr: [{ method: 'password', timestamp: Math.floor(Date.now() / 1000) }],
    app_metadata: user.app_metadata,
  };
  // With a hook the token is signed after it, in completePresignedSession.
  const accessToken =
    deps.config.authHookCustomAccessToken === null
      ? signAccessToken(deps.config.secret, claims, deps.config.accessTokenTtl)
      : Promise.resolve('');
  accessToken.catch(() => {}); // awaited later, or dropped when the password is wrong
  return { claims, refresh: newOpaqueToken(), accessToken };
}

/** Open the family of a presigned session. 404 `user not found` if the user is gone. */
export async function completePresignedSession(deps: SessionDeps, p: PresignedSession, context: AuditContext | null): Promise<Session> {
  const grant = await startSession(deps.db.sql, p.claims.sub, p.refresh.hash, deps.config.refreshTokenTtl, p.claims.session_id, 'password', context);
  if (!isOkGrant(grant)) throw new AppError(404, 'user not found');
  const u = grant.user_json;
  if (
    deps.config.authHookCustomAccessToken !== null ||
    u.role !== p.claims.role ||
    u.email !== p.claims.email ||
    grant.is_anonymous !== p.claims.is_anonymous ||
    JSON.stringify(grant.app_metadata) !== JSON.stringify(p.claims.app_metadata)
  ) {
    // A hook to run, or changed in the meantime (milliseconds): sign with what the database says now.
    return sessionFromGrant(deps, grant, p.refresh.token, 'password');
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
