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
 * `/functions/v1/<name>` with the service-role key (so it takes every path of a normal
 * call: catalog, runtime, budgets), `X-Request-Id`, and the headers that say which run
 * called it (RUN_HEADERS), aborted after options.timeout.
 */
import { randomUUID } from 'node:crypto';
import type { Task } from 'graphile-worker';
import type { Deps } from '../core/area.ts';
import { schedulePeriodic } from '../core/periodic.ts';
import * as q from './db.ts';

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
 * A `sql:` target, and on success the attempt's row, in one transaction sent at once (one
 * round trip): begin; the role, timeout, claims and request id; the call; back to the
 * connecting role; record_run (its times from the transaction's start and the clock); commit.
 * The commit does not wait for the disk: the job's completion, a later synchronous commit,
 * flushes it (WAL is written in order), and until then a crash only means the job runs
 * again (at least once, as before). Returns the outcome, or the error when the call failed
 * (the transaction then rolled back, and the caller records the attempt).
 */
async function callSql(deps: Deps, t: q.RunTarget, job: RunJob, jobId: string, requestId: string): Promise<{ outcome: q.Outcome } | { error: string }> {
  const m = /^sql:([^.]+)\.(.+)$/.exec(t.target!)!;
  const claims = JSON.stringify({ role: t.role });
  const c = await deps.db.sql.reserve();
  try {
    const sent = [
      c`begin`.execute(),
      c`select set_config('role', ${t.role}, true), set_config('statement_timeout', ${String(t.timeout_ms)}, true),
               set_config('request.jwt.claims', ${claims}, true), set_config('request.id', ${requestId}, true),
               set_config('synchronous_commit', 'off', true)`.execute(),
      c`select ${c(m[1])}.${c(m[2])}(${JSON.stringify(job.p ?? null)}::text::jsonb)`.execute(),
      c`select set_config('role', 'none', true)`.execute(),
      c<{ outcome: q.Outcome }[]>`select plinth_private.record_run(${job.k}, ${job.n}, ${jobId}::bigint, ${job.a}, ${t.max_attempts}::int,
        ${job.at}::timestamptz, ${requestId}, null, null, true, null, ${JSON.stringify(job)}::text::jsonb) as outcome`.execute(),
      c`commit`.execute(),
    ];
    const settled = await Promise.allSettled(sent);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed !== undefined) {
      // A failed statement aborted the transaction; the commit (if it got that far) rolled back.
      await c`rollback`.catch(() => {});
      return { error: message(failed.reason) };
    }
    return { outcome: (settled[4] as PromiseFulfilledResult<{ outcome: q.Outcome }[]>).value[0].outcome };
  } finally {
    c.release();
  }
}

async function callFunction(base: string, deps: Deps, target: string, job: RunJob, jobId: string, timeoutMs: number, requestId: string): Promise<void> {
  const name = target.slice('function:'.length);
  const res = await fetch(`${base}/functions/v1/${encodeURIComponent(name)}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${deps.config.serviceRoleKey}`,
      apikey: deps.config.serviceRoleKey,
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
  return async (raw, helpers) => {
    const job = raw as RunJob;
    const requestId = randomUUID();
    const t = await targetOf(job.k, job.n);
    const startedAt = new Date();
    let error: string | null = null;
    if (t.target === null) {
      error = `the ${job.k} no longer exists`;
    } else if (t.target.startsWith('sql:')) {
      const r = await callSql(deps, t, job, helpers.job.id, requestId);
      if ('outcome' in r) return;
      error = r.error;
    } else {
      try {
        await callFunction(base(), deps, t.target, job, helpers.job.id, t.timeout_ms!, requestId);
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
    if (outcome !== 'succeeded') deps.log.warn({ kind: job.k, name: job.n, job_id: helpers.job.id, attempt: job.a, outcome, error }, 'run failed');
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
