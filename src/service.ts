/**
 * The service: config + database → HTTP areas + job worker. `main.ts` adds the embedded
 * PostgreSQL, migrations and signals; tests call `startService` directly on port 0.
 *
 * Each API area (auth, rest, storage …) is an `Area`: its routes and its worker tasks.
 */
import type { FastifyInstance } from 'fastify';
import type { TaskList } from 'graphile-worker';
import type { RuntimeConfig } from './core/config.ts';
import { Credentials } from './core/credentials.ts';
import type { Area, Deps } from './core/area.ts';
import { Db } from './core/db.ts';
import { buildHttp, inFlightRequests } from './core/http.ts';
import type { Logger } from './core/log.ts';
import { startWorker, type Worker } from './worker/index.ts';
import { healthArea } from './health/index.ts';
import { devArea } from './dev/index.ts';
import { restArea } from './rest/index.ts';
import { authArea } from './auth/index.ts';
import { webhooksArea } from './webhooks/index.ts';
import { functionsArea } from './functions/index.ts';
import { liveArea } from './live/index.ts';
import { storageArea } from './storage/index.ts';
import { siteArea } from './site/index.ts';
import { dashboardArea } from './dashboard/index.ts';

export type { Area, Deps };

export const AREAS: readonly Area[] = [healthArea, devArea, authArea, restArea, webhooksArea, functionsArea, liveArea, storageArea, dashboardArea, siteArea];

export interface ServiceOptions {
  databaseUrl: string;
  /** Run the job worker (default true). */
  worker?: boolean;
  workerConcurrency?: number;
  workerPoolSize?: number;
  areas?: readonly Area[];
}

export interface Service {
  app: FastifyInstance;
  db: Db;
  deps: Deps;
  /** http://host:port the service listens on. */
  url: string;
  close(): Promise<void>;
  /**
   * The shutdown deadline passed: cancel the request statements in flight and close every
   * connection, so `close()` can finish. Returns how many requests were cut.
   */
  cut(): Promise<number>;
}

export async function startService(config: RuntimeConfig, log: Logger, opts: ServiceOptions): Promise<Service> {
  const areas = opts.areas ?? AREAS;
  const db = new Db({
    url: opts.databaseUrl,
    poolSize: config.dbPoolSize,
    log,
    anonymousRole: config.anonymousRole,
    requestPassword: config.dbRequestPassword,
    secret: config.secret,
  });
  const deps: Deps = { config, db, log, credentials: new Credentials(config) };
  const app = buildHttp(config, log);
  let worker: Worker | null = null;
  try {
    for (const area of areas) await area.register(app, deps);
    await app.listen({ host: config.host, port: config.port });
    const tasks: TaskList = Object.assign({}, ...areas.map((a) => a.tasks?.(deps) ?? {}));
    if (opts.worker !== false) {
      worker = await startWorker({
        databaseUrl: opts.databaseUrl,
        tasks,
        log,
        concurrency: opts.workerConcurrency,
        maxPoolSize: opts.workerPoolSize,
      });
    }
  } catch (err) {
    await app.close().catch(() => {});
    await db.end().catch(() => {});
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
  let closing: Promise<void> | null = null;
  return {
    app,
    db,
    deps,
    url: `http://${host}:${port}`,
    close() {
      // Order (design.md): stop listening and drain, stop the worker, end the pools.
      closing ??= (async () => {
        await app.close();
        for (const area of areas) await area.close?.();
        await worker?.stop();
        await db.end();
      })();
      return closing;
    },
    async cut() {
      const requests = inFlightRequests(app);
      app.server.closeAllConnections();
      await db.cancelAll().catch(() => 0);
      return requests;
    },
  };
}
