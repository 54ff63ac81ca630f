/**
 * The REST SQL builder: a request resolved against the catalog → one statement whose single
 * row carries the response body as JSON text built by PostgreSQL (`body`), the number of rows
 * in it (`n`) and, when a count was asked for, the total (`total`).
 *
 * Identifiers come only from the catalog, through `ident`; values only as `$n` parameters
 * (see compile.ts for the layout).
 */
import { CASTS, type FilterNode, type LogicNode, type ParsedQuery, type SelectItem, type SelectNode, type JsonStep } from '../grammar.ts';
import { ident, literal, type Catalog, type Column, type Func, type Relation } from '../catalog.ts';
import { ERRORS } from '../../core/errors.ts';
import type { Prefer } from '../prefer.ts';
import { REST_ERRORS } from '../errors.ts';
import { checkSpreadNames, outputItems, column, resolveEmbed, type Method, type Plan } from '../plan.ts';
import { CSV_BODY, SQL_BINARY_OPS, SQL_FTS_FUNCS, castParam, csvField, jsonPath, outer } from './fragments.ts';

/** Above this planner estimate, `count=estimated` keeps the estimate instead of counting. */
export const ESTIMATED_EXACT_LIMIT = 1000;

interface State {
  readonly cat: Catalog;
  /** Alias counter: _t0 is the top-level relation. */
  n: number;
}

/** A column of the row `alias`, or a computed field: its function applied to the row. */
function columnSql(alias: string, col: Column): string {
  return col.computed === undefined ? alias + '.' + ident(col.name) : `${col.computed}(${alias})`;
}

