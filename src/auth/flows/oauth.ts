/**
 * OAuth sign-in over HTTP (docs/api/auth.md, "OAuth": authorize and callback, the state
 * cookie, Microsoft linking; docs/operations.md: the providers' address overrides).
 *
 * GET /auth/v1/authorize?provider=<name>
 *   → 302 to the provider, with redirect_uri exactly `<SITE_URL>/auth/v1/callback`, a fresh
 *     `state` (stored as SHA-256 with the PKCE verifier and nonce, 10 minutes, single use)
 *     that is also set in an HttpOnly cookie on the callback path, PKCE (S256) where the
 *     provider takes it and a nonce where it returns an id_token. `redirect_to` is ignored:
 *     the destination is always SITE_URL. Under SUPABASE_COMPAT (docs/api/supabase.md,
 *     "OAuth"), a checked `redirect_to` is the destination, and a `code_challenge` makes the
 *     callback redirect to `redirect_to?code=<auth code>` (errors in the query) instead of
 *     a session in the fragment: POST /token?grant_type=pkce exchanges it.
 *   → 400 `{"error": "unsupported provider"}` for a missing, unknown or unconfigured provider.
 *
 * GET /auth/v1/user/identities/authorize?provider=<name> (a guest's access token)
 *   → 200 `{"url": …}` (GoTrue's link shape) and the same state cookie: the guest's browser
 *     goes there, and the callback gives the guest the provider-verified address (it
 *     becomes a user, keeping its id) instead of signing in; 422 `only a guest links an
 *     identity` for a user with an address; 401 without a user's token.
 *
 * GET and POST /auth/v1/callback (POST: apple's response_mode=form_post)
 *   → 302 `<SITE_URL>#access_token=…&refresh_token=…&token_type=bearer&expires_in=…` on
 *     success (the magic link's fragment);
 *   → 302 `<SITE_URL>#error=<code>&error_description=<text>` on failure, with <code>:
 *       invalid_state     no state, no state cookie or a different one, or a state that is
 *                         unknown, expired or already used;
 *       access_denied     the user (or the provider) refused; other standard OAuth error
 *                         codes the provider sends are passed on as they are;
 *       invalid_request   no code and no error in the callback;
 *       server_error      the code exchange or the identity request failed (including an
 *                         id_token whose signature, issuer, audience or nonce is wrong), or
 *                         the provider is unreachable;
 *       unverified_email  the provider does not vouch for the email (or sent none): no
 *                         account is created and none is linked (OAuth rule 3);
 *       identity_already_exists  (linking) the address is another account's;
 *       not_a_guest       (linking) the guest has meanwhile an address, or is gone.
 *     The state cookie is cleared either way.
 *
 * The state cookie binds the flow to the browser that started it (login CSRF): the
 * callback needs the cookie to equal the `state` parameter, then consumes the state in SQL.
 * `SameSite=Lax` lets the cookie ride the provider's top-level GET redirect; apple's
 * callback is a cross-site POST, which only `SameSite=None; Secure` cookies survive.
 *
 * Routes live in their own fastify context so that their form parser (apple posts
 * `application/x-www-form-urlencoded`) does not reach any other route.
 */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as client from 'openid-client';
import type { Deps } from '../../core/area.ts';
import { AppError, unreachable } from '../../core/errors.ts';
import type { GrantRow } from '../db.ts';
import { auditContext, isOkGrant, sessionFromGrant, sessionFragmentUrl } from '../sessions.ts';
import { hashToken, newOpaqueToken } from '../tokens.ts';
import * as q from '../oauth/db.ts';
import { createProviders, type Identity, type Provider } from '../oauth/providers.ts';
import { compatCreateOAuthState, compatOAuthFlow, compatOAuthSignInPkce } from '../compat/db.ts';
import { codeRedirectUrl, oauthAuthorizeParams } from '../compat/pkce.ts';

export const OAUTH_ERRORS = {
  unsupportedProvider: () => new AppError(400, 'unsupported provider'),
  notAGuest: () => new AppError(422, 'only a guest links an identity'),
} as const;

