/**
 * The REST planner: a parsed request and the catalog → what to run. It resolves names
 * (relations, columns, embeds' relationships, RPC overloads), checks write bodies, and decides
 * the response (status, body or none, Content-Range, caching). It writes no SQL text: that is
 * sql/build.ts.
 */
import { ERRORS, type AppError } from '../core/errors.ts';
import type { Catalog, Column, Func, Relation, Relationship } from './catalog.ts';
import type { EmbedItem, ParsedQuery, SelectItem, SelectNode } from './grammar.ts';
import type { Prefer } from './prefer.ts';
import { REST_ERRORS } from './errors.ts';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
export type Param = string | null;

/** What a compiled statement is and how its one result row becomes a response. */
export interface Plan {
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
}

/** A plan plus the values of one request: ready to run on any connection. */
export interface Prepared {
  readonly plan: Plan;
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

/**
 * The items of one select level, each output name once. Two items with one output name would
 * give a JSON object with that key twice (parsers keep the last): refused, as PostgREST does;
 * aliases tell them apart. A plain column written again exactly as before (`id,id`) has the
 * same value: it is selected once, as PostgREST answers it.
 */
export function outputItems(node: SelectNode): readonly SelectItem[] {
  if (node.items.length < 2) return node.items;
  const seen = new Map<string, SelectItem>();
  let repeated = false;
  for (const item of node.items) {
    // `*` and spreads are checked apart (checkSpreadNames); an empty embed adds no key.
    if (item.kind === 'star' || (item.kind === 'embed' && (item.spread || item.select.items.length === 0))) continue;
    const name =
      item.kind === 'column' ? (item.alias ?? (item.aggregate !== undefined ? item.aggregate : (item.key ?? item.name))) : (item.alias ?? item.relation);
    const before = seen.get(name);
    if (before === undefined) seen.set(name, item);
    else if (item.kind === 'column' && item.aggregate === undefined && JSON.stringify(item) === JSON.stringify(before)) repeated = true;
    else throw REST_ERRORS.duplicateName(name);
  }
  if (!repeated) return node.items;
  const kept: SelectItem[] = [];
  for (const item of node.items) {
    if (item.kind !== 'column' || !kept.some((k) => JSON.stringify(k) === JSON.stringify(item))) kept.push(item);
  }
  return kept;
}

/** The names spreads bring into a level must not meet each other or the level's own items. */
export function checkSpreadNames(node: SelectNode, spread: readonly string[]): void {
  const seen = new Set<string>();
  for (const item of node.items) {
    if (item.kind === 'column') seen.add(item.alias ?? (item.aggregate !== undefined ? item.aggregate : (item.key ?? item.name)));
    else if (item.kind === 'embed' && !item.spread && item.select.items.length > 0) seen.add(item.alias ?? item.relation);
  }
  for (const name of spread) {
    if (seen.has(name)) throw REST_ERRORS.duplicateName(name);
    seen.add(name);
  }
}

export function column(rel: Relation, name: string): Column {
  const col = rel.columns.get(name) ?? rel.computed.get(name);
  if (col === undefined || col.name === '') throw REST_ERRORS.unknownColumn(name, rel.name);
  return col;
}

/**
 * An embed named by a foreign key instead of a table (PostgREST): this table's key by its
 * name or its one column (`parent_id(*)`: the parent), or another table's key to this one by
 * its name.
 */
function byKeyName(cat: Catalog, rel: Relation, name: string): Relationship[] {
  const out: Relationship[] = [];
  for (const fk of rel.outgoing) {
    if (fk.name === name || (fk.fromCols.length === 1 && fk.fromCols[0] === name)) {
      for (const r of cat.relationships(rel, fk.to)) if (r.cardinality === 'm2o' && r.constraint === fk.name) out.push(r);
    }
  }
  for (const fk of rel.incoming) {
    if (fk.name === name) {
      for (const r of cat.relationships(rel, fk.from)) if (r.cardinality === 'o2m' && r.constraint === fk.name) out.push(r);
    }
  }
  return out;
}

/** The hint that names a relationship in the ambiguity message: its key, or its junction. */
function hintOf(r: Relationship): string {
  return r.junction === undefined ? r.constraint : r.junction.rel.name;
}

/**
 * Picks the relationship an embed means. A hint keeps those whose foreign key has that name,
 * whose key columns include it, or (many-to-many) whose junction has that name or whose
 * junction key to this table does. A
 * self-reference gives the same key both ways: the children (one-to-many), or the parent
 * (many-to-one) when the hint names a column. None: `invalid embed in request`; several: the
 * message names the hints.
 */
export function resolveEmbed(cat: Catalog, rel: Relation, item: EmbedItem): Relationship {
  let found = cat.relationships(rel, item.relation);
  if (found.length === 0) found = byKeyName(cat, rel, item.relation);
  const hint = item.hint;
  let byColumn = false;
  if (hint !== undefined) {
    found = found.filter((r) => {
      if (r.junction !== undefined) return r.junction.rel.name === hint || r.constraint === hint;
      if (r.constraint === hint) return true;
      const col = r.pairs.some(([mine, theirs]) => (r.cardinality === 'm2o' ? mine : theirs) === hint);
      if (col) byColumn = true;
      return col;
    });
  }
  if (found.length === 2 && found[0].constraint === found[1].constraint && found[0].target === rel && found[0].junction === undefined && found[1].junction === undefined) {
    // Self-reference: m2o and o2m over one key.
    const want = byColumn ? 'm2o' : 'o2m';
    found = found.filter((r) => r.cardinality === want);
  }
  if (found.length === 1) return found[0];
  if (found.length === 0) throw REST_ERRORS.invalidEmbed();
  let hints = [...new Set(found.map((r) => item.relation + '!' + hintOf(r)))];
  // Two ways through one junction (a self many-to-many): its keys tell them apart.
  if (hints.length < found.length) hints = [...new Set(found.map((r) => item.relation + '!' + r.constraint))];
  hints.sort();
  throw REST_ERRORS.ambiguousEmbed(rel.name, item.relation, hints);
}

export interface TableRequest {
  readonly method: Method;
  /** Relation name as it came in the path. */
  readonly table: string;
  /** The raw query string (without '?'): the grammar needs repeated keys as sent. */
  readonly query: string;
  /** Parsed JSON body (POST, PATCH); undefined when absent. */
  readonly body: unknown;
  /** The body's JSON text when the caller has it (saves a stringify). */
  readonly bodyText?: string;
  readonly prefer: Prefer;
  readonly singular: boolean;
  /** GET: `Accept: text/csv`. */
  readonly csv?: boolean;
  /** GET: a `Range: from-to` header (`to` null: open). Intersected with limit/offset. */
  readonly range?: { readonly from: number; readonly to: number | null } | null;
  /** End the transaction with a rollback (`Prefer: tx=rollback` where REST_TX_END allows, or REST_TX_END=rollback). */
  readonly rollback?: boolean;
}

export function bodyError(): AppError {
  return ERRORS.invalidBody();
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The columns a write body names, checked against the relation; sorted (shape key). */
export function bodyColumns(rel: Relation, rows: readonly Record<string, unknown>[]): string[] {
  const seen = new Set<string>();
  for (const row of rows) for (const k in row) seen.add(k);
  const cols = [...seen].sort();
  for (const c of cols) if (!rel.columns.has(c)) throw REST_ERRORS.unknownColumn(c, rel.name);
  return cols;
}

/** limit/offset ∩ the Range header's rows (both absolute, as PostgREST intersects them). */
export function withRange(q: ParsedQuery, range: { readonly from: number; readonly to: number | null }): ParsedQuery {
  const qFrom = q.offset ?? 0;
  const qTo = q.limit === null ? Infinity : qFrom + q.limit - 1;
  const from = Math.max(qFrom, range.from);
  const to = Math.min(qTo, range.to ?? Infinity);
  return {
    ...q,
    offset: from === 0 ? null : from,
    limit: to === Infinity ? null : Math.max(0, to - from + 1),
  };
}

export interface RpcRequest {
  readonly method: 'GET' | 'POST';
  readonly name: string;
  /** POST: the parsed JSON body (an object, or undefined for none). */
  readonly body?: unknown;
  readonly bodyText?: string;
  /**
   * The raw query string. GET: a parameter the function takes is an argument; for a function
   * whose result has columns, the others shape the result (filters, select, order, paging)
   * as on a table. POST: all of it shapes the result.
   */
  readonly query?: string;
  /** `Prefer: count=…`: the result is counted (always exactly) and answers Content-Range. */
  readonly count?: Prefer['count'];
}

/**
 * The columns of a set-returning function's result, as a relation the query string can
 * filter, select and order: the table when it returns `setof` a table of `public` (embeds
 * then work as on the table), else its `returns table (…)` or OUT columns. null: a function
 * whose result has no columns to address (a scalar, void, a single row).
 */
export function resultRelation(cat: Catalog, fn: Func): Relation | null {
  if (!fn.returnsSet || fn.returnKind !== 'composite') return null;
  const known = results.get(fn);
  if (known !== undefined) return known;
  let rel: Relation | null = null;
  const t = fn.returnType;
  if (t.cast.startsWith('public.')) rel = cat.relations.get(t.base) ?? null;
  if (rel === null && fn.outputs.length > 0) {
    const columnList: Column[] = fn.outputs.map((a) => ({
      name: a.name,
      type: a.type,
      cast: a.cast,
      base: a.base,
      category: a.category,
      elem: a.elem,
      nullable: true,
      hasDefault: false,
      generated: true,
      description: null,
    }));
    rel = {
      name: fn.name,
      kind: 'f',
      insertable: false,
      updatable: false,
      deletable: false,
      pk: [],
      uniques: [],
      columns: new Map(columnList.map((c) => [c.name, c])),
      columnList,
      description: null,
      qname: fn.qname,
      outgoing: [],
      incoming: [],
      computed: new Map(),
    };
  }
  results.set(fn, rel);
  return rel;
}
const results = new WeakMap<Func, Relation | null>();

/** The names any function of that name takes: on GET, these parameters are arguments. */
export function argumentNames(cat: Catalog, name: string): ReadonlySet<string> {
  const set = new Set<string>();
  for (const fn of cat.functions.get(name) ?? []) for (const a of fn.inputs) if (a.name !== '') set.add(a.name);
  return set;
}

/** Whether some function of that name has a result the query string can shape. */
export function hasResultColumns(cat: Catalog, name: string): boolean {
  return (cat.functions.get(name) ?? []).some((fn) => resultRelation(cat, fn) !== null);
}

/**
 * Resolve by name and the set of argument names given (docs/api/rest.md): a candidate takes
 * every given name and is given every input without a default. None with that name in
 * public → 404 `function not found`; no candidate or several → 400 `invalid request`.
 * A function whose only input is an unnamed json/jsonb argument takes the whole POST body.
 */
export function resolveFunction(cat: Catalog, name: string, given: readonly string[], post: boolean): { fn: Func; wholeBody: boolean } {
  const overloads = cat.functions.get(name);
  if (overloads === undefined) throw REST_ERRORS.functionNotFound(name);
  const givenSet = new Set(given);
  const matches: Func[] = [];
  for (const fn of overloads) {
    let ok = true;
    let named = 0;
    for (const a of fn.inputs) {
      if (a.name !== '' && givenSet.has(a.name)) named++;
      else if (!a.hasDefault) ok = false;
    }
    if (ok && named === givenSet.size) matches.push(fn);
  }
  if (matches.length === 1) return { fn: matches[0], wholeBody: false };
  if (matches.length === 0 && post) {
    const raw = overloads.filter(
      (fn) => fn.inputs.length === 1 && fn.inputs[0].name === '' && (fn.inputs[0].base === 'json' || fn.inputs[0].base === 'jsonb'),
    );
    if (raw.length === 1) return { fn: raw[0], wholeBody: true };
  }
  throw ERRORS.invalidRequest();
}

export function maxAgeOf(fn: Pick<Func, 'volatility'>): number | null {
  return fn.volatility === 's' ? 60 : fn.volatility === 'i' ? 3600 : null;
}

export function rpcPlan(fn: Pick<Func, 'volatility'>, text: string): Plan {
  return {
    text,
    status: 200,
    returnsBody: true,
    contentRange: false,
    count: null,
    singular: false,
    write: false,
    maxAge: maxAgeOf(fn),
  };
}
