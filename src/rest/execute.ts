/**
 * The REST executor: run a prepared operation on a given connection and turn its one
 * result row into an outcome (status, JSON text, headers). The HTTP routes run it inside
 * `db.withContext` (one round trip, role and claims included); the batch runs several on
 * the one connection of `db.transactionWithContext`. Rows are never parsed here: `body`
 * is the JSON text PostgreSQL built.
 */
import type postgres from 'postgres';
import type { ContextOptions, Db, LaneQuery, LaneSql, RequestContext, Sql } from '../core/db.ts';
import { pgErrorToAppError } from '../core/errors.ts';
import { REST_ERRORS } from './errors.ts';
import type { Prepared } from './statement.ts';
import type { PlanRequest } from './request.ts';

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
  inserted?: number;
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
  return c.unsafe(p.statement.text, p.params as postgres.ParameterOrJSON<never>[], PREPARED);
}

export function outcome(p: Prepared, rows: readonly postgres.Row[]): Outcome {
  const s = p.statement;
  if (!s.returnsBody) {
    // A write under `max-affected` counts its rows even without a body.
    const counted = s.counted ? (rows[0] as ResultRow).n : 0;
    return { status: s.mergeStatus === true && (rows[0] as ResultRow).inserted === 0 ? 200 : s.status, body: null, n: counted, contentRange: null };
  }
  const row = rows[0] as ResultRow;
  const n = row.n;
  if (s.singular && n !== 1) throw REST_ERRORS.singular(n);
  let contentRange: string | null = null;
  let status = s.mergeStatus === true && row.inserted === 0 ? 200 : s.status;
  if (s.contentRange) {
    // A counted call of a function without result columns: what it returned is the total.
    const total = row.total !== undefined && row.total !== null ? String(row.total) : s.count !== null ? String(n) : '*';
    contentRange = n === 0 ? `*/${total}` : `${p.offset}-${p.offset + n - 1}/${total}`;
    // A Range header's page that is not the whole result: 206 (PostgREST); an empty page
    // past the end stays 200 (the interface has no 416).
    if (p.ranged && n > 0 && total !== '*' && n < Number(total)) status = 206;
  }
  let body = row.body;
  if (s.csvHeader !== undefined) body = n === 0 ? s.csvHeader : s.csvHeader + '\n' + body;
  return { status, body, n, contentRange };
}

/** Thrown inside the transaction to roll it back after a successful statement (`tx=rollback`). */
class RolledBack extends Error {
  readonly out: Outcome;
  constructor(out: Outcome) {
    super('rolled back on request (Prefer: tx=rollback)');
    this.out = out;
  }
}

/**
 * One operation, one transaction, as the caller. A singular write (`Accept:
 * application/vnd.pgrst.object+json`), a request under `handling=strict; max-affected=N` or
 * one that ends in a rollback (`tx=rollback`) must be able to roll back after seeing its
 * rows, so it takes the two-step transaction; everything else is one round trip.
 */
export async function execute(db: Db, ctx: RequestContext, p: Prepared, opts: ContextOptions = {}): Promise<Outcome> {
  try {
    if ((p.statement.write && p.statement.singular) || p.rollback === true || p.maxAffected !== undefined) {
      return await db.transactionWithContext(ctx, async (c) => {
        const out = outcome(p, await run(c, p).execute());
        if (p.maxAffected !== undefined && out.n > p.maxAffected) throw REST_ERRORS.maxAffected();
        if (p.rollback === true) throw new RolledBack(out);
        return out;
      });
    }
    return outcome(p, await db.withContext(ctx, (c) => run(c, p), opts));
  } catch (err) {
    if (err instanceof RolledBack) return err.out;
    // A merging upsert with two rows of one key: the request's own mistake, not the server's.
    if (p.statement.mergeStatus === true && (err as { code?: unknown } | null)?.code === '21000') throw REST_ERRORS.upsertSameRowTwice(err);
    throw pgErrorToAppError(err);
  }
}

/**
 * The execution plan of a prepared operation (`Accept: application/vnd.pgrst.plan…`, under
 * REST_PLAN_ENABLED): EXPLAIN of the very statement with the request's values, as the caller.
 * Without `analyze` nothing runs, so a write plans without writing; with it the statement
 * runs, as PostgREST runs it (a write is kept).
 * `wal` needs `analyze` and is dropped without it. JSON: the plan document; text: its lines.
 */
export async function explain(db: Db, ctx: RequestContext, p: Prepared, plan: PlanRequest): Promise<string> {
  const analyze = plan.options.includes('analyze');
  const options = [...plan.options.filter((o) => o !== 'wal' || analyze), ...(plan.format === 'json' ? ['format json'] : [])];
  const text = (options.length ? `explain (${options.join(', ')}) ` : 'explain ') + p.statement.text;
  let rows: readonly postgres.Row[];
  try {
    rows = await db.withContext(ctx, (c) => c.unsafe(text, p.params, PREPARED));
  } catch (err) {
    throw pgErrorToAppError(err);
  }
  if (plan.format === 'text') return rows.map((r) => String(r['QUERY PLAN'])).join('\n');
  const doc: unknown = rows[0]['QUERY PLAN'];
  return typeof doc === 'string' ? doc : JSON.stringify(doc);
}
