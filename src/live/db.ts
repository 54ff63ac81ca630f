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
}

export async function configure(sql: Sql, channel: string): Promise<void> {
  await sql`select live_private.configure(${channel})`;
}

export async function access(sql: Sql, queryId: string, claims: string): Promise<Access> {
  const [row]: [Access?] = await sql`select registered, bound, allowed from live_private.access(${queryId}, ${claims}::text::jsonb)`;
  return row ?? { registered: false, bound: false, allowed: true };
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

export async function seqs(sql: Sql, queryIds: string[]): Promise<Map<string, number>> {
  const rows = await sql<{ query_id: string; seq: string }[]>`select query_id, seq::text from live_private.seqs(${queryIds}::text[])`;
  return new Map(rows.map((r) => [r.query_id, Number(r.seq)]));
}
