/**
 * Configuration: the whole environment contract (docs/operations.md, "Configuration") parsed once
 * into a frozen, typed object. Nothing else in plinth reads `process.env`.
 *
 * `parseConfig` is pure and synchronous: it validates syntax and throws `ConfigError`
 * naming the variable. `resolveSecrets` then settles the JWT secret (generated once under
 * DATA_DIR in development mode) and the anon / service-role keys, verifying keys given
 * explicitly. `main.ts` prints `ConfigError.message` as one line and exits 1 before
 * anything listens or migrates.
 */
import { createHash, createPrivateKey, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync, existsSync, statSync } from 'node:fs';
import { isIP, isIPv4, isIPv6 } from 'node:net';
import { join, resolve } from 'node:path';
import { SignJWT, jwtVerify } from 'jose';
import { parseWorkers } from './cores.ts';

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`invalid configuration: ${variable} ${problem}`);
    this.variable = variable;
  }
}

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

export const REST_TX_ENDS = ['commit', 'commit-allow-override', 'rollback', 'rollback-allow-override'] as const;
export type RestTxEnd = (typeof REST_TX_ENDS)[number];

export interface Config {
  siteUrl: string;
  jwtSecret: string | null;
  /** Raw ANON_KEY / SERVICE_ROLE_KEY when given explicitly (verified in resolveSecrets). */
  anonKeyEnv: string | null;
  serviceRoleKeyEnv: string | null;
  anonymousRole: string;
  requireEmailVerification: boolean;
  allowAnonymousSignin: boolean;
  /** SUPABASE_COMPAT: answer what supabase-js sends, in GoTrue's and PostgREST's shapes (docs/api/supabase.md). */
  supabaseCompat: boolean;
  /** ADDITIONAL_REDIRECT_URLS: under SUPABASE_COMPAT, the `redirect_to` targets allowed besides SITE_URL (GoTrue's globs). */
  additionalRedirectUrls: readonly string[];
  authRateLimit: number;
  anonymousRateLimit: number;
  /** MAIL_RATE_LIMIT_PER_HOUR: recovery and magic-link mails per address in any hour; 0 disables. */
  mailRateLimitPerHour: number;
  /** MFA_ENCRYPTION_KEY: the key TOTP secrets are encrypted under (at least 32 characters); null: derived from the JWT secret. */
  mfaEncryptionKey: string | null;
  /** AUTH_HOOK_CUSTOM_ACCESS_TOKEN: `schema.function`, the SQL function every access token's claims pass through; null: none. */
  authHookCustomAccessToken: string | null;
  /** AUTH_TEMPLATES_DIR: the app's email templates (docs/emails.md); `required`: set explicitly, so it must exist. */
  authTemplatesDir: { path: string; required: boolean };
  /** AUTH_HOOK_SEND_EMAIL: a SQL function (`schema.function`) or a URL that sends the mails instead of SMTP; null: none. */
  authHookSendEmail: { kind: 'sql'; fn: string } | { kind: 'http'; url: string } | null;
  /** AUTH_HOOK_SEND_EMAIL_SECRET: the Standard Webhooks secrets (`v1,whsec_…`, `|`-separated) the URL form is signed with. */
  authHookSendEmailSecrets: readonly string[];
  /** AUTH_AUDIT_RETENTION_DAYS: audit entries older than this are deleted by the hourly purge; 0 keeps them all. */
  authAuditRetentionDays: number;
  maxBatchOperations: number;
  /** REST_TX_END: how a REST request's transaction ends, and whether `Prefer: tx=` may override it. */
  restTxEnd: RestTxEnd;
  /** REST_COMPUTED_FIELDS: functions of a table's row type are selectable, filterable columns. */
  restComputedFields: boolean;
  /** REST_AGGREGATES_ENABLED: `count()`, `col.sum()`, `avg`, `max`, `min` in `select`, grouped by the plain columns. */
  restAggregatesEnabled: boolean;
  /** REST_PLAN_ENABLED: `Accept: application/vnd.pgrst.plan…` answers the statement's execution plan. */
  restPlanEnabled: boolean;
  storageBackend: 'database' | 'disk' | 's3';
  storageDir: string;
  /** IMAGE_TRANSFORMATION_ENABLED: the /storage/v1/render/image routes (resized variants cached under DATA_DIR/image-cache). */
  imageTransformation: boolean;
  /** IMAGE_MAX_PIXELS: a render source's width × height, read from its header, at most this (default 25 megapixels). */
  imageMaxPixels: number;
  /** IMAGE_RENDER_CONCURRENCY: renders one instance runs at once (default 1); more wait in a short queue or get 503. */
  imageRenderConcurrency: number;
  /** Any S3-compatible store, for the s3 storage back end (STORAGE_BACKEND=s3) and backups to S3 (BACKUP_S3_PREFIX). */
  s3: S3Config | null;
  enableSqlEndpoint: boolean;
  enableDemoEndpoint: boolean;
  /** DASHBOARD_ENABLED: the dashboard at /_/ and its endpoints (default true). */
  dashboardEnabled: boolean;
  requireAuthenticatedWs: boolean;
  allowedOrigins: readonly string[];
  allowPermissiveCors: boolean;
  oauth: Readonly<Partial<Record<OAuthProviderName, OAuthProviderConfig>>>;
  databaseUrl: string | null;
  /** DATABASE_DIRECT_URL: PostgreSQL itself, for LISTEN, the job worker and migrations when DATABASE_URL is a pooler (null: DATABASE_URL). */
  databaseDirectUrl: string | null;
  /** DB_POOLER: `transaction` when DATABASE_URL is a pooler in transaction mode (no session state, no named statements); `session` otherwise. */
  dbPooler: 'session' | 'transaction';
  /** DATABASE_READ_URL: streaming replicas (one URL or a comma-separated list, used round-robin) for REST reads; empty: none. */
  databaseReadUrls: readonly string[];
  /** READ_YOUR_WRITES_MS: a client that wrote this recently reads from the primary. */
  readYourWritesMs: number;
  /** REPLICA_MAX_LAG_MS: a replica further behind than this is skipped. */
  replicaMaxLagMs: number;
  dataDir: string;
  /** MIGRATIONS_DIR: the application's own graphile-migrate folder (committed/, current.sql), applied after plinth's. */
  migrationsDir: string;
  /** PUBLIC_DIR: the application's front end, served at `/` (default ./public when it exists); null: none. */
  publicDir: string | null;
  host: string;
  port: number;
  migrateOnStart: boolean;
  accessTokenTtl: number;
  refreshTokenTtl: number;
  apiExternalUrl: string;
  smtpUrl: string | null;
  mailFrom: string;
  /** TRUST_PROXY: which X-Forwarded-For hops are proxies of this deployment (see TrustProxy). */
  trustProxy: TrustProxy;
  edgeRuntimeUrl: string | null;
  functionsDir: string;
  /** A call to a deno function that gets no answer (or no further bytes) for this long: 504. */
  functionsTimeoutMs: number;
  /** FUNCTIONS_ENV: the variables the bundled Deno runtime may read, with their values here (null: unset). */
  functionsEnv: Readonly<Record<string, string | null>>;
  /** FUNCTIONS_ALLOW_NET: Deno net entries the bundled runtime's functions may reach; null: any host (`*` in the list: any host too). */
  functionsAllowNet: readonly string[] | null;
  /** FUNCTIONS_DENY_NET: Deno net entries denied on top of the default denials. */
  functionsDenyNet: readonly string[];
  /** EDGE_RUNTIME_SECRET: sent to an external EDGE_RUNTIME_URL in `x-plinth-runtime-secret` (the bundled runtime gets a random one per start). */
  edgeRuntimeSecret: string | null;
  webhookTimeoutMs: number;
  /** WEBHOOK_DENY_PRIVATE: deliveries to loopback and private addresses are refused too (link-local always is). */
  webhookDenyPrivate: boolean;
  /** WEBHOOK_RETRY_SCHEDULE: the delays (ms) before each retry of a failed delivery attempt; its length + 1 attempts in all. */
  webhookRetryScheduleMs: readonly number[];
  /** JOB_RUN_RETENTION_DAYS: how long the run log of schedules and queues keeps a finished run. */
  jobRunRetentionDays: number;
  /** FUNCTIONS_MEMORY_MB: the heap budget of each bundled-runtime function process. */
  functionsMemoryMb: number;
  wsMaxConnections: number;
  wsMaxConnectionsPerIp: number;
  /** Seconds between WebSocket pings; a client that missed the previous pong is closed. */
  wsPingInterval: number;
  liveChannel: string;
  /** LIVE_RERUN_MAX_MS: while live-query changes keep coming, how often the poller runs (at most once per this; idle, a writer's notification wakes it). */
  liveRerunMaxMs: number;
  /** LIVE_MAX_GROUPS: groups of subscribers per `as: subscriber` subscription. */
  liveMaxGroups: number;
  /** LIVE_MAX_ROWS: rows per live-query result (per group). */
  liveMaxRows: number;
  /** REALTIME_MAX_SUBSCRIPTIONS: table subscriptions (postgres_changes) per socket of /realtime/v1. */
  realtimeMaxSubscriptions: number;
  /** REALTIME_MAX_FILTERS: conditions in one table subscription's filter. */
  realtimeMaxFilters: number;
  dbPoolSize: number;
  /** WORKERS: service processes on the port (`auto`: the cores; src/core/cores.ts). */
  workers: number;
  /** DB_POOL_IDLE_MS: a request connection idle this long is closed. */
  dbPoolIdleMs: number;
  /** DB_POOL_TIMEOUT_MS: how long a request waits for a connection before 503 `database busy`. */
  dbPoolTimeoutMs: number;
  /** INSTANCE_DEAD_MS: an instance whose heartbeat is older than this is declared dead by the others. */
  instanceDeadMs: number;
  maxBodyBytes: number;
  /** Deepest nesting of arrays and objects a JSON request body may have (MAX_JSON_DEPTH). */
  maxJsonDepth: number;
  /** SIGTERM/SIGINT: after this long in-flight statements are cancelled and the process exits. */
  shutdownTimeoutMs: number;
  logLevel: string;
  /** LOG_FORMAT: `json` lines (production), or `pretty` through pino-pretty (development). */
  logFormat: 'json' | 'pretty';
  /** SHUTDOWN_GRACE_MS: after SIGTERM, /ready answers 503 while new connections are still accepted this long. */
  shutdownGraceMs: number;
  /** REQUEST_LOG_SIZE: requests kept in memory for GET /api/requests (0: none). */
  requestLogSize: number;
  /** METRICS_PORT: a second listener on HOST serving /metrics without credentials (null: none). */
  metricsPort: number | null;
  /** BACKUP_DIR: WAL archive and base backups of the embedded PostgreSQL (null: none). */
  backupDir: string | null;
  /** BACKUP_S3_PREFIX: the same, as objects under this prefix in S3_BUCKET (null: none). */
  backupS3Prefix: string | null;
  /** BACKUP_SCHEDULE: milliseconds between base backups (`daily`, `hourly`, `<n>h`, `<n>m`). */
  backupIntervalMs: number;
  /** BACKUP_RETENTION_DAYS: how far back a restore can go; older base backups and WAL go. */
  backupRetentionDays: number;
  /** OTEL_EXPORTER_OTLP_ENDPOINT: traces exported over OTLP/HTTP (null: OpenTelemetry is not loaded). */
  otelEndpoint: string | null;
  /** OTEL_SERVICE_NAME: the traces' service.name. */
  otelServiceName: string;
  shadowDatabaseUrl: string | null;
  rootDatabaseUrl: string | null;
  /** DB_REQUEST_PASSWORD: the request login roles' password, managed by a DBA; null = derived from JWT_SECRET and set by the migrations step. */
  dbRequestPassword: string | null;
}

