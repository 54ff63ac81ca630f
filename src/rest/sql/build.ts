/**
 * The build stage of REST (as PostgREST's query builder): a plan tree (plan/tree.ts) → one
 * statement whose single row carries the response body as JSON text built by PostgreSQL
 * (`body`), the number of rows in it (`n`) and, when a count was asked for, the total
 * (`total`). It reads the tree alone: no catalog, no planner; every refusal was the
 * planner's. Identifiers come from the tree through `ident`; values only as `$n` parameters,
 * all of them text (`$n::text::<type>`), at the numbers the planner laid out.
 */
import type { Statement } from '../statement.ts';
import type { ActionPlan, CallAnswerPlan, CallPlan, ColumnRef, Condition, FilterCondition, MutatePlan, Operand, OrderTerm, ReadNode, ReadPlan, SelectPlan } from '../plan/tree.ts';
import type { Prefer } from '../prefer.ts';
import { CSV_BODY, SQL_BINARY_OPS, SQL_FTS_FUNCS, castParam, csvField, ident, jsonPath, literal, outer } from './fragments.ts';

/** Above this planner estimate, `count=estimated` keeps the estimate instead of counting. */
export const ESTIMATED_EXACT_LIMIT = 1000;

export function build(plan: ActionPlan): Statement {
  switch (plan.kind) {
    case 'read':
      return buildRead(plan);
    case 'call':
      return buildCall(plan);
    default:
      return buildMutate(plan);
  }
}

interface State {
  /** Alias counter: _t0 is the top-level relation. */
  n: number;
}

/** A column of the row `alias`, or a computed field: its function applied to the row. */
function columnSql(alias: string, col: ColumnRef): string {
  return col.computed === undefined ? alias + '.' + ident(col.name) : `${col.computed}(${alias})`;
}

/** `->>` yields text; `->` json(b), compared as jsonb (json has no equality). */
function operandSql(on: Operand, alias: string): string {
  const c = columnSql(alias, on.column);
  if (on.path === undefined) return c;
  if (on.path[on.path.length - 1].arrow === '->>') return jsonPath(c, on.path);
  return `${jsonPath(c, on.path)}::jsonb`;
}

/** What embeds add to the query level their select list is part of. */
interface Frame {
  /** Lateral joins of spread embeds, each ` left join lateral (…) _sK on true`. */
  joins: string;
  /** `!inner` embeds: `exists (…)` conditions, ANDed into that level's WHERE. */
  conds: string[];
  /** Positions a grouped level groups by. */
  groupBy: string[];
}

/** ` group by 1, 3` for a level that groups by columns; '' otherwise. */
function groupSql(frame: Frame): string {
  return frame.groupBy.length === 0 ? '' : ' group by ' + frame.groupBy.join(', ');
}

function newFrame(): Frame {
  return { joins: '', conds: [], groupBy: [] };
}

/**
 * The select list of `node` aliased `alias`. Spread and `!inner` embeds add to `frame` (the
 * FROM clause and WHERE of the level this list is selected at); a grouped level groups by
 * the positions of its plain columns (a to-one spread's columns among them).
 */
function selectList(st: State, node: ReadNode, alias: string, frame: Frame): string {
  let out = '';
  let pos = 0;
  for (const item of node.select) {
    const one = selectItem(st, item, alias, frame);
    if (one === '') continue;
    if (node.grouped && item.kind === 'embed' && item.spread && item.toOne) {
      for (let i = 0; i < item.node.names.length; i++) frame.groupBy.push(String(++pos));
    } else pos++;
    if (node.grouped && item.kind === 'column') frame.groupBy.push(String(pos));
    if (out !== '') out += ', ';
    out += one;
  }
  return out;
}