export type OAuthErrorCode =
  | 'invalid_state'
  | 'access_denied'
  | 'invalid_request'
  | 'server_error'
  | 'unverified_email'
  | 'identity_already_exists'
  | 'not_a_guest'
  | ProviderErrorCode;

/** Error codes a provider may send to the callback (RFC 6749 §4.1.2.1, OpenID Core §3.1.2.6): passed on unchanged. */
const PROVIDER_ERRORS = [
  'invalid_request',
  'unauthorized_client',
  'access_denied',
  'unsupported_response_type',
  'invalid_scope',
  'server_error',
  'temporarily_unavailable',
  'interaction_required',
  'login_required',
  'account_selection_required',
  'consent_required',
] as const;
type ProviderErrorCode = (typeof PROVIDER_ERRORS)[number];

export const CALLBACK_PATH = '/auth/v1/callback';
export const STATE_COOKIE = 'plinth-oauth-state';
/** Seconds between authorize and callback. */
export const STATE_TTL = 600;
/** Apple's form post is small (code, state, user); anything larger is not a callback. */
const FORM_BODY_LIMIT = 64 * 1024;

/** Only single string values: a repeated or structured parameter counts as absent. */
function callbackParams(input: unknown): URLSearchParams {
  const out = new URLSearchParams();
  if (input === null || typeof input !== 'object') return out;
  for (const [k, v] of Object.entries(input)) if (typeof v === 'string') out.set(k, v);
  return out;
}

/** Every value of the state cookie in the Cookie header (a tiny parser: one cookie name, no attributes). */
function stateCookies(req: FastifyRequest): string[] {
  const header = req.headers.cookie;
  if (header === undefined) return [];
  const out: string[] = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== STATE_COOKIE) continue;
    let v = part.slice(eq + 1).trim();
    if (v.startsWith('"') && v.endsWith('"') && v.length >= 2) v = v.slice(1, -1);
    out.push(v);
  }
  return out;
}

/**
 * What a provider failure logs: openid-client's error name, code and message, and the
 * provider's OAuth error code if it sent one — not the error's `cause`, which can hold
 * id_token claims (addresses) or response bodies.
 */
function describe(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { message: String(err) };
  const e = err as Error & { code?: unknown; error?: unknown; status?: unknown };
  return { name: e.name, code: e.code, message: e.message, error: e.error, status: e.status };
}

/** Constant-time comparison of the cookie and the parameter (their SHA-256s, so the lengths match). */
function sameState(a: string, b: string): boolean {
  return timingSafeEqual(hashToken(a), hashToken(b));
}

/**
 * The callback's account step: a guest's linking request gives that guest the identity;
 * otherwise sign in (or up) by it. A banned user (403 `user is banned`) comes back as the
 * error, for the application to get it as a code like every OAuth failure.
 */
async function signInOrLink(sql: Deps['db']['sql'], state: string, account: q.OAuthSignInInput): Promise<GrantRow<q.OAuthLinkStatus> | AppError> {
  const linkUser = await q.oauthStateLinkUser(sql, hashToken(state));
  try {
    return linkUser === null ? await q.oauthSignIn(sql, account) : await q.oauthLinkGuest(sql, linkUser, account);
  } catch (err) {
    if (err instanceof AppError && err.status === 403) return err;
    throw err;
  }
}

/** What the OAuth routes share: the configured providers and the callback's address. */
interface OAuthRoom {
  deps: Deps;
  config: Deps['config'];
  sql: Deps['db']['sql'];
  log: Deps['log'];
  providers: ReadonlyMap<string, Provider>;
  redirectUri: string;
  siteIsHttps: boolean;
}

function cookie(room: OAuthRoom, value: string, maxAge: number, formPost: boolean): string {
  const sameSite = formPost ? 'SameSite=None; Secure' : `SameSite=Lax${room.siteIsHttps ? '; Secure' : ''}`;
  return `${STATE_COOKIE}=${value}; Path=${CALLBACK_PATH}; Max-Age=${maxAge}; HttpOnly; ${sameSite}`;
}

