/**
 * The plan tree: what plan.ts resolves a request into, and all that sql/build.ts reads. Every
 * name in it has been checked against the catalog once, by the planner; the builder looks
 * nothing up (it takes qualified names, column references, relationships' key pairs and
 * parameter numbers as they are here). Values are never in the tree: a filter refers to its
 * value by slot (`$slot+1`), limit, offset and bodies by parameter number.
 *
 * As PostgREST's `ReadPlan` tree: a level (`ReadNode`) holds its relation, its select list,
 * and its own conditions, order and page. Today only the top level has conditions, order
 * and a page; an embed's are empty but under SUPABASE_COMPAT=true, where embedded filters,
 * order and paging are planned into them. Likewise an insert's `onConflict` is upsert's
 * (on_conflict, `Prefer: resolution=…`), null but under that setting.
 */
import type { Aggregate, FilterNode, JsonStep } from '../grammar.ts';
import type { Prefer } from '../prefer.ts';

/** A column of a level's row: a stored column by name, or a computed field (its function applied to the row). */
export interface ColumnRef {
  readonly name: string;
  /** The computed field's function, qualified; absent for a stored column. */
  readonly computed?: string;
}

/**
 * A column, or a JSON path into one, as a filter's or order term's operand. `cast` is the type
 * a value compared with it is cast to; `base` its base type (a `tsvector` is searched as is).
 */
export interface Operand {
  readonly column: ColumnRef;
  readonly path?: readonly JsonStep[];
  readonly cast: string;
  readonly base: string;
}

export interface FilterCondition {
  readonly kind: 'filter';
  readonly on: Operand;
  /** The grammar's node: operator, negation, quantifier and value slots. */
  readonly filter: FilterNode;
}

export interface LogicCondition {
  readonly kind: 'logic';
  readonly op: 'and' | 'or';
  readonly negated: boolean;
  readonly children: readonly Condition[];
}

export type Condition = FilterCondition | LogicCondition;

export interface OrderTerm {
  readonly on: Operand;
  readonly direction: 'asc' | 'desc';
  readonly nulls: 'first' | 'last' | null;
}

/** One item of a level's select list, with its output name(s) decided. */
export type SelectPlan = StarPlan | ColumnPlan | AggregatePlan | EmbedPlan;

export interface StarPlan {
  readonly kind: 'star';
}

export interface ColumnPlan {
  readonly kind: 'column';
  readonly column: ColumnRef;
  readonly path?: readonly JsonStep[];
  /** `::cast`: the built-in type (qualified) the value is cast to. */
  readonly cast?: string;
  readonly output: string;
  /** Selected as the column itself, under its own name (no alias, path or cast). */
  readonly bare: boolean;
}

export interface AggregatePlan {
  readonly kind: 'aggregate';
  readonly aggregate: Aggregate;
  /** null: `count()`, the group's rows. */
  readonly arg: { readonly column: ColumnRef; readonly path?: readonly JsonStep[] } | null;
  readonly cast?: string;
  readonly output: string;
}

/** How a related level's rows are joined to the row of the level above. */
export interface JoinPlan {
  /** [column of the level above (or of the junction's key to it), column of the related relation (or of the junction)]. */
  readonly pairs: readonly (readonly [string, string])[];
  /** Many-to-many: the junction, and its key pairs [junction column, related column]. */
  readonly junction?: { readonly qname: string; readonly pairs: readonly (readonly [string, string])[] };
}

export interface EmbedPlan {
  readonly kind: 'embed';
  /** The key of the embedded value in the row (not used by a spread). */
  readonly output: string;
  readonly toOne: boolean;
  /** `...rel(…)`: its columns flattened into this level (to-many: each an array). */
  readonly spread: boolean;
  /** `!inner`: this level keeps only rows with a related row. */
  readonly inner: boolean;
  /** `rel()`: nothing selected; it only narrows (with `!inner`). */
  readonly empty: boolean;
  readonly join: JoinPlan;
  readonly node: ReadNode;
}

