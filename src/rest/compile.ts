/**
 * The REST compiler: (catalog, operation) → one SQL statement whose single row carries
 * the response body as JSON text built by PostgreSQL (`body`), the number of rows in it
 * (`n`) and, when a count was asked for, the total (`total`).
 *
 * - Identifiers come only from the catalog, through `ident`; values only as `$n`
 *   parameters, all of them text: a filter value is `$n::text::<column type>`, an `in`
 *   list one array literal `$n::text::<type>[]`, a write body one JSON document that
 *   `json_populate_recordset` turns into typed rows, RPC arguments likewise through
 *   `json_to_record`. Typing every parameter as text keeps postgres.js from applying its
 *   own serializers (booleans, dates, json) to what are strings from the URL.
 * - The SQL text depends only on the shape of the request (grammar `shapeOf`, plus the
 *   method, relation, body columns and Prefer), so it is cached per catalog by that key,
 *   and the same text is a prepared statement on every connection.
 * - Parameter layout: the query's value slots first ($1…$V, slot order of the grammar),
 *   then limit, offset (when present), then the body (writes).
 */
import {
  GrammarError,
  INVALID_EMBED,
  SQL_BINARY_OPS,
  SQL_FTS_FUNCS,
  parseQuery,
  shapeOf,
  type FilterNode,
  type LogicNode,
  type ParsedQuery,
  type Prefer,
  type SelectItem,
  type SelectNode,
  type Value,
} from './grammar.ts';
import { ident, literal, type Catalog, type Column, type Func, type Relation } from './catalog.ts';
import { AppError, ERRORS } from '../core/errors.ts';
import { checkArgs, checkFilters, checkRows, checkSelect } from './limits.ts';

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
}

/** A plan plus the values of one request: ready to run on any connection. */
export interface Prepared {
  readonly plan: Plan;
  readonly params: Param[];
  /** Offset of the first row, for Content-Range. */
  readonly offset: number;
}

export const MSG = {
  relationNotFound: 'relation not found',
  functionNotFound: 'function not found',
  unknownColumn: 'unknown column in request',
  singular: 'JSON object requested, multiple (or no) rows returned',
} as const;

export const REST_ERRORS = {
  relationNotFound: () => new AppError(404, MSG.relationNotFound),
  functionNotFound: () => new AppError(404, MSG.functionNotFound),
  unknownColumn: () => new AppError(400, MSG.unknownColumn),
  invalidEmbed: () => new AppError(400, INVALID_EMBED),
  methodNotAllowed: () => new AppError(405, 'method not allowed'),
  singular: () => new AppError(406, MSG.singular),
} as const;

/** GrammarError (status 400, public message) → AppError; anything else unchanged. */
export function grammarToAppError(err: unknown): unknown {
  return err instanceof GrammarError ? new AppError(400, err.publicMessage, { cause: err }) : err;
}

/** Above this planner estimate, `count=estimated` keeps the estimate instead of counting. */
export const ESTIMATED_EXACT_LIMIT = 1000;

// ---------------------------------------------------------------------------
// values
// ---------------------------------------------------------------------------

/** An `in` list as one PostgreSQL array literal: every element quoted, `\` and `"` escaped. */
export function arrayLiteral(items: readonly string[]): string {
  let out = '{';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ',';
    out += '"' + items[i].replaceAll('\\', '\\\\').replaceAll('"', '\\"') + '"';
  }
  return out + '}';
}

function bindValues(values: readonly Value[], out: Param[]): void {
  for (const v of values) out.push(typeof v === 'string' ? v : arrayLiteral(v));
}

/** `$n` typed as text, cast to the type `cast` (no second cast for text). */
function castParam(n: number, cast: string): string {
  return cast === 'pg_catalog.text' ? `$${n}::text` : `$${n}::text::${cast}`;
}

// ---------------------------------------------------------------------------
// select lists and embeds
// ---------------------------------------------------------------------------

interface State {
  readonly cat: Catalog;
  /** Alias counter: _t0 is the top-level relation. */
  n: number;
}

