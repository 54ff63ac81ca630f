/**
 * The five OAuth providers of docs/api/auth.md, each as a `Provider`: how to send the
 * browser there, and how to turn the callback into a provider-verified identity. The
 * protocol work is openid-client's (v6: authorization URL, PKCE, code exchange, id_token
 * claim checks, userinfo); this module only knows each provider's endpoints, scopes and
 * where it states that an email is verified.
 *
 * Server metadata: `oidc` discovers it from OIDC_ISSUER_URL; the others are built here
 * from the real providers' endpoints or the configured overrides (docs/operations.md:
 * GOOGLE_AUTHORIZE_URL …), so that no start depends on a provider being reachable.
 * Provider addresses may be http:// only for loopback hosts (checked by config.ts); for
 * those, openid-client's HTTPS-only rule is lifted with `allowInsecureRequests`.
 *
 * Where each provider vouches for the email (OAuth rule 3, docs/api/auth.md):
 * - google, oidc: `email_verified: true` of the id_token (or of userinfo when the id_token
 *   carries no email);
 * - microsoft (common tenant): the id_token's `xms_edov: true` (the email domain owner is
 *   verified), or the consumer tenant `9188040d-6c67-4c5b-b112-36a304b66dad` (personal
 *   Microsoft accounts, whose addresses Microsoft itself verified). Entra's
 *   `email_verified`-less work accounts otherwise carry an address any tenant admin can
 *   set, so it is not vouched for;
 * - github: `/user/emails`, the address that is both `primary` and `verified`;
 * - apple: the id_token's `email` with `email_verified` true (Apple sends "true"), the
 *   id_token's signature checked against Apple's JWKS, with issuer, audience and nonce.
 */
import { createPrivateKey } from 'node:crypto';
import * as client from 'openid-client';
import { SignJWT } from 'jose';
import { type OAuthProviderConfig, type OAuthProviderName, type RuntimeConfig } from '../../core/config.ts';

/** What the callback learnt from the provider. */
export interface Identity {
  /** The provider's id of the user (logs only). */
  subject: string;
  email: string | null;
  /** The provider itself vouches for `email`. */
  emailVerified: boolean;
}

export interface AuthorizationRequest {
  redirectUri: string;
  state: string;
  nonce: string | null;
  codeChallenge: string | null;
}

export interface CallbackChecks {
  redirectUri: string;
  state: string;
  codeVerifier: string | null;
  nonce: string | null;
}

export interface Provider {
  readonly name: OAuthProviderName;
  /** The callback arrives as a form post (apple, response_mode=form_post). */
  readonly formPost: boolean;
  /** Send a PKCE challenge (RFC 7636). */
  readonly pkce: boolean;
  /** Send a nonce and expect it back in an id_token. */
  readonly nonce: boolean;
  /** Where to send the browser. Rejects only when the provider's metadata cannot be had (oidc discovery). */
  authorizationUrl(r: AuthorizationRequest): Promise<URL>;
  /** Exchange the code of the callback's parameters and read the identity. Rejects on any failure. */
  identity(params: URLSearchParams, checks: CallbackChecks): Promise<Identity>;
}

/** Seconds for every request to a provider (openid-client's default is 30). */
const PROVIDER_TIMEOUT = 10;

export const MICROSOFT_CONSUMER_TENANT = '9188040d-6c67-4c5b-b112-36a304b66dad';
export const APPLE_ISSUER = 'https://appleid.apple.com';
export const GOOGLE_ISSUER = 'https://accounts.google.com';

const DEFAULTS = {
  google: {
    authorizeUrl: 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: 'https://oauth2.googleapis.com/token',
    userinfoUrl: 'https://openidconnect.googleapis.com/v1/userinfo',
  },
  github: {
    authorizeUrl: 'https://github.com/login/oauth/authorize',
    tokenUrl: 'https://github.com/login/oauth/access_token',
    userinfoUrl: 'https://api.github.com/user',
  },
  microsoft: {
    authorizeUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/authorize',
    tokenUrl: 'https://login.microsoftonline.com/common/oauth2/v2.0/token',
    userinfoUrl: 'https://graph.microsoft.com/oidc/userinfo',
  },
  apple: {
    authorizeUrl: 'https://appleid.apple.com/auth/authorize',
    tokenUrl: 'https://appleid.apple.com/auth/token',
    jwksUrl: 'https://appleid.apple.com/auth/keys',
  },
} as const;

/** `true` or `"true"` (Apple and some OpenID providers send the string). */
function isTrue(v: unknown): boolean {
  return v === true || v === 'true';
}