/**
 * TRUST_PROXY, in the forms fastify's `trustProxy` takes: false (the socket's address is
 * the client), true (every hop is trusted: the left-most X-Forwarded-For entry is the
 * client), a number of proxies in front of plinth (the socket and the right-most n - 1
 * entries are trusted), or the proxies' addresses and CIDR ranges (and proxy-addr's
 * names `loopback`, `linklocal`, `uniquelocal`). The client is the right-most hop not
 * trusted.
 */
export type TrustProxy = boolean | number | readonly string[];

export interface S3Config {
  /** Unset: AWS's own endpoint for the region. */
  endpoint: string | null;
  bucket: string;
  region: string;
  /** Unset: the AWS SDK's default credential chain. */
  accessKeyId: string | null;
  secretAccessKey: string | null;
  forcePathStyle: boolean;
}

/** The S3 settings, read when `requiredBy` (the setting that needs them) is not null. */
function s3Config(env: Env, requiredBy: string | null): S3Config | null {
  const endpoint = url(env, 'S3_ENDPOINT') ?? null;
  const bucket = str(env, 'S3_BUCKET');
  const accessKeyId = str(env, 'S3_ACCESS_KEY_ID') ?? null;
  const secretAccessKey = str(env, 'S3_SECRET_ACCESS_KEY') ?? null;
  const forcePathStyle = bool(env, 'S3_FORCE_PATH_STYLE', false);
  const region = str(env, 'S3_REGION') ?? 'us-east-1';
  if (requiredBy === null) return null;
  if (bucket === undefined) throw new ConfigError('S3_BUCKET', `is required when ${requiredBy}`);
  if ((accessKeyId === null) !== (secretAccessKey === null)) {
    throw new ConfigError(accessKeyId === null ? 'S3_ACCESS_KEY_ID' : 'S3_SECRET_ACCESS_KEY', 'must be set together with its pair');
  }
  return Object.freeze({ endpoint, bucket, region, accessKeyId, secretAccessKey, forcePathStyle });
}