/**
 * Clear the cookie in both flavours: on an http SITE_URL the Lax one is not Secure, and
 * only a Secure Set-Cookie may replace a Secure cookie (apple's).
 */
function clearCookies(room: OAuthRoom, reply: FastifyReply): FastifyReply {
  return reply.header('set-cookie', [cookie(room, '', 0, false), cookie(room, '', 0, true)]);
}

function redirect(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(302).header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').header('location', location).send();
}

/**
 * Where the callback sends the browser: SITE_URL, or (SUPABASE_COMPAT) the request's
 * checked `redirect_to`; `pkce`: the application's PKCE flow (an auth code in the query).
 */
interface Back {
  url: string;
  pkce: boolean;
}

function siteBack(room: OAuthRoom): Back {
  return { url: room.config.siteUrl, pkce: false };
}

/** The failure as a code: in the fragment, or in the query for a PKCE flow (GoTrue's). */
function fail(room: OAuthRoom, reply: FastifyReply, error: OAuthErrorCode, description: string, back: Back = siteBack(room)): FastifyReply {
  const params = new URLSearchParams({ error, error_description: description });
  if (back.pkce) {
    const u = new URL(back.url);
    for (const [k, v] of params) u.searchParams.set(k, v);
    return redirect(clearCookies(room, reply), u.toString());
  }
  return redirect(clearCookies(room, reply), `${back.url.split('#')[0]}#${params.toString()}`);
}

type AuthorizeRequest = FastifyRequest<{ Querystring: Record<string, unknown> }>;

/** GET /auth/v1/authorize (302 to the provider), or for a guest linking an identity (`linkUser`: 200 `{url}`, GoTrue's). */
async function authorize(room: OAuthRoom, req: AuthorizeRequest, reply: FastifyReply, linkUser: string | null = null) {
  const { sql, log, providers, redirectUri } = room;
  const name = req.query.provider;
  const provider = typeof name === 'string' ? providers.get(name) : undefined;
  if (provider === undefined) throw OAUTH_ERRORS.unsupportedProvider();
  // SUPABASE_COMPAT: the application's redirect_to and PKCE challenge (a sign-in's, not a link's).
  const compat = room.config.supabaseCompat && linkUser === null ? oauthAuthorizeParams(room.config, req.query) : null;
  const state = client.randomState();
  const codeVerifier = provider.pkce ? client.randomPKCECodeVerifier() : null;
  const nonce = provider.nonce ? client.randomNonce() : null;
  let url: URL;
  try {
    const codeChallenge = codeVerifier === null ? null : await client.calculatePKCECodeChallenge(codeVerifier);
    url = await provider.authorizationUrl({ redirectUri, state, nonce, codeChallenge });
  } catch (err) {
    // Only `oidc` can fail here (discovery): the browser goes back to the site with the reason.
    log.warn({ provider: provider.name, failure: describe(err) }, 'oauth: provider metadata unavailable');
    const back = compat === null ? siteBack(room) : { url: compat.redirectTo ?? room.config.siteUrl, pkce: compat.challenge !== null };
    return fail(room, reply, 'server_error', 'the provider is unreachable', back);
  }
  const stored = { stateHash: hashToken(state), provider: provider.name, codeVerifier, nonce, ttlSeconds: STATE_TTL };
  if (compat !== null) await compatCreateOAuthState(sql, stored, compat);
  else if (linkUser === null) await q.createOAuthState(sql, stored);
  else if ((await q.createOAuthLinkState(sql, stored, linkUser)) === 'not_a_guest') throw OAUTH_ERRORS.notAGuest();
  reply.header('set-cookie', cookie(room, state, STATE_TTL, provider.formPost));
  if (linkUser !== null) return reply.code(200).header('cache-control', 'no-store').send({ url: url.href });
  return redirect(reply, url.href);
}

/** GET /auth/v1/user/identities/authorize: a guest's access token starts the linking flow. */
async function authorizeLink(room: OAuthRoom, req: AuthorizeRequest, reply: FastifyReply) {
  return authorize(room, req, reply, (await room.deps.credentials.user(req)).userId);
}