function emailOf(v: unknown): string | null {
  return typeof v === 'string' && v.includes('@') ? v : null;
}

function anyInsecure(...urls: (string | undefined)[]): boolean {
  return urls.some((u) => u !== undefined && new URL(u).protocol === 'http:');
}

/** The callback's parameters as openid-client reads them: the registered redirect URI plus code, state (and iss). */
function callbackUrl(params: URLSearchParams, redirectUri: string, keepIss: boolean): URL {
  const url = new URL(redirectUri);
  for (const name of ['code', 'state', ...(keepIss ? ['iss'] : [])]) {
    const v = params.get(name);
    if (v !== null) url.searchParams.set(name, v);
  }
  return url;
}

/** A promise made once and kept; a rejected one is forgotten, so the next call tries again. */
function retrying<T>(make: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | null = null;
  return () => {
    p ??= make().catch((err: unknown) => {
      p = null;
      throw err;
    });
    return p;
  };
}

function authParams(r: AuthorizationRequest, scope: string, extra: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = { redirect_uri: r.redirectUri, scope, state: r.state, ...extra };
  if (r.nonce !== null) out.nonce = r.nonce;
  if (r.codeChallenge !== null) {
    out.code_challenge = r.codeChallenge;
    out.code_challenge_method = 'S256';
  }
  return out;
}

function grantChecks(c: CallbackChecks): client.AuthorizationCodeGrantChecks {
  return {
    expectedState: c.state,
    ...(c.codeVerifier !== null ? { pkceCodeVerifier: c.codeVerifier } : {}),
    ...(c.nonce !== null ? { expectedNonce: c.nonce } : {}),
  };
}

/**
 * The identity of an OpenID Connect sign-in: the id_token's claims (already checked by
 * openid-client: iss, aud, exp, nonce), or userinfo when the id_token carries no email.
 */
async function openIdClaims(config: client.Configuration, tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers) {
  const idToken = tokens.claims();
  if (idToken === undefined) throw new Error('no id_token in the token response');
  let emailSource: Record<string, unknown> = idToken;
  if (emailOf(idToken.email) === null && config.serverMetadata().userinfo_endpoint !== undefined) {
    emailSource = await client.fetchUserInfo(config, tokens.access_token, idToken.sub);
  }
  return { idToken, emailSource };
}

// ── google, oidc and microsoft: OpenID Connect ───────────────────────────────────────────

/** Where an OpenID provider differs: the `iss` of the authorization response, and who vouches for the email. */
interface OpenIdRules {
  /** RFC 9207: the authorization response carries `iss`, and it is checked. */
  issInResponse: boolean;
  vouched(idToken: client.IDToken, emailSource: Record<string, unknown>): boolean;
}

/** Google and any OIDC issuer: the id_token's or userinfo's `email_verified`. */
const EMAIL_VERIFIED: OpenIdRules = { issInResponse: true, vouched: (_idToken, emailSource) => isTrue(emailSource.email_verified) };

function openIdProvider(name: 'google' | 'oidc' | 'microsoft', getConfig: () => Promise<client.Configuration>, rules: OpenIdRules): Provider {
  return {
    name,
    formPost: false,
    pkce: true,
    nonce: true,
    async authorizationUrl(r) {
      return client.buildAuthorizationUrl(await getConfig(), authParams(r, 'openid email'));
    },
    async identity(params, checks) {
      const config = await getConfig();
      const tokens = await client.authorizationCodeGrant(config, callbackUrl(params, checks.redirectUri, rules.issInResponse), grantChecks(checks));
      const { idToken, emailSource } = await openIdClaims(config, tokens);
      return { subject: idToken.sub, email: emailOf(emailSource.email), emailVerified: rules.vouched(idToken, emailSource) };
    },
  };
}

function googleProvider(p: OAuthProviderConfig): Provider {
  const e = { ...DEFAULTS.google, ...definedOnly(p.endpoints) };
  const config = new client.Configuration(
    {
      issuer: GOOGLE_ISSUER,
      authorization_endpoint: e.authorizeUrl,
      token_endpoint: e.tokenUrl,
      userinfo_endpoint: e.userinfoUrl,
    },
    p.clientId,
    p.clientSecret,
  );
  config.timeout = PROVIDER_TIMEOUT;
  if (anyInsecure(e.authorizeUrl, e.tokenUrl, e.userinfoUrl)) client.allowInsecureRequests(config);
  return openIdProvider('google', () => Promise.resolve(config), EMAIL_VERIFIED);
}