/** Config plus the settled secrets: what the running service uses. */
export interface RuntimeConfig extends Config {
  secret: string;
  /** true when JWT_SECRET was unset (development mode: no credential = anon). */
  devMode: boolean;
  anonKey: string;
  serviceRoleKey: string;
  /** true when SERVICE_ROLE_KEY was set explicitly (mounts /api/demo, docs/api/overview.md). */
  serviceRoleKeyExplicit: boolean;
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
const RESERVED_ROLES = new Set(['anon', 'authenticated', 'service_role']);

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v === '' ? undefined : v;
}

function bool(env: Env, name: string, dflt: boolean): boolean {
  const v = str(env, name);
  if (v === undefined) return dflt;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw new ConfigError(name, 'must be exactly true or false');
}

function restTxEnd(env: Env): RestTxEnd {
  const v = str(env, 'REST_TX_END') ?? 'commit';
  const found = REST_TX_ENDS.find((x) => x === v);
  if (found === undefined) throw new ConfigError('REST_TX_END', `must be one of ${REST_TX_ENDS.join(', ')}`);
  return found;
}

const RETRY_UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const RETRY_MAX_DELAYS = 20;
const RETRY_MAX_DELAY_MS = 24 * 3_600_000;

/**
 * WEBHOOK_RETRY_SCHEDULE: comma-separated delays (`1s,4s,1m,10m,1h`), each a whole number
 * with a unit (ms, s, m, h), at most 20 of them, each at most 24 h. Unset: the interface's
 * 1 s and 4 s (three attempts in all).
 */
function retrySchedule(env: Env): readonly number[] {
  const v = str(env, 'WEBHOOK_RETRY_SCHEDULE');
  if (v === undefined) return Object.freeze([1000, 4000]);
  const parts = v.split(',').map((p) => p.trim());
  const bad = () => new ConfigError('WEBHOOK_RETRY_SCHEDULE', `must be 1 to ${RETRY_MAX_DELAYS} comma-separated delays such as 1s,4s,1m,10m,1h (units ms, s, m, h; each at most 24h)`);
  if (parts.length > RETRY_MAX_DELAYS) throw bad();
  return Object.freeze(
    parts.map((p) => {
      const m = /^(\d{1,9})(ms|s|m|h)$/.exec(p);
      if (!m) throw bad();
      const ms = Number(m[1]) * RETRY_UNITS[m[2]];
      if (ms > RETRY_MAX_DELAY_MS) throw bad();
      return ms;
    }),
  );
}

