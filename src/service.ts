/**
 * The service: config + database → HTTP areas + job worker. `main.ts` adds the embedded
 * PostgreSQL, migrations and signals; tests call `startService` directly on port 0.
 *
 * Each API area (auth, rest, storage …) is an `Area`: its routes and its worker tasks.
 */
import type { FastifyInstance } from 'fastify';
import type { TaskList } from 'graphile-worker';
import type { RuntimeConfig } from './core/config.ts';
import { Credentials, type AdminAalCheck } from './core/credentials.ts';
import type { Area, Deps, Listeners } from './core/area.ts';
import { Db } from './core/db.ts';
import type { Server } from 'node:http';
import { InstanceRegistry, instanceName } from './core/instances.ts';
import { buildHttp, inFlightRequests, cutRequests } from './core/http.ts';
import type { Logger } from './core/log.ts';
import { Metrics } from './core/metrics.ts';
import type { ClusterPlace } from './core/cluster-worker.ts';
import { ClusterListener } from './core/cluster-listener.ts';
import { pgErrorToAppError } from './core/errors.ts';
import { RequestLog } from './core/request-log.ts';
import { startWorker, type Worker } from './worker/index.ts';
import { healthArea } from './health/index.ts';
import { devArea } from './dev/index.ts';
import { restArea } from './rest/index.ts';
import { authArea } from './auth/index.ts';
import { webhooksArea } from './webhooks/index.ts';
import { schedulesArea } from './schedules/index.ts';
import { functionsArea } from './functions/index.ts';
import { liveArea } from './live/index.ts';
import { storageArea } from './storage/index.ts';
import { siteArea } from './site/index.ts';
import { opsArea } from './ops/index.ts';
import { dashboardArea } from './dashboard/index.ts';

// Not an ESM import of node:http: that loads Node's bundled undici (see src/core/http.ts).
const { createServer } = process.getBuiltinModule('node:http');

export type { Area, Deps };

export const AREAS: readonly Area[] = [healthArea, opsArea, devArea, authArea, restArea, webhooksArea, schedulesArea, functionsArea, liveArea, storageArea, dashboardArea, siteArea];

export interface ServiceOptions {
  databaseUrl: string;
  /** PostgreSQL itself when `databaseUrl` is a pooler in transaction mode: LISTEN and the job worker (default: DATABASE_DIRECT_URL, else `databaseUrl`). */
  directUrl?: string;
  /** Run the job worker (default true). */
  worker?: boolean;
  workerConcurrency?: number;
  workerPoolSize?: number;
  areas?: readonly Area[];
  /** One process of several (WORKERS > 1): binds the port with SO_REUSEPORT, says its number in `x-plinth-worker`, registers as one instance of its own. */
  place?: ClusterPlace | null;
}

export interface Service {
  app: FastifyInstance;
  db: Db;
  deps: Deps;
  /** http://host:port the service listens on. */
  url: string;
  /** http://host:port of the METRICS_PORT listener (null: none). */
  metricsUrl: string | null;
  /** The stop's first step: /ready answers 503 from now on; everything else goes on as before. */
  drain(): void;
  close(): Promise<void>;
  /**
   * The shutdown deadline passed: requests still running are answered 503 `service shutting
   * down`, function calls in flight are aborted, the request statements in flight are
   * cancelled, and every connection is closed, so `close()` can finish. Returns how many
   * requests were cut.
   */
  cut(): Promise<number>;
}

/** What the areas are handed (Deps) and what the service keeps to stop them. */
interface Parts {
  db: Db;
  deps: Deps;
  metrics: Metrics;
  requestLog: RequestLog;
  lifecycle: { draining: boolean; cut: AbortSignal };
  cut: AbortController;
  listeners: Listeners;
}

/** The running pieces started after the areas registered. */
interface Running {
  worker: Worker | null;
  registry: InstanceRegistry | null;
  metricsServer: Server | null;
}

function makeParts(config: RuntimeConfig, log: Logger, databaseUrl: string, directUrl: string, place: ClusterPlace | null): Parts {
  const db = new Db({
    // One process of several: the instance's LISTEN connection is the primary's (src/core/cluster-listener.ts).
    listener: place !== null ? new ClusterListener() : undefined,
    url: databaseUrl,
    directUrl,
    pooler: config.dbPooler === 'transaction',
    poolSize: config.dbPoolSize,
    idleMs: config.dbPoolIdleMs,
    timeoutMs: config.dbPoolTimeoutMs,
    log,
    anonymousRole: config.anonymousRole,
    requestPassword: config.dbRequestPassword,
    secret: config.secret,
    readUrls: config.databaseReadUrls,
    replicaMaxLagMs: config.replicaMaxLagMs,
  });
  const metrics = new Metrics();
  const requestLog = new RequestLog(config.requestLogSize);
  const cut = new AbortController();
  const lifecycle = { draining: false, cut: cut.signal };
  const listeners: Listeners = { metricsPort: null };
  const deps: Deps = { config, db, log, credentials: new Credentials(config, adminAalCheck(db)), metrics, requestLog, lifecycle, listeners };
  return { db, deps, metrics, requestLog, lifecycle, cut, listeners };
}

