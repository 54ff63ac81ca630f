/** Typed wrappers of the SQL functions of table subscriptions (sql/fixtures/live/realtime.sql). */
import type { Sql } from '../../core/db.ts';

export interface TableJoin {
  group_id: string | null;
  query_id: string | null;
  pk: string[] | null;
  cols: string[] | null;
  error: 'not found' | 'permission denied' | null;
}

/** A socket's table subscription joins the group of its role and claims (registering the table on first use). */
export async function realtimeJoin(sql: Sql, instanceId: string, table: string, role: string, claims: string, want: object | null): Promise<TableJoin> {
  const [row]: [TableJoin?] = await sql`select group_id::text, query_id, pk, cols, error
    from live_private.realtime_join(${instanceId}, ${table}, ${role}, ${claims}::text::jsonb, ${want === null ? null : JSON.stringify(want)}::text::jsonb)`;
  return row ?? { group_id: null, query_id: null, pk: null, cols: null, error: 'not found' };
}
