/**
 * Typed wrappers of the live area's SQL functions (sql/fixtures/live/*.sql). Each runs as
 * the connecting (owner) role on the service's own pool; the heartbeat, periodic, on the
 * listener's connection.
 */
import type { Sql } from '../core/db.ts';
import type { Listener } from '../core/listener.ts';

export interface Access {
  registered: boolean;
  bound: boolean;
  allowed: boolean;
  /** Its query stopped working (live_private.mark_broken). */
  broken: boolean;
  /** The subscription's seq now (the baseline of a new socket). */
  seq: number;
  /** Registered with `{"as": "subscriber"}`: each socket joins a group. */
  as_subscriber: boolean;
}

export async function configure(sql: Sql, channel: string, maxRows: number, maxGroups: number): Promise<void> {
  await sql`select live_private.configure(${channel}, ${maxRows}::int, ${maxGroups}::int)`;
}

export async function access(sql: Sql, queryId: string, claims: string): Promise<Access> {
  const [row]: [(Omit<Access, 'seq'> & { seq: string })?] =
    await sql`select registered, bound, allowed, broken, seq::text, as_subscriber from live_private.access(${queryId}, ${claims}::text::jsonb)`;
  return row ? { ...row, seq: Number(row.seq) } : { registered: false, bound: false, allowed: true, broken: false, seq: 0, as_subscriber: false };
}

export async function heartbeat(listener: Listener, instanceId: string, bcChannel: string, ttl: number): Promise<boolean> {
  const [row] = await listener.query<{ fresh: boolean }>('select live_private.heartbeat($1, $2, $3) as fresh', [instanceId, bcChannel, ttl]);
  return row?.fresh === true;
}

export async function presenceSet(sql: Sql, instanceId: string, bcChannel: string, channel: string, clientId: string, state: string): Promise<void> {
  await sql`select live_private.presence_set(${instanceId}, ${bcChannel}, ${channel}, ${clientId}, ${state}::text::jsonb)`;
}

export async function presenceLeave(sql: Sql, bcChannel: string, channel: string, clientId: string): Promise<void> {
  await sql`select live_private.presence_leave(${bcChannel}, ${channel}, ${clientId})`;
}

/** The presence object of a channel, as JSON text built by PostgreSQL. */
export async function presenceList(sql: Sql, channel: string, ttl: number): Promise<string> {
  const [row]: [{ p: string }?] = await sql`select live_private.presence_list(${channel}, ${ttl})::text as p`;
  return row?.p ?? '{}';
}

export async function broadcast(sql: Sql, bcChannel: string, channel: string, clientId: string, payload: string): Promise<void> {
  await sql`select live_private.broadcast(${bcChannel}, ${channel}, ${clientId}, ${payload}::text::jsonb)`;
}

export async function broadcastMany(sql: Sql, bcChannel: string, channel: string, clientId: string, payloads: string[]): Promise<void> {
  await sql`select live_private.broadcast_many(${bcChannel}, ${channel}, ${clientId}, ${payloads}::text[]::jsonb[])`;
}

export async function instanceStop(sql: Sql, instanceId: string, bcChannel: string): Promise<void> {
  await sql`select live_private.instance_stop(${instanceId}, ${bcChannel})`;
}

/** The current seq of each route (Hub routes: a query_id, or a group's route). */
export async function routeSeqs(sql: Sql, routes: string[]): Promise<Map<string, number>> {
  const rows = await sql<{ route: string; seq: string }[]>`select route, seq::text from live_private.route_seqs(${routes}::text[])`;
  return new Map(rows.map((r) => [r.route, Number(r.seq)]));
}

/** Work the poller holds the lease of: a default-mode subscription (group null) or a group. */
export interface Claimed {
  group_id: string | null;
  query_id: string;
  role: string | null;
  claims: string | null;
  /** The group's query to re-run, or on the fast path its statement over `ins` and `del`. */
  query: string | null;
  /** The fast path: `ins` and `del` are the rows (jsonb arrays as text) the group has not seen. */
  fast: boolean;
  ins: string | null;
  del: string | null;
  /** The snapshot `ins` and `del` were read in. */
  snap: string | null;
}

/** The poll; rare while idle (the pollers sleep until a writer wakes them). */
export async function claim(sql: Sql, instanceId: string, leaseMs: number, busy = false): Promise<Claimed[]> {
  return await sql<Claimed[]>`select group_id::text, query_id, role, claims, query, fast, ins, del, snap from live_private.claim(${instanceId}, ${leaseMs}::int, ${busy})`;
}

/** A table subscription's group with changes it may want (realtime.sql, claim_changes): its lane's statement over `ins`. */
export interface ClaimedChanges {
  query_id: string;
  /** The subscription's new cursor, for realtime_done. */
  snap: string;
  group_id: string;
  role: string;
  claims: string;
  query: string;
  ins: string;
}

