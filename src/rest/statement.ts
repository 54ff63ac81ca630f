/**
 * What the builder hands the executor: one SQL statement and how its one result row becomes
 * a response (`Statement`), and a statement with one request's values (`Prepared`). The
 * types between the last stages (sql/build.ts → prepare.ts → execute.ts); they hold no logic.
 */
import type { Prefer } from './prefer.ts';

export type Param = string | null;

/** One statement and how its single row (`body`, `n`, `total`) becomes a response. */
export interface Statement {
  readonly text: string;
  /** Status on success. */
  readonly status: number;
  /** false: the statement returns no row and the response has no body (return=minimal). */
  readonly returnsBody: boolean;
  /** GET and writes with a count: answer Content-Range. */
  readonly contentRange: boolean;
  readonly count: Prefer['count'];
  /** Accept: application/vnd.pgrst.object+json — body is the one object, n must be 1. */
  readonly singular: boolean;
  readonly write: boolean;
  /** RPC only: `max-age=N` for STABLE / IMMUTABLE functions. */
  readonly maxAge: number | null;
  /** Accept: text/csv (GET): the header row; `body` is then the CSV records. */
  readonly csvHeader?: string;
  /** A write without a body that still answers its row count (`n`), for `max-affected`. */
  readonly counted?: boolean;
  /** A call of a function returning void (SUPABASE_COMPAT=true answers it 204, as PostgREST). */
  readonly voidCall?: boolean;
  /** A merging upsert (SUPABASE_COMPAT=true): 200 instead of 201 when its row's `inserted` is 0. */
  readonly mergeStatus?: boolean;
}

/** A statement plus the values of one request: ready to run on any connection. */
export interface Prepared {
  readonly statement: Statement;
  readonly params: Param[];
  /** Offset of the first row, for Content-Range. */
  readonly offset: number;
  /** Paged by a `Range` header: a partial result with a known total answers 206. */
  readonly ranged?: boolean;
  /** `Prefer: tx=rollback` where allowed: run, answer, roll back. */
  readonly rollback?: boolean;
  /** `Prefer: handling=strict, max-affected=N`: more rows than N refuses and rolls back. */
  readonly maxAffected?: number;
}
