/**
 * graphile-worker inside the service process (design.md, Jobs): emails and webhook
 * deliveries are jobs enqueued by SQL in the same transaction as their cause. Every
 * instance runs a worker; jobs are taken once. Signals belong to main.ts.
 */
import pg from 'pg';
import { run, type Runner, type TaskList } from 'graphile-worker';
import type { Logger } from '../core/log.ts';
import type { Metrics } from '../core/metrics.ts';
import { workerLogger } from '../core/migrate.ts';

export interface WorkerOptions {
  databaseUrl: string;
  tasks: TaskList;
  log: Logger;
  concurrency?: number;
  maxPoolSize?: number;
  /** Jobs running, completed and failed are counted here; queued jobs are counted from the table, at most every 10 s. */
  metrics?: Metrics;
}

/** The queued-jobs count is refreshed at most this often (it reads graphile-worker's table). */
const QUEUED_REFRESH_MS = 10_000;

export interface Worker {
  stop(): Promise<void>;
}

export async function startWorker(opts: WorkerOptions): Promise<Worker> {
  const pool = new pg.Pool({
    connectionString: opts.databaseUrl,
    max: opts.maxPoolSize ?? 4,
    connectionTimeoutMillis: 5000,
    application_name: 'plinth-worker',
  });
  // A lost connection must never crash the service: the worker retries by itself.
  pool.on('error', (err) => opts.log.warn({ err }, 'worker pool connection lost'));
  pool.on('connect', (client) => client.on('error', (err) => opts.log.warn({ err }, 'worker connection lost')));
  let runner: Runner;
  try {
    runner = await run({
      pgPool: pool,
      taskList: opts.tasks,
      concurrency: opts.concurrency ?? 16,
      // 50 ms, not 250: webhook jobs are added without NOTIFY (a notifying commit serialises
      // all writers of a watched table, sql/fixtures/webhooks/enqueue.sql), so the poll bounds
      // how long an idle worker leaves a delivery waiting. An idle poll is one indexed query.
      pollInterval: 50,
      noHandleSignals: true,
      logger: workerLogger(opts.log),
      // Completions and failures go through graphile-worker's batcher (same tick, delay 0):
      // a graceful stop then waits for the last job's completion before the pool ends (with
      // the default, unbatched path it does not, and a job finished during the stop stayed
      // locked); and jobs finished together complete in one statement.
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0, localQueue: { size: 32 } } },
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
        .query<{ n: number }>('select count(*)::int as n from graphile_worker._private_jobs where locked_at is null')
        .then((r) => metrics.jobs.set({ state: 'queued' }, r.rows[0].n))
        .catch(() => {})
        .finally(() => (counting = false));
    });
  }
  return {
    async stop() {
      await runner.stop().catch((err: unknown) => opts.log.warn({ err }, 'worker stop failed'));
      await pool.end().catch(() => {});
    },
  };
}
