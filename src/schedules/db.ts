/**
 * The schedules area's SQL entry functions (sql/fixtures/schedules), one typed wrapper each.
 * They run as the connecting role through the Db's own pool; expected outcomes come back as
 * a `status` the callers switch on.
 */
import type { Sql } from '../core/db.ts';
import { pgErrorToAppError } from '../core/errors.ts';

async function call<T>(q: Promise<T>): Promise<T> {
  try {
    return await q;
  } catch (err) {
    throw pgErrorToAppError(err, { trusted: true });
  }
}

export type UpsertStatus = 'ok' | 'invalid_name' | 'invalid_cron' | 'invalid_target' | 'target_not_found' | 'invalid_options';

export interface ScheduleInput {
  name: string;
  cron: string;
  target: string;
  payload: unknown;
  options: unknown;
}

export async function upsertSchedule(sql: Sql, i: ScheduleInput): Promise<{ status: UpsertStatus; created: boolean; schedule: string | null }> {
  const [r] = await call(
    sql<{ status: UpsertStatus; created: boolean; schedule: string | null }[]>`
      select status, created, schedule::text as schedule
        from plinth_private.upsert_schedule(${i.name}, ${i.cron}, ${i.target}, ${JSON.stringify(i.payload ?? {})}::text::jsonb, ${JSON.stringify(i.options ?? {})}::text::jsonb)`,
  );
  return r;
}

export async function listSchedules(sql: Sql): Promise<string> {
  const [r] = await call(sql<{ body: string }[]>`select plinth_private.list_schedules()::text as body`);
  return r.body;
}

export async function deleteSchedule(sql: Sql, name: string): Promise<'ok' | 'not_found'> {
  const [r] = await call(sql<{ status: 'ok' | 'not_found' }[]>`select plinth_private.delete_schedule(${name}) as status`);
  return r.status;
}

/** Pause (no tick until resumed) or resume a schedule. */
export async function pauseSchedule(sql: Sql, name: string, paused: boolean): Promise<'ok' | 'not_found'> {
  const [r] = await call(sql<{ status: 'ok' | 'not_found' }[]>`select plinth_private.pause_schedule(${name}, ${paused}) as status`);
  return r.status;
}

/** The job id of the run added, or null when there is no such schedule. */
export async function runNow(sql: Sql, name: string): Promise<string | null> {
  const [r] = await call(sql<{ id: string | null }[]>`select plinth_private.run_now(${name})::text as id`);
  return r.id;
}

export type EnqueueStatus = 'ok' | 'queue_not_found' | 'invalid_options';

export async function enqueue(sql: Sql, queue: string, payload: unknown, options: unknown): Promise<{ status: EnqueueStatus; job_id: string | null }> {
  const [r] = await call(
    sql<{ status: EnqueueStatus; job_id: string | null }[]>`
      select status, job_id::text as job_id
        from plinth_private.enqueue(${queue}, ${JSON.stringify(payload ?? null)}::text::jsonb, ${JSON.stringify(options ?? {})}::text::jsonb)`,
  );
  return r;
}

export interface RunFilter {
  name: string | null;
  kind: string | null;
  outcome: string | null;
  before: string | null;
  limit: number;
}

export async function listRuns(sql: Sql, f: RunFilter): Promise<string> {
  const [r] = await call(
    sql<{ body: string }[]>`select plinth_private.list_runs(${f.name}::text, ${f.kind}::text, ${f.outcome}::text, ${f.before}::bigint, ${f.limit})::text as body`,
  );
  return r.body;
}

// ── the worker's side ────────────────────────────────────────────────────────────────────

export interface RunTarget {
  target: string | null;
  role: string | null;
  timeout_ms: number | null;
  max_attempts: number | null;
}

/** The target of a schedule or queue; all null when it no longer exists. */
export async function runTarget(sql: Sql, kind: string, name: string): Promise<RunTarget> {
  const [r] = await sql<RunTarget[]>`select target, role, timeout_ms, max_attempts from plinth_private.run_target(${kind}, ${name})`;
  return r ?? { target: null, role: null, timeout_ms: null, max_attempts: null };
}

export type Outcome = 'succeeded' | 'retrying' | 'failed';

export interface Attempt {
  kind: string;
  name: string;
  jobId: string;
  attempt: number;
  maxAttempts: number | null;
  scheduledFor: string | null;
  requestId: string;
  startedAt: Date;
  finishedAt: Date;
  error: string | null;
  job: unknown;
}

export async function recordRun(sql: Sql, a: Attempt): Promise<Outcome> {
  const [r] = await sql<{ outcome: Outcome }[]>`
    select plinth_private.record_run(${a.kind}, ${a.name}, ${a.jobId}::bigint, ${a.attempt}, ${a.maxAttempts}::int, ${a.scheduledFor}::timestamptz,
      ${a.requestId}, ${a.startedAt}::timestamptz, ${a.finishedAt}::timestamptz, ${a.error === null}, ${a.error}::text, ${JSON.stringify(a.job)}::text::jsonb) as outcome`;
  return r.outcome;
}

export async function tick(sql: Sql, name: string, at: string): Promise<number> {
  const [r] = await sql<{ n: number }[]>`select plinth_private.tick(${name}, ${at}::timestamptz) as n`;
  return r.n;
}

export async function purgeRuns(sql: Sql, days: number): Promise<string> {
  const [r] = await sql<{ n: string }[]>`select plinth_private.purge_runs(${days})::text as n`;
  return r.n;
}