/** Register the areas, listen (metrics first), start the job worker and register this instance. `running` fills as they start. */
async function startParts(app: FastifyInstance, parts: Parts, running: Running, areas: readonly Area[], opts: ServiceOptions, directUrl: string): Promise<void> {
  const { config, log } = parts.deps;
  const { db, deps, metrics, listeners } = parts;
  const place = opts.place ?? null;
  for (const area of areas) await area.register(app, deps);
  // The metrics listener first: its port is known when the API's listening starts the edge runtime, which must not reach it.
  if (config.metricsPort !== null) {
    running.metricsServer = await listenMetrics(metrics, config.host, config.metricsPort, place !== null);
    const bound = running.metricsServer.address();
    listeners.metricsPort = typeof bound === 'object' && bound !== null ? bound.port : config.metricsPort;
  }
  if (place !== null) {
    const tag = String(place.index);
    app.server.prependListener('request', (_req, res) => res.setHeader('x-plinth-worker', tag));
    // A WebSocket's 101 too (an upgrade is no `request`): which process holds the socket.
    (app as { websocketServer?: { on(e: 'headers', fn: (headers: string[]) => void): void } }).websocketServer?.on('headers', (headers) => headers.push(`x-plinth-worker: ${tag}`));
  }
  // Several processes: each binds the port itself, the kernel spreads the connections (src/core/cluster.ts).
  await app.listen({ host: config.host, port: config.port, ...(place !== null ? { exclusive: true, reusePort: true } : {}) } as { host: string; port: number });
  const tasks: TaskList = Object.assign({}, ...areas.map((a) => a.tasks?.(deps) ?? {})) as TaskList;
  if (opts.worker !== false) {
    running.worker = await startWorker({
      databaseUrl: directUrl,
      tasks,
      log,
      metrics,
      concurrency: opts.workerConcurrency,
      maxPoolSize: opts.workerPoolSize,
      listener: db.listener,
    });
    for (const a of areas) a.startJobs?.(deps);
  }
  const bound = app.server.address();
  running.registry = new InstanceRegistry({
    id: db.instanceId,
    name: instanceName(typeof bound === 'object' && bound ? bound.port : config.port) + (place !== null && place.index > 1 ? `/${place.index}` : ''),
    listener: db.listener,
    log,
    deadMs: config.instanceDeadMs,
    workerIds: () => running.worker?.ids() ?? [],
  });
  await running.registry.start();
}

export async function startService(config: RuntimeConfig, log: Logger, opts: ServiceOptions): Promise<Service> {
  const areas = opts.areas ?? AREAS;
  const directUrl = opts.directUrl ?? config.databaseDirectUrl ?? opts.databaseUrl;
  const parts = makeParts(config, log, opts.databaseUrl, directUrl, opts.place ?? null);
  const { db, deps, lifecycle, cut } = parts;
  // OpenTelemetry is loaded only when configured: without it the request path pays nothing.
  const tracing = config.otelEndpoint !== null ? await (await import('./core/tracing.ts')).startTracing(config, log) : null;
  const app = buildHttp(config, log, { requestLog: parts.requestLog, metrics: parts.metrics, trace: tracing?.requestTracer });
  const running: Running = { worker: null, registry: null, metricsServer: null };
  try {
    await startParts(app, parts, running, areas, opts, directUrl);
  } catch (err) {
    await app.close().catch(() => {});
    running.metricsServer?.close();
    await tracing?.shutdown().catch(() => {});
    await db.end().catch(() => {});
    throw err;
  }
  const { worker, registry, metricsServer } = running;
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
  const metricsAddress = metricsServer?.address();
  let closing: Promise<void> | null = null;
  return {
    app,
    db,
    deps,
    url: `http://${host}:${port}`,
    metricsUrl: typeof metricsAddress === 'object' && metricsAddress ? `http://${host}:${metricsAddress.port}` : null,
    drain() {
      lifecycle.draining = true;
    },
    close() {
      // Order (docs/architecture.md): stop listening and drain, stop the worker, end the pools.
      closing ??= (async () => {
        lifecycle.draining = true;
        // A connection whose answer is written while its request body was never read to the
        // end (an upload refused early) is not idle to Node and would hold app.close() until
        // its keep-alive timeout (72 s): once nothing is being answered, close them all.
        const sweep = setInterval(() => {
          if (inFlightRequests(app) === 0) app.server.closeAllConnections();
        }, 100);
        try {
          await app.close();
        } finally {
          clearInterval(sweep);
        }
        for (const area of areas) await area.close?.();
        await worker?.stop();
        await registry?.stop();
        metricsServer?.close();
        metricsServer?.closeAllConnections();
        await tracing?.shutdown().catch(() => {});
        await db.end();
      })();
      return closing;
    },
    async cut() {
      const requests = inFlightRequests(app);
      cutRequests(app);
      cut.abort();
      await db.cancelAll().catch(() => 0);
      // The 503s are written; a connection still open a moment later is closed.
      setTimeout(() => app.server.closeAllConnections(), 500).unref();
      return requests;
    },
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The service-role gate's question for an admin's token below aal2, asked of the database
 * (sql/fixtures/auth/admin_aal.sql). A `sub` that is no user id (a token made by hand with
 * the secret) names no account, so no factor.
 */
function adminAalCheck(db: Db): AdminAalCheck {
  return async (userId, aal) => {
    if (!UUID.test(userId)) return true;
    try {
      const [r] = await db.sql<{ ok: boolean }[]>`select auth.admin_aal_ok(${userId}::uuid, ${aal}::text) as ok`;
      return r.ok;
    } catch (err) {
      throw pgErrorToAppError(err);
    }
  };
}

/** METRICS_PORT: GET /metrics without credentials, on a listener of its own (bound to HOST). */
function listenMetrics(metrics: Metrics, host: string, port: number, reusePort: boolean): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json; charset=utf-8' }).end('{"error":"not found"}');
      return;
    }
    metrics.scrape().then(
      (m) => res.writeHead(200, { 'content-type': m.contentType }).end(m.body),
      () => res.writeHead(500, { 'content-type': 'application/json; charset=utf-8' }).end('{"error":"internal error"}'),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host, ...(reusePort ? { exclusive: true, reusePort: true } : {}) }, () => resolve(server));
  });
}
