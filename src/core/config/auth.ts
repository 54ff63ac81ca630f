/** The accounts settings: keys given explicitly, sign-in rules, rate limits, mail, OAuth providers. */
import { createPrivateKey } from 'node:crypto';
import { resolve } from 'node:path';
import { ConfigError, bool, int, list, str, url, type Env } from './read.ts';

export type OAuthProviderName = 'google' | 'github' | 'apple' | 'microsoft' | 'oidc';

export interface OAuthEndpoints {
  authorizeUrl?: string;
  tokenUrl?: string;
  userinfoUrl?: string;
  jwksUrl?: string;
}

export interface OAuthProviderConfig {
  clientId: string;
  clientSecret?: string;
  /** apple only */
  teamId?: string;
  keyId?: string;
  privateKey?: string;
  /** oidc only */
  issuerUrl?: string;
  endpoints: OAuthEndpoints;
}

const RESERVED_ROLES = new Set(['anon', 'authenticated', 'service_role']);

/** JWT_SECRET: at least 32 characters; null (unset) is development mode. */
export function jwtSecret(env: Env): string | null {
  const v = str(env, 'JWT_SECRET') ?? null;
  if (v !== null && v.length < 32) throw new ConfigError('JWT_SECRET', 'must be at least 32 characters');
  return v;
}

function anonymousRole(env: Env): string {
  const v = str(env, 'ANONYMOUS_ROLE') ?? 'anonymous';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(v) || RESERVED_ROLES.has(v)) {
    throw new ConfigError('ANONYMOUS_ROLE', 'must be a lower-case identifier other than anon, authenticated and service_role');
  }
  return v;
}

function appleProvider(env: Env): OAuthProviderConfig | undefined {
  const endpoints: OAuthEndpoints = {
    authorizeUrl: url(env, 'APPLE_AUTHORIZE_URL', { httpOnlyLoopback: true }),
    tokenUrl: url(env, 'APPLE_TOKEN_URL', { httpOnlyLoopback: true }),
    jwksUrl: url(env, 'APPLE_JWKS_URL', { httpOnlyLoopback: true }),
  };
  const apple = {
    clientId: str(env, 'APPLE_CLIENT_ID'),
    teamId: str(env, 'APPLE_TEAM_ID'),
    keyId: str(env, 'APPLE_KEY_ID'),
    privateKey: str(env, 'APPLE_PRIVATE_KEY'),
  };
  if (!(apple.clientId && apple.teamId && apple.keyId && apple.privateKey)) return undefined;
  const pem = apple.privateKey.replace(/\\n/g, '\n');
  let curve: string | undefined;
  try {
    const key = createPrivateKey(pem);
    curve = key.asymmetricKeyType === 'ec' ? key.asymmetricKeyDetails?.namedCurve : undefined;
  } catch {
    throw new ConfigError('APPLE_PRIVATE_KEY', 'must be a PEM private key');
  }
  if (curve !== 'prime256v1') throw new ConfigError('APPLE_PRIVATE_KEY', 'must be a P-256 (ES256) private key');
  return { clientId: apple.clientId, teamId: apple.teamId, keyId: apple.keyId, privateKey: pem, endpoints };
}

function oauthProviders(env: Env): Partial<Record<OAuthProviderName, OAuthProviderConfig>> {
  const out: Partial<Record<OAuthProviderName, OAuthProviderConfig>> = {};
  const endpointOverrides = (prefix: string): OAuthEndpoints => ({
    authorizeUrl: url(env, `${prefix}_AUTHORIZE_URL`, { httpOnlyLoopback: true }),
    tokenUrl: url(env, `${prefix}_TOKEN_URL`, { httpOnlyLoopback: true }),
    userinfoUrl: url(env, `${prefix}_USERINFO_URL`, { httpOnlyLoopback: true }),
  });
  for (const [name, prefix] of [['google', 'GOOGLE'], ['github', 'GITHUB'], ['microsoft', 'MICROSOFT']] as const) {
    const endpoints = endpointOverrides(prefix);
    const clientId = str(env, `${prefix}_CLIENT_ID`);
    const clientSecret = str(env, `${prefix}_CLIENT_SECRET`);
    if (clientId && clientSecret) out[name] = { clientId, clientSecret, endpoints };
  }
  const apple = appleProvider(env);
  if (apple) out.apple = apple;
  const issuerUrl = url(env, 'OIDC_ISSUER_URL', { httpOnlyLoopback: true });
  const oidcId = str(env, 'OIDC_CLIENT_ID');
  const oidcSecret = str(env, 'OIDC_CLIENT_SECRET');
  if (issuerUrl && oidcId && oidcSecret) out.oidc = { clientId: oidcId, clientSecret: oidcSecret, issuerUrl, endpoints: {} };
  return out;
}

