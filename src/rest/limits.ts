/**
 * Limits on REST, RPC and batch input that PostgreSQL would otherwise meet as errors of its
 * own — class 54 "program limit exceeded", or XX000 from the tsquery parser — which the error mapping
 * (docs/api/overview.md) turns into 500. Such input is refused here with 400 before anything reaches the database:
 * `invalid request` for the query string, `invalid request body` for the body. (JSON
 * nesting depth, MAX_JSON_DEPTH, is checked by the shell's JSON parser for every area.)
 * The values are named in the README ("Limits").
 *
 * Everything here walks what the grammar and the catalog already produced; nothing knows
 * SQL. The select check depends only on the request's shape, so the planner runs it when
 * it resolves a plan tree; the value checks run per request and cost a lookup per value unless
 * a column or argument is an array or a tsquery.
 */
import { ERRORS } from '../core/errors.ts';
import type { Catalog, Column, Func, Relation, TypeInfo } from './catalog.ts';
import type { FilterNode, LogicNode, ParsedQuery, SelectNode, Value } from './grammar.ts';

/** Items in one `select`, counted over every embed level (`*` and an embed count one each). */
export const MAX_SELECT_ITEMS = 300;
/** PostgreSQL's limit of entries in one target list (54011); `*` counts as the table's columns. */
export const MAX_TARGET_ENTRIES = 1664;
/** Array dimensions PostgreSQL accepts (MAXDIM; 54000 above). */
export const MAX_ARRAY_DIMS = 6;
/**
 * Negations in a row in a tsquery (`!` for `fts` and tsquery values, `-` for `wfts`): the
 * parser's operator stack holds 32, up to 3 of them pending binary operators (XX000
 * `tsquery stack too small` above).
 */
export const MAX_TSQUERY_NEGATIONS = 16;
/** Parentheses nesting in a tsquery (the parser recurses per level: 54001 near 8,000). */
export const MAX_TSQUERY_NESTING = 32;

// ---------------------------------------------------------------------------
// select
// ---------------------------------------------------------------------------

/** Refuses a select with more than MAX_SELECT_ITEMS items, or a list wider than PostgreSQL allows. */
export function checkSelect(cat: Catalog, rel: Relation, select: SelectNode): void {
  let total = 0;
  const walk = (r: Relation | undefined, node: SelectNode): void => {
    let entries = 0;
    for (const item of node.items) {
      total++;
      entries += item.kind === 'star' ? (r?.columns.size ?? 1) : 1;
      const inner = (item as { select?: SelectNode }).select;
      if (inner !== undefined) walk(cat.relations.get((item as { relation?: string }).relation ?? ''), inner);
    }
    if (entries > MAX_TARGET_ENTRIES) throw ERRORS.invalidRequest();
  };
  walk(rel, select);
  if (total > MAX_SELECT_ITEMS) throw ERRORS.invalidRequest();
}

// ---------------------------------------------------------------------------
// values
// ---------------------------------------------------------------------------

const BANG = 0x21;
const DASH = 0x2d;

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
}

/**
 * true when tsquery text would overflow PostgreSQL's tsquery parser: more than
 * MAX_TSQUERY_NEGATIONS `negation` characters in a row (whitespace between them does not
 * break the run) or, with `nesting`, parentheses deeper than MAX_TSQUERY_NESTING.
 */
export function tsqueryTooComplex(text: string, negation: number, nesting: boolean): boolean {
  let run = 0;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === negation) {
      if (++run > MAX_TSQUERY_NEGATIONS) return true;
      continue;
    }
    if (isWs(c)) continue;
    run = 0;
    if (!nesting) continue;
    if (c === 0x28) {
      if (++depth > MAX_TSQUERY_NESTING) return true;
    } else if (c === 0x29) depth--;
  }
  return false;
}

/** true when an array literal's text nests `{` deeper than `limit` (quoted elements skipped). */
export function bracesDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      for (i++; i < text.length; i++) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d) depth--;
  }
  return false;
}

function arraysDeeperThan(v: unknown, limit: number): boolean {
  if (!Array.isArray(v)) return false;
  if (limit === 0) return true;
  for (const x of v) if (arraysDeeperThan(x, limit - 1)) return true;
  return false;
}

