/** The query AST: the nodes the grammar produces, its errors, limits and casts. (The whole grammar: ../grammar.ts.) */

export const INVALID_REQUEST = 'invalid request';
export const INVALID_EMBED = 'invalid embed in request';

/** A syntax error in the query. `message` (= `publicMessage`) is what the client sees, with status 400. */
export class GrammarError extends Error {
  readonly status = 400;
  readonly publicMessage: string;
  constructor(publicMessage: string) {
    super(publicMessage);
    this.name = 'GrammarError';
    this.publicMessage = publicMessage;
  }
}

/** Embeds may nest this many levels below the top-level table. */
export const MAX_EMBED_DEPTH = 3;
/** Nesting limit for and()/or() groups (guards the recursion; not part of the API). */
export const MAX_LOGIC_DEPTH = 32;
/** Aliases become output names, which PostgreSQL would cut at 63 bytes: longer is refused. */
export const MAX_ALIAS_BYTES = 63;

/** The casts `select` accepts (`col::name`), each to one fixed built-in type. */
export const CASTS: Readonly<Record<string, string>> = Object.freeze({
  text: 'pg_catalog.text',
  varchar: 'pg_catalog.varchar',
  int: 'pg_catalog.int4',
  integer: 'pg_catalog.int4',
  int2: 'pg_catalog.int2',
  smallint: 'pg_catalog.int2',
  int4: 'pg_catalog.int4',
  int8: 'pg_catalog.int8',
  bigint: 'pg_catalog.int8',
  numeric: 'pg_catalog.numeric',
  float4: 'pg_catalog.float4',
  real: 'pg_catalog.float4',
  float8: 'pg_catalog.float8',
  bool: 'pg_catalog.bool',
  boolean: 'pg_catalog.bool',
  date: 'pg_catalog.date',
  time: 'pg_catalog.time',
  timestamp: 'pg_catalog.timestamp',
  timestamptz: 'pg_catalog.timestamptz',
  interval: 'pg_catalog.interval',
  uuid: 'pg_catalog.uuid',
  json: 'pg_catalog.json',
  jsonb: 'pg_catalog.jsonb',
});

// ---------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------

/** A bound value: a scalar as text, or (for `in`) a list bound as one text[] parameter. */
export type Value = string | string[];

/** One `->` / `->>` step of a JSON path; the key is a bound value, `values[slot]`. */
export interface JsonStep {
  readonly arrow: '->' | '->>';
  readonly slot: number;
  /** The key is an integer: an array index (bound as int4). */
  readonly index: boolean;
}

/** Optional fields are present only when written, so a plain column is `{kind, name}`. */
export interface ColumnItem {
  readonly kind: 'column';
  readonly name: string;
  /** `alias:`: the output name. */
  readonly alias?: string;
  /** JSON path steps (never empty when present). */
  readonly path?: readonly JsonStep[];
  /** With a path and no alias: the last key, the output name (as PostgREST names it). */
  readonly key?: string;
  /** `::cast`: a key of CASTS (after an aggregate: of its result). */
  readonly cast?: string;
  /** `.sum()` … after the field, or `count()` alone (then `name` is `*`): an aggregate. */
  readonly aggregate?: Aggregate;
}

/** The aggregates `select` takes (`col.sum()`, `count()`), when the catalog allows them. */
export type Aggregate = 'count' | 'sum' | 'avg' | 'max' | 'min';
export const AGGREGATES: ReadonlySet<string> = new Set(['count', 'sum', 'avg', 'max', 'min']);

export interface EmbedItem {
  readonly kind: 'embed';
  readonly relation: string;
  readonly select: SelectNode;
  readonly alias?: string;
  /** `!hint`: a foreign key's name, one of its columns, or a junction's name. */
  readonly hint?: string;
  /** `...relation(…)`: the related row's columns flattened into this row. */
  readonly spread?: true;
  /** `!inner`: only rows with at least one related row (`!left`, the default, is not kept). */
  readonly inner?: true;
}

export type SelectItem = { readonly kind: 'star' } | ColumnItem | EmbedItem;

export interface SelectNode {
  readonly items: readonly SelectItem[];
}

