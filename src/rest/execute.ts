/**
 * The REST executor: run a prepared operation on a given connection and turn its one
 * result row into an outcome (status, JSON text, headers). The HTTP routes run it inside
 * `db.withContext` (one round trip, role and claims included); the batch runs several on
 * the one connection of `db.transactionWithContext`. Rows are never parsed here: `body`
 * is the JSON text PostgreSQL built.
 */
import type postgres from 'postgres';
import type { Db, LaneQuery, LaneSql, RequestContext, Sql } from '../core/db.ts';
import { pgErrorToAppError } from '../core/errors.ts';
import { REST_ERRORS } from './errors.ts';
import type { Prepared } from './plan.ts';

export interface Outcome {
  status: number;
  /** JSON text, or null for no body. */
  body: string | null;
  /** Rows in the body (1 for an RPC value). */
  n: number;
  contentRange: string | null;
}

interface ResultRow {
  body: string | null;
  n: number;
  total?: string | number | null;
}

/**
 * Always the extended protocol, prepared: the driver would otherwise send a statement
 * without parameters (an unfiltered GET, an RPC without arguments) as a simple query,
 * parsed and planned on every request. (`simple` is read by the driver but not in its types.)
 */
const PREPARED = { prepare: true, simple: false } as postgres.UnsafeQueryOptions;

/** The statement on a lane (`withContext` runs it), or on a transaction's connection (it runs when executed or awaited). */
export function run(c: LaneSql, p: Prepared): LaneQuery;
export function run(c: Sql, p: Prepared): postgres.PendingQuery<postgres.Row[]>;
export function run(c: Sql | LaneSql, p: Prepared): LaneQuery | postgres.PendingQuery<postgres.Row[]> {
  return c.unsafe(p.plan.text, p.params as postgres.ParameterOrJSON<never>[], PREPARED);
}

export function outcome(p: Prepared, rows: readonly postgres.Row[]): Outcome {
  const plan = p.plan;
  if (!plan.returnsBody) return { status: plan.status, body: null, n: 0, contentRange: null };
  const row = rows[0] as ResultRow;
  const n = row.n;
  if (plan.singular && n !== 1) throw REST_ERRORS.singular();
  let contentRange: string | null = null;
  let status = plan.status;
  if (plan.contentRange) {
    const total = row.total === undefined || row.total === null ? '*' : String(row.total);
    contentRange = n === 0 ? `*/${total}` : `${p.offset}-${p.offset + n - 1}/${total}`;
    // A Range header's page that is not the whole result: 206 (PostgREST); an empty page
    // past the end stays 200 (the interface has no 416).
    if (p.ranged && n > 0 && total !== '*' && n < Number(total)) status = 206;
  }
  let body = row.body;
  if (plan.csvHeader !== undefined) body = n === 0 ? plan.csvHeader : plan.csvHeader + '\n' + body;
  return { status, body, n, contentRange };
}

/**
 * One operation, one transaction, as the caller. A singular write (`Accept:
 * application/vnd.pgrst.object+json`) must roll back when it touched other than one row,
 * so it takes the two-step transaction; everything else is one round trip.
 */
export async function execute(db: Db, ctx: RequestContext, p: Prepared): Promise<Outcome> {
  try {
    if (p.plan.write && p.plan.singular) {
      return await db.transactionWithContext(ctx, async (c) => outcome(p, await run(c, p).execute()));
    }
    return outcome(p, await db.withContext(ctx, (c) => run(c, p)));
  } catch (err) {
    throw pgErrorToAppError(err);
  }
}