function oidcProvider(p: OAuthProviderConfig): Provider {
  const issuer = p.issuerUrl as string;
  const secret = p.clientSecret as string;
  // The discovery document says how the client authenticates; client_secret_basic is the
  // OpenID default when it says nothing.
  const auth: client.ClientAuth = (as, c, body, headers) => {
    const methods = as.token_endpoint_auth_methods_supported;
    const basic = methods === undefined || methods.includes('client_secret_basic') || !methods.includes('client_secret_post');
    (basic ? client.ClientSecretBasic(secret) : client.ClientSecretPost(secret))(as, c, body, headers);
  };
  const getConfig = retrying(() =>
    client.discovery(new URL(issuer), p.clientId, secret, auth, {
      timeout: PROVIDER_TIMEOUT,
      execute: anyInsecure(issuer) ? [client.allowInsecureRequests] : [],
    }),
  );
  return openIdProvider('oidc', getConfig, EMAIL_VERIFIED);
}

// ── microsoft: common tenant; xms_edov or the consumer tenant ─────────────────────────────

/**
 * Entra ID's common endpoint signs id_tokens with the user's tenant as issuer
 * (`https://login.microsoftonline.com/<tid>/v2.0`). openid-client checks exactly that
 * rule (issuer template with the token's own `tid`), but applies it only to a
 * Configuration discovered from login.microsoftonline.com. So the Configuration is made
 * by `discovery` of the common tenant, whose document is served from memory through
 * openid-client's own `customFetch` hook: no network round trip, the endpoint overrides
 * apply, and every later request passes through to `fetch` unchanged.
 */
const MICROSOFT_COMMON = 'https://login.microsoftonline.com/common/v2.0';

function microsoftProvider(p: OAuthProviderConfig): Provider {
  const e = { ...DEFAULTS.microsoft, ...definedOnly(p.endpoints) };
  const wellKnown = `${MICROSOFT_COMMON}/.well-known/openid-configuration`;
  const document = {
    issuer: 'https://login.microsoftonline.com/{tenantid}/v2.0',
    authorization_endpoint: e.authorizeUrl,
    token_endpoint: e.tokenUrl,
    userinfo_endpoint: e.userinfoUrl,
    jwks_uri: 'https://login.microsoftonline.com/common/discovery/v2.0/keys',
  };
  const getConfig = retrying(() =>
    client.discovery(new URL(MICROSOFT_COMMON), p.clientId, p.clientSecret, undefined, {
      timeout: PROVIDER_TIMEOUT,
      execute: anyInsecure(e.authorizeUrl, e.tokenUrl, e.userinfoUrl) ? [client.allowInsecureRequests] : [],
      [client.customFetch]: (url, options) =>
        url === wellKnown ? Promise.resolve(Response.json(document)) : fetch(url, options as RequestInit),
    }),
  );
  return openIdProvider('microsoft', getConfig, {
    // Entra sends no RFC 9207 `iss` in the authorization response, and its issuer is per
    // tenant: an `iss` there is left out. The state row already pins the provider.
    issInResponse: false,
    vouched: (idToken) => isTrue(idToken.xms_edov) || idToken.tid === MICROSOFT_CONSUMER_TENANT,
  });
}

// ── github: /user and /user/emails (primary and verified) ─────────────────────────────────

interface GitHubEmail {
  email?: unknown;
  primary?: unknown;
  verified?: unknown;
}