/** MFA_ENCRYPTION_KEY: at least 32 characters (the key is derived from it, as from JWT_SECRET). */
function mfaEncryptionKey(env: Env): string | null {
  const v = str(env, 'MFA_ENCRYPTION_KEY');
  if (v === undefined) return null;
  if (v.length < 32) throw new ConfigError('MFA_ENCRYPTION_KEY', 'must be at least 32 characters');
  return v;
}

/** AUTH_HOOK_CUSTOM_ACCESS_TOKEN: `schema.function`, two lower-case identifiers. */
function authHook(env: Env): string | null {
  const v = str(env, 'AUTH_HOOK_CUSTOM_ACCESS_TOKEN');
  if (v === undefined) return null;
  if (!/^[a-z_][a-z0-9_$]{0,62}\.[a-z_][a-z0-9_$]{0,62}$/.test(v)) {
    throw new ConfigError('AUTH_HOOK_CUSTOM_ACCESS_TOKEN', 'must be schema.function (lower-case identifiers)');
  }
  return v;
}

/**
 * A GoTrue hook (AUTH_HOOK_SEND_EMAIL, AUTH_HOOK_SEND_SMS): a SQL function `schema.function`,
 * or a URL posted to with Standard Webhooks signatures (src/auth/standard-webhooks.ts) under
 * the base64 keys of `<NAME>_SECRET`.
 */
export type StandardHook = { kind: 'sql'; fn: string } | { kind: 'http'; url: string; secrets: readonly string[] };

/**
 * What each hook takes, as it always has: the email hook also takes `schema.function` and
 * checks its secret whenever it is set; the SMS hook names a malformed `pg-functions:` form.
 * The start-up errors keep their words.
 */
const HOOK_FORMS = {
  AUTH_HOOK_SEND_EMAIL: {
    dotted: true,
    secretAlways: true,
    secretPattern: /^v1,whsec_[A-Za-z0-9+/=]{24,}$/,
    badFunction: null,
    badSecret: 'must be v1,whsec_<base64> (several separated by |)',
    noSecret: 'is required with an AUTH_HOOK_SEND_EMAIL URL',
  },
  AUTH_HOOK_SEND_SMS: {
    dotted: false,
    secretAlways: false,
    secretPattern: /^v1,whsec_[A-Za-z0-9+/]{16,}={0,2}$/,
    badFunction: 'must be pg-functions://<database>/<schema>/<function> (lower-case identifiers)',
    badSecret: 'is required with an http(s) AUTH_HOOK_SEND_SMS: v1,whsec_<base64> (several joined by |)',
    noSecret: 'is required with an http(s) AUTH_HOOK_SEND_SMS: v1,whsec_<base64> (several joined by |)',
  },
} as const;

const IDENT = '([a-z_][a-z0-9_$]{0,62})';
const PG_FUNCTIONS = new RegExp(`^pg-functions://[^/]+/${IDENT}/${IDENT}$`);
const DOTTED = new RegExp(`^${IDENT}\\.${IDENT}$`);

/**
 * A hook setting, as GoTrue takes it: `pg-functions://<db>/<schema>/<function>`, or an https
 * URL (http on loopback) with `<name>_SECRET`: one or more `v1,whsec_<base64>` joined by `|`,
 * kept as the keys after `whsec_`.
 */
