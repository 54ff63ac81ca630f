/**
 * The webhooks area's SQL entry functions (sql/fixtures/webhooks), one typed wrapper each
 * (STYLE, SQL/TS boundary). They run as the connecting role through the Db's own pool
 * (docs/architecture.md: the service's own webhook endpoints call their SQL functions as that role).
 * Expected outcomes come back as a `status` the callers switch on exhaustively; anything
 * raised is mapped by `pgErrorToAppError(err, {trusted: true})`.
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

// ── registry (hooks.sql) ─────────────────────────────────────────────────────────────────

export type CreateHookStatus = 'ok' | 'table_not_found' | 'invalid_url' | 'invalid_events';

export interface CreateHookInput {
  url: string;
  events: string[] | null;
  tableName: string | null;
  secret: string | null;
}

/** `hook` is the Webhook's JSON text (docs/api/webhooks.md, no secret) when status is `ok`. */
export async function createHook(sql: Sql, i: CreateHookInput): Promise<{ status: CreateHookStatus; hook: string | null }> {
  const [r] = await call(
    sql<{ status: CreateHookStatus; hook: string | null }[]>`
      select status, hook::text as hook from webhooks.create_hook(${i.url}, ${i.events}::text[], ${i.tableName}::text, ${i.secret}::text)`,
  );
  return r;
}

/** Every webhook as JSON text (an array). */
export async function listHooks(sql: Sql): Promise<string> {
  const [r] = await call(sql<{ hooks: string }[]>`select webhooks.list_hooks()::text as hooks`);
  return r.hooks;
}

export type DeleteHookStatus = 'ok' | 'not_found';

export async function deleteHook(sql: Sql, id: string): Promise<DeleteHookStatus> {
  const [r] = await call(sql<{ status: DeleteHookStatus }[]>`select webhooks.delete_hook(${id}::uuid) as status`);
  return r.status;
}

// ── delivery log (deliveries.sql) ─────────────────────────────────────────────────────────

export type ListDeliveriesStatus = 'ok' | 'not_found';

export async function listDeliveries(
  sql: Sql,
  webhookId: string,
  limit: number,
): Promise<{ status: ListDeliveriesStatus; deliveries: string | null }> {
  const [r] = await call(
    sql<{ status: ListDeliveriesStatus; deliveries: string | null }[]>`
      select status, deliveries::text as deliveries from webhooks.list_deliveries(${webhookId}::uuid, ${limit}::int)`,
  );
  return r;
}

export type BeginAttemptStatus = 'ok' | 'gone' | 'done';

export interface BeginAttempt {
  status: BeginAttemptStatus;
  url: string | null;
  secret: string | null;
}

/** One attempt of a job's batch, as the outbox drain wrote it (deliver.ts, DeliverPayload). */
export interface AttemptRef {
  /** delivery id */
  d: string;
  /** webhook id */
  w: string;
  /** attempt number */
  n: number;
}

/** Whether each attempt is still due and where it goes, in the batch's order (begin_attempts). */
export async function beginAttempts(sql: Sql, items: readonly AttemptRef[]): Promise<BeginAttempt[]> {
  const refs = items.map(({ d, w, n }) => ({ d, w, n }));
  return await sql<BeginAttempt[]>`select * from webhooks_private.begin_attempts(${JSON.stringify(refs)}::text::jsonb)`;
}

export type RecordAttemptStatus = 'delivered' | 'retry' | 'failed' | 'duplicate' | 'gone';

/** An attempt made, to record: its job item's fields and its outcome. */
export interface AttemptRecord extends AttemptRef {
  /** event, table, when the change was made */
  e: string;
  t: string;
  c: string;
  /** the bytes sent, for the next attempt; null after a 2xx */
  b: string | null;
  /** the id of the request that caused the attempt (null: none) */
  r: string | null;
  /** status code (null: none) */
  s: number | null;
  /** error (null: a status came back) */
  x: string | null;
  ms: number;
  /** when the attempt started, ISO 8601 */
  at: string;
}

/**
 * Record the attempts of a batch in one transaction; `delaysMs` is WEBHOOK_RETRY_SCHEDULE
 * (attempt n is followed, after a failure, by one `delaysMs[n - 1]` later). Statuses in order.
 */
export async function recordAttempts(sql: Sql, records: readonly AttemptRecord[], delaysMs: readonly number[]): Promise<RecordAttemptStatus[]> {
  const [r] = await sql<{ statuses: RecordAttemptStatus[] }[]>`
    select webhooks_private.record_attempts(${JSON.stringify(records)}::text::jsonb, ${delaysMs as number[]}::int[]) as statuses`;
  return r.statuses;
}

// ── housekeeping (purge.sql) ─────────────────────────────────────────────────────────────

export async function purgeLog(sql: Sql): Promise<{ deliveries: number }> {
  const [r] = await sql<{ counts: { deliveries: number } }[]>`select webhooks.purge_log() as counts`;
  return r.counts;
}


/** Give an attempt back unrecorded (this instance is stopping): to the outbox again, due after `delayMs`. */
export async function requeueAttempt(sql: Sql, a: AttemptRef & { e: string; t: string; c: string; b: string; r: string | null }, delayMs: number): Promise<void> {
  await sql`select webhooks_private.requeue_attempt(${a.w}::uuid, ${a.d}::uuid, ${a.n}::int, ${a.e}::text,
    ${a.t}::text, ${a.c}::timestamptz, ${a.b}::text, ${delayMs}::int, ${a.r}::text)`;
}

// ── outbox (outbox.sql) ───────────────────────────────────────────────────────────────────

/**
 * Hand up to `limit` due outbox rows to the job worker; returns the rows taken and, after
 * them, in how many milliseconds the earliest row left is due (null: the outbox is empty).
 */
export async function drainOutbox(sql: Sql, limit: number, instanceId: string): Promise<{ taken: number; nextDueMs: number | null }> {
  const [r] = await sql<{ taken: number; nextDueMs: number | null }[]>`
    select webhooks_private.drain_outbox(${limit}::int, ${instanceId}::uuid) as taken, webhooks_private.outbox_next_due_ms() as "nextDueMs"`;
  return r;
}

/** This instance's drain stopped: it is no longer recorded awake. */
export async function drainStopped(sql: Sql, instanceId: string): Promise<void> {
  await sql`select webhooks_private.drain_stopped(${instanceId}::uuid)`;
}

/** Whether the outbox needs polling: a webhook is active, or a row waits. */
export async function anyActiveHook(sql: Sql): Promise<boolean> {
  const [r] = await sql<{ any: boolean }[]>`select webhooks_private.any_active_hook() as any`;
  return r.any;
}

export type RedeliverStatus = 'ok' | 'webhook_not_found' | 'paused' | 'not_found' | 'not_failed';

/** Send a failed delivery once more; `attempt` is the new attempt's number when status is `ok`. */
export async function redeliver(sql: Sql, webhookId: string, deliveryId: string, requestId: string): Promise<{ status: RedeliverStatus; attempt: number | null }> {
  const [r] = await call(
    sql<{ status: RedeliverStatus; attempt: number | null }[]>`
      select status, attempt from webhooks.redeliver(${webhookId}::uuid, ${deliveryId}::uuid, ${requestId}::text)`,
  );
  return r;
}
