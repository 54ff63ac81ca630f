/** The operations settings: folders, logs, shutdown, metrics, tracing, backups, the dashboard. */
import { resolve } from 'node:path';
import { ConfigError, bool, int, isDirectory, str, url, type Env } from './read.ts';

const LOG_LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** DATA_DIR, made absolute (default ./.data). */
export function dataDir(env: Env): string {
  return resolve(str(env, 'DATA_DIR') ?? './.data');
}

function publicDir(env: Env): string | null {
  const set = str(env, 'PUBLIC_DIR');
  const dir = resolve(set ?? './public');
  if (set !== undefined && !isDirectory(dir)) throw new ConfigError('PUBLIC_DIR', `${dir} is not a folder`);
  return isDirectory(dir) ? dir : null;
}

function logLevel(env: Env): string {
  const v = str(env, 'LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.has(v)) throw new ConfigError('LOG_LEVEL', `must be one of ${[...LOG_LEVELS].join(', ')}`);
  return v;
}

function logFormat(env: Env): 'json' | 'pretty' {
  const v = str(env, 'LOG_FORMAT') ?? 'json';
  if (v !== 'json' && v !== 'pretty') throw new ConfigError('LOG_FORMAT', 'must be json or pretty');
  return v;
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

export function opsSettings(env: Env, jwtSecret: string | null) {
  return {
    publicDir: publicDir(env),
    dashboardEnabled: bool(env, 'DASHBOARD_ENABLED', true),
    shutdownTimeoutMs: int(env, 'SHUTDOWN_TIMEOUT_MS', 10000, 0),
    logLevel: logLevel(env),
    logFormat: logFormat(env),
    // Development mode has no load balancer to tell: Ctrl-C stops at once.
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', jwtSecret === null ? 0 : 5000, 0),
    requestLogSize: int(env, 'REQUEST_LOG_SIZE', 1000, 0, 1_000_000),
    metricsPort: str(env, 'METRICS_PORT') === undefined ? null : int(env, 'METRICS_PORT', 0, 0, 65535),
    otelEndpoint: url(env, 'OTEL_EXPORTER_OTLP_ENDPOINT')?.replace(/\/$/, '') ?? null,
    otelServiceName: str(env, 'OTEL_SERVICE_NAME') ?? 'plinth',
  };
}

/** The backups of the embedded PostgreSQL (DATABASE_URL unset). */
export function backupSettings(env: Env, databaseUrl: string | null) {
  return {
    backupDir: backupDir(env, databaseUrl),
    backupS3Prefix: backupS3Prefix(env, databaseUrl),
    backupIntervalMs: backupSchedule(env),
    backupRetentionDays: int(env, 'BACKUP_RETENTION_DAYS', 7, 1, 100000),
  };
}