function selectItem(st: State, item: SelectPlan, alias: string, frame: Frame): string {
  switch (item.kind) {
    case 'star':
      return alias + '.*';
    case 'aggregate': {
      let expr = 'count(*)';
      if (item.arg !== null) {
        let arg = columnSql(alias, item.arg.column);
        if (item.arg.path !== undefined) arg = jsonPath(arg, item.arg.path);
        expr = `${item.aggregate}(${arg})`;
      }
      if (item.cast !== undefined) expr = `(${expr})::${item.cast}`;
      return `${expr} as ${ident(item.output)}`;
    }
    case 'column': {
      if (item.bare) return item.column.computed === undefined ? alias + '.' + ident(item.column.name) : `${columnSql(alias, item.column)} as ${ident(item.output)}`;
      let expr = columnSql(alias, item.column);
      if (item.path !== undefined) expr = jsonPath(expr, item.path);
      if (item.cast !== undefined) expr = `(${expr})::${item.cast}`;
      return `${expr} as ${ident(item.output)}`;
    }
    case 'embed':
      return embedSql(st, item, alias, frame);
  }
}

function embedSql(st: State, item: Extract<SelectPlan, { kind: 'embed' }>, alias: string, frame: Frame): string {
  const k = ++st.n;
  const a = '_t' + k;
  const e = '_e' + k;
  const innerFrame = newFrame();
  const inner = item.empty ? '1' : selectList(st, item.node, a, innerFrame);
  let from = `${item.node.qname} ${a}`;
  let cond = '';
  const { pairs, junction } = item.join;
  if (junction === undefined) {
    for (const [mine, theirs] of pairs) {
      if (cond !== '') cond += ' and ';
      cond += `${a}.${ident(theirs)} = ${alias}.${ident(mine)}`;
    }
  } else {
    // many-to-many: through the junction; its keys are in its pk, so no row twice.
    const j = '_j' + k;
    let on = '';
    for (const [jc, tc] of junction.pairs) {
      if (on !== '') on += ' and ';
      on += `${j}.${ident(jc)} = ${a}.${ident(tc)}`;
    }
    from += ` join ${junction.qname} ${j} on ${on}`;
    for (const [mine, jc] of pairs) {
      if (cond !== '') cond += ' and ';
      cond += `${j}.${ident(jc)} = ${alias}.${ident(mine)}`;
    }
  }
  for (const c of innerFrame.conds) cond += ' and ' + c;
  // An embed's own conditions, order and page (SUPABASE_COMPAT=true): its values are text parameters.
  const own = whereSql(item.node.where, a);
  if (own !== '') cond += ' and ' + own;
  const sub = `select ${inner} from ${from}${innerFrame.joins} where ${cond}${groupSql(innerFrame)}${orderSql(item.node.order, a)}${pagingSql(item.node)}`;
  // `!inner`: this level keeps only rows with a related row (the same subquery, as EXISTS).
  if (item.inner) frame.conds.push(`exists (${sub})`);
  // An empty embed (`books!inner()`) adds nothing to the row: it only narrows with !inner.
  if (item.empty) return '';
  if (item.spread && !item.toOne) {
    // A to-many relationship spread: each of its columns becomes an array over the related rows ([] when none).
    const sp = '_s' + k;
    const q = '_q' + k;
    const aggs = item.node.names.map((n) => `coalesce(json_agg(${q}.${ident(n)}), '[]') as ${ident(n)}`).join(', ');
    frame.joins += ` left join lateral (select ${aggs} from (${sub}) ${q}) ${sp} on true`;
    return sp + '.*';
  }
  if (item.spread) {
    // A to-one relationship's columns, flattened into this row: null columns when none.
    const sp = '_s' + k;
    frame.joins += ` left join lateral (${sub}) ${sp} on true`;
    return sp + '.*';
  }
  // to-one: the row or null; to-many: an array, [] when none (docs/api/rest.md).
  return item.toOne
    ? `(select to_json(${e}) from (${sub}) ${e}) as ${ident(item.output)}`
    : `(select coalesce(json_agg(${e}), '[]') from (${sub}) ${e}) as ${ident(item.output)}`;
}