/** The callback's state: the cookie's, then consumed in SQL; its provider, or the reply that failed. */
async function consumeState(room: OAuthRoom, req: FastifyRequest, reply: FastifyReply, state: string | null) {
  if (state === null || state === '') return fail(room, reply, 'invalid_state', 'missing state');
  if (!stateCookies(req).some((c) => sameState(c, state))) {
    // Not consumed: a forged callback must not burn the state of the browser's own flow.
    return fail(room, reply, 'invalid_state', 'the state does not match this browser');
  }
  const consumed = await q.consumeOAuthState(room.sql, hashToken(state));
  switch (consumed.status) {
    case 'ok':
      break;
    case 'invalid':
      return fail(room, reply, 'invalid_state', 'unknown state');
    case 'expired':
      return fail(room, reply, 'invalid_state', 'the sign-in took too long; please try again');
    case 'used':
      return fail(room, reply, 'invalid_state', 'the state was already used');
    default:
      return unreachable(consumed.status);
  }
  // The state pins the provider (not the callback's parameters).
  const provider: Provider | undefined = consumed.provider === null ? undefined : room.providers.get(consumed.provider);
  const flow = room.config.supabaseCompat ? await compatOAuthFlow(room.sql, hashToken(state)) : null;
  const back: Back = flow === null ? siteBack(room) : { url: flow.redirect_to ?? room.config.siteUrl, pkce: flow.pkce };
  if (provider === undefined) return fail(room, reply, 'server_error', 'the provider is no longer configured', back);
  return { provider, state, consumed, back };
}

/** The provider's error in the callback, passed on as a code (null: no error). */
function providerFailure(room: OAuthRoom, reply: FastifyReply, provider: Provider, providerError: string | null, back: Back): FastifyReply | null {
  if (providerError === null) return null;
  // Apple reports a cancelled sign-in as `user_cancelled_authorize`.
  const code: OAuthErrorCode =
    providerError === 'user_cancelled_authorize'
      ? 'access_denied'
      : ((PROVIDER_ERRORS as readonly string[]).includes(providerError) ? (providerError as ProviderErrorCode) : 'server_error');
  room.log.info({ provider: provider.name, error: providerError }, 'oauth: the provider returned an error');
  return fail(room, reply, code, code === 'access_denied' ? 'the sign-in was denied at the provider' : `the provider answered ${code}`, back);
}

/** The account step's answer: the session in the fragment, or the failure as a code. */
async function finish(room: OAuthRoom, req: FastifyRequest, reply: FastifyReply, provider: Provider, state: string, identity: Identity, back: Back) {
  const { deps, config, sql, log } = room;
  if (back.pkce) return finishPkce(room, req, reply, provider, state, identity, back);
  const refresh = newOpaqueToken();
  const account = {
    provider: provider.name,
    email: identity.email,
    emailVerified: identity.emailVerified,
    refreshHash: refresh.hash,
    refreshTtl: config.refreshTokenTtl,
    context: auditContext(req, config),
  };
  const r = await signInOrLink(sql, state, account);
  if (r instanceof AppError) return fail(room, reply, 'access_denied', r.publicMessage, back);
  const status = r.status;
  switch (status) {
    case 'ok': {
      if (!isOkGrant(r)) throw new Error('oauth_sign_in: ok without a session');
      let session;
      try {
        session = await sessionFromGrant(deps, r, refresh.token, 'oauth');
      } catch (err) {
        // The access-token hook refused the token: back to the application as a code, like every OAuth failure.
        if (!(err instanceof AppError)) throw err;
        return fail(room, reply, err.status < 500 ? 'access_denied' : 'server_error', err.publicMessage, back);
      }
      return redirect(clearCookies(room, reply), sessionFragmentUrl(back.url.split('#')[0], session));
    }
    case 'unverified_email':
      log.info({ provider: provider.name, subject: identity.subject, hasEmail: identity.email !== null }, 'oauth: email not verified by the provider');
      return fail(room, reply, 'unverified_email', UNVERIFIED, back);
    case 'email_taken':
      return fail(room, reply, 'identity_already_exists', 'the address is another account\'s: sign in with the provider instead', back);
    case 'not_a_guest':
      return fail(room, reply, 'not_a_guest', 'only a guest links an identity', back);
    default:
      return unreachable(status);
  }
}

