/**
 * SUPABASE_COMPAT: supabase-js's PKCE flow (`flowType: 'pkce'`), as GoTrue answers it
 * (internal/api/pkce.go, token.go): POST /otp and /recover take `code_challenge` and
 * `code_challenge_method`; the mailed link then redirects with `?code=<auth code>` instead
 * of a session in the fragment; POST /token?grant_type=pkce with `auth_code` and
 * `code_verifier` answers the session (`exchangeCodeForSession`). The flow states live in
 * SQL (sql/fixtures/auth/compat_pkce.sql): bound to the link, used once, 5 minutes a code.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERRORS } from '../../core/errors.ts';
import { sessionFromGrant, isOkGrant } from '../sessions.ts';
import { hashToken, newOpaqueToken } from '../tokens.ts';
import { compatExchangePkce, compatVerifyPkce, type CompatOAuthState, type PkceChallenge } from './db.ts';
import { compatSession, redirectTarget } from './shape.ts';
import type { RuntimeConfig } from '../../core/config.ts';
import { isPlainObject, sendSession } from '../flows/room.ts';
import { kindsOf, type Body, type Compat } from './context.ts';

/** GoTrue's words (its error codes: compat-errors.ts). */
export const PKCE_ERRORS = {
  params: () => new AppError(400, 'PKCE flow requires code_challenge_method and code_challenge'),
  length: () => new AppError(400, 'code challenge has to be between 43 and 128 characters'),
  chars: () => new AppError(400, 'code challenge can only contain alphanumeric characters, hyphens, periods, underscores and tildes'),
  method: () => new AppError(400, 'code challenge method must be s256 or plain'),
  exchange: () => new AppError(400, 'invalid request: both auth code and code verifier should be non-empty'),
  flowNotFound: () => new AppError(404, 'invalid flow state, no valid flow state found'),
  flowExpired: () => new AppError(422, 'invalid flow state, flow state has expired'),
  badVerifier: () => new AppError(400, 'code challenge does not match previously saved code verifier'),
} as const;

const CHALLENGE = /^[a-zA-Z._~0-9-]+$/;

/** The PKCE challenge of a body (auth-js sends both as null in the implicit flow); null: none. */
export function pkceOf(b: Body): PkceChallenge | null {
  const c = b.code_challenge ?? '';
  const m = b.code_challenge_method ?? '';
  if (c === '' && m === '') return null;
  if (typeof c !== 'string' || typeof m !== 'string' || c === '' || m === '') throw PKCE_ERRORS.params();
  if (c.length < 43 || c.length > 128) throw PKCE_ERRORS.length();
  if (!CHALLENGE.test(c)) throw PKCE_ERRORS.chars();
  const method = m.toLowerCase();
  if (method !== 's256' && method !== 'plain') throw PKCE_ERRORS.method();
  return { challenge: c, method };
}

/**
 * GET /authorize's `redirect_to` (checked as every compat redirect; null: SITE_URL) and the
 * application's PKCE challenge (null: the implicit flow), as signInWithOAuth sends them.
 */
export function oauthAuthorizeParams(config: Pick<RuntimeConfig, 'siteUrl' | 'additionalRedirectUrls'>, query: Body): CompatOAuthState {
  const given = query.redirect_to;
  const redirectTo = given === undefined || given === '' ? null : redirectTarget(config, given);
  return { redirectTo, challenge: pkceOf({ code_challenge: query.code_challenge, code_challenge_method: query.code_challenge_method }) };
}

/** What a mailed link is: a PKCE flow's (used, its auth code issued), an implicit one's, or invalid. */
export type LinkFlow = { flow: 'pkce'; code: string } | { flow: 'implicit' } | { flow: 'invalid' };

export async function linkFlow(c: Compat, type: unknown, tokenHash: Buffer): Promise<LinkFlow> {
  for (const kind of kindsOf(type)) {
    const code = newOpaqueToken();
    const status = await compatVerifyPkce(c.sql, kind, tokenHash, code.hash);
    if (status === 'implicit') return { flow: 'implicit' };
    if (status === 'ok') return { flow: 'pkce', code: code.token };
  }
  return { flow: 'invalid' };
}

/** `target?…&code=<auth code>` (GoTrue's prepPKCERedirectURL). */
export function codeRedirectUrl(target: string, code: string): string {
  const u = new URL(target);
  u.searchParams.set('code', code);
  return u.toString();
}

/** POST /token?grant_type=pkce: `{auth_code, code_verifier}` → a Session. */
export function pkceGrant(c: Compat) {
  const { deps, sql } = c;
  return async (req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    const b = req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    const code = b.auth_code;
    const verifier = b.code_verifier;
    if (typeof code !== 'string' || typeof verifier !== 'string' || code === '' || verifier === '') throw PKCE_ERRORS.exchange();
    const refresh = newOpaqueToken();
    const g = await compatExchangePkce(sql, hashToken(code), verifier, refresh.hash, deps.config.refreshTokenTtl, c.audit(req));
    switch (g.status) {
      case 'ok':
        if (!isOkGrant(g)) throw ERRORS.internal(new Error('pkce exchange without a session'));
        return sendSession(reply, 200, await compatSession(deps, await sessionFromGrant(deps, g, refresh.token, 'pkce')));
      case 'not_found':
      case 'user_not_found':
        throw PKCE_ERRORS.flowNotFound();
      case 'expired':
        throw PKCE_ERRORS.flowExpired();
      case 'bad_verifier':
        throw PKCE_ERRORS.badVerifier();
      default:
        throw ERRORS.internal(new Error(`pkce exchange: ${String(g.status)}`));
    }
  };
}