/** ` limit $n offset $m` of a level ('' when neither). */
function pagingSql(node: ReadNode): string {
  let paging = '';
  if (node.limit !== null) paging += ` limit $${node.limit}::text::int8`;
  if (node.offset !== null) paging += ` offset $${node.offset}::text::int8`;
  return paging;
}

// ---------------------------------------------------------------------------
// conditions, order, count
// ---------------------------------------------------------------------------

function filterSql(cond: FilterCondition, alias: string): string {
  const c = operandSql(cond.on, alias);
  const { cast, base } = cond.on;
  const f = cond.filter;
  let s: string;
  switch (f.op) {
    case 'is':
      s = `${c} is ${f.value}`;
      break;
    case 'in':
      s = `${c} = any($${f.slot + 1}::text::${cast}[])`;
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
      const doc = base === 'tsvector' ? c : `to_tsvector(${lang}${c})`;
      s = `${doc} @@ ${SQL_FTS_FUNCS[f.op]}(${lang}$${f.slot + 1}::text)`;
      break;
    }
    default:
      s =
        f.quant === undefined
          ? `${c} ${SQL_BINARY_OPS[f.op]} ${castParam(f.slot + 1, cast)}`
          : `${c} ${SQL_BINARY_OPS[f.op]} ${f.quant}($${f.slot + 1}::text::${cast}[])`;
  }
  return f.negated ? `not (${s})` : s;
}

function conditionSql(cond: Condition, alias: string): string {
  if (cond.kind === 'filter') return filterSql(cond, alias);
  const s = '(' + cond.children.map((ch) => conditionSql(ch, alias)).join(cond.op === 'or' ? ' or ' : ' and ') + ')';
  return cond.negated ? `not ${s}` : s;
}

/** The WHERE condition ('' when none): all ANDed. */
function whereSql(conds: readonly Condition[], alias: string): string {
  return conds.map((c) => conditionSql(c, alias)).join(' and ');
}

function orderSql(terms: readonly OrderTerm[], alias: string): string {
  if (terms.length === 0) return '';
  const parts = terms.map((o) => {
    let s = `${operandSql(o.on, alias)} ${o.direction}`;
    if (o.nulls !== null) s += ` nulls ${o.nulls}`;
    return s;
  });
  return ' order by ' + parts.join(', ');
}

/** `total` column for Prefer: count=…, over the same relation and filters, without paging. */
function countSql(qname: string, values: number, where: string, count: NonNullable<Prefer['count']>, source: string, atLeastExact = false): string {
  const exact = `(select count(*) from ${source}${where === '' ? '' : ' where ' + where})`;
  if (count === 'exact') return exact;
  const text = `select 1 from ${qname} _t0${where === '' ? '' : ' where ' + where}`;
  const args: string[] = [];
  for (let i = 1; i <= values; i++) args.push(`$${i}::text`);
  const planned = `rest.planned_rows(${literal(text)}, array[${args.join(', ')}]::text[])`;
  if (count === 'planned') return planned;
  if (atLeastExact) return `greatest(${exact}, ${planned})`;
  return `(select case when _p.n <= ${ESTIMATED_EXACT_LIMIT} then ${exact} else _p.n end from (select ${planned} as n) _p)`;
}

// ---------------------------------------------------------------------------
// statements
// ---------------------------------------------------------------------------

