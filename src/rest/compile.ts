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
  CASTS,
  GrammarError,
  INVALID_EMBED,
  SQL_BINARY_OPS,
  SQL_FTS_FUNCS,
  parseQuery,
  shapeOf,
  type EmbedItem,
  type FilterNode,
  type JsonStep,
  type LogicNode,
  type ParsedQuery,
  type Prefer,
  type SelectItem,
  type SelectNode,
  type Value,
} from './grammar.ts';
import { ident, literal, type Catalog, type Column, type Func, type Relation, type Relationship } from './catalog.ts';
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
  /** Accept: text/csv (GET): the header row; `body` is then the CSV records. */
  readonly csvHeader?: string;
}

/** A plan plus the values of one request: ready to run on any connection. */
export interface Prepared {
  readonly plan: Plan;
  readonly params: Param[];
  /** Offset of the first row, for Content-Range. */
  readonly offset: number;
  /** Paged by a `Range` header: a partial result with a known total answers 206. */
  readonly ranged?: boolean;
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
  unknownColumn: (column?: string, relation?: string) => new AppError(400, MSG.unknownColumn, { internal: { column, relation } }),
  invalidEmbed: () => new AppError(400, INVALID_EMBED),
  /** Several relationships fit an embed: the message names the hints that pick one. */
  ambiguousEmbed: (from: string, name: string, hints: readonly string[]) =>
    new AppError(400, `${INVALID_EMBED}: more than one relationship between ${from} and ${name}; use one of ${hints.join(', ')}`),
  schemaNotExposed: () => new AppError(406, 'only the public schema is exposed'),
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

/** A JSON path over a column expression; keys are parameters (`$n`, an int4 for an index). */
function jsonPath(expr: string, path: readonly JsonStep[]): string {
  for (const p of path) expr = `(${expr} ${p.arrow} $${p.slot + 1}::text${p.index ? '::int4' : ''})`;
  return expr;
}

/** A column, or a JSON path into one, as an operand: SQL, and the type values are cast to. */
function operand(rel: Relation, name: string, path: readonly JsonStep[] | undefined, alias: string): { sql: string; col: Column } {
  const col = column(rel, name);
  const c = alias + '.' + ident(col.name);
  if (path === undefined) return { sql: c, col };
  if (col.base !== 'json' && col.base !== 'jsonb') throw ERRORS.invalidRequest();
  // `->>` yields text; `->` json(b), compared as jsonb (json has no equality).
  if (path[path.length - 1].arrow === '->>') return { sql: jsonPath(c, path), col: JSON_TEXT };
  return { sql: `${jsonPath(c, path)}::jsonb`, col: JSON_JSONB };
}

const JSON_TEXT: Column = {
  name: '',
  type: 'text',
  cast: 'pg_catalog.text',
  base: 'text',
  category: 'S',
  elem: null,
  nullable: true,
  hasDefault: false,
  generated: false,
  description: null,
};
const JSON_JSONB: Column = { ...JSON_TEXT, type: 'jsonb', cast: 'pg_catalog.jsonb', base: 'jsonb', category: 'U' };

function column(rel: Relation, name: string): Column {
  const col = rel.columns.get(name);
  if (col === undefined) throw REST_ERRORS.unknownColumn(name, rel.name);
  return col;
}

/** What embeds add to the query level their select list is part of. */
interface Frame {
  /** Lateral joins of spread embeds, each ` left join lateral (…) _sK on true`. */
  joins: string;
  /** `!inner` embeds: `exists (…)` conditions, ANDed into that level's WHERE. */
  conds: string[];
}

function newFrame(): Frame {
  return { joins: '', conds: [] };
}

/**
 * The select list over `rel` aliased `alias`. Spread and `!inner` embeds add to `frame` (the
 * FROM clause and WHERE of the level this list is selected at); `names`, when given,
 * receives the output column names (the CSV header).
 */
function selectList(st: State, rel: Relation, node: SelectNode, alias: string, frame: Frame, names?: string[]): string {
  let out = '';
  for (const item of node.items) {
    if (out !== '') out += ', ';
    out += selectItem(st, rel, item, alias, frame, names);
  }
  return out;
}

function selectItem(st: State, rel: Relation, item: SelectItem, alias: string, frame: Frame, names?: string[]): string {
  if (item.kind === 'star') {
    if (names) for (const c of rel.columnList) names.push(c.name);
    return alias + '.*';
  }
  if (item.kind === 'column') {
    const col = column(rel, item.name);
    const out = item.alias ?? item.key ?? col.name;
    if (names) names.push(out);
    if (item.alias === undefined && item.path === undefined && item.cast === undefined) return alias + '.' + ident(col.name);
    let expr = alias + '.' + ident(col.name);
    if (item.path !== undefined) {
      if (col.base !== 'json' && col.base !== 'jsonb') throw ERRORS.invalidRequest();
      expr = jsonPath(expr, item.path);
    }
    if (item.cast !== undefined) expr = `(${expr})::${CASTS[item.cast]}`;
    return `${expr} as ${ident(out)}`;
  }
  // Embed: one relationship between the two tables (interface §4.3, embedding rules), picked
  // by the hint when there are several.
  const r = resolveEmbed(st.cat, rel, item);
  if (item.spread && !r.toOne) throw REST_ERRORS.invalidEmbed();
  const k = ++st.n;
  const a = '_t' + k;
  const e = '_e' + k;
  const innerFrame = newFrame();
  const innerNames = item.spread && names ? names : undefined;
  const inner = selectList(st, r.target, item.select, a, innerFrame, innerNames);
  let from = `${r.target.qname} ${a}`;
  let cond = '';
  if (r.junction === undefined) {
    for (const [mine, theirs] of r.pairs) {
      if (cond !== '') cond += ' and ';
      cond += `${a}.${ident(theirs)} = ${alias}.${ident(mine)}`;
    }
  } else {
    // many-to-many: through the junction; its keys are in its pk, so no row twice.
    const j = '_j' + k;
    let on = '';
    for (const [jc, tc] of r.junction.pairs) {
      if (on !== '') on += ' and ';
      on += `${j}.${ident(jc)} = ${a}.${ident(tc)}`;
    }
    from += ` join ${r.junction.rel.qname} ${j} on ${on}`;
    for (const [mine, jc] of r.pairs) {
      if (cond !== '') cond += ' and ';
      cond += `${j}.${ident(jc)} = ${alias}.${ident(mine)}`;
    }
  }
  for (const c of innerFrame.conds) cond += ' and ' + c;
  const sub = `select ${inner} from ${from}${innerFrame.joins} where ${cond}`;
  // `!inner`: this level keeps only rows with a related row (the same subquery, as EXISTS).
  if (item.inner) frame.conds.push(`exists (${sub})`);
  if (item.spread) {
    // A to-one relationship's columns, flattened into this row: null columns when none.
    const sp = '_s' + k;
    frame.joins += ` left join lateral (${sub}) ${sp} on true`;
    return sp + '.*';
  }
  const out = item.alias ?? item.relation;
  if (names) names.push(out);
  // to-one: the row or null; to-many: an array, [] when none (contract §9).
  return r.toOne
    ? `(select to_json(${e}) from (${sub}) ${e}) as ${ident(out)}`
    : `(select coalesce(json_agg(${e}), '[]') from (${sub}) ${e}) as ${ident(out)}`;
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

// ---------------------------------------------------------------------------
// filters
// ---------------------------------------------------------------------------

function filterSql(rel: Relation, f: FilterNode, alias: string): string {
  const { sql: c, col } = operand(rel, f.column, f.path, alias);
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
      s = f.quant === undefined ? `${c} ${f.op} $${f.slot + 1}::text` : `${c} ${f.op} ${f.quant}($${f.slot + 1}::text::text[])`;
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
      s =
        f.quant === undefined
          ? `${c} ${SQL_BINARY_OPS[f.op]} ${castParam(f.slot + 1, col.cast)}`
          : `${c} ${SQL_BINARY_OPS[f.op]} ${f.quant}($${f.slot + 1}::text::${col.cast}[])`;
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
    let s = `${operand(rel, o.column, o.path, alias).sql} ${o.direction}`;
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
  /** GET: `Accept: text/csv`. */
  readonly csv?: boolean;
  /** GET: a `Range: from-to` header (`to` null: open). Intersected with limit/offset. */
  readonly range?: { readonly from: number; readonly to: number | null } | null;
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
    // POST binds only what `select` needs (its JSON path keys): parse that alone.
    if (req.method === 'POST' && q.values.length > 0) {
      const only = new URLSearchParams();
      const s = new URLSearchParams(req.query).get('select');
      if (s !== null) only.set('select', s);
      q = parseQuery(only);
    }
  } catch (err) {
    throw grammarToAppError(err);
  }
  const ranged = req.method === 'GET' && req.range != null;
  if (ranged) q = withRange(q, req.range);

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
  const csv = req.method === 'GET' && req.csv === true;
  const singular = req.singular && !minimal && !csv;
  const key =
    req.method + '\u0000' + rel.name + '\u0000' + shapeOf(q) + '\u0000' + columns.join('\u0001') + '\u0000' +
    (minimal ? 'm' : '') + (singular ? 's' : '') + (csv ? 'c' : '') + (count ?? '');
  let plan = cat.cached<Plan>(key);
  if (plan === undefined) {
    checkSelect(cat, rel, q.select);
    plan = cat.remember(key, compileTable(cat, rel, req.method, q, columns, { minimal, count, singular, csv }));
  }

  // POST takes only `select` from the query (filters, order and paging mean nothing there).
  const params: Param[] = [];
  bindValues(q.values, params);
  if (req.method === 'GET') {
    if (q.limit !== null) params.push(String(q.limit));
    if (q.offset !== null) params.push(String(q.offset));
  }
  if (bodyParam !== null) params.push(bodyParam);
  return ranged ? { plan, params, offset: q.offset ?? 0, ranged } : { plan, params, offset: q.offset ?? 0 };
}

/** limit/offset ∩ the Range header's rows (both absolute, as PostgREST intersects them). */
function withRange(q: ParsedQuery, range: { readonly from: number; readonly to: number | null }): ParsedQuery {
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

/** One CSV field (RFC 4180): quoted when it holds a quote, comma or line break. */
export function csvField(v: string): string {
  return /[",\r\n]/.test(v) ? '"' + v.replaceAll('"', '""') + '"' : v;
}

/**
 * The CSV records of `_r`, one a line (LF, as PostgREST): each row's values in column order,
 * RFC 4180 quoting (a field with a quote, comma, CR or LF is quoted, quotes doubled).
 */
const CSV_BODY =
  `coalesce(string_agg((select string_agg(case when _c.v is null then '' when _c.v ~ '[",\\n\\r]' ` +
  `then '"' || replace(_c.v, '"', '""') || '"' else _c.v end, ',' order by _c.o) ` +
  `from json_each_text(to_json(_r)) with ordinality _c(k, v, o)), E'\\n'), '')`;

interface TableOptions {
  minimal: boolean;
  count: Prefer['count'];
  singular: boolean;
  csv?: boolean;
}

export function compileTable(cat: Catalog, rel: Relation, method: Method, q: ParsedQuery, columns: readonly string[], o: TableOptions): Plan {
  const st: State = { cat, n: 0 };
  let p = q.values.length; // last parameter number used so far
  const where = method === 'POST' ? '' : whereSql(rel, q, '_t0');
  const whereClause = where === '' ? '' : ' where ' + where;
  const base = { count: o.count, singular: o.singular, maxAge: null };

  if (method === 'GET') {
    const frame = newFrame();
    const names: string[] | undefined = o.csv ? [] : undefined;
    const list = selectList(st, rel, q.select, '_t0', frame, names);
    // `!inner` embeds narrow the rows, and so the count.
    const all = frame.conds.length === 0 ? where : [...(where === '' ? [] : [where]), ...frame.conds].join(' and ');
    let paging = '';
    if (q.limit !== null) paging += ` limit $${++p}::text::int8`;
    if (q.offset !== null) paging += ` offset $${p + 1}::text::int8`;
    let text = o.csv ? `select ${CSV_BODY} as body, count(*)::int4 as n` : `${outer(o.singular)}`;
    if (o.count !== null) text += `, ${countSql(rel, q, all, o.count)}::int8 as total`;
    text += ` from (select ${list} from ${rel.qname} _t0${frame.joins}${all === '' ? '' : ' where ' + all}${orderSql(rel, q, '_t0')}${paging}) _r`;
    const plan: Plan = { ...base, text, status: 200, returnsBody: true, contentRange: true, write: false };
    return names ? { ...plan, csvHeader: names.map(csvField).join(',') } : plan;
  }

  const cols = columns.map(ident).join(', ');
  let write: string;
  if (method === 'POST') {
    const b = p + 1;
    // `{}` inserts a row of defaults: no column list at all (an empty one is a syntax error).
    const target = cols === '' ? rel.qname : `${rel.qname} (${cols})`;
    write = `insert into ${target} select ${cols} from json_populate_recordset(null::${rel.qname}, $${b}::text::json)`;
  } else if (method === 'PATCH') {
    const b = p + 1;
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
  const frame = newFrame();
  const list = selectList(st, rel, q.select, '_t0', frame);
  let text = `with _w as (${write} returning ${method === 'POST' ? '*' : '_t0.*'}) ${outer(o.singular)}`;
  if (o.count !== null) text += `, count(*)::int8 as total`;
  text += ` from (select ${list} from _w _t0${frame.joins}${frame.conds.length === 0 ? '' : ' where ' + frame.conds.join(' and ')}) _r`;
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

/**
 * Shape the call's result: bare value, array for sets, null for void (interface §4.4 rule 2).
 * Exported for the plv8 path of edge functions (src/functions), which shapes alike.
 */
export function rpcSelect(fn: Pick<Func, 'returnsSet' | 'returnKind'>, call: string, from: string): string {
  if (fn.returnsSet) {
    return `select coalesce(json_agg(_r), '[]')::text as body, count(*)::int4 as n from ${from === '' ? '' : from + ', '}${call} _r`;
  }
  const value = fn.returnKind === 'void' ? `concat('null', ${call}::text)` : `coalesce(to_json(${call})::text, 'null')`;
  return `select ${value} as body, 1 as n${from === '' ? '' : ' from ' + from}`;
}

function maxAgeOf(fn: Pick<Func, 'volatility'>): number | null {
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
