/**
 * The function catalog cache: `edge_private.catalog()` (one round trip, one JSON document)
 * read into a Map and swapped in whole. It reloads on NOTIFY `plinth_cache` with payload
 * `functions` (the trigger on edge.functions, POST /functions/v1/_refresh, on every
 * instance) and `rest` (DDL in `public`: a plv8 function created, replaced or dropped).
 * Loads are coalesced: calls during a load make one more load after it.
 *
 * A `plv8` entry carries its compiled call: `public.<name>($1::text::jsonb)`, shaped as RPC
 * shapes (bare value, array for sets, null for void), built by REST's `jsonCallStatement`.
 */
import type { Sql } from '../core/db.ts';
import type { Logger } from '../core/log.ts';
import { Reloading } from '../core/reloading.ts';
import { jsonCallStatement, type Statement } from '../rest/prepare.ts';

export interface FunctionEntry {
  readonly name: string;
  readonly runtime: 'deno' | 'plv8' | null;
  readonly status: string | null;
  /** A null verify_jwt counts as true: the safe reading. */
  readonly verifyJwt: boolean;
  /** plv8 with a resolvable public.<name>(jsonb): the statement; otherwise null. */
  readonly statement: Statement | null;
}

interface RawEntry {
  name: string;
  runtime: 'deno' | 'plv8' | null;
  status: string | null;
  verify_jwt: boolean | null;
  fn: { returns_set: boolean; return_kind: 'void' | 'composite' | 'scalar'; volatility: 'i' | 's' | 'v' } | null;
}

export type FunctionCatalog = ReadonlyMap<string, FunctionEntry>;

/** SQLSTATEs meaning the edge schema is not there (its migration has not run): an empty catalog. */
const MISSING = new Set(['42P01', '3F000', '42883']);

export async function loadFunctionCatalog(sql: Sql, log: Logger): Promise<FunctionCatalog> {
  let raw: RawEntry[];
  try {
    const [row] = await sql`select edge_private.catalog()::text as c`;
    raw = JSON.parse(row.c as string) as RawEntry[];
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && MISSING.has(code)) {
      log.warn({ code }, 'edge.functions is missing (migrations not applied?): no functions');
      return new Map();
    }
    throw err;
  }
  const out = new Map<string, FunctionEntry>();
  for (const r of raw) {
    let statement: Statement | null = null;
    if (r.runtime === 'plv8' && r.fn !== null) {
      statement = jsonCallStatement(r.name, { returnsSet: r.fn.returns_set, returnKind: r.fn.return_kind, volatility: r.fn.volatility });
    }
    out.set(r.name, { name: r.name, runtime: r.runtime, status: r.status, verifyJwt: r.verify_jwt !== false, statement });
  }
  return out;
}

/** The holder: the current catalog, coalesced reloads, an atomic swap. */
export class FunctionCache extends Reloading<FunctionCatalog> {
  constructor(sql: Sql, log: Logger) {
    super(() => loadFunctionCatalog(sql, log));
  }
}