function buildRead(plan: ReadPlan): Statement {
  const st: State = { n: 0 };
  const node = plan.node;
  const where = whereSql(node.where, '_t0');
  const frame = newFrame();
  const list = selectList(st, node, '_t0', frame);
  // `!inner` embeds narrow the rows, and so the count.
  const all = frame.conds.length === 0 ? where : [...(where === '' ? [] : [where]), ...frame.conds].join(' and ');
  const paging = pagingSql(node);
  let text = plan.csv ? `select ${CSV_BODY} as body, count(*)::int4 as n` : `${outer(plan.singular)}`;
  let source = node.qname + ' _t0';
  if (plan.from.kind === 'call') {
    const c = callSql(plan.from.call);
    source = (c.from === '' ? '' : c.from + ', ') + c.call + ' _t0';
  }
  if (plan.count !== null) text += `, ${countSql(node.qname, plan.values, all, plan.count, source, plan.estimateAtLeastExact === true)}::int8 as total`;
  text += ` from (select ${list} from ${source}${frame.joins}${all === '' ? '' : ' where ' + all}${groupSql(frame)}${orderSql(node.order, '_t0')}${paging}) _r`;
  const maxAge = plan.from.kind === 'call' ? plan.from.call.maxAge : null;
  const statement: Statement = { text, status: 200, returnsBody: true, contentRange: true, count: plan.count, singular: plan.singular, write: false, maxAge };
  return plan.csv ? { ...statement, csvHeader: node.names.map(csvField).join(',') } : statement;
}

/** A column of a `missing=default` insert: the row's value when its object has the key, else the default (or NULL). */
function withDefault(c: { readonly name: string; readonly default: string | null }): string {
  const value = `(_e.r).${ident(c.name)}`;
  return c.default === null ? value : `case when _e.j ? ${literal(c.name)} then ${value} else ${c.default} end`;
}

/** `on conflict (…) do update set c = excluded.c, …` (merge) or `do nothing`; '' for a plain insert. */
function conflictSql(plan: MutatePlan): string {
  const oc = plan.onConflict;
  if (oc === null) return '';
  const target = ` on conflict (${oc.columns.map(ident).join(', ')})`;
  if (oc.action === 'ignore' || plan.columns.length === 0) return target + ' do nothing';
  return target + ' do update set ' + plan.columns.map((c) => `${ident(c.name)} = excluded.${ident(c.name)}`).join(', ');
}

function writeSql(plan: MutatePlan, merge: boolean): string {
  const where = whereSql(plan.where, '_t0');
  const whereClause = where === '' ? '' : ' where ' + where;
  const qname = plan.qname;
  const cols = plan.columns.map((c) => ident(c.name)).join(', ');
  const b = plan.body;
  if (plan.kind === 'insert') {
    // `{}` inserts a row of defaults: no column list at all (an empty one is a syntax error).
    // A merging upsert names the table `_i`, to tell inserted rows (xmax 0) from updated ones.
    const target = (merge ? `${qname} as _i` : qname) + (cols === '' ? '' : ` (${cols})`);
    const rows = plan.missingDefault
      ? `select ${plan.columns.map(withDefault).join(', ')} from (select _e::jsonb as j, json_populate_record(null::${qname}, _e) as r from json_array_elements($${b}::text::json) _e) _e`
      : `select ${cols} from json_populate_recordset(null::${qname}, $${b}::text::json)`;
    return `insert into ${target} ${rows}${conflictSql(plan)}`;
  }
  if (plan.kind === 'update') {
    return `update ${qname} _t0 set (${cols}) = (select ${cols} from json_populate_record(null::${qname}, $${b}::text::json))${whereClause}`;
  }
  return `delete from ${qname} _t0${whereClause}`;
}

