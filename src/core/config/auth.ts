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

/** The send-SMS hook: a SQL function `schema.function`, or a URL posted to with Standard Webhooks signatures (base64 keys). */
export type SendSmsHook = { kind: 'sql'; fn: string } | { kind: 'http'; url: string; secrets: readonly string[] };

/** AUTH_HOOK_SEND_SMS: GoTrue's `pg-functions://<db>/<schema>/<function>` or an https URL (http on loopback) with AUTH_HOOK_SEND_SMS_SECRET `v1,whsec_<base64>` (several joined by `|`). */
function sendSmsHook(env: Env): SendSmsHook | null {
  const v = str(env, 'AUTH_HOOK_SEND_SMS');
  if (v === undefined) return null;
  const fn = /^pg-functions:\/\/[^/]+\/([a-z_][a-z0-9_$]{0,62})\/([a-z_][a-z0-9_$]{0,62})$/.exec(v);
  if (fn) return { kind: 'sql', fn: `${fn[1]}.${fn[2]}` };
  if (v.startsWith('pg-functions:')) throw new ConfigError('AUTH_HOOK_SEND_SMS', 'must be pg-functions://<database>/<schema>/<function> (lower-case identifiers)');
  const hookUrl = url(env, 'AUTH_HOOK_SEND_SMS', { httpOnlyLoopback: true }) as string;
  const secrets = (str(env, 'AUTH_HOOK_SEND_SMS_SECRET') ?? '').split('|').map((x) => x.trim()).filter((x) => x !== '');
  if (secrets.length === 0 || !secrets.every((x) => /^v1,whsec_[A-Za-z0-9+/]{16,}={0,2}$/.test(x))) {
    throw new ConfigError('AUTH_HOOK_SEND_SMS_SECRET', 'is required with an http(s) AUTH_HOOK_SEND_SMS: v1,whsec_<base64> (several joined by |)');
  }
  return { kind: 'http', url: hookUrl, secrets: Object.freeze(secrets.map((x) => x.slice('v1,whsec_'.length))) };
}

/** AUTH_PASSKEY_RP_ID: a host name (WebAuthn's RP id: no scheme, port or path). */
function hostName(env: Env, name: string): string | null {
  const v = str(env, name);
  if (v !== undefined && !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(v)) throw new ConfigError(name, 'must be a host name such as example.com');
  return v?.toLowerCase() ?? null;
}

/** AUTH_HOOK_SEND_EMAIL: GoTrue's `pg-functions://<db>/<schema>/<function>` (or `schema.function`), or an https:// URL (http:// to loopback) with its secret. */
function sendEmailHook(env: Env): { authHookSendEmail: { kind: 'sql'; fn: string } | { kind: 'http'; url: string } | null; authHookSendEmailSecrets: readonly string[] } {
  const v = str(env, 'AUTH_HOOK_SEND_EMAIL');
  const secrets = (str(env, 'AUTH_HOOK_SEND_EMAIL_SECRET') ?? '').split('|').map((x) => x.trim()).filter((x) => x !== '');
  if (secrets.some((x) => !/^v1,whsec_[A-Za-z0-9+/=]{24,}$/.test(x))) throw new ConfigError('AUTH_HOOK_SEND_EMAIL_SECRET', 'must be v1,whsec_<base64> (several separated by |)');
  if (v === undefined) return { authHookSendEmail: null, authHookSendEmailSecrets: secrets };
  const fn = /^pg-functions:\/\/[^/]+\/([a-z_][a-z0-9_$]{0,62})\/([a-z_][a-z0-9_$]{0,62})$/.exec(v) ?? /^([a-z_][a-z0-9_$]{0,62})\.([a-z_][a-z0-9_$]{0,62})$/.exec(v);
  if (fn !== null) return { authHookSendEmail: { kind: 'sql', fn: `${fn[1]}.${fn[2]}` }, authHookSendEmailSecrets: secrets };
  const u = url(env, 'AUTH_HOOK_SEND_EMAIL', { httpOnlyLoopback: true })!;
  if (secrets.length === 0) throw new ConfigError('AUTH_HOOK_SEND_EMAIL_SECRET', 'is required with an AUTH_HOOK_SEND_EMAIL URL');
  return { authHookSendEmail: { kind: 'http', url: u }, authHookSendEmailSecrets: secrets };
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
    ...sendEmailHook(env),
    authHookSendSms: sendSmsHook(env),
    smsRateLimitPerHour: int(env, 'SMS_RATE_LIMIT_PER_HOUR', 5, 0, 10000),
  };
}