/** Comparison / pattern / array / range operators: `column <sqlop> $slot`. */
export type BinaryOp =
  | 'eq'
  | 'neq'
  | 'gt'
  | 'gte'
  | 'lt'
  | 'lte'
  | 'like'
  | 'ilike'
  | 'cs'
  | 'cd'
  | 'ov'
  | 'sl'
  | 'sr'
  | 'nxl'
  | 'nxr'
  | 'adj';
export type FtsOp = 'fts' | 'plfts' | 'phfts' | 'wfts';
export type IsValue = 'null' | 'true' | 'false' | 'unknown';
export type FilterOp = BinaryOp | FtsOp | 'in' | 'is';

export interface FilterCommon {
  readonly kind: 'filter';
  /** As written; may be anything (e.g. `relation.column`): the compiler checks it. */
  readonly column: string;
  /** `not.` prefix: wrap the predicate in NOT (…). */
  readonly negated: boolean;
  /** `column->a->>b`: JSON path steps (never empty when present); their slots come before the value's. */
  readonly path?: readonly JsonStep[];
}
/** `values[slot]` is a string (like/ilike already have `*` → `%`). */
export interface BinaryFilter extends FilterCommon {
  readonly op: BinaryOp;
  readonly slot: number;
  /** `op(any)` / `op(all)`: the value is an array literal `{…}`, compared with any / all of it. */
  readonly quant?: 'any' | 'all';
}
/** `values[slot]` is a string[]; compile as `column = any($slot)` (empty list → false). */
export interface InFilter extends FilterCommon {
  readonly op: 'in';
  readonly slot: number;
}
/** No value slot: IS NULL / TRUE / FALSE / UNKNOWN is part of the shape. */
export interface IsFilter extends FilterCommon {
  readonly op: 'is';
  readonly value: IsValue;
}
/** `values[slot]` is the query text; `langSlot`, when not null, is the regconfig name. */
export interface FtsFilter extends FilterCommon {
  readonly op: FtsOp;
  readonly slot: number;
  readonly langSlot: number | null;
}
export type FilterNode = BinaryFilter | InFilter | IsFilter | FtsFilter;

export interface LogicNode {
  readonly kind: 'logic';
  readonly op: 'and' | 'or';
  readonly negated: boolean;
  /** Never empty. */
  readonly children: readonly (FilterNode | LogicNode)[];
}

export interface OrderTerm {
  readonly column: string;
  /** JSON path steps (never empty when present). */
  readonly path?: readonly JsonStep[];
  readonly direction: 'asc' | 'desc';
  /** null: PostgreSQL's default for the direction. */
  readonly nulls: 'first' | 'last' | null;
}

export interface ParsedQuery {
  readonly select: SelectNode;
  /** Top-level column filters, in parameter order; all ANDed. */
  readonly filters: FilterNode[];
  /** `or` / `and` / `not.or` / `not.and` groups, in parameter order; ANDed with the filters. */
  readonly logic: LogicNode[];
  readonly order: OrderTerm[];
  readonly limit: number | null;
  readonly offset: number | null;
  /**
   * Bound values, slot-indexed. Slots are assigned filters first, then logic groups,
   * then JSON path keys of `select`, then those of `order`, each depth-first left to right
   * (a filter: its path keys, then its value; fts: term, then language), so two queries
   * with the same `shapeOf` have the same slot layout and the same `values.length`.
   */
  readonly values: Value[];
  /**
   * SUPABASE_COMPAT=true only: the filters, order and page of embedded levels
   * (`books.title=eq.x`, `books.order=title.desc`, `books.limit=2`), in parameter order;
   * their values (limit and offset included, as text) take the slots after all the others.
   * Absent in the default mode, where a dotted key is a column's name.
   */
  readonly embedded?: readonly EmbeddedQuery[];
}

/** One embedded level's conditions, order and page (SUPABASE_COMPAT=true). */
export interface EmbeddedQuery {
  /** The embeds' output names (alias, or relation), from the top level down; never empty. */
  readonly path: readonly string[];
  readonly filters: FilterNode[];
  readonly logic: LogicNode[];
  readonly order: OrderTerm[];
  /** Slots of limit and offset (their values bound as text); null: none. */
  readonly limit: number | null;
  readonly offset: number | null;
}

/** The select used when `select` is absent or blank. Shared and frozen: do not mutate. */
export const STAR_SELECT: SelectNode = Object.freeze({
  items: Object.freeze([Object.freeze({ kind: 'star' as const })]),
});