function githubProvider(p: OAuthProviderConfig): Provider {
  const e = { ...DEFAULTS.github, ...definedOnly(p.endpoints) };
  const userUrl = e.userinfoUrl.replace(/\/$/, '');
  const config = new client.Configuration(
    { issuer: 'https://github.com', authorization_endpoint: e.authorizeUrl, token_endpoint: e.tokenUrl },
    p.clientId,
    p.clientSecret,
  );
  config.timeout = PROVIDER_TIMEOUT;
  if (anyInsecure(e.authorizeUrl, e.tokenUrl, e.userinfoUrl)) client.allowInsecureRequests(config);

  async function getJson(accessToken: string, url: string): Promise<unknown> {
    const headers = new Headers({ accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' });
    const res = await client.fetchProtectedResource(config, accessToken, new URL(url), 'GET', undefined, headers);
    if (!res.ok) throw new Error(`github ${new URL(url).pathname} answered ${res.status}`);
    return res.json();
  }

  return {
    name: 'github',
    formPost: false,
    // GitHub accepts PKCE (S256) for OAuth apps; a server that ignores it loses nothing.
    pkce: true,
    nonce: false,
    async authorizationUrl(r) {
      return client.buildAuthorizationUrl(config, authParams(r, 'read:user user:email'));
    },
    async identity(params, checks) {
      const tokens = await client.authorizationCodeGrant(config, callbackUrl(params, checks.redirectUri, false), grantChecks(checks));
      const [user, emails] = await Promise.all([getJson(tokens.access_token, userUrl), getJson(tokens.access_token, `${userUrl}/emails`)]);
      const id = (user as { id?: unknown } | null)?.id;
      if (typeof id !== 'number' && typeof id !== 'string') throw new Error('github /user has no id');
      if (!Array.isArray(emails)) throw new Error('github /user/emails is not a list');
      const primary = (emails as GitHubEmail[]).find((m) => m !== null && typeof m === 'object' && m.primary === true);
      const email = emailOf(primary?.email);
      return { subject: String(id), email, emailVerified: email !== null && primary?.verified === true };
    },
  };
}

// ── apple: form_post, id_token against Apple's JWKS, ES256 client secret ─────────────────

/** Apple's client secret lives up to 6 months; plinth signs one for an hour and renews it after half of that. */
const APPLE_SECRET_TTL = 3600;

function appleProvider(p: OAuthProviderConfig): Provider {
  const e = { ...DEFAULTS.apple, ...definedOnly(p.endpoints) };
  const teamId = p.teamId as string;
  const keyId = p.keyId as string;
  // config.ts has checked that APPLE_PRIVATE_KEY is a P-256 private key.
  const key = createPrivateKey(p.privateKey as string);
  let secret: { value: string; renewAt: number } | null = null;

  /** The client secret: an ES256 JWT (iss team id, sub client id, aud Apple), signed with APPLE_PRIVATE_KEY. */
  async function clientSecret(): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    if (secret === null || now >= secret.renewAt) {
      const value = await new SignJWT({})
        .setProtectedHeader({ alg: 'ES256', kid: keyId })
        .setIssuer(teamId)
        .setSubject(p.clientId)
        .setAudience(APPLE_ISSUER)
        .setIssuedAt(now)
        .setExpirationTime(now + APPLE_SECRET_TTL)
        .sign(key);
      secret = { value, renewAt: now + APPLE_SECRET_TTL / 2 };
    }
    return secret.value;
  }

  let current = '';
  const config = new client.Configuration(
    {
      issuer: APPLE_ISSUER,
      authorization_endpoint: e.authorizeUrl,
      token_endpoint: e.tokenUrl,
      jwks_uri: e.jwksUrl,
      id_token_signing_alg_values_supported: ['RS256'],
    },
    p.clientId,
    undefined,
    // client_secret_post with the current JWT (ClientAuth is synchronous: renewed before each exchange).
    (as, c, body, headers) => client.ClientSecretPost(current)(as, c, body, headers),
  );
  config.timeout = PROVIDER_TIMEOUT;
  // The id_token's signature is checked against Apple's JWKS (not only its claims).
  client.enableNonRepudiationChecks(config);
  if (anyInsecure(e.authorizeUrl, e.tokenUrl, e.jwksUrl)) client.allowInsecureRequests(config);

  return {
    name: 'apple',
    formPost: true,
    // Apple documents no PKCE for Sign in with Apple: state, nonce and the client secret protect the code.
    pkce: false,
    nonce: true,
    async authorizationUrl(r) {
      return client.buildAuthorizationUrl(config, authParams(r, 'email', { response_mode: 'form_post' }));
    },
    async identity(params, checks) {
      current = await clientSecret();
      const tokens = await client.authorizationCodeGrant(config, callbackUrl(params, checks.redirectUri, false), grantChecks(checks));
      const idToken = tokens.claims();
      if (idToken === undefined) throw new Error('no id_token in the token response');
      return { subject: idToken.sub, email: emailOf(idToken.email), emailVerified: isTrue(idToken.email_verified) };
    },
  };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The configured providers (docs/operations.md: a provider is configured when all its variables are set). */
export function createProviders(config: RuntimeConfig): ReadonlyMap<string, Provider> {
  const out = new Map<string, Provider>();
  const o = config.oauth;
  if (o.google) out.set('google', googleProvider(o.google));
  if (o.github) out.set('github', githubProvider(o.github));
  if (o.microsoft) out.set('microsoft', microsoftProvider(o.microsoft));
  if (o.apple) out.set('apple', appleProvider(o.apple));
  if (o.oidc) out.set('oidc', oidcProvider(o.oidc));
  return out;
}