function buildMutate(plan: MutatePlan): Statement {
  const base = { count: plan.count, singular: plan.singular, maxAge: null };
  // A merging upsert that inserted no row answers 200 (PostgREST): `inserted` counts the new ones.
  const merge = plan.onConflict !== null && plan.onConflict.action === 'merge';
  const write = writeSql(plan, merge);
  const mergeStatus = merge ? { mergeStatus: true } : {};
  if (plan.returning === null) {
    // No RETURNING: a write the caller may not read back is still allowed (RLS SELECT policies
    // apply to RETURNING), as in PostgREST. PATCH and DELETE answer 204, POST 201. Counted: the
    // rows are counted, none is read (`returning 1` names no column).
    // Values only the answer would have read are still typed (a prepared statement must type every parameter).
    const v = plan.unread === undefined ? '' : `_v as (select ${Array.from({ length: plan.unread }, (_, i) => `$${i + 1}::text`).join(', ')}), `;
    let text = plan.counted ? `with ${v}_w as (${write} returning 1) select null::text as body, count(*)::int4 as n from _w` : v === '' ? write : `with ${v.slice(0, -2)} ${write}`;
    if (merge) text = `with ${v}_w as (${write} returning _i.xmax = 0 as i) select null::text as body, count(*)::int4 as n, count(*) filter (where _w.i)::int4 as inserted from _w`;
    return { ...base, ...mergeStatus, text, status: plan.kind === 'insert' ? 201 : 204, returnsBody: false, contentRange: false, write: true, counted: plan.counted || merge };
  }
  const frame = newFrame();
  const list = selectList({ n: 0 }, plan.returning, '_t0', frame);
  let text = merge
    ? `with _m as (${write} returning _i as r, _i.xmax = 0 as i), _w as (select (_m.r).* from _m) ${outer(plan.singular)}, (select count(*) filter (where _m.i) from _m)::int4 as inserted`
    : `with _w as (${write} returning ${plan.kind === 'insert' ? '*' : '_t0.*'}) ${outer(plan.singular)}`;
  if (plan.count !== null) text += `, count(*)::int8 as total`;
  text += ` from (select ${list} from _w _t0${frame.joins}${frame.conds.length === 0 ? '' : ' where ' + frame.conds.join(' and ')}) _r`;
  return { ...base, ...mergeStatus, text, status: plan.kind === 'insert' ? 201 : 200, returnsBody: true, contentRange: plan.count !== null, write: true };
}

/** A call, and the FROM item its arguments are read from ('' when none). */
function callSql(call: CallPlan): { call: string; from: string } {
  const a = call.args;
  switch (a.kind) {
    case 'none':
      return { call: `${call.qname}()`, from: '' };
    case 'whole':
      return { call: `${call.qname}($${a.param}::text::${a.cast})`, from: '' };
    case 'record': {
      const defs = a.args.map((x) => `${ident(x.name)} ${x.cast}`).join(', ');
      const args = a.args.map((x) => `${x.variadic ? 'variadic ' : ''}${ident(x.name)} => _a.${ident(x.name)}`);
      return { call: `${call.qname}(${args.join(', ')})`, from: `json_to_record($${a.param}::text::json) as _a(${defs})` };
    }
    case 'params': {
      const args = a.args.map((x, i) => `${x.variadic ? 'variadic ' : ''}${ident(x.name)} => ${castParam(a.first + i, x.cast)}`);
      return { call: `${call.qname}(${args.join(', ')})`, from: '' };
    }
  }
}

/** The call's answer as RPC shapes it: bare value, array for sets, null for void (docs/api/rest.md). */
function buildCall(plan: CallAnswerPlan): Statement {
  const fn = plan.call;
  const { call, from } = callSql(fn);
  let text: string;
  if (fn.returnsSet) {
    text = `select coalesce(json_agg(_r), '[]')::text as body, count(*)::int4 as n from ${from === '' ? '' : from + ', '}${call} _r`;
  } else {
    const value = fn.returnKind === 'void' ? `concat('null', ${call}::text)` : `coalesce(to_json(${call})::text, 'null')`;
    text = `select ${value} as body, 1 as n${from === '' ? '' : ' from ' + from}`;
  }
  const statement: Statement = { text, status: 200, returnsBody: true, contentRange: plan.counted, count: plan.counted ? 'exact' : null, singular: false, write: false, maxAge: fn.maxAge };
  return fn.returnKind === 'void' && !fn.returnsSet ? { ...statement, voidCall: true } : statement;
}