function workersSetting(env: Env): number {
  const n = parseWorkers(str(env, 'WORKERS'), int(env, 'DB_POOL_SIZE', 10, 1, 1000));
  if (typeof n === 'string') throw new ConfigError('WORKERS', n);
  return n;
}

function int(env: Env, name: string, dflt: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const v = str(env, name);
  if (v === undefined) return dflt;
  if (!/^\d+$/.test(v)) throw new ConfigError(name, `must be a whole number from ${min}`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(name, `must be a whole number from ${min} to ${max}`);
  return n;
}

function isLoopbackHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

function url(env: Env, name: string, opts: { protocols?: string[]; httpOnlyLoopback?: boolean } = {}): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  const protocols = opts.protocols ?? ['http:', 'https:'];
  if (!protocols.includes(u.protocol)) throw new ConfigError(name, `must use ${protocols.map((p) => p.slice(0, -1)).join(' or ')}`);
  if (opts.httpOnlyLoopback && u.protocol === 'http:' && !isLoopbackHost(u.hostname)) {
    throw new ConfigError(name, 'may use http:// only for loopback hosts');
  }
  return v;
}

function origin(value: string, name: string): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(name, `has an invalid origin "${value}"`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.origin !== value.replace(/\/$/, '')) {
    throw new ConfigError(name, `has an invalid origin "${value}" (expected scheme://host[:port])`);
  }
  return u.origin;
}

function logFormat(env: Env): 'json' | 'pretty' {
  const v = str(env, 'LOG_FORMAT') ?? 'json';
  if (v !== 'json' && v !== 'pretty') throw new ConfigError('LOG_FORMAT', 'must be json or pretty');
  return v;
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
  const appleEndpoints: OAuthEndpoints = {
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
  if (apple.clientId && apple.teamId && apple.keyId && apple.privateKey) {
    const pem = apple.privateKey.replace(/\\n/g, '\n');
    let curve: string | undefined;
    try {
      const key = createPrivateKey(pem);
      curve = key.asymmetricKeyType === 'ec' ? key.asymmetricKeyDetails?.namedCurve : undefined;
    } catch {
      throw new ConfigError('APPLE_PRIVATE_KEY', 'must be a PEM private key');
    }
    if (curve !== 'prime256v1') throw new ConfigError('APPLE_PRIVATE_KEY', 'must be a P-256 (ES256) private key');
    out.apple = {
      clientId: apple.clientId,
      teamId: apple.teamId,
      keyId: apple.keyId,
      privateKey: pem,
      endpoints: appleEndpoints,
    };
  }
  const issuerUrl = url(env, 'OIDC_ISSUER_URL', { httpOnlyLoopback: true });
  const oidcId = str(env, 'OIDC_CLIENT_ID');
  const oidcSecret = str(env, 'OIDC_CLIENT_SECRET');
  if (issuerUrl && oidcId && oidcSecret) out.oidc = { clientId: oidcId, clientSecret: oidcSecret, issuerUrl, endpoints: {} };
  return out;
}

const TRUST_PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);
const MAX_PROXY_HOPS = 100;

/** One entry of a TRUST_PROXY list: an IP address, an address/prefix, or a proxy-addr name. */
function trustedProxyEntry(entry: string): boolean {
  if (TRUST_PROXY_NAMES.has(entry)) return true;
  const slash = entry.indexOf('/');
  const addr = slash < 0 ? entry : entry.slice(0, slash);
  // Zone ids (fe80::1%eth0) are left out: the address never carries one in X-Forwarded-For.
  const kind = addr.includes('%') ? 0 : isIP(addr);
  if (kind === 0) return false;
  if (slash < 0) return true;
  const prefix = entry.slice(slash + 1);
  return /^\d{1,3}$/.test(prefix) && Number(prefix) >= 1 && Number(prefix) <= (kind === 4 ? 32 : 128);
}

/** TRUST_PROXY: true | false | a number of proxies | comma-separated proxy addresses or CIDR ranges. */
function trustProxy(env: Env): TrustProxy {
  const v = str(env, 'TRUST_PROXY')?.trim();
  if (v === undefined || v === '' || v === 'false') return false;
  if (v === 'true') return true;
  if (/^\d+$/.test(v)) {
    const n = Number(v);
    if (n > MAX_PROXY_HOPS) throw new ConfigError('TRUST_PROXY', `must be true, false, a number of proxies from 0 to ${MAX_PROXY_HOPS}, or proxy addresses`);
    return n === 0 ? false : n;
  }
  const entries = v.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = entries.find((e) => !trustedProxyEntry(e));
  if (bad !== undefined || entries.length === 0) {
    throw new ConfigError(
      'TRUST_PROXY',
      `has an invalid proxy address "${bad ?? v}" (expected true, false, a number of proxies, or comma-separated IP addresses and CIDR ranges)`,
    );
  }
  return Object.freeze(entries);
}

