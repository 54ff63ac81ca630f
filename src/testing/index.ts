/**
 * `plinth/testing`: a real plinth for an application's own tests. Each `startPlinth()` gets
 * a fresh database cloned from a template migrated once per content of the SQL (plinth's
 * chain and the application's migrations, committed and current.sql), and the real service
 * on a loopback port in this process. Nothing is mocked: real PostgreSQL, real HTTP.
 *
 *     const p = await startPlinth({ migrations: './migrations', functions: './functions' });
 *     const alice = await p.signUp('alice@example.com');
 *     await fetch(`${p.url}/rest/v1/notes`, { headers: { apikey: p.anonKey, authorization: `Bearer ${alice.accessToken}` } });
 *     await p.stop();
 *
 * The PostgreSQL server: TEST_DATABASE_URL, DATABASE_URL or the PG* variables (a superuser:
 * it creates databases), else the embedded PostgreSQL `plinth dev` runs under DATA_DIR
 * (./.plinth) when it runs, else postgres@127.0.0.1:5432.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import postgres from 'postgres';
import { parseConfig, resolveSecrets } from '../core/config.ts';
import { createLogger } from '../core/log.ts';
import { startService } from '../service.ts';
import { cloneTemplate } from './template.ts';

export { serverUrl } from './template.ts';

export interface StartPlinthOptions {
  /** The application's migrations folder (committed/ and current.sql); default ./migrations. */
  migrations?: string;
  /** The application's edge functions (FUNCTIONS_DIR); default ./functions. */
  functions?: string;
  /** More of the service's settings (README, Configuration); `undefined` removes one. */
  env?: Record<string, string | undefined>;
}

export interface SignedUp {
  id: string;
  email: string;
  /** The user's access token: `authorization: Bearer <accessToken>` acts as this user. */
  accessToken: string;
  refreshToken: string;
}

export interface Plinth {
  /** The service's base URL, e.g. http://127.0.0.1:41234. */
  url: string;
  anonKey: string;
  serviceRoleKey: string;
  /** A superuser connection to this test's own database (fixtures, checks). */
  sql: postgres.Sql;
  /** The database's name and URL (superuser). */
  database: { name: string; url: string };
  /** Sign a user up with the anon key (password: a random one unless given). */
  signUp(email: string, password?: string): Promise<SignedUp>;
  /** Stop the service and drop the database. */
  stop(): Promise<void>;
}

function answers(port: number): Promise<boolean> {
  return new Promise((done) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), done(true)));
    s.once('error', () => done(false));
  });
}

/**
 * With no server named, the embedded PostgreSQL of `plinth dev` under DATA_DIR, when it runs.
 * Its request login roles have passwords derived from that folder's development secret
 * (roles belong to the whole server): the harness's services use the same secret. Returns it.
 */
async function useRunningEmbedded(): Promise<string | null> {
  const env = process.env;
  if (env.TEST_DATABASE_URL || env.DATABASE_URL || env.PGHOST || env.PGPORT) return null;
  const dataDir = resolve(env.DATA_DIR ?? './.plinth');
  const state = join(dataDir, 'postgres.json');
  const secretFile = join(dataDir, 'jwt-secret.json');
  if (!existsSync(state) || !existsSync(secretFile) || !existsSync(join(dataDir, 'postgres', 'postmaster.pid'))) return null;
  const stored = JSON.parse(readFileSync(state, 'utf8')) as { password: string; port: number };
  if (!(await answers(stored.port))) return null;
  env.TEST_DATABASE_URL = `postgres://postgres:${encodeURIComponent(stored.password)}@127.0.0.1:${stored.port}/postgres`;
  return (JSON.parse(readFileSync(secretFile, 'utf8')) as { secret: string }).secret;
}

export async function startPlinth(opts: StartPlinthOptions = {}): Promise<Plinth> {
  const devSecret = await useRunningEmbedded();
  const migrations = resolve(opts.migrations ?? './migrations');
  const functions = resolve(opts.functions ?? './functions');
  const clone = await cloneTemplate('plinth_test_', { appFolder: existsSync(migrations) ? migrations : null });
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-test-'));
  const cleanup = async () => {
    rmSync(dataDir, { recursive: true, force: true });
    await clone.drop();
  };
  try {
    const env: Record<string, string | undefined> = {
      JWT_SECRET: devSecret ?? randomBytes(32).toString('base64url'),
      HOST: '127.0.0.1',
      PORT: '0',
      DATA_DIR: dataDir,
      FUNCTIONS_DIR: functions,
      MIGRATIONS_DIR: migrations,
      DB_POOL_SIZE: '2',
      DASHBOARD_ENABLED: 'false',
      LOG_LEVEL: 'silent',
      ...opts.env,
    };
    for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
    const config = await resolveSecrets(parseConfig(env));
    const service = await startService(config, createLogger(config.logLevel), { databaseUrl: clone.url });
    const sql = postgres(clone.url, { max: 2, onnotice: () => {} });
    const url = service.url;
    return {
      url,
      anonKey: config.anonKey,
      serviceRoleKey: config.serviceRoleKey,
      sql,
      database: { name: clone.name, url: clone.url },
      async signUp(email, password = randomBytes(12).toString('base64url') + 'aA1!') {
        const res = await fetch(`${url}/auth/v1/signup`, {
          method: 'POST',
          headers: { apikey: config.anonKey, 'content-type': 'application/json' },
          body: JSON.stringify({ email, password }),
        });
        const body = (await res.json()) as { access_token?: string; refresh_token?: string; user?: { id: string; email: string }; error?: string };
        if (res.status !== 201 || !body.access_token || !body.user) throw new Error(`signUp(${email}): ${res.status} ${JSON.stringify(body)}`);
        return { id: body.user.id, email: body.user.email, accessToken: body.access_token, refreshToken: body.refresh_token ?? '' };
      },
      async stop() {
        await service.close();
        await sql.end({ timeout: 1 });
        await cleanup();
      },
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}
