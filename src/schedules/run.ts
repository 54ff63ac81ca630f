/**
 * The worker's side of schedules and queues (sql/fixtures/schedules/schedules.sql):
 *
 * - `plinth__tick`: a schedule's tick; SQL adds the run(s) due and the next tick job.
 * - `plinth__run`: one attempt of a run: the target (run_target, kept a second per name),
 *   the call, then one statement that records the attempt (record_run, which adds the
 *   next attempt while attempts remain). The task never throws for a failing target, so
 *   graphile-worker's own retries are only for a database that could not be reached.
 *
 * Targets: `sql:<schema>.<function>` is called with the payload in a transaction as the
 * schedule's role, with statement_timeout = options.timeout, the role's claims and
 * `request.id`; `function:<name>` is a POST of the payload to this instance's own
 * `/functions/v1/<name>` with a short-lived service-role token naming the schedule or
 * queue (token.ts; never the service-role key), so it takes every path of a normal call:
 * catalog, runtime, budgets; with `X-Request-Id` and the headers that say which run called
 * it (RUN_HEADERS), aborted after options.timeout. The `sql:` jobs of one name that
 * the worker hands out together run as one batch statement (sqlBatcher,
 * sql/fixtures/schedules/batch.sql): a queue drains without a round trip and a commit per job.
 */
import { randomUUID } from 'node:crypto';
import type { Task } from 'graphile-worker';
import type { Deps } from '../core/area.ts';
import type { ReservedSql } from '../core/db.ts';
import { schedulePeriodic } from '../worker/periodic.ts';
import * as q from './db.ts';
import { RunTokens } from './token.ts';

/** Headers an edge function called by a schedule or a queue receives. */
export const RUN_HEADERS = {
  kind: 'x-job-kind',
  name: 'x-job-name',
  jobId: 'x-job-id',
  attempt: 'x-job-attempt',
} as const;

/** The job payload of `plinth__run`, as sql/fixtures/schedules builds it. */
interface RunJob {
  k: 'schedule' | 'queue';
  n: string;
  p: unknown;
  a: number;
  at: string | null;
}

const MAX_ERROR = 2000;

function message(err: unknown): string {
  if (err instanceof Error) {
    if (err.name === 'TimeoutError' || err.name === 'AbortError') return 'timed out';
    return err.message;
  }
  return String(err);
}

/**
 * Statements sent at once on one reserved connection, between begin and commit: one round
 * trip. Their results in order; or the first failure, the transaction then rolled back (the
 * commit, if it got that far, rolled back). A connection that cannot be had throws.
 */
async function sentAtOnce(deps: Deps, statements: (c: ReservedSql) => Array<Promise<unknown>>): Promise<{ values: unknown[] } | { failure: unknown }> {
  const c = await deps.db.sql.reserve();
  try {
    const settled = await Promise.allSettled([c`begin`.execute(), ...statements(c), c`commit`.execute()]);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed !== undefined) {
      await c`rollback`.catch(() => {});
      return { failure: failed.reason };
    }
    return { values: settled.slice(1, -1).map((r) => (r as PromiseFulfilledResult<unknown>).value) };
  } finally {
    c.release();
  }
}

/**
 * A `sql:` target, and on success the attempt's row, in one transaction sent at once: the
 * role, timeout, claims and request id; the call; back to the connecting role; record_run
 * (its times from the transaction's start and the clock). The commit does not wait for the
 * disk: the job's completion, a later synchronous commit, flushes it (WAL is written in
 * order), and until then a crash only means the job runs again (at least once, as before).
 * Returns the outcome, or the error when the call failed (the caller records the attempt).
 */
