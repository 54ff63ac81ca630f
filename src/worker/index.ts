/**
 * graphile-worker inside the service process (docs/architecture.md): emails and webhook
 * deliveries are jobs enqueued by SQL in the same transaction as their cause. Every
 * instance runs a worker; jobs are taken once. Signals belong to main.ts.
 */
import pg from 'pg';
import { EventEmitter } from 'node:events';
import { run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import type { Listener } from '../core/listener.ts';
import { workerLogger, type Logger } from '../core/log.ts';
import type { Metrics } from '../core/metrics.ts';

export interface WorkerOptions {
  databaseUrl: string;
  tasks: TaskList;
  log: Logger;
  concurrency?: number;
  /** Connections for the worker's statements (default 1); its LISTEN is on `listener`'s. */
  maxPoolSize?: number;
  /** Jobs running, completed and failed are counted here; queued jobs are counted from the table, at most every 10 s. */
  metrics?: Metrics;
  /** The instance's listener: graphile-worker's LISTEN (`jobs:insert`) goes through it. */
  listener: Listener;
}

/**
 * What graphile-worker's `listenForChanges` is handed instead of a connection of its own:
 * its `LISTEN "jobs:insert"; LISTEN "worker:migrate"` (and the UNLISTENs when it stops) go
 * to the instance's listener, whose notifications it gets as a client's `notification`
 * events. So the worker holds no LISTEN connection besides the instance's one, the same
 * whether that connection is this process's or, under WORKERS > 1, the primary's
 * (src/core/cluster-listener.ts). It never emits `error`: the listener reconnects and
 * listens again by itself (a job added meanwhile is found by the worker's poll).
 */
export class ListenClient extends EventEmitter {
  private readonly listener: Listener;
  private readonly handles = new Map<string, Promise<{ unlisten(): Promise<void> } | null>>();

  constructor(listener: Listener) {
    super();
    this.listener = listener;
  }

  /** Only LISTEN and UNLISTEN of quoted channels, `;`-separated: what graphile-worker sends. */
  async query(text: string): Promise<{ rows: never[] }> {
    const statements = text
      .split(';')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const parsed = statements.map((s) => /^(UN)?LISTEN\s+"([^"]+)"$/i.exec(s));
    if (parsed.some((m) => m === null)) throw new Error(`not a LISTEN or UNLISTEN for the shared listener: ${text}`);
    await Promise.all(
      parsed.map(async (m) => {
        const [, un, channel] = m!;
        if (un === undefined) {
          if (this.handles.has(channel)) return;
          const h = this.listener.listen(channel, (payload) => this.emit('notification', { channel, payload, processId: 0 })).catch(() => null);
          this.handles.set(channel, h);
          await h;
        } else {
          const h = this.handles.get(channel);
          this.handles.delete(channel);
          await (await h)?.unlisten();
        }
      }),
    );
    return { rows: [] };
  }
}

/**
 * graphile-worker's pool: its statements on connections of its own; the one connection it
 * would hold for LISTEN (taken by its `listenForChanges` callback; pg-pool's own `query`
 * takes connections with a callback too) is a `ListenClient` on the instance's listener.
 */
class SharedListenPool extends pg.Pool {
  private readonly listener: Listener;

  constructor(config: pg.PoolConfig, listener: Listener) {
    super(config);
    this.listener = listener;
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): void;
  override connect(callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): Promise<pg.PoolClient> | void {
    if (callback === undefined) return super.connect();
    if (callback.name !== 'listenForChanges') return super.connect(callback as never);
    // Later, as a pool hands a connection (graphile-worker expects its callback asynchronous).
    queueMicrotask(() => callback(undefined, new ListenClient(this.listener) as unknown as pg.PoolClient, () => {}));
  }
}

/** The queued-jobs count is refreshed at most this often (it reads graphile-worker's table). */
const QUEUED_REFRESH_MS = 10_000;

export interface Worker {
  stop(): Promise<void>;
  /** The ids of its graphile-worker pools: what its jobs are locked by. */
  ids(): readonly string[];
}

export async function startWorker(opts: WorkerOptions): Promise<Worker> {
  const pool = new SharedListenPool(
    {
      connectionString: opts.databaseUrl,
      max: opts.maxPoolSize ?? 1,
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 10_000,
      application_name: 'plinth-worker',
    },
    opts.listener,
  );
  // A lost connection must never crash the service: the worker retries by itself.
  pool.on('error', (err) => opts.log.warn({ err }, 'worker pool connection lost'));
  pool.on('connect', (client) => client.on('error', (err) => opts.log.warn({ err }, 'worker connection lost')));
  const ids: string[] = [];
  const events = new EventEmitter() as WorkerEvents;
  events.on('pool:create', ({ workerPool }) => ids.push(workerPool.id));
  let runner: Runner;
  try {
    runner = await run({
      events,
      pgPool: pool,
      taskList: opts.tasks,
      // 64: the jobs of one queue handed out together run as one batch (src/schedules/run.ts),
      // so a larger concurrency is fewer round trips and commits per job, not more connections.
      concurrency: opts.concurrency ?? 64,
      // A calm poll: work added now wakes the worker through add_job's NOTIFY; webhook
      // attempts reach it that way from the outbox when due (src/webhooks/outbox.ts), so the
      // poll only bounds how late other future-dated jobs (schedules, backoffs) start.
      pollInterval: 1000,
      noHandleSignals: true,
      logger: workerLogger(opts.log),
      // Completions and failures go through graphile-worker's batcher (same tick, delay 0):
      // a graceful stop then waits for the last job's completion before the pool ends (with
      // the default, unbatched path it does not, and a job finished during the stop stayed
      // locked); and jobs finished together complete in one statement. The local queue holds
      // two rounds of the concurrency: on the one connection, taking jobs waits half as often
      // on completing them.
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0, localQueue: { size: 128 } } },
    });
  } catch (err) {
    await pool.end().catch(() => {});
    throw err;
  }
  runner.promise.catch((err: unknown) => opts.log.error({ err }, 'worker stopped'));
  const metrics = opts.metrics;
  if (metrics) {
    let running = 0;
    metrics.jobs.set({ state: 'running' }, 0);
    runner.events.on('job:start', () => metrics.jobs.set({ state: 'running' }, ++running));
    runner.events.on('job:complete', () => metrics.jobs.set({ state: 'running' }, --running));
    runner.events.on('job:success', () => metrics.jobsCompleted.inc());
    runner.events.on('job:error', () => metrics.jobsFailed.inc());
    // A scrape reports the last count and, when it is older than 10 s, starts the next one.
    let countedAt = 0;
    let counting = false;
    metrics.onCollect(() => {
      if (counting || Date.now() - countedAt < QUEUED_REFRESH_MS) return;
      counting = true;
      countedAt = Date.now();
      pool
        .query<{ n: number }>('select count(*)::int as n from graphile_worker.jobs where locked_at is null')
        .then((r) => metrics.jobs.set({ state: 'queued' }, r.rows[0].n))
        .catch(() => {})
        .finally(() => (counting = false));
    });
  }
  return {
    ids: () => ids,
    async stop() {
      await runner.stop().catch((err: unknown) => opts.log.warn({ err }, 'worker stop failed'));
      await pool.end().catch(() => {});
    },
  };
}