function column(rel: Relation, name: string): Column {
  const col = rel.columns.get(name);
  if (col === undefined) throw REST_ERRORS.unknownColumn();
  return col;
}

function selectList(st: State, rel: Relation, node: SelectNode, alias: string): string {
  let out = '';
  for (const item of node.items) {
    if (out !== '') out += ', ';
    out += selectItem(st, rel, item, alias);
  }
  return out;
}

function selectItem(st: State, rel: Relation, item: SelectItem, alias: string): string {
  if (item.kind === 'star') return alias + '.*';
  if (item.kind === 'column') return alias + '.' + ident(column(rel, item.name).name);
  // Embed: one foreign key between the two tables, either way (interface §4.3, embedding rules).
  const found = st.cat.relationships(rel, item.relation);
  if (found.length !== 1) throw REST_ERRORS.invalidEmbed();
  const r = found[0];
  const k = ++st.n;
  const a = '_t' + k;
  const e = '_e' + k;
  const inner = selectList(st, r.target, item.select, a);
  let cond = '';
  for (const [mine, theirs] of r.pairs) {
    if (cond !== '') cond += ' and ';
    cond += `${a}.${ident(theirs)} = ${alias}.${ident(mine)}`;
  }
  const sub = `select ${inner} from ${r.target.qname} ${a} where ${cond}`;
  // many-to-one: the row or null; one-to-many: an array, [] when none (contract §9).
  return r.cardinality === 'm2o'
    ? `(select to_json(${e}) from (${sub}) ${e}) as ${ident(item.relation)}`
    : `(select coalesce(json_agg(${e}), '[]') from (${sub}) ${e}) as ${ident(item.relation)}`;
}

// ---------------------------------------------------------------------------
// filters
// ---------------------------------------------------------------------------

function filterSql(rel: Relation, f: FilterNode, alias: string): string {
  const col = column(rel, f.column);
  const c = alias + '.' + ident(col.name);
  let s: string;
  switch (f.op) {
    case 'is':
      s = `${c} is ${f.value}`;
      break;
    case 'in':
      s = `${c} = any($${f.slot + 1}::text::${col.cast}[])`;
      break;
    case 'like':
    case 'ilike':
      s = `${c} ${f.op} $${f.slot + 1}::text`;
      break;
    case 'fts':
    case 'plfts':
    case 'phfts':
    case 'wfts': {
      const lang = f.langSlot === null ? '' : `$${f.langSlot + 1}::text::regconfig, `;
      const doc = col.base === 'tsvector' ? c : `to_tsvector(${lang}${c})`;
      s = `${doc} @@ ${SQL_FTS_FUNCS[f.op]}(${lang}$${f.slot + 1}::text)`;
      break;
    }
    default:
      s = `${c} ${SQL_BINARY_OPS[f.op]} ${castParam(f.slot + 1, col.cast)}`;
  }
  return f.negated ? `not (${s})` : s;
}

function logicSql(rel: Relation, g: LogicNode, alias: string): string {
  const parts = g.children.map((ch) => (ch.kind === 'logic' ? logicSql(rel, ch, alias) : filterSql(rel, ch, alias)));
  const s = '(' + parts.join(g.op === 'or' ? ' or ' : ' and ') + ')';
  return g.negated ? `not ${s}` : s;
}

/** The WHERE condition ('' when none): filters and groups, all ANDed. */
function whereSql(rel: Relation, q: ParsedQuery, alias: string): string {
  const parts: string[] = [];
  for (const f of q.filters) parts.push(filterSql(rel, f, alias));
  for (const g of q.logic) parts.push(logicSql(rel, g, alias));
  return parts.join(' and ');
}

function orderSql(rel: Relation, q: ParsedQuery, alias: string): string {
  if (q.order.length === 0) return '';
  const parts = q.order.map((o) => {
    let s = `${alias}.${ident(column(rel, o.column).name)} ${o.direction}`;
    if (o.nulls !== null) s += ` nulls ${o.nulls}`;
    return s;
  });
  return ' order by ' + parts.join(', ');
}