async function callSql(deps: Deps, t: q.RunTarget, job: RunJob, jobId: string, requestId: string): Promise<{ outcome: q.Outcome } | { error: string }> {
  const m = /^sql:([^.]+)\.(.+)$/.exec(t.target!)!;
  const claims = JSON.stringify({ role: t.role });
  const r = await sentAtOnce(deps, (c) => [
    c`select set_config('role', ${t.role}, true), set_config('statement_timeout', ${String(t.timeout_ms)}, true),
             set_config('request.jwt.claims', ${claims}, true), set_config('request.id', ${requestId}, true),
             set_config('synchronous_commit', 'off', true)`.execute(),
    c`select ${c(m[1])}.${c(m[2])}(${JSON.stringify(job.p ?? null)}::text::jsonb)`.execute(),
    c`select set_config('role', 'none', true)`.execute(),
    c`select plinth_private.record_run(${job.k}, ${job.n}, ${jobId}::bigint, ${job.a}, ${t.max_attempts}::int,
      ${job.at}::timestamptz, ${requestId}, null, null, true, null, ${JSON.stringify(job)}::text::jsonb) as outcome`.execute(),
  ]);
  if ('failure' in r) return { error: message(r.failure) };
  return { outcome: (r.values[3] as Array<{ outcome: q.Outcome }>)[0].outcome };
}

async function callFunction(base: string, tokens: RunTokens, target: string, job: RunJob, jobId: string, timeoutMs: number, requestId: string): Promise<void> {
  const name = target.slice('function:'.length);
  const token = await tokens.get(job.k, job.n, timeoutMs);
  const res = await fetch(`${base}/functions/v1/${encodeURIComponent(name)}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${token}`,
      apikey: token,
      'x-request-id': requestId,
      [RUN_HEADERS.kind]: job.k,
      [RUN_HEADERS.name]: job.n,
      [RUN_HEADERS.jobId]: jobId,
      [RUN_HEADERS.attempt]: String(job.a),
    },
    body: JSON.stringify(job.p ?? null),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  if (res.status < 200 || res.status > 299) throw new Error(`HTTP ${res.status}: ${text.slice(0, 500)}`);
}

/** How long a target read from SQL is used before it is read again (a changed queue takes effect within it). */
const TARGET_TTL_MS = 1000;

/**
 * At most this many jobs of one queue or schedule in one batch statement: half the worker's
 * concurrency, so that one batch runs while the jobs of the next are handed out and the last
 * one's completed; and under PostgreSQL's 64 subtransactions a backend caches (a call is one).
 */
const MAX_BATCH = 32;

/** A name whose batch ran past its timeout runs its jobs one by one for this long (each with its own timeout). */
const SOLO_MS = 60_000;

interface Pending {
  job: RunJob;
  jobId: string;
  requestId: string;
  resolve: (r: { outcome: q.Outcome } | { error: string }) => void;
  reject: (err: unknown) => void;
}

/**
 * Several jobs of one `sql:` target in one statement (plinth_private.run_batch, in one
 * transaction sent at once): the calls, each in its own subtransaction, and their run-log
 * rows. The outcomes, in order; a rejection when the batch as a whole failed (its statement
 * timeout, a lost connection): it rolled back, nothing of it happened.
 */
async function callBatch(deps: Deps, t: q.RunTarget, kind: string, name: string, batch: readonly Pending[]): Promise<q.Outcome[]> {
  const jobs = batch.map((b) => ({ id: b.jobId, rid: b.requestId, job: b.job }));
  const r = await sentAtOnce(deps, (c) => [
    c`select set_config('statement_timeout', ${String(t.timeout_ms)}, true)`.execute(),
    c`select plinth_private.run_batch(${kind}, ${name}, ${t.target}, ${t.role}, ${t.max_attempts}::int,
      ${JSON.stringify(jobs)}::text::jsonb) as outcomes`.execute(),
  ]);
  if ('failure' in r) throw r.failure;
  return (r.values[1] as Array<{ outcomes: q.Outcome[] }>)[0].outcomes;
}

/**
 * The `sql:` calls of one worker, batched: the jobs of one queue or schedule that reach the
 * task in the same turn of the event loop (the worker hands out the jobs it fetched
 * together) go to the database as one batch; a lone job goes as before (callSql). When a
 * batch fails as a whole, each of its jobs runs alone, with its own timeout and its own
 * outcome, and a batch that timed out makes its name run alone for SOLO_MS.
 */
