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

/** One attempt of a batch, as webhooks_private.claim_batches wrote it. */
export interface BatchItem {
  /** delivery id (X-Webhook-Id) */
  d: string;
  /** webhook id */
  w: string;
  /** attempt number */
  n: number;
  /** event, table, when the change was made */
  e: string;
  t: string;
  c: string;
  /** the request body, as sent */
  b: string;
  /** the id of the request that made the change (null: none) */
  r: string | null;
}

/** A batch an instance's poll took: attempts of one webhook, with where they go (url null: the webhook is gone or paused). */
export interface Batch {
  id: number;
  webhook: string;
  url: string | null;
  secret: string | null;
  /** Taken over from an instance that died: its attempts may have been sent already. */
  repeat: boolean;
  items: BatchItem[];
}

/** The outcome of an attempt made, to record. */
export interface AttemptOutcomeRecord {
  /** delivery id */
  d: string;
  /** status code (null: none) */
  s: number | null;
  /** error (null: a status came back) */
  x: string | null;
  ms: number;
  /** when the attempt started, ISO 8601 */
  at: string;
}

export type FinishStatus = 'delivered' | 'retry' | 'failed' | 'given_back' | 'taken' | 'gone';

/**
 * End a batch (finish_batch): record the outcomes, give back the attempts without one (due
 * after `giveBackMs`); `delaysMs` is WEBHOOK_RETRY_SCHEDULE. Statuses in the batch's order.
 */
export async function finishBatch(
  sql: Sql,
  batchId: number,
  instanceId: string,
  outcomes: readonly AttemptOutcomeRecord[],
  delaysMs: readonly number[],
  giveBackMs = 0,
): Promise<FinishStatus[]> {
  const [r] = await sql<{ statuses: FinishStatus[] }[]>`
    select webhooks_private.finish_batch(${batchId}::bigint, ${instanceId}::uuid, ${JSON.stringify(outcomes)}::text::jsonb,
      ${delaysMs as number[]}::int[], ${giveBackMs}::int) as statuses`;
  return r.statuses;
}

// ── housekeeping (purge.sql) ─────────────────────────────────────────────────────────────

export async function purgeLog(sql: Sql): Promise<{ deliveries: number }> {
  const [r] = await sql<{ counts: { deliveries: number } }[]>`select webhooks.purge_log() as counts`;
  return r.counts;
}


/** Attempts of a job of the former webhooks__deliver task: back to the outbox. */
export async function requeueItems(sql: Sql, items: unknown[]): Promise<void> {
  await sql`select webhooks_private.requeue_items(${JSON.stringify(items)}::text::json)`;
}

// ── outbox (outbox.sql) ───────────────────────────────────────────────────────────────────

/**
 * An instance's poll (claim_batches): up to `limit` due outbox rows become this instance's
 * batches; returns them, the rows taken and, after them, in how many milliseconds the
 * earliest row left is due (null: the outbox is empty).
 */
export async function claimBatches(sql: Sql, limit: number, instanceId: string): Promise<{ taken: number; batches: Batch[]; nextDueMs: number | null }> {
  const [r] = await sql<{ claim: string; nextDueMs: number | null }[]>`
    select webhooks_private.claim_batches(${limit}::int, ${instanceId}::uuid)::text as claim, webhooks_private.outbox_next_due_ms() as "nextDueMs"`;
  const c = JSON.parse(r.claim) as { taken: number; batches: Batch[] };
  return { taken: c.taken, batches: c.batches, nextDueMs: r.nextDueMs };
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