export async function claimChanges(sql: Sql, instanceId: string, leaseMs: number): Promise<ClaimedChanges[]> {
  return await sql<ClaimedChanges[]>`select query_id, snap, group_id::text, role, claims, query, ins from live_private.claim_changes(${instanceId}, ${leaseMs}::int)`;
}

/** What the lanes of one leased table subscription's groups returned (each `ins`, or an error `SQLSTATE|message`). */
export async function realtimeDone(sql: Sql, instanceId: string, queryId: string, snap: string, ids: string[], ins: (string | null)[], errors: (string | null)[]): Promise<void> {
  await sql`select live_private.realtime_done(${instanceId}, ${queryId}, ${snap}, ${ids}::bigint[], ${ins as string[]}::text[]::jsonb[], ${errors as string[]}::text[])`;
}

/**
 * VACUUM of the queue of changes (live_private.changes): a poll deletes what every group
 * has been given, thousands of rows a second under writers, and autovacuum comes once a
 * minute at most; until it does, each poll's scans of the queue read every dead row and
 * index entry (at 20 000 dead rows a poll cost 50 times its work). SKIP_LOCKED: another
 * instance's vacuum in flight is enough. A role that does not own the table only gets a
 * warning.
 */
export async function vacuumChanges(sql: Sql): Promise<void> {
  await sql`vacuum (skip_locked) live_private.changes`.simple();
}

/** Table subscriptions nobody has joined for `graceMs` go, with their triggers; how many went. */
export async function realtimeSweep(sql: Sql, graceMs: number): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select live_private.realtime_sweep(${graceMs}::int) as n`;
  return row.n;
}

export async function rerunSubscription(sql: Sql, instanceId: string, queryId: string): Promise<void> {
  await sql`select live_private.rerun_subscription(${instanceId}, ${queryId})`;
}

/** What the lanes of leased groups returned, in one round trip: a result or a delta (JSON text), its snapshot, or an error. */
export interface GroupOutcome {
  id: string;
  result: string | null;
  ins: string | null;
  del: string | null;
  snap: string | null;
  error: string | null;
}

export async function publishGroups(sql: Sql, instanceId: string, outcomes: GroupOutcome[]): Promise<void> {
  const col = <K extends keyof GroupOutcome>(k: K) => outcomes.map((o) => o[k]) as string[];
  await sql`select live_private.publish_groups(${instanceId}, ${col('id')}::bigint[], ${col('result')}::text[]::jsonb[], ${col('error')}::text[],
    ${col('snap')}::text[], ${col('ins')}::text[]::jsonb[], ${col('del')}::text[]::jsonb[])`;
}

export interface Joined {
  group_id: string;
  seq: number;
  needs_init: boolean;
  /** The group's claims (JSON text): what its lane runs with. */
  group_claims: string;
  query: string;
}

export async function joinGroup(sql: Sql, instanceId: string, queryId: string, role: string, claims: string): Promise<Joined | null> {
  const [row]: [(Omit<Joined, 'seq'> & { seq: string })?] = await sql`select group_id::text, seq::text, needs_init, group_claims, query
    from live_private.join_group(${instanceId}, ${queryId}, ${role}, ${claims}::text::jsonb)`;
  return row ? { ...row, seq: Number(row.seq) } : null;
}

export async function initGroup(sql: Sql, groupId: string, rows: string, snap: string): Promise<number> {
  const [row]: [{ seq: string | null }?] = await sql`select live_private.init_group(${groupId}::bigint, ${rows}::text::jsonb, ${snap})::text as seq`;
  return Number(row?.seq ?? 0);
}

/** On the listener's connection, as the heartbeat: periodic work keeps no request connection from idling out. */
export async function syncMembers(listener: Listener, instanceId: string, groupIds: string[]): Promise<void> {
  await listener.query('select live_private.sync_members($1, $2::bigint[])', [instanceId, groupIds]);
}

export async function markAllDirty(sql: Sql): Promise<void> {
  await sql`select live_private.mark_all_dirty()`;
}

/** The id of the group `role` with `claims` falls in, null when there is none. */
export async function groupOf(sql: Sql, queryId: string, role: string, claims: string): Promise<string | null> {
  const [row]: [{ id: string | null }?] = await sql`select live_private.group_of(${queryId}, ${role}, ${claims}::text::jsonb)::text as id`;
  return row?.id ?? null;
}

/**
 * A delta-mode subscription's stored result (or its group's, `groupId`) as JSON text and
 * the seq it is at, read together; null when there is none to send.
 */
export async function storedResult(sql: Sql, queryId: string, groupId: string | null): Promise<{ seq: number; rows: string } | null> {
  const [row]: [{ seq: string; rows: string }?] = await sql`select seq::text, rows from live_private.stored_result(${queryId}, ${groupId}::bigint)`;
  return row ? { seq: Number(row.seq), rows: row.rows } : null;
}
