/**
 * Start the real service on a loopback port against a test database, and call it over
 * real HTTP. `env` is the service's environment (contract §2) on top of test defaults;
 * a value of `undefined` removes a default (e.g. `JWT_SECRET: undefined` for
 * development mode).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig, resolveSecrets, type RuntimeConfig } from '../../src/core/config.ts';
import { createLogger, type Logger } from '../../src/core/log.ts';
import { startService, type Service } from '../../src/service.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

export const TEST_JWT_SECRET = 'test-secret-test-secret-test-secret-0123456789';

interface TapLike {
  teardown(fn: () => unknown): void;
}

export interface TestApp {
  url: string;
  config: RuntimeConfig;
  service: Service;
  db: TestDatabase;
  anonKey: string;
  serviceKey: string;
  /** fetch relative to the app's URL. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** JSON request helper: returns status, headers and parsed body (text when not JSON). */
  call(method: string, path: string, opts?: CallOptions): Promise<CallResult>;
}

export interface CallOptions {
  body?: unknown;
  /** Raw body text (sent as is). */
  raw?: string;
  headers?: Record<string, string>;
  /** Bearer token for Authorization. */
  token?: string;
  apikey?: string;
}

export interface CallResult {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export interface StartOptions {
  env?: Record<string, string | undefined>;
  /** Reuse an existing test database instead of cloning a new one. */
  db?: TestDatabase;
  /** Connect the service through this URL instead of the database's own (e.g. a TCP proxy). */
  databaseUrl?: string;
  worker?: boolean;
  /** The worker's concurrency (default 1). */
  workerConcurrency?: number;
  /** The service's logger (default: one at LOG_LEVEL, silent in tests). */
  log?: Logger;
}

export async function startApp(t: TapLike, opts: StartOptions = {}): Promise<TestApp> {
  const db = opts.db ?? (await createTestDatabase(t));
  const dataDir = mkdtempSync(join(tmpdir(), 'plinth-test-'));
  const env: Record<string, string | undefined> = {
    JWT_SECRET: TEST_JWT_SECRET,
    HOST: '127.0.0.1',
    PORT: '0',
    DATA_DIR: dataDir,
    DB_POOL_SIZE: '2',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...opts.env,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  const config = await resolveSecrets(parseConfig(env));
  const log = opts.log ?? createLogger(config.logLevel);
  const service = await startService(config, log, {
    databaseUrl: opts.databaseUrl ?? db.url,
    worker: opts.worker,
    workerConcurrency: opts.workerConcurrency ?? 1,
  });
  t.teardown(async () => {
    await service.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const url = service.url;
  const doFetch = (path: string, init?: RequestInit) => fetch(url + path, init);
  return {
    url,
    config,
    service,
    db,
    anonKey: config.anonKey,
    serviceKey: config.serviceRoleKey,
    fetch: doFetch,
    async call(method, path, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
      if (o.apikey !== undefined) headers.apikey = o.apikey;
      let body: string | undefined = o.raw;
      if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers['content-type'] ??= 'application/json';
      }
      const res = await doFetch(path, { method, headers, body, redirect: 'manual' });
      const text = await res.text();
      let parsed: unknown = text;
      if ((res.headers.get('content-type') ?? '').includes('json') && text !== '') {
        try {
          parsed = JSON.parse(text);
        } catch {
          /* leave as text */
        }
      }
      return { status: res.status, headers: res.headers, body: parsed, text };
    },
  };
}