/** FUNCTIONS_ENV: comma-separated variable names; each maps to its value here (null when unset). */
function functionsEnv(env: Env): Readonly<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const name of (str(env, 'FUNCTIONS_ENV') ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new ConfigError('FUNCTIONS_ENV', `has an invalid variable name "${name}"`);
    out[name] = env[name] ?? null;
  }
  return Object.freeze(out);
}

/**
 * One entry of Deno's `--allow-net` / `--deny-net` list: `host`, `host:port`, an IPv4
 * address or range (`169.254.0.0/16`) with an optional port, or `[IPv6]` with an optional port.
 */
function netEntry(value: string, name: string): string {
  const bad = () => new ConfigError(name, `has an invalid entry "${value}" (expected host, host:port, IPv4/prefix[:port] or [IPv6][:port])`);
  const v6 = /^\[([0-9A-Fa-f:.]+)\](?::(\d{1,5}))?$/.exec(value);
  const plain = /^([A-Za-z0-9_.-]+)(?:\/(\d{1,2}))?(?::(\d{1,5}))?$/.exec(value);
  const port = v6?.[2] ?? plain?.[3];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) throw bad();
  if (v6 !== null) {
    if (!isIPv6(v6[1])) throw bad();
    return value;
  }
  if (plain === null) throw bad();
  const [, host, prefix] = plain;
  if (prefix !== undefined && (!isIPv4(host) || Number(prefix) > 32)) throw bad();
  if (!isIPv4(host) && !/^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?)*$/.test(host)) throw bad();
  return value;
}

/** A comma-separated list of net entries; `extra` are words accepted as they are (`*`, `none`). */
function netList(env: Env, name: string, extra: readonly string[] = []): string[] | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  const entries = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (entries.length === 0) throw new ConfigError(name, 'has no entry');
  return entries.map((e) => (extra.includes(e) ? e : netEntry(e, name)));
}

/** FUNCTIONS_ALLOW_NET: unset → null (any host); `none` alone → no network; else the entries (`*`: any host). */
function functionsAllowNet(env: Env): readonly string[] | null {
  const list = netList(env, 'FUNCTIONS_ALLOW_NET', ['*', 'none']);
  if (list === undefined) return null;
  if (list.includes('none')) {
    if (list.length > 1) throw new ConfigError('FUNCTIONS_ALLOW_NET', 'may hold none only alone');
    return Object.freeze([]);
  }
  return Object.freeze(list);
}

