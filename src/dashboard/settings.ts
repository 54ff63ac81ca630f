/**
 * GET /api/settings: what this instance runs with, for the dashboard's Settings view: the
 * features on, the back ends, the limits, the version and the applied migrations of both
 * chains. Never a secret: no key, password, URL with credentials or signing secret (the anon
 * key is not a secret: every browser app ships it, and the dashboard calls functions with it).
 */
import { readFileSync } from 'node:fs';
import type { Deps } from '../core/area.ts';
import { originsFor } from '../core/origins.ts';
import { isEmbeddedUrl } from '../host/embedded-url.ts';
import { schemaTarget } from './schema.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export async function settings({ config, db }: Deps): Promise<Record<string, unknown>> {
  const plinth = await db.sql<{ name: string; applied_at: string }[]>`
    select filename as name, to_char(applied_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as applied_at
    from plinth_migrate.migrations order by filename`.catch(() => []);
  const app = await db.sql<{ name: string; applied_at: string }[]>`
    select filename as name, to_char(date at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as applied_at
    from graphile_migrate.migrations order by filename`.catch(() => []);
  return {
    version: VERSION,
    node: process.version,
    development_mode: config.devMode,
    // Where the dashboard's schema changes go: appended to the watched current.sql, or offered as SQL.
    schema_changes: schemaTarget(config).mode === 'development' ? 'migrations/current.sql' : 'sql to copy',
    anon_key: config.anonKey,
    site_url: config.siteUrl,
    api_external_url: config.apiExternalUrl,
    allowed_origins: originsFor(config).describe(),
    features: {
      dashboard: config.dashboardEnabled,
      sql_endpoint: config.enableSqlEndpoint,
      demo_endpoint: config.enableDemoEndpoint,
      email_verification: config.requireEmailVerification,
      anonymous_sign_in: config.allowAnonymousSignin,
      oauth_providers: Object.keys(config.oauth).sort(),
      mail: config.smtpUrl !== null,
      authenticated_websockets_only: config.requireAuthenticatedWs,
    },
    back_ends: {
      database: config.databaseUrl === null || isEmbeddedUrl(config.databaseUrl, config.dataDir) ? 'embedded' : 'external',
      storage: config.storageBackend,
      functions: config.edgeRuntimeUrl === null ? 'bundled Deno runtime' : 'external runtime',
    },
    limits: {
      db_pool_size: config.dbPoolSize,
      max_body_bytes: config.maxBodyBytes,
      max_json_depth: config.maxJsonDepth,
      max_batch_operations: config.maxBatchOperations,
      access_token_ttl_s: config.accessTokenTtl,
      refresh_token_ttl_s: config.refreshTokenTtl,
      auth_rate_limit: config.authRateLimit,
      functions_timeout_ms: config.functionsTimeoutMs,
      webhook_timeout_ms: config.webhookTimeoutMs,
      ws_max_connections: config.wsMaxConnections,
      ws_max_connections_per_ip: config.wsMaxConnectionsPerIp,
      shutdown_timeout_ms: config.shutdownTimeoutMs,
    },
    migrations: { plinth, app },
  };
}
