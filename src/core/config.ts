/**
 * Configuration: the whole environment contract (docs/operations.md, "Configuration") parsed once
 * into a frozen, typed object. Nothing else in plinth reads `process.env`.
 *
 * Reading settings: `parseConfig` is pure and synchronous; the readers of each area live in
 * config/ (auth, database, http, rest, storage, functions, live, ops) on the primitives of
 * config/read.ts, and throw `ConfigError` naming the variable. Making secrets: `resolveSecrets`
 * then settles the JWT secret (generated once under DATA_DIR in development mode) and the
 * anon / service-role keys, verifying keys given explicitly (secrets.ts). `main.ts` prints
 * `ConfigError.message` as one line and exits 1 before anything listens or migrates.
 */
import { authSettings, jwtSecret as readJwtSecret, type OAuthProviderConfig, type OAuthProviderName, type StandardHook } from './config/auth.ts';
import { databaseSettings, databaseUrl } from './config/database.ts';
import { functionsSettings, webhookSettings } from './config/functions.ts';
import { httpSettings, type TrustProxy } from './config/http.ts';
import { liveSettings } from './config/live.ts';
import { backupSettings, dataDir as readDataDir, opsSettings } from './config/ops.ts';
import { bool, type Env } from './config/read.ts';
import { restSettings, type RestTxEnd } from './config/rest.ts';
import { storageSettings, type S3Config } from './config/storage.ts';
import { makeSecrets, type Secrets } from './secrets.ts';

export { ConfigError } from './config/read.ts';
export type { OAuthEndpoints, OAuthProviderConfig, OAuthProviderName, StandardHook } from './config/auth.ts';
export type { TrustProxy } from './config/http.ts';
export { REST_TX_ENDS, type RestTxEnd } from './config/rest.ts';
export type { S3Config } from './config/storage.ts';

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
  /** AUTH_AUDIT_RETENTION_DAYS: audit entries older than this are deleted by the hourly purge; 0 keeps them all. */
  /** AUTH_TEMPLATES_DIR: the app's email templates (docs/emails.md); `required`: set explicitly, so it must exist. */
  authTemplatesDir: { path: string; required: boolean };
  /** AUTH_HOOK_SEND_EMAIL (+ _SECRET): a SQL function or a signed URL that sends the mails instead of SMTP; null: none. */
  authHookSendEmail: StandardHook | null;
  authAuditRetentionDays: number;
  /** AUTH_PASSKEY_RP_ID: the WebAuthn relying party id of passkeys (a host name); null: SITE_URL's host. */
  passkeyRpId: string | null;
  /** AUTH_PASSKEY_ORIGINS: the origins passkey ceremonies may run on (comma-separated); empty: SITE_URL's origin. */
  passkeyOrigins: readonly string[];
  /** AUTH_HOOK_SEND_SMS (+ _SECRET): how phone codes are sent (docs/api/auth.md); null: phone sign-in is off. */
  authHookSendSms: StandardHook | null;
  /** SMS_RATE_LIMIT_PER_HOUR: phone codes per number in any hour; 0 disables. */
  smsRateLimitPerHour: number;
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
  /** REALTIME_IDLE_MS: a table nobody has subscribed to for this long loses its triggers (docs/api/realtime.md). */
  realtimeIdleMs: number;
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

/** Config plus the settled secrets: what the running service uses. */
export interface RuntimeConfig extends Config, Secrets {}

/** Parse and validate the environment. Throws ConfigError naming the first bad variable. */
export function parseConfig(env: Env = process.env): Config {
  const jwtSecret = readJwtSecret(env);
  const dataDir = readDataDir(env);
  const config: Config = {
    jwtSecret,
    supabaseCompat: bool(env, 'SUPABASE_COMPAT', false),
    dataDir,
    ...authSettings(env),
    ...httpSettings(env),
    ...databaseSettings(env),
    ...restSettings(env, jwtSecret),
    ...storageSettings(env, dataDir),
    ...functionsSettings(env),
    ...webhookSettings(env),
    ...liveSettings(env),
    ...opsSettings(env, jwtSecret),
    ...backupSettings(env, databaseUrl(env)),
  };
  return Object.freeze(config);
}

/**
 * Settle the secret and keys (secrets.ts). Development mode (no JWT_SECRET): a random secret
 * is generated once and kept in DATA_DIR/jwt-secret.json; derived keys use the secret's
 * creation time as `iat`, so every start prints the same keys.
 */
export async function resolveSecrets(config: Config): Promise<RuntimeConfig> {
  return Object.freeze({ ...config, ...(await makeSecrets(config)) });
}

export async function loadConfig(env: Env = process.env): Promise<RuntimeConfig> {
  return resolveSecrets(parseConfig(env));
}
