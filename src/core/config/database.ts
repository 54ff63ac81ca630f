/** The database settings: where PostgreSQL is, pooler, replicas, pool sizes, migrations. */
import { resolve } from 'node:path';
import { parseWorkers } from '../cores.ts';
import { ConfigError, bool, int, list, str, url, type Env } from './read.ts';

const PG = { protocols: ['postgres:', 'postgresql:'] };

function workersSetting(env: Env): number {
  const n = parseWorkers(str(env, 'WORKERS'), int(env, 'DB_POOL_SIZE', 10, 1, 1000));
  if (typeof n === 'string') throw new ConfigError('WORKERS', n);
  return n;
}

function pooler(env: Env, databaseDirectUrl: string | null): 'session' | 'transaction' {
  const v = str(env, 'DB_POOLER') ?? 'session';
  if (v !== 'session' && v !== 'transaction') throw new ConfigError('DB_POOLER', 'must be session or transaction');
  if (v === 'transaction' && databaseDirectUrl === null) {
    throw new ConfigError('DATABASE_DIRECT_URL', 'is required with DB_POOLER=transaction (LISTEN, the job worker and migrations need a direct connection)');
  }
  return v;
}

/** DATABASE_URL alone: the backup settings need to know whether PostgreSQL is the embedded one. */
export function databaseUrl(env: Env): string | null {
  return url(env, 'DATABASE_URL', PG) ?? null;
}

export function databaseSettings(env: Env) {
  const databaseDirectUrl = url(env, 'DATABASE_DIRECT_URL', PG) ?? null;
  return {
    databaseUrl: databaseUrl(env),
    databaseDirectUrl,
    dbPooler: pooler(env, databaseDirectUrl),
    databaseReadUrls: Object.freeze(list(env, 'DATABASE_READ_URL').map((v) => url({ DATABASE_READ_URL: v }, 'DATABASE_READ_URL', PG) as string)),
    readYourWritesMs: int(env, 'READ_YOUR_WRITES_MS', 5000, 0, 3_600_000),
    replicaMaxLagMs: int(env, 'REPLICA_MAX_LAG_MS', 1000, 0, 3_600_000),
    dbPoolSize: int(env, 'DB_POOL_SIZE', 10, 1, 1000),
    workers: workersSetting(env),
    dbPoolIdleMs: int(env, 'DB_POOL_IDLE_MS', 10000, 100),
    dbPoolTimeoutMs: int(env, 'DB_POOL_TIMEOUT_MS', 5000, 1),
    instanceDeadMs: int(env, 'INSTANCE_DEAD_MS', 30000, 1000),
    migrateOnStart: bool(env, 'MIGRATE_ON_START', true),
    migrationsDir: resolve(str(env, 'MIGRATIONS_DIR') ?? './migrations'),
    shadowDatabaseUrl: url(env, 'SHADOW_DATABASE_URL', PG) ?? null,
    rootDatabaseUrl: url(env, 'ROOT_DATABASE_URL', PG) ?? null,
    dbRequestPassword: str(env, 'DB_REQUEST_PASSWORD') ?? null,
  };
}