export function standardHook(env: Env, name: keyof typeof HOOK_FORMS): StandardHook | null {
  const form = HOOK_FORMS[name];
  const secretName = `${name}_SECRET`;
  const secrets = (str(env, secretName) ?? '').split('|').map((x) => x.trim()).filter((x) => x !== '');
  const checkSecrets = (): void => {
    if (!secrets.every((x) => form.secretPattern.test(x))) throw new ConfigError(secretName, form.badSecret);
  };
  if (form.secretAlways) checkSecrets();
  const v = str(env, name);
  if (v === undefined) return null;
  const fn = PG_FUNCTIONS.exec(v) ?? (form.dotted ? DOTTED.exec(v) : null);
  if (fn !== null) return { kind: 'sql', fn: `${fn[1]}.${fn[2]}` };
  if (form.badFunction !== null && v.startsWith('pg-functions:')) throw new ConfigError(name, form.badFunction);
  const hookUrl = url(env, name, { httpOnlyLoopback: true })!;
  if (secrets.length === 0) throw new ConfigError(secretName, form.noSecret);
  checkSecrets();
  return { kind: 'http', url: hookUrl, secrets: Object.freeze(secrets.map((x) => x.slice('v1,whsec_'.length))) };
}

/** AUTH_PASSKEY_RP_ID: a host name (WebAuthn's RP id: no scheme, port or path). */
function hostName(env: Env, name: string): string | null {
  const v = str(env, name);
  if (v !== undefined && !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(v)) throw new ConfigError(name, 'must be a host name such as example.com');
  return v?.toLowerCase() ?? null;
}

export function authSettings(env: Env) {
  return {
    anonKeyEnv: str(env, 'ANON_KEY') ?? null,
    serviceRoleKeyEnv: str(env, 'SERVICE_ROLE_KEY') ?? null,
    anonymousRole: anonymousRole(env),
    requireEmailVerification: bool(env, 'REQUIRE_EMAIL_VERIFICATION', false),
    allowAnonymousSignin: bool(env, 'ALLOW_ANONYMOUS_SIGNIN', false),
    additionalRedirectUrls: Object.freeze(list(env, 'ADDITIONAL_REDIRECT_URLS')),
    authRateLimit: int(env, 'AUTH_RATE_LIMIT', 30, 0),
    anonymousRateLimit: int(env, 'ANONYMOUS_RATE_LIMIT', 30, 0),
    mailRateLimitPerHour: int(env, 'MAIL_RATE_LIMIT_PER_HOUR', 5, 0, 10000),
    mfaEncryptionKey: mfaEncryptionKey(env),
    authHookCustomAccessToken: authHook(env),
    authAuditRetentionDays: int(env, 'AUTH_AUDIT_RETENTION_DAYS', 90, 0, 100000),
    oauth: Object.freeze(oauthProviders(env)),
    accessTokenTtl: int(env, 'ACCESS_TOKEN_TTL', 3600, 1),
    refreshTokenTtl: int(env, 'REFRESH_TOKEN_TTL', 2592000, 1),
    smtpUrl: url(env, 'SMTP_URL', { protocols: ['smtp:', 'smtps:'] }) ?? null,
    mailFrom: str(env, 'MAIL_FROM') ?? 'noreply@localhost',
    passkeyRpId: hostName(env, 'AUTH_PASSKEY_RP_ID'),
    passkeyOrigins: Object.freeze(
      (str(env, 'AUTH_PASSKEY_ORIGINS') ?? '').split(',').map((v) => v.trim()).filter((v) => v !== '').map((v) => new URL(url({ AUTH_PASSKEY_ORIGINS: v }, 'AUTH_PASSKEY_ORIGINS')!).origin),
    ),
    authTemplatesDir: { path: resolve(str(env, 'AUTH_TEMPLATES_DIR') ?? 'templates/auth'), required: str(env, 'AUTH_TEMPLATES_DIR') !== undefined },
    authHookSendEmail: standardHook(env, 'AUTH_HOOK_SEND_EMAIL'),
    authHookSendSms: standardHook(env, 'AUTH_HOOK_SEND_SMS'),
    smsRateLimitPerHour: int(env, 'SMS_RATE_LIMIT_PER_HOUR', 5, 0, 10000),
  };
}