/** EDGE_RUNTIME_SECRET: printable ASCII without spaces (it travels in a header), at least 32 characters. */
function edgeRuntimeSecret(env: Env): string | null {
  const v = str(env, 'EDGE_RUNTIME_SECRET');
  if (v === undefined) return null;
  if (!/^[\x21-\x7e]{32,}$/.test(v)) throw new ConfigError('EDGE_RUNTIME_SECRET', 'must be at least 32 printable ASCII characters without spaces');
  return v;
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

/** AUTH_HOOK_SEND_EMAIL: GoTrue's `pg-functions://<db>/<schema>/<function>` (or `schema.function`), or an https:// URL (http:// to loopback) with its secret. */
function sendEmailHook(env: Env): Pick<RuntimeConfig, 'authHookSendEmail' | 'authHookSendEmailSecrets'> {
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

/** BACKUP_DIR: a folder (made absolute); only for the embedded PostgreSQL (its own is pgBackRest's job). */
function backupDir(env: Env, databaseUrl: string | null): string | null {
  const v = str(env, 'BACKUP_DIR');
  if (v === undefined) return null;
  if (databaseUrl !== null) throw new ConfigError('BACKUP_DIR', 'backs up the embedded PostgreSQL only (DATABASE_URL is set): use pgBackRest or your provider\'s backups');
  // The folder goes into archive_command and restore_command, run by /bin/sh.
  if (/['"\\$`\n]/.test(v)) throw new ConfigError('BACKUP_DIR', 'must not contain quotes, backslashes, $ or backquotes');
  return resolve(v);
}

/** BACKUP_S3_PREFIX: a key prefix ending with `/` in S3_BUCKET; only for the embedded PostgreSQL, and not with BACKUP_DIR. */
function backupS3Prefix(env: Env, databaseUrl: string | null): string | null {
  const v = str(env, 'BACKUP_S3_PREFIX');
  if (v === undefined) return null;
  if (databaseUrl !== null) throw new ConfigError('BACKUP_S3_PREFIX', 'backs up the embedded PostgreSQL only (DATABASE_URL is set): use pgBackRest or your provider\'s backups');
  if (str(env, 'BACKUP_DIR') !== undefined) throw new ConfigError('BACKUP_S3_PREFIX', 'and BACKUP_DIR name two places for the backups: set one');
  if (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*\/?$/.test(v) || v.split('/').some((p) => p === '.' || p === '..')) {
    throw new ConfigError('BACKUP_S3_PREFIX', 'must be a key prefix such as backups/plinth/ (letters, digits, . _ - and /, no leading /)');
  }
  return v.endsWith('/') ? v : v + '/';
}

/** BACKUP_SCHEDULE: `daily` (default), `hourly`, or every `<n>h` / `<n>m` (at most a week). */
function backupSchedule(env: Env): number {
  const v = str(env, 'BACKUP_SCHEDULE') ?? 'daily';
  if (v === 'daily') return 86_400_000;
  if (v === 'hourly') return 3_600_000;
  const m = /^([1-9][0-9]{0,4})([hm])$/.exec(v);
  const ms = m === null ? NaN : Number(m[1]) * (m[2] === 'h' ? 3_600_000 : 60_000);
  // At most a week: a longer interval leaves too long a WAL to replay (and overflows a timer).
  if (!(ms <= 7 * 86_400_000)) throw new ConfigError('BACKUP_SCHEDULE', 'must be daily, hourly, or a number of hours or minutes up to a week, such as 6h or 30m');
  return ms;
}

/** Parse and validate the environment. Throws ConfigError naming the first bad variable. */
export function parseConfig(env: Env = process.env): Config {
  const jwtSecret = str(env, 'JWT_SECRET') ?? null;
  if (jwtSecret !== null && jwtSecret.length < 32) throw new ConfigError('JWT_SECRET', 'must be at least 32 characters');

  const anonymousRole = str(env, 'ANONYMOUS_ROLE') ?? 'anonymous';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(anonymousRole) || RESERVED_ROLES.has(anonymousRole)) {
    throw new ConfigError('ANONYMOUS_ROLE', 'must be a lower-case identifier other than anon, authenticated and service_role');
  }

  const storageBackend = str(env, 'STORAGE_BACKEND') ?? 'database';
  if (storageBackend !== 'database' && storageBackend !== 'disk' && storageBackend !== 's3') {
    throw new ConfigError('STORAGE_BACKEND', 'must be database, disk or s3');
  }

  const allowedOrigins = (str(env, 'ALLOWED_ORIGINS') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((o) => origin(o, 'ALLOWED_ORIGINS'));

  const host = str(env, 'HOST') ?? '127.0.0.1';
  const port = int(env, 'PORT', 8000, 0, 65535);
  const publicHost = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  const dataDir = resolve(str(env, 'DATA_DIR') ?? './.data');

  const publicDirSet = str(env, 'PUBLIC_DIR');
  const publicDir = resolve(publicDirSet ?? './public');
  if (publicDirSet !== undefined && !isDirectory(publicDir)) throw new ConfigError('PUBLIC_DIR', `${publicDir} is not a folder`);

  const logLevel = str(env, 'LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.has(logLevel)) throw new ConfigError('LOG_LEVEL', `must be one of ${[...LOG_LEVELS].join(', ')}`);

  const liveChannel = str(env, 'LIVE_CHANNEL') ?? 'lqs';
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(liveChannel)) throw new ConfigError('LIVE_CHANNEL', 'must be a lower-case identifier');

  const databaseUrl = url(env, 'DATABASE_URL', { protocols: ['postgres:', 'postgresql:'] }) ?? null;
  const databaseDirectUrl = url(env, 'DATABASE_DIRECT_URL', { protocols: ['postgres:', 'postgresql:'] }) ?? null;
  const dbPooler = str(env, 'DB_POOLER') ?? 'session';
  if (dbPooler !== 'session' && dbPooler !== 'transaction') throw new ConfigError('DB_POOLER', 'must be session or transaction');
  if (dbPooler === 'transaction' && databaseDirectUrl === null) {
    throw new ConfigError('DATABASE_DIRECT_URL', 'is required with DB_POOLER=transaction (LISTEN, the job worker and migrations need a direct connection)');
  }
  const databaseReadUrls = (str(env, 'DATABASE_READ_URL') ?? '')
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '')
    .map((v) => url({ DATABASE_READ_URL: v }, 'DATABASE_READ_URL', { protocols: ['postgres:', 'postgresql:'] }) as string);

  return Object.freeze({
    siteUrl: (url(env, 'SITE_URL') ?? 'http://localhost:3000').replace(/\/$/, ''),
    jwtSecret,
    anonKeyEnv: str(env, 'ANON_KEY') ?? null,
    serviceRoleKeyEnv: str(env, 'SERVICE_ROLE_KEY') ?? null,
    anonymousRole,
    requireEmailVerification: bool(env, 'REQUIRE_EMAIL_VERIFICATION', false),
    allowAnonymousSignin: bool(env, 'ALLOW_ANONYMOUS_SIGNIN', false),
    supabaseCompat: bool(env, 'SUPABASE_COMPAT', false),
    additionalRedirectUrls: Object.freeze((str(env, 'ADDITIONAL_REDIRECT_URLS') ?? '').split(',').map((v) => v.trim()).filter((v) => v !== '')),
    authRateLimit: int(env, 'AUTH_RATE_LIMIT', 30, 0),
    anonymousRateLimit: int(env, 'ANONYMOUS_RATE_LIMIT', 30, 0),
    mailRateLimitPerHour: int(env, 'MAIL_RATE_LIMIT_PER_HOUR', 5, 0, 10000),
    mfaEncryptionKey: mfaEncryptionKey(env),
    authHookCustomAccessToken: authHook(env),
    authTemplatesDir: { path: resolve(str(env, 'AUTH_TEMPLATES_DIR') ?? 'templates/auth'), required: str(env, 'AUTH_TEMPLATES_DIR') !== undefined },
    ...sendEmailHook(env),
    authAuditRetentionDays: int(env, 'AUTH_AUDIT_RETENTION_DAYS', 90, 0, 100000),
    maxBatchOperations: int(env, 'MAX_BATCH_OPERATIONS', 20, 1),
    restTxEnd: restTxEnd(env),
    restComputedFields: bool(env, 'REST_COMPUTED_FIELDS', false),
    restPlanEnabled: bool(env, 'REST_PLAN_ENABLED', false),
    restAggregatesEnabled: bool(env, 'REST_AGGREGATES_ENABLED', false),
    storageBackend,
    storageDir: resolve(str(env, 'STORAGE_DIR') ?? join(dataDir, 'storage')),
    imageTransformation: bool(env, 'IMAGE_TRANSFORMATION_ENABLED', true),
    imageMaxPixels: int(env, 'IMAGE_MAX_PIXELS', 25_000_000, 1, 1_000_000_000),
    imageRenderConcurrency: int(env, 'IMAGE_RENDER_CONCURRENCY', 1, 1, 64),
    s3: s3Config(env, storageBackend === 's3' ? 'STORAGE_BACKEND=s3' : str(env, 'BACKUP_S3_PREFIX') !== undefined ? 'BACKUP_S3_PREFIX is set' : null),
    // On in development mode: the dashboard's SQL view is how a machine with only Node runs SQL.
    enableSqlEndpoint: bool(env, 'ENABLE_SQL_ENDPOINT', jwtSecret === null),
    enableDemoEndpoint: bool(env, 'ENABLE_DEMO_ENDPOINT', false),
    dashboardEnabled: bool(env, 'DASHBOARD_ENABLED', true),
    requireAuthenticatedWs: bool(env, 'REQUIRE_AUTHENTICATED_WS', false),
    allowedOrigins: Object.freeze(allowedOrigins),
    allowPermissiveCors: bool(env, 'ALLOW_PERMISSIVE_CORS', false),
    oauth: Object.freeze(oauthProviders(env)),
    databaseUrl,
    databaseDirectUrl,
    dbPooler,
    dataDir,
    migrationsDir: resolve(str(env, 'MIGRATIONS_DIR') ?? './migrations'),
    publicDir: isDirectory(publicDir) ? publicDir : null,
    host,
    port,
    migrateOnStart: bool(env, 'MIGRATE_ON_START', true),
    accessTokenTtl: int(env, 'ACCESS_TOKEN_TTL', 3600, 1),
    refreshTokenTtl: int(env, 'REFRESH_TOKEN_TTL', 2592000, 1),
    apiExternalUrl: (url(env, 'API_EXTERNAL_URL') ?? `http://${publicHost}:${port}`).replace(/\/$/, ''),
    smtpUrl: url(env, 'SMTP_URL', { protocols: ['smtp:', 'smtps:'] }) ?? null,
    mailFrom: str(env, 'MAIL_FROM') ?? 'noreply@localhost',
    trustProxy: trustProxy(env),
    edgeRuntimeUrl: url(env, 'EDGE_RUNTIME_URL')?.replace(/\/$/, '') ?? null,
    functionsDir: resolve(str(env, 'FUNCTIONS_DIR') ?? './functions'),
    functionsTimeoutMs: int(env, 'FUNCTIONS_TIMEOUT_MS', 60000, 1),
    functionsEnv: functionsEnv(env),
    functionsAllowNet: functionsAllowNet(env),
    functionsDenyNet: Object.freeze(netList(env, 'FUNCTIONS_DENY_NET') ?? []),
    edgeRuntimeSecret: edgeRuntimeSecret(env),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10000, 1),
    webhookDenyPrivate: bool(env, 'WEBHOOK_DENY_PRIVATE', false),
    webhookRetryScheduleMs: retrySchedule(env),
    jobRunRetentionDays: int(env, 'JOB_RUN_RETENTION_DAYS', 14, 1, 3650),
    functionsMemoryMb: int(env, 'FUNCTIONS_MEMORY_MB', 256, 16, 65536),
    wsMaxConnections: int(env, 'WS_MAX_CONNECTIONS', 10000, 1),
    wsMaxConnectionsPerIp: int(env, 'WS_MAX_CONNECTIONS_PER_IP', 100, 1),
    wsPingInterval: int(env, 'WS_PING_INTERVAL', 30, 1, 3600),
    liveRerunMaxMs: int(env, 'LIVE_RERUN_MAX_MS', 20, 1, 60_000),
    liveMaxGroups: int(env, 'LIVE_MAX_GROUPS', 10_000, 1, 1_000_000),
    liveMaxRows: int(env, 'LIVE_MAX_ROWS', 10_000, 1, 10_000_000),
    realtimeMaxSubscriptions: int(env, 'REALTIME_MAX_SUBSCRIPTIONS', 100, 1, 100_000),
    realtimeMaxFilters: int(env, 'REALTIME_MAX_FILTERS', 10, 1, 1000),
    liveChannel,
    dbPoolSize: int(env, 'DB_POOL_SIZE', 10, 1, 1000),
    workers: workersSetting(env),
    databaseReadUrls: Object.freeze(databaseReadUrls),
    readYourWritesMs: int(env, 'READ_YOUR_WRITES_MS', 5000, 0, 3_600_000),
    replicaMaxLagMs: int(env, 'REPLICA_MAX_LAG_MS', 1000, 0, 3_600_000),
    dbPoolIdleMs: int(env, 'DB_POOL_IDLE_MS', 10000, 100),
    dbPoolTimeoutMs: int(env, 'DB_POOL_TIMEOUT_MS', 5000, 1),
    instanceDeadMs: int(env, 'INSTANCE_DEAD_MS', 30000, 1000),
    maxBodyBytes: int(env, 'MAX_BODY_BYTES', 1048576, 1),
    maxJsonDepth: int(env, 'MAX_JSON_DEPTH', 128, 1, 1000),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10000, 0),
    logLevel,
    logFormat: logFormat(env),
    // Development mode has no load balancer to tell: Ctrl-C stops at once.
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', jwtSecret === null ? 0 : 5000, 0),
    requestLogSize: int(env, 'REQUEST_LOG_SIZE', 1000, 0, 1_000_000),
    metricsPort: str(env, 'METRICS_PORT') === undefined ? null : int(env, 'METRICS_PORT', 0, 0, 65535),
    backupDir: backupDir(env, databaseUrl),
    backupS3Prefix: backupS3Prefix(env, databaseUrl),
    backupIntervalMs: backupSchedule(env),
    backupRetentionDays: int(env, 'BACKUP_RETENTION_DAYS', 7, 1, 100000),
    otelEndpoint: url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')?.replace(/\/$/, '') ?? null,
    otelServiceName: str(env, 'OTEL_SERVICE_NAME') ?? 'plinth',
    shadowDatabaseUrl: url(env, 'SHADOW_DATABASE_URL', { protocols: ['postgres:', 'postgresql:'] }) ?? null,
    rootDatabaseUrl: url(env, 'ROOT_DATABASE_URL', { protocols: ['postgres:', 'postgresql:'] }) ?? null,
    dbRequestPassword: str(env, 'DB_REQUEST_PASSWORD') ?? null,
  });
}

interface StoredSecret {
  secret: string;
  created_at: number;
}

/** Reads or creates a JSON file under DATA_DIR, mode 0600. */
function readOrCreate<T>(file: string, create: () => T): T {
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as T;
  // 0711: others may pass through (the embedded PostgreSQL's postgres user, as root) but not list; the files are 0600.
  mkdirSync(join(file, '..'), { recursive: true, mode: 0o711 });
  const value = create();
  writeFileSync(file, JSON.stringify(value, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
  return value;
}

const TEN_YEARS = 10 * 365 * 24 * 3600;

async function deriveKey(secret: string, role: 'anon' | 'service_role', iat: number): Promise<string> {
  return new SignJWT({ role })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt(iat)
    .setExpirationTime(iat + TEN_YEARS)
    .sign(new TextEncoder().encode(secret));
}

async function checkKey(secret: string, name: string, token: string, role: string): Promise<void> {
  try {
    const { payload } = await jwtVerify(token, new TextEncoder().encode(secret), { algorithms: ['HS256'] });
    if (payload.role !== role) throw new Error('role');
  } catch {
    throw new ConfigError(name, `must be a JWT signed with JWT_SECRET whose role is ${role}`);
  }
}

/**
 * Settle the secret and keys. Development mode (no JWT_SECRET): a random secret is
 * generated once and kept in DATA_DIR/jwt-secret.json. Derived keys use the secret's
 * creation time as `iat`, so every start prints the same keys.
 */
export async function resolveSecrets(config: Config): Promise<RuntimeConfig> {
  let secret: string;
  let createdAt: number;
  if (config.jwtSecret === null) {
    if (config.anonKeyEnv !== null) throw new ConfigError('ANON_KEY', 'is set without JWT_SECRET');
    if (config.serviceRoleKeyEnv !== null) throw new ConfigError('SERVICE_ROLE_KEY', 'is set without JWT_SECRET');
    const stored = readOrCreate<StoredSecret>(join(config.dataDir, 'jwt-secret.json'), () => ({
      secret: randomBytes(48).toString('base64url'),
      created_at: Math.floor(Date.now() / 1000),
    }));
    secret = stored.secret;
    createdAt = stored.created_at;
  } else {
    secret = config.jwtSecret;
    // A given secret has no creation time of its own: remember when this data directory
    // first saw it, so the derived keys stay the same from start to start.
    const fingerprint = createHash('sha256').update(secret).digest('hex').slice(0, 16);
    const file = join(config.dataDir, `keys-${fingerprint}.json`);
    try {
      createdAt = readOrCreate(file, () => ({ created_at: Math.floor(Date.now() / 1000) })).created_at;
    } catch {
      createdAt = 1767225600; // DATA_DIR not writable: a fixed epoch (2026-01-01) still gives stable keys
    }
  }
  if (config.anonKeyEnv !== null) await checkKey(secret, 'ANON_KEY', config.anonKeyEnv, 'anon');
  if (config.serviceRoleKeyEnv !== null) await checkKey(secret, 'SERVICE_ROLE_KEY', config.serviceRoleKeyEnv, 'service_role');
  return Object.freeze({
    ...config,
    secret,
    devMode: config.jwtSecret === null,
    anonKey: config.anonKeyEnv ?? (await deriveKey(secret, 'anon', createdAt)),
    serviceRoleKey: config.serviceRoleKeyEnv ?? (await deriveKey(secret, 'service_role', createdAt)),
    serviceRoleKeyExplicit: config.serviceRoleKeyEnv !== null,
  });
}

export async function loadConfig(env: Env = process.env): Promise<RuntimeConfig> {
  return resolveSecrets(parseConfig(env));
}