function sqlBatcher(deps: Deps) {
  const pending = new Map<string, { t: q.RunTarget; list: Pending[] }>();
  const soloUntil = new Map<string, number>();
  const alone = (t: q.RunTarget, p: Pending): void => {
    callSql(deps, t, p.job, p.jobId, p.requestId).then(p.resolve, p.reject);
  };
  const flush = (key: string): void => {
    const entry = pending.get(key);
    if (entry === undefined) return;
    pending.delete(key);
    const { t, list } = entry;
    if (list.length === 1) return alone(t, list[0]);
    const [kind, name] = [list[0].job.k, list[0].job.n];
    callBatch(deps, t, kind, name, list).then(
      (outcomes) => list.forEach((p, i) => p.resolve({ outcome: outcomes[i] })),
      (err: unknown) => {
        if (message(err).includes('statement timeout')) soloUntil.set(key, Date.now() + SOLO_MS);
        deps.log.warn({ kind, name, jobs: list.length, err }, 'schedules: a batch of runs failed as a whole; each runs alone');
        for (const p of list) alone(t, p);
      },
    );
  };
  return (t: q.RunTarget, p: RunJob, jobId: string, requestId: string): Promise<{ outcome: q.Outcome } | { error: string }> =>
    new Promise((resolve, reject) => {
      const key = `${p.k}:${p.n}`;
      const item = { job: p, jobId, requestId, resolve, reject };
      if ((soloUntil.get(key) ?? 0) > Date.now()) return alone(t, item);
      let entry = pending.get(key);
      if (entry === undefined) {
        pending.set(key, (entry = { t, list: [] }));
        setImmediate(() => flush(key));
      }
      entry.list.push(item);
      if (entry.list.length >= MAX_BATCH) flush(key);
    });
}

/** `base()`: this instance's own URL (known once it listens). */
export function runTask(deps: Deps, base: () => string): Task {
  const targets = new Map<string, { at: number; t: Promise<q.RunTarget> }>();
  const targetOf = (kind: string, name: string): Promise<q.RunTarget> => {
    const key = `${kind}:${name}`;
    const hit = targets.get(key);
    if (hit !== undefined && Date.now() - hit.at < TARGET_TTL_MS) return hit.t;
    const t = q.runTarget(deps.db.sql, kind, name);
    targets.set(key, { at: Date.now(), t });
    t.catch(() => targets.delete(key));
    return t;
  };
  const runSql = sqlBatcher(deps);
  const tokens = new RunTokens(deps.config.secret);
  // Counted for /metrics as recorded; a failed attempt logged (a batched call's error text is in the run log).
  const counted = (job: RunJob, jobId: string, outcome: q.Outcome, error?: string | null): void => {
    deps.metrics.jobRuns.inc({ kind: job.k, name: job.n, outcome });
    if (outcome !== 'succeeded') deps.log.warn({ kind: job.k, name: job.n, job_id: jobId, attempt: job.a, outcome, error }, 'run failed');
  };
  return async (raw, helpers) => {
    const job = raw as RunJob;
    const requestId = randomUUID();
    const t = await targetOf(job.k, job.n);
    const startedAt = new Date();
    let error: string | null = null;
    if (t.target === null) {
      error = `the ${job.k} no longer exists`;
    } else if (t.target.startsWith('sql:')) {
      const r = await runSql(t, job, helpers.job.id, requestId);
      if ('outcome' in r) return counted(job, helpers.job.id, r.outcome);
      error = r.error;
    } else {
      try {
        await callFunction(base(), tokens, t.target, job, helpers.job.id, t.timeout_ms!, requestId);
      } catch (err) {
        error = message(err);
      }
    }
    error = error === null ? null : error.slice(0, MAX_ERROR) || 'failed';
    const outcome = await q.recordRun(deps.db.sql, {
      kind: job.k,
      name: job.n,
      jobId: helpers.job.id,
      attempt: job.a,
      maxAttempts: t.max_attempts,
      scheduledFor: job.at,
      requestId,
      startedAt,
      finishedAt: new Date(),
      error,
      job,
    });
    counted(job, helpers.job.id, outcome, error);
  };
}

export function tickTask(deps: Deps): Task {
  return async (raw) => {
    const { s, at } = raw as { s: string; at: string };
    await q.tick(deps.db.sql, s, at);
  };
}

export const PURGE_EVERY_SECONDS = 3600;

export function purgeTask(deps: Deps): Task {
  return async () => {
    const n = await q.purgeRuns(deps.db.sql, deps.config.jobRunRetentionDays);
    deps.log.info({ purged: n }, 'schedules: old run log rows purged');
    await schedulePeriodic(deps.db.sql, 'plinth__purge', PURGE_EVERY_SECONDS);
  };
}