/** A column, or a JSON path into one, as an operand: SQL, and the type values are cast to. */
function operand(rel: Relation, name: string, path: readonly JsonStep[] | undefined, alias: string): { sql: string; col: Column } {
  const col = column(rel, name);
  const c = columnSql(alias, col);
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

/** What embeds add to the query level their select list is part of. */
interface Frame {
  /** Lateral joins of spread embeds, each ` left join lateral (…) _sK on true`. */
  joins: string;
  /** `!inner` embeds: `exists (…)` conditions, ANDed into that level's WHERE. */
  conds: string[];
  /** The level selects an aggregate: GROUP BY these output positions (none: one group). */
  grouped: boolean;
  groupBy: string[];
  /** The output names spreads bring into this level (checked against the level's own). */
  spreadNames: string[];
}

/** ` group by 1, 3` for a level that groups by columns; '' otherwise. */
function groupSql(frame: Frame): string {
  return frame.groupBy.length === 0 ? '' : ' group by ' + frame.groupBy.join(', ');
}

function newFrame(): Frame {
  return { joins: '', conds: [], grouped: false, groupBy: [], spreadNames: [] };
}

/**
 * The select list over `rel` aliased `alias`. Spread and `!inner` embeds add to `frame` (the
 * FROM clause and WHERE of the level this list is selected at); `names`, when given,
 * receives the output column names (the CSV header).
 */
function selectList(st: State, rel: Relation, node: SelectNode, alias: string, frame: Frame, names?: string[]): string {
  const items = outputItems(node);
  // A level with an aggregate groups by its plain columns (by position); `*` and embeds that
  // add a key cannot be grouped and are refused there.
  const grouping = items.some((i) => i.kind === 'column' && i.aggregate !== undefined);
  if (grouping) {
    if (!st.cat.features.aggregates) throw REST_ERRORS.aggregatesOff();
    frame.grouped = true;
  }
  let out = '';
  let pos = 0;
  for (const item of items) {
    // A to-one spread's columns are plain columns of this level: grouped by like them.
    const groupedSpread = grouping && item.kind === 'embed' && item.spread === true && resolveEmbed(st.cat, rel, item).toOne;
    if (grouping && !groupedSpread && (item.kind === 'star' || (item.kind === 'embed' && item.select.items.length > 0))) throw ERRORS.invalidRequest();
    const spreadBefore = frame.spreadNames.length;
    const one = selectItem(st, rel, item, alias, frame, names);
    if (one === '') continue;
    if (groupedSpread) {
      for (let i = spreadBefore; i < frame.spreadNames.length; i++) frame.groupBy.push(String(++pos));
    } else pos++;
    if (grouping && item.kind === 'column' && item.aggregate === undefined) frame.groupBy.push(String(pos));
    if (out !== '') out += ', ';
    out += one;
  }
  if (frame.spreadNames.length > 0) checkSpreadNames(node, frame.spreadNames);
  return out;
}

function selectItem(st: State, rel: Relation, item: SelectItem, alias: string, frame: Frame, names?: string[]): string {
  if (item.kind === 'star') {
    if (names) for (const c of rel.columnList) names.push(c.name);
    return alias + '.*';
  }
  if (item.kind === 'column' && item.aggregate !== undefined) {
    // `count()` counts the group's rows; `col.sum()` … aggregates a column (or a JSON path into one).
    let expr = 'count(*)';
    if (item.name !== '*') {
      const col = column(rel, item.name);
      let arg = columnSql(alias, col);
      if (item.path !== undefined) {
        if (col.base !== 'json' && col.base !== 'jsonb') throw ERRORS.invalidRequest();
        arg = jsonPath(arg, item.path);
      }
      expr = `${item.aggregate}(${arg})`;
    }
    if (item.cast !== undefined) expr = `(${expr})::${CASTS[item.cast]}`;
    const out = item.alias ?? item.aggregate;
    if (names) names.push(out);
    return `${expr} as ${ident(out)}`;
  }
  if (item.kind === 'column') {
    const col = column(rel, item.name);
    const out = item.alias ?? item.key ?? col.name;
    if (names) names.push(out);
    if (item.alias === undefined && item.path === undefined && item.cast === undefined) {
      return col.computed === undefined ? alias + '.' + ident(col.name) : `${columnSql(alias, col)} as ${ident(out)}`;
    }
    let expr = columnSql(alias, col);
    if (item.path !== undefined) {
      if (col.base !== 'json' && col.base !== 'jsonb') throw ERRORS.invalidRequest();
      expr = jsonPath(expr, item.path);
    }
    if (item.cast !== undefined) expr = `(${expr})::${CASTS[item.cast]}`;
    return `${expr} as ${ident(out)}`;
  }
  // Embed: one relationship between the two tables (docs/api/rest.md), picked
  // by the hint when there are several.
  const r = resolveEmbed(st.cat, rel, item);
  const k = ++st.n;
  const a = '_t' + k;
  const e = '_e' + k;
  const innerFrame = newFrame();
  // A to-many spread needs its output names (each becomes an array); a to-one spread adds them to this level's.
  const spreadMany = item.spread === true && !r.toOne;
  const innerNames: string[] | undefined = item.spread ? [] : undefined;
  const empty = item.select.items.length === 0;
  const inner = empty ? '1' : selectList(st, r.target, item.select, a, innerFrame, innerNames);
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
  const sub = `select ${inner} from ${from}${innerFrame.joins} where ${cond}${groupSql(innerFrame)}`;
  // `!inner`: this level keeps only rows with a related row (the same subquery, as EXISTS).
  if (item.inner) frame.conds.push(`exists (${sub})`);
  // An empty embed (`books!inner()`) adds nothing to the row: it only narrows with !inner.
  if (empty) return '';
  if (innerNames !== undefined) {
    frame.spreadNames.push(...innerNames);
    if (names) names.push(...innerNames);
  }
  if (spreadMany) {
    // A to-many relationship spread: each of its columns becomes an array over the related rows ([] when none).
    const sp = '_s' + k;
    const q = '_q' + k;
    const aggs = innerNames!.map((n) => `coalesce(json_agg(${q}.${ident(n)}), '[]') as ${ident(n)}`).join(', ');
    frame.joins += ` left join lateral (select ${aggs} from (${sub}) ${q}) ${sp} on true`;
    return sp + '.*';
  }
  if (item.spread) {
    // A to-one relationship's columns, flattened into this row: null columns when none.
    const sp = '_s' + k;
    frame.joins += ` left join lateral (${sub}) ${sp} on true`;
    return sp + '.*';
  }
  const out = item.alias ?? item.relation;
  if (names) names.push(out);
  // to-one: the row or null; to-many: an array, [] when none (docs/api/rest.md).
  return r.toOne
    ? `(select to_json(${e}) from (${sub}) ${e}) as ${ident(out)}`
    : `(select coalesce(json_agg(${e}), '[]') from (${sub}) ${e}) as ${ident(out)}`;
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
function countSql(rel: Relation, q: ParsedQuery, where: string, count: NonNullable<Prefer['count']>, source: string): string {
  const exact = `(select count(*) from ${source}${where === '' ? '' : ' where ' + where})`;
  if (count === 'exact') return exact;
  const text = `select 1 from ${rel.qname} _t0${where === '' ? '' : ' where ' + where}`;
  const args: string[] = [];
  for (let i = 1; i <= q.values.length; i++) args.push(`$${i}::text`);
  const planned = `rest.planned_rows(${literal(text)}, array[${args.join(', ')}]::text[])`;
  if (count === 'planned') return planned;
  return `(select case when _p.n <= ${ESTIMATED_EXACT_LIMIT} then ${exact} else _p.n end from (select ${planned} as n) _p)`;
}

interface TableOptions {
  minimal: boolean;
  /** GET: the row source aliased `_t0` instead of the relation (a function call, for RPC). */
  source?: string;
  /** POST: a key missing from a row takes the column default (`Prefer: missing=default`). */
  missingDefault?: boolean;
  /** Minimal, but the row count is wanted (`max-affected`). */
  counted?: boolean;
  count: Prefer['count'];
  singular: boolean;
  csv?: boolean;
}

/** A column of a `missing=default` insert: the row's value when its object has the key, else the default (or NULL). */
function withDefault(rel: Relation, name: string): string {
  const col = rel.columns.get(name)!;
  const value = `(_e.r).${ident(name)}`;
  return col.default == null ? value : `case when _e.j ? ${literal(name)} then ${value} else ${col.default} end`;
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
    const source = o.source ?? rel.qname + ' _t0';
    if (o.count !== null) text += `, ${countSql(rel, q, all, o.count, source)}::int8 as total`;
    text += ` from (select ${list} from ${source}${frame.joins}${all === '' ? '' : ' where ' + all}${groupSql(frame)}${orderSql(rel, q, '_t0')}${paging}) _r`;
    const plan: Plan = { ...base, text, status: 200, returnsBody: true, contentRange: true, write: false };
    return names ? { ...plan, csvHeader: names.map(csvField).join(',') } : plan;
  }

  const cols = columns.map(ident).join(', ');
  let write: string;
  if (method === 'POST') {
    const b = p + 1;
    // `{}` inserts a row of defaults: no column list at all (an empty one is a syntax error).
    const target = cols === '' ? rel.qname : `${rel.qname} (${cols})`;
    write = o.missingDefault
      ? `insert into ${target} select ${columns.map((c) => withDefault(rel, c)).join(', ')} from (select _e::jsonb as j, json_populate_record(null::${rel.qname}, _e) as r from json_array_elements($${b}::text::json) _e) _e`
      : `insert into ${target} select ${cols} from json_populate_recordset(null::${rel.qname}, $${b}::text::json)`;
  } else if (method === 'PATCH') {
    const b = p + 1;
    write = `update ${rel.qname} _t0 set (${cols}) = (select ${cols} from json_populate_record(null::${rel.qname}, $${b}::text::json))${whereClause}`;
  } else {
    write = `delete from ${rel.qname} _t0${whereClause}`;
  }
  const status = method === 'POST' ? 201 : 200;
  if (o.minimal) {
    // No RETURNING: a write the caller may not read back is still allowed (RLS SELECT policies
    // apply to RETURNING), as in PostgREST. PATCH and DELETE answer 204, POST 201. Counted: the
    // rows are counted, none is read (`returning 1` names no column).
    const text = o.counted ? `with _w as (${write} returning 1) select null::text as body, count(*)::int4 as n from _w` : write;
    return { ...base, text, status: method === 'POST' ? 201 : 204, returnsBody: false, contentRange: false, write: true, counted: o.counted === true };
  }
  const frame = newFrame();
  const list = selectList(st, rel, q.select, '_t0', frame);
  // A write answers its rows; aggregates of them are not offered.
  if (frame.grouped) throw ERRORS.invalidRequest();
  let text = `with _w as (${write} returning ${method === 'POST' ? '*' : '_t0.*'}) ${outer(o.singular)}`;
  if (o.count !== null) text += `, count(*)::int8 as total`;
  text += ` from (select ${list} from _w _t0${frame.joins}${frame.conds.length === 0 ? '' : ' where ' + frame.conds.join(' and ')}) _r`;
  return { ...base, text, status, returnsBody: true, contentRange: o.count !== null, write: true };
}

export function rpcCall(fn: Func, argSql: readonly string[]): string {
  return `${fn.qname}(${argSql.join(', ')})`;
}

/**
 * Shape the call's result: bare value, array for sets, null for void (docs/api/rest.md).
 * Exported for the plv8 path of edge functions (src/functions), which shapes alike.
 */
export function rpcSelect(fn: Pick<Func, 'returnsSet' | 'returnKind'>, call: string, from: string): string {
  if (fn.returnsSet) {
    return `select coalesce(json_agg(_r), '[]')::text as body, count(*)::int4 as n from ${from === '' ? '' : from + ', '}${call} _r`;
  }
  const value = fn.returnKind === 'void' ? `concat('null', ${call}::text)` : `coalesce(to_json(${call})::text, 'null')`;
  return `select ${value} as body, 1 as n${from === '' ? '' : ' from ' + from}`;
}