/** One level of a read: a relation and what to read of it. */
export interface ReadNode {
  /** The relation, qualified and quoted as the catalog holds it. */
  readonly qname: string;
  readonly select: readonly SelectPlan[];
  /** The output names of the select list, in order (`*`: the relation's columns); the CSV header. */
  readonly names: readonly string[];
  /** An aggregate is selected: the level groups by its plain columns. */
  readonly grouped: boolean;
  readonly where: readonly Condition[];
  readonly order: readonly OrderTerm[];
  /** Parameter numbers ($n) of limit and offset (an embed's: text values of the query); null: none. */
  readonly limit: number | null;
  readonly offset: number | null;
}

/** A function's argument as the call names it. */
export interface CallArg {
  readonly name: string;
  readonly cast: string;
  readonly variadic: boolean;
}

/** A function call: where its arguments come from. */
export interface CallPlan {
  readonly qname: string;
  readonly returnsSet: boolean;
  readonly returnKind: 'void' | 'composite' | 'scalar';
  /** `max-age` of its answer: STABLE 60, IMMUTABLE 3600, else null. */
  readonly maxAge: number | null;
  readonly args:
    | { readonly kind: 'none' }
    /** The whole JSON body (or the edge function's payload) as the one argument, at `$param`. */
    | { readonly kind: 'whole'; readonly cast: string; readonly param: number }
    /** Named arguments from the JSON object at `$param`. */
    | { readonly kind: 'record'; readonly args: readonly CallArg[]; readonly param: number }
    /** Named arguments, each a text parameter from `$first` on. */
    | { readonly kind: 'params'; readonly args: readonly CallArg[]; readonly first: number };
}

/** GET of a relation, or of a function's result shaped as one (`from` a call). */
export interface ReadPlan {
  readonly kind: 'read';
  readonly node: ReadNode;
  readonly from: { readonly kind: 'relation' } | { readonly kind: 'call'; readonly call: CallPlan };
  readonly count: Prefer['count'];
  /** SUPABASE_COMPAT=true: `count=estimated` is the greater of the exact and the planned count (PostgREST without db-max-rows). */
  readonly estimateAtLeastExact?: boolean;
  /** The number of filter values ($1…$n): `count=planned` plans the filtered read with them. */
  readonly values: number;
  readonly singular: boolean;
  readonly csv: boolean;
}

/** Upsert's conflict target and action (SUPABASE_COMPAT=true). */
export interface OnConflict {
  readonly columns: readonly string[];
  readonly action: 'merge' | 'ignore';
}

/** POST, PATCH, DELETE of a relation. */
export interface MutatePlan {
  readonly kind: 'insert' | 'update' | 'delete';
  readonly qname: string;
  /** The body's columns (insert, update), sorted, each with its default expression (`missing=default`). */
  readonly columns: readonly { readonly name: string; readonly default: string | null }[];
  /** Parameter number of the JSON body; null for a delete. */
  readonly body: number | null;
  readonly where: readonly Condition[];
  /** POST: a key missing from a row takes the column default (`Prefer: missing=default`). */
  readonly missingDefault: boolean;
  readonly onConflict: OnConflict | null;
  /** The rows answered (their select list); null: `return=minimal`. */
  readonly returning: ReadNode | null;
  /** Minimal, but the row count is wanted (`max-affected`). */
  readonly counted: boolean;
  /** Minimal, with query values only the answer would have used (select's JSON keys, embedded filters): $1…$n, typed without being read. */
  readonly unread?: number;
  readonly count: Prefer['count'];
  readonly singular: boolean;
}

/** A function call answered as RPC answers: bare value, array for sets, null for void. */
export interface CallAnswerPlan {
  readonly kind: 'call';
  readonly call: CallPlan;
  /** `Prefer: count=`: Content-Range counts what it returned, exactly. */
  readonly counted: boolean;
}

export type ActionPlan = ReadPlan | MutatePlan | CallAnswerPlan;