/** `total` column for Prefer: count=…, over the same relation and filters, without paging. */
function countSql(rel: Relation, q: ParsedQuery, where: string, count: NonNullable<Prefer['count']>): string {
  const exact = `(select count(*) from ${rel.qname} _t0${where === '' ? '' : ' where ' + where})`;
  if (count === 'exact') return exact;
  const text = `select 1 from ${rel.qname} _t0${where === '' ? '' : ' where ' + where}`;
  const args: string[] = [];
  for (let i = 1; i <= q.values.length; i++) args.push(`$${i}::text`);
  const planned = `rest.planned_rows(${literal(text)}, array[${args.join(', ')}]::text[])`;
  if (count === 'planned') return planned;
  return `(select case when _p.n <= ${ESTIMATED_EXACT_LIMIT} then ${exact} else _p.n end from (select ${planned} as n) _p)`;
}

/** The outer select over a row source `_r`: body, n (and total). */
function outer(singular: boolean): string {
  return singular
    ? `select case when count(*) = 1 then (json_agg(_r) -> 0)::text end as body, count(*)::int4 as n`
    : `select coalesce(json_agg(_r), '[]')::text as body, count(*)::int4 as n`;
}

// ---------------------------------------------------------------------------
// table operations
// ---------------------------------------------------------------------------

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
}

