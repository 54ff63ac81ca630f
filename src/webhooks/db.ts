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

export async function beginAttempt(sql: Sql, webhookId: string, deliveryId: string, attempt: number): Promise<BeginAttempt> {
  const [r] = await sql<BeginAttempt[]>`
    select * from webhooks_private.begin_attempt(${webhookId}::uuid, ${deliveryId}::uuid, ${attempt}::int)`;
  return r;
}

export type RecordAttemptStatus = 'delivered' | 'retry' | 'failed' | 'duplicate' | 'gone';

export interface AttemptRecord {
  webhookId: string;
  deliveryId: string;
  attempt: number;
  event: string;
  table: string;
  createdAt: string;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  attemptedAt: Date;
  /** The bytes sent, for the next attempt; null after a 2xx. */
  body: string | null;
  /** The id of the request whose change caused the delivery (null: none). */
  requestId: string | null;
}

export async function recordAttempt(sql: Sql, a: AttemptRecord): Promise<RecordAttemptStatus> {
  const [r] = await sql<{ status: RecordAttemptStatus }[]>`
    select webhooks_private.record_attempt(${a.webhookId}::uuid, ${a.deliveryId}::uuid, ${a.attempt}::int, ${a.event}::text,
      ${a.table}::text, ${a.createdAt}::timestamptz, ${a.statusCode}::int, ${a.error}::text, ${a.durationMs}::int,
      ${a.attemptedAt}::timestamptz, ${a.body}::text, ${a.requestId}::text) as status`;
  return r.status;
}

// ── housekeeping (purge.sql) ─────────────────────────────────────────────────────────────

export async function purgeLog(sql: Sql): Promise<{ deliveries: number }> {
  const [r] = await sql<{ counts: { deliveries: number } }[]>`select webhooks.purge_log() as counts`;
  return r.counts;
}


/** Give an attempt back unrecorded (this instance is stopping): the same job again, after `delayMs`. */
export async function requeueAttempt(sql: Sql, a: Pick<AttemptRecord, 'webhookId' | 'deliveryId' | 'attempt' | 'event' | 'table' | 'createdAt' | 'requestId'> & { body: string }, delayMs: number): Promise<void> {
  await sql`select webhooks_private.requeue_attempt(${a.webhookId}::uuid, ${a.deliveryId}::uuid, ${a.attempt}::int, ${a.event}::text,
    ${a.table}::text, ${a.createdAt}::timestamptz, ${a.body}::text, ${delayMs}::int, ${a.requestId}::text)`;
}

export interface DeliveryTarget {
  id: string;
  url: string;
  secret: string;
}

export async function deliveryTargets(sql: Sql): Promise<DeliveryTarget[]> {
  return await sql<DeliveryTarget[]>`select * from webhooks_private.delivery_targets()`;
}