/** true when a value (query text, or a JSON body value) for a column or argument of type `t` would hit a limit. */
function valueOverLimit(t: TypeInfo, v: unknown): boolean {
  if (t.category === 'A') {
    return typeof v === 'string' ? bracesDeeperThan(v, MAX_ARRAY_DIMS) : arraysDeeperThan(v, MAX_ARRAY_DIMS);
  }
  if (t.base === 'tsquery') return typeof v === 'string' && tsqueryTooComplex(v, BANG, true);
  return false;
}

function needsCheck(t: TypeInfo): boolean {
  return t.category === 'A' || t.base === 'tsquery';
}

/** The columns of a relation whose values need a look (arrays, tsquery); usually none. */
const checkedColumns = new WeakMap<Relation, ReadonlyMap<string, Column>>();
function columnsToCheck(rel: Relation): ReadonlyMap<string, Column> {
  let m = checkedColumns.get(rel);
  if (m === undefined) {
    const found = new Map<string, Column>();
    for (const [name, col] of rel.columns) if (needsCheck(col)) found.set(name, col);
    checkedColumns.set(rel, (m = found));
  }
  return m;
}

function checkFilter(rel: Relation, cols: ReadonlyMap<string, Column>, f: FilterNode, values: readonly Value[]): void {
  if (f.op === 'is') return;
  const v = values[f.slot];
  if (typeof v === 'string') {
    if (f.op === 'fts' && tsqueryTooComplex(v, BANG, true)) throw ERRORS.invalidRequest();
    if (f.op === 'wfts' && tsqueryTooComplex(v, DASH, false)) throw ERRORS.invalidRequest();
  }
  if (cols.size === 0) return;
  const col = cols.get(f.column);
  if (col === undefined || f.op === 'fts' || f.op === 'plfts' || f.op === 'phfts' || f.op === 'wfts') return;
  // An `in` list binds its elements quoted, each one element; only a tsquery element needs a look.
  if (typeof v === 'string' ? valueOverLimit(col, v) : col.base === 'tsquery' && v.some((x) => valueOverLimit(col, x))) {
    throw ERRORS.invalidRequest();
  }
}

function checkLogic(rel: Relation, cols: ReadonlyMap<string, Column>, g: LogicNode, values: readonly Value[]): void {
  for (const ch of g.children) {
    if (ch.kind === 'logic') checkLogic(rel, cols, ch, values);
    else checkFilter(rel, cols, ch, values);
  }
}

/** The filter values of a GET, PATCH or DELETE. */
export function checkFilters(rel: Relation, q: ParsedQuery): void {
  const cols = columnsToCheck(rel);
  for (const f of q.filters) checkFilter(rel, cols, f, q.values);
  for (const g of q.logic) checkLogic(rel, cols, g, q.values);
  // SUPABASE_COMPAT=true's embedded levels: their relation is resolved with the plan tree, so
  // every value is checked as a value for an array column might be (besides the tsquery checks).
  for (const e of q.embedded ?? []) {
    for (const f of e.filters) checkFilter(rel, ANY_ARRAY, f, q.values);
    for (const g of e.logic) checkLogic(rel, ANY_ARRAY, g, q.values);
  }
}

/** A column map in which every name is an array column (embedded levels' filters). */
const ARRAY_COLUMN: Column = { name: '', type: '', cast: '', base: '', category: 'A', elem: null, nullable: true, hasDefault: false, generated: false, description: null };
const ANY_ARRAY: ReadonlyMap<string, Column> = { get: () => ARRAY_COLUMN, size: 1 } as unknown as ReadonlyMap<string, Column>;

/** The rows of a POST or the object of a PATCH. */
export function checkRows(rel: Relation, rows: readonly Record<string, unknown>[]): void {
  const cols = columnsToCheck(rel);
  if (cols.size === 0) return;
  for (const row of rows) {
    for (const [name, col] of cols) {
      if (Object.hasOwn(row, name) && valueOverLimit(col, row[name])) throw ERRORS.invalidBody();
    }
  }
}

/** RPC arguments by name: JSON values (POST, `body`) or query-string text (GET). */
export function checkArgs(fn: Func, args: Iterable<readonly [string, unknown]>, body: boolean): void {
  if (!fn.inputs.some(needsCheck)) return;
  for (const [name, v] of args) {
    const a = fn.inputs.find((x) => x.name === name);
    if (a !== undefined && valueOverLimit(a, v)) throw body ? ERRORS.invalidBody() : ERRORS.invalidRequest();
  }
}