const UNVERIFIED = 'the provider did not confirm a verified email address';

/**
 * SUPABASE_COMPAT, the application's PKCE flow (GoTrue's external.go): the account step,
 * then an auth code bound to a flow state instead of a session, on `redirect_to?code=…`;
 * POST /token?grant_type=pkce exchanges it (src/auth/compat/pkce.ts).
 */
async function finishPkce(room: OAuthRoom, req: FastifyRequest, reply: FastifyReply, provider: Provider, state: string, identity: Identity, back: Back) {
  const code = newOpaqueToken();
  const account = { provider: provider.name, email: identity.email, emailVerified: identity.emailVerified, context: auditContext(req, room.config) };
  let status;
  try {
    status = await compatOAuthSignInPkce(room.sql, hashToken(state), account, code.hash);
  } catch (err) {
    if (err instanceof AppError && err.status === 403) return fail(room, reply, 'access_denied', err.publicMessage, back);
    throw err;
  }
  switch (status) {
    case 'ok':
      return redirect(clearCookies(room, reply), codeRedirectUrl(back.url, code.token));
    case 'unverified_email':
      room.log.info({ provider: provider.name, subject: identity.subject, hasEmail: identity.email !== null }, 'oauth: email not verified by the provider');
      return fail(room, reply, 'unverified_email', UNVERIFIED, back);
    case 'invalid':
      return fail(room, reply, 'invalid_state', 'unknown state', back);
    default:
      return unreachable(status);
  }
}

/** GET and POST /auth/v1/callback: state, the provider's answer, the code exchange, then the account. */
async function callback(room: OAuthRoom, req: FastifyRequest, reply: FastifyReply, input: unknown) {
  const params = callbackParams(input);
  const checked = await consumeState(room, req, reply, params.get('state'));
  if (!('provider' in checked)) return checked;
  const { provider, state, consumed, back } = checked;
  const failed = providerFailure(room, reply, provider, params.get('error'), back);
  if (failed !== null) return failed;
  if (!params.get('code')) return fail(room, reply, 'invalid_request', 'missing authorization code', back);

  let identity: Identity;
  try {
    identity = await provider.identity(params, { redirectUri: room.redirectUri, state, codeVerifier: consumed.code_verifier, nonce: consumed.nonce });
  } catch (err) {
    room.log.warn({ provider: provider.name, failure: describe(err) }, 'oauth: code exchange failed');
    return fail(room, reply, 'server_error', 'the sign-in with the provider could not be completed', back);
  }
  return finish(room, req, reply, provider, state, identity, back);
}

/** Apple's form post: `application/x-www-form-urlencoded`, repeated names kept as arrays (callbackParams drops them). */
function parseForm(_req: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void): void {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of new URLSearchParams(body as string)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  done(null, out);
}

export function registerOAuthRoutes(app: FastifyInstance, deps: Deps): void {
  const { config, db, log } = deps;
  const room: OAuthRoom = {
    deps,
    config,
    sql: db.sql,
    log,
    providers: createProviders(config),
    redirectUri: `${config.siteUrl}${CALLBACK_PATH}`,
    siteIsHttps: new URL(config.siteUrl).protocol === 'https:',
  };
  app.register(async (scoped) => {
    scoped.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT }, parseForm);
    scoped.get<{ Querystring: Record<string, unknown> }>('/auth/v1/authorize', (req, reply) => authorize(room, req, reply));
    scoped.get<{ Querystring: Record<string, unknown> }>('/auth/v1/user/identities/authorize', (req, reply) => authorizeLink(room, req, reply));
    scoped.get<{ Querystring: Record<string, unknown> }>(CALLBACK_PATH, (req, reply) => callback(room, req, reply, req.query));
    scoped.post(CALLBACK_PATH, (req, reply) => callback(room, req, reply, req.body));
  });
}