function bodyError(): AppError {
  return ERRORS.invalidBody();
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The columns a write body names, checked against the relation; sorted (shape key). */
function bodyColumns(rel: Relation, rows: readonly Record<string, unknown>[]): string[] {
  const seen = new Set<string>();
  for (const row of rows) for (const k in row) seen.add(k);
  const cols = [...seen].sort();
  for (const c of cols) column(rel, c);
  return cols;
}

/** Compile (or fetch from the catalog's cache) and bind one table operation. */
export function prepareTable(cat: Catalog, req: TableRequest): Prepared {
  const rel = cat.relations.get(req.table);
  if (rel === undefined) throw REST_ERRORS.relationNotFound();
  let q: ParsedQuery;
  try {
    q = parseQuery(req.query);
  } catch (err) {
    throw grammarToAppError(err);
  }

  let columns: string[] = [];
  let bodyParam: string | null = null;
  if (req.method === 'POST') {
    if (!rel.insertable) throw REST_ERRORS.methodNotAllowed();
    const b = req.body;
    let rows: Record<string, unknown>[];
    if (Array.isArray(b)) {
      for (const r of b) if (!isPlainObject(r)) throw bodyError();
      rows = b as Record<string, unknown>[];
      bodyParam = req.bodyText ?? JSON.stringify(b);
    } else if (isPlainObject(b)) {
      rows = [b];
      bodyParam = '[' + (req.bodyText ?? JSON.stringify(b)) + ']';
    } else throw bodyError();
    columns = bodyColumns(rel, rows);
    checkRows(rel, rows);
  } else if (req.method === 'PATCH') {
    if (!rel.updatable) throw REST_ERRORS.methodNotAllowed();
    const b = req.body;
    if (!isPlainObject(b)) throw bodyError();
    columns = bodyColumns(rel, [b]);
    checkRows(rel, [b]);
    if (columns.length === 0) throw bodyError();
    bodyParam = req.bodyText ?? JSON.stringify(b);
  } else if (req.method === 'DELETE') {
    if (!rel.deletable) throw REST_ERRORS.methodNotAllowed();
  }
  if (req.method === 'PATCH' || req.method === 'DELETE') {
    // A filter is required (interface §4.3; contract §8), and paging a write is refused
    // rather than silently ignored.
    if (q.filters.length === 0 && q.logic.length === 0) throw ERRORS.invalidRequest();
    if (q.limit !== null || q.offset !== null) throw ERRORS.invalidRequest();
  }
  if (req.method !== 'POST') checkFilters(rel, q);

  const minimal = req.prefer.returnMinimal && req.method !== 'GET';
  const count = minimal ? null : req.prefer.count;
  const singular = req.singular && !minimal;
  const key =
    req.method + '\u0000' + rel.name + '\u0000' + shapeOf(q) + '\u0000' + columns.join('\u0001') + '\u0000' +
    (minimal ? 'm' : '') + (singular ? 's' : '') + (count ?? '');
  let plan = cat.cached<Plan>(key);
  if (plan === undefined) {
    checkSelect(cat, rel, q.select);
    plan = cat.remember(key, compileTable(cat, rel, req.method, q, columns, { minimal, count, singular }));
  }

  // POST takes only `select` from the query (filters, order and paging mean nothing there).
  const params: Param[] = [];
  if (req.method !== 'POST') bindValues(q.values, params);
  if (req.method === 'GET') {
    if (q.limit !== null) params.push(String(q.limit));
    if (q.offset !== null) params.push(String(q.offset));
  }
  if (bodyParam !== null) params.push(bodyParam);
  return { plan, params, offset: q.offset ?? 0 };
}

interface TableOptions {
  minimal: boolean;
  count: Prefer['count'];
  singular: boolean;
}

export function compileTable(cat: Catalog, rel: Relation, method: Method, q: ParsedQuery, columns: readonly string[], o: TableOptions): Plan {
  const st: State = { cat, n: 0 };
  let p = method === 'POST' ? 0 : q.values.length; // last parameter number used so far
  const where = method === 'POST' ? '' : whereSql(rel, q, '_t0');
  const whereClause = where === '' ? '' : ' where ' + where;
  const base = { count: o.count, singular: o.singular, maxAge: null };

  if (method === 'GET') {
    const list = selectList(st, rel, q.select, '_t0');
    let paging = '';
    if (q.limit !== null) paging += ` limit $${++p}::text::int8`;
    if (q.offset !== null) paging += ` offset $${++p}::text::int8`;
    let text = `${outer(o.singular)}`;
    if (o.count !== null) text += `, ${countSql(rel, q, where, o.count)}::int8 as total`;
    text += ` from (select ${list} from ${rel.qname} _t0${whereClause}${orderSql(rel, q, '_t0')}${paging}) _r`;
    return { ...base, text, status: 200, returnsBody: true, contentRange: true, write: false };
  }

  const cols = columns.map(ident).join(', ');
  let write: string;
  if (method === 'POST') {
    const b = ++p;
    // `{}` inserts a row of defaults: no column list at all (an empty one is a syntax error).
    const target = cols === '' ? rel.qname : `${rel.qname} (${cols})`;
    write = `insert into ${target} select ${cols} from json_populate_recordset(null::${rel.qname}, $${b}::text::json)`;
  } else if (method === 'PATCH') {
    const b = ++p;
    write = `update ${rel.qname} _t0 set (${cols}) = (select ${cols} from json_populate_record(null::${rel.qname}, $${b}::text::json))${whereClause}`;
  } else {
    write = `delete from ${rel.qname} _t0${whereClause}`;
  }
  const status = method === 'POST' ? 201 : 200;
  if (o.minimal) {
    // No RETURNING: a write the caller may not read back is still allowed (RLS SELECT policies
    // apply to RETURNING), as in PostgREST. PATCH and DELETE answer 204, POST 201.
    return { ...base, text: write, status: method === 'POST' ? 201 : 204, returnsBody: false, contentRange: false, write: true };
  }
  const list = selectList(st, rel, q.select, '_t0');
  let text = `with _w as (${write} returning ${method === 'POST' ? '*' : '_t0.*'}) ${outer(o.singular)}`;
  if (o.count !== null) text += `, count(*)::int8 as total`;
  text += ` from (select ${list} from _w _t0) _r`;
  return { ...base, text, status, returnsBody: true, contentRange: o.count !== null, write: true };
}

// ---------------------------------------------------------------------------
// RPC
// ---------------------------------------------------------------------------

export interface RpcRequest {
  readonly method: 'GET' | 'POST';
  readonly name: string;
  /** POST: the parsed JSON body (an object, or undefined for none). */
  readonly body?: unknown;
  readonly bodyText?: string;
  /** GET: the raw query string; every parameter is an argument. */
  readonly query?: string;
}

/**
 * Resolve by name and the set of argument names given (contract §9): a candidate takes
 * every given name and is given every input without a default. None with that name in
 * public → 404 `function not found`; no candidate or several → 400 `invalid request`.
 * A function whose only input is an unnamed json/jsonb argument takes the whole POST body.
 */
export function resolveFunction(cat: Catalog, name: string, given: readonly string[], post: boolean): { fn: Func; wholeBody: boolean } {
  const overloads = cat.functions.get(name);
  if (overloads === undefined) throw REST_ERRORS.functionNotFound();
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

function rpcCall(fn: Func, argSql: readonly string[]): string {
  return `${fn.qname}(${argSql.join(', ')})`;
}

/** Shape the call's result: bare value, array for sets, null for void (interface §4.4 rule 2). */
function rpcSelect(fn: Func, call: string, from: string): string {
  if (fn.returnsSet) {
    return `select coalesce(json_agg(_r), '[]')::text as body, count(*)::int4 as n from ${from === '' ? '' : from + ', '}${call} _r`;
  }
  const value = fn.returnKind === 'void' ? `concat('null', ${call}::text)` : `coalesce(to_json(${call})::text, 'null')`;
  return `select ${value} as body, 1 as n${from === '' ? '' : ' from ' + from}`;
}

function maxAgeOf(fn: Func): number | null {
  return fn.volatility === 's' ? 60 : fn.volatility === 'i' ? 3600 : null;
}

export function prepareRpc(cat: Catalog, req: RpcRequest): Prepared & { fn: Func } {
  if (req.method === 'POST') {
    const b = req.body === undefined ? {} : req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    const names = Object.keys(b).sort();
    const { fn, wholeBody } = resolveFunction(cat, req.name, names, true);
    if (!wholeBody) checkArgs(fn, Object.entries(b), true);
    const key = 'RPC\u0000' + fn.oid + '\u0000' + (wholeBody ? '\u0002' : names.join('\u0001'));
    let plan = cat.cached<Plan>(key);
    if (plan === undefined) {
      let text: string;
      if (wholeBody) text = rpcSelect(fn, rpcCall(fn, [`$1::text::${fn.inputs[0].cast}`]), '');
      else if (names.length === 0) text = rpcSelect(fn, rpcCall(fn, []), '');
      else {
        const args = names.map((n) => fn.inputs.find((a) => a.name === n)!);
        const defs = args.map((a) => `${ident(a.name)} ${a.cast}`).join(', ');
        const call = rpcCall(
          fn,
          args.map((a) => `${a.mode === 'v' ? 'variadic ' : ''}${ident(a.name)} => _a.${ident(a.name)}`),
        );
        text = rpcSelect(fn, call, `json_to_record($1::text::json) as _a(${defs})`);
      }
      plan = cat.remember(key, rpcPlan(fn, text));
    }
    const params: Param[] = wholeBody || names.length > 0 ? [req.bodyText ?? JSON.stringify(b)] : [];
    return { plan, params, offset: 0, fn };
  }

  // GET: query-string arguments, cast to the declared types.
  const sp = new URLSearchParams(req.query ?? '');
  const values = new Map<string, string>();
  for (const [k, v] of sp) {
    if (values.has(k)) throw ERRORS.invalidRequest();
    values.set(k, v);
  }
  const names = [...values.keys()].sort();
  const { fn } = resolveFunction(cat, req.name, names, false);
  checkArgs(fn, values, false);
  const key = 'RPCGET\u0000' + fn.oid + '\u0000' + names.join('\u0001');
  let plan = cat.cached<Plan>(key);
  if (plan === undefined) {
    const call = rpcCall(
      fn,
      names.map((n, i) => {
        const a = fn.inputs.find((x) => x.name === n)!;
        return `${a.mode === 'v' ? 'variadic ' : ''}${ident(a.name)} => ${castParam(i + 1, a.cast)}`;
      }),
    );
    plan = cat.remember(key, rpcPlan(fn, rpcSelect(fn, call, '')));
  }
  return { plan, params: names.map((n) => values.get(n)!), offset: 0, fn };
}

function rpcPlan(fn: Func, text: string): Plan {
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
