/**
 * The worker's side of schedules and queues (sql/fixtures/schedules/schedules.sql):
 *
 * - `plinth__tick`: a schedule's tick; SQL adds the run(s) due and the next tick job.
 * - `plinth__run`: one attempt of a run. SQL records its start (begin_run) and its end
 *   (finish_run, which adds the next attempt while attempts remain). The task never throws
 *   for a failing target, so graphile-worker's own retries are only for a database that
 *   could not be reached.
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
import * as q from './db.ts';

/** Headers an edge function called by a schedule or a queue receives. */
export const RUN_HEADERS = {
  kind: 'x-job-kind',
  name: 'x-job-name',
  runId: 'x-job-run-id',
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

async function callSql(deps: Deps, target: string, role: string, timeoutMs: number, payload: unknown, requestId: string): Promise<void> {
  const m = /^sql:([^.]+)\.(.+)$/.exec(target)!;
  const claims = JSON.stringify({ role });
  await deps.db.sql.begin(async (tx) => {
    await tx`select set_config('role', ${role}, true), set_config('statement_timeout', ${String(timeoutMs)}, true),
                    set_config('request.jwt.claims', ${claims}, true), set_config('request.id', ${requestId}, true)`;
    await tx`select ${tx(m[1])}.${tx(m[2])}(${JSON.stringify(payload ?? null)}::text::jsonb)`;
  });
}

async function callFunction(base: string, deps: Deps, target: string, job: RunJob, runId: string, timeoutMs: number, requestId: string): Promise<void> {
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
      [RUN_HEADERS.runId]: runId,
      [RUN_HEADERS.attempt]: String(job.a),
    },
    body: JSON.stringify(job.p ?? null),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  if (res.status < 200 || res.status > 299) throw new Error(`HTTP ${res.status}: ${text.slice(0, 500)}`);
}

/** `base()`: this instance's own URL (known once it listens). */
export function runTask(deps: Deps, base: () => string): Task {
  return async (raw, helpers) => {
    const job = raw as RunJob;
    const requestId = randomUUID();
    const began = await q.beginRun(deps.db.sql, job.k, job.n, helpers.job.id, job.a, job.at, requestId);
    if (began.status === 'gone') {
      deps.log.warn({ kind: job.k, name: job.n, run_id: began.run_id }, 'run of a removed schedule or queue recorded as failed');
      return;
    }
    const target = began.target!;
    let error: string | null = null;
    try {
      if (target.startsWith('sql:')) await callSql(deps, target, began.role!, began.timeout_ms!, job.p, requestId);
      else await callFunction(base(), deps, target, job, began.run_id, began.timeout_ms!, requestId);
    } catch (err) {
      error = message(err).slice(0, MAX_ERROR) || 'failed';
    }
    const outcome = await q.finishRun(deps.db.sql, began.run_id, error === null, error, job);
    if (outcome !== 'succeeded') deps.log.warn({ kind: job.k, name: job.n, run_id: began.run_id, attempt: job.a, outcome, error }, 'run failed');
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
    await q.schedulePurge(deps.db.sql, PURGE_EVERY_SECONDS);
  };
}
