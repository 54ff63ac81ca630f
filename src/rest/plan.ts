/**
 * The plan stage of REST (as PostgREST's `actionPlan`): a parsed request and the catalog →
 * what to run. Per request it checks what the catalog decides (the relation or function, the
 * method it allows, the body's columns, the limits on values), and decides the request's
 * shape (the key of the statement cache) and its parameters in order. When no statement of
 * that shape is cached, `tree()` resolves the rest of the names into the plan tree
 * (plan/tree.ts) that sql/build.ts writes as SQL. Nothing here writes SQL text.
 *
 * Parameter layout: the query's value slots first ($1…$V, the grammar's slot order), then
 * limit, offset (when present), then the body (writes) or a function's arguments.
 */
import { ERRORS } from '../core/errors.ts';
import type { Catalog, Func, Relation } from './catalog.ts';
import { parseQuery, type FilterNode, type LogicNode, type ParsedQuery, type Value } from './grammar.ts';
import { shapeOf } from './shape.ts';
import { checkArgs, checkFilters, checkRows, checkSelect } from './limits.ts';
import { grammarToAppError, REST_ERRORS } from './errors.ts';
import { arrayLiteral } from './sql/fragments.ts';
import { isRefused, type Method, type RpcRequest, type TableRequest } from './request.ts';
import type { Param } from './statement.ts';
import type { Prefer } from './prefer.ts';
import { checkScope, conditions, embedScope, orderTerms, readNode, selectList } from './plan/select.ts';
import { argumentNames, getCall, hasResultColumns, postCall, resolveFunction, resultRelation } from './plan/rpc.ts';
import type { ActionPlan, OnConflict, ReadNode, ReadPlan } from './plan/tree.ts';

/** A request planned: its shape, its values, and the plan tree on demand. */
export interface Planned {
  /** The request's shape: equal for two requests that differ only in values; the statement cache's key. */
  readonly key: string;
  readonly params: Param[];
  /** Offset of the first row, for Content-Range. */
  readonly offset: number;
  /** Paged by a `Range` header: a partial result with a known total answers 206. */
  readonly ranged?: boolean;
  readonly rollback?: boolean;
  readonly maxAffected?: number;
  /** The plan tree, resolved when no statement of this shape is cached. */
  readonly tree: () => ActionPlan;
}

function bindValues(values: readonly Value[], out: Param[]): void {
  for (const v of values) out.push(typeof v === 'string' ? v : arrayLiteral(v));
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

/** The columns a write body names, checked against the relation; sorted (shape key). */
export function bodyColumns(rel: Relation, rows: readonly Record<string, unknown>[]): string[] {
  const seen = new Set<string>();
  for (const row of rows) for (const k in row) seen.add(k);
  const cols = [...seen].sort();
  for (const c of cols) if (!rel.columns.has(c)) throw REST_ERRORS.unknownColumn(c, rel.name);
  return cols;
}

/** The top level of a read: conditions, select list, order and page, in the order their refusals are answered. */
function readLevel(cat: Catalog, rel: Relation, q: ParsedQuery, selectFirst = false): ReadNode {
  // SUPABASE_COMPAT=true refuses in PostgREST's order: the select list's names before the filters'.
  const scope = embedScope(q);
  const first = selectFirst ? selectList(cat, rel, q.select, scope) : null;
  const where = conditions(rel, q);
  const { items, names, grouped } = first ?? selectList(cat, rel, q.select, scope);
  checkScope(scope);
  const order = orderTerms(rel, q);
  let p = q.values.length;
  const limit = q.limit === null ? null : ++p;
  const offset = q.offset === null ? null : p + 1;
  return { qname: rel.qname, select: items, names, grouped, where, order, limit, offset };
}

/** How many of the query's values (from $1) its filters and groups read: the slots after them are select's, order's and embedded levels'. */
function filterValues(q: ParsedQuery): number {
  let n = 0;
  const walk = (f: FilterNode | LogicNode): void => {
    if (f.kind === 'logic') return f.children.forEach(walk);
    for (const p of f.path ?? []) n = Math.max(n, p.slot + 1);
    if (f.op !== 'is') n = Math.max(n, f.slot + 1);
    if ('langSlot' in f && f.langSlot !== null) n = Math.max(n, f.langSlot + 1);
  };
  q.filters.forEach(walk);
  q.logic.forEach(walk);
  return n;
}

interface TableOptions {
  readonly onConflict: OnConflict | null;
  readonly minimal: boolean;
  readonly count: Prefer['count'];
  readonly singular: boolean;
  readonly csv: boolean;
  readonly counted: boolean;
  readonly missingDefault: boolean;
  readonly compat: boolean;
}

function tableTree(cat: Catalog, rel: Relation, method: Method, q: ParsedQuery, columns: readonly string[], o: TableOptions): ActionPlan {
  checkSelect(cat, rel, q.select);
  if (method === 'GET') {
    return { kind: 'read', node: readLevel(cat, rel, q, o.compat), from: { kind: 'relation' }, count: o.count, ...(o.compat ? { estimateAtLeastExact: true } : {}), values: q.values.length, singular: o.singular, csv: o.csv };
  }
  const where = method === 'POST' ? [] : conditions(rel, q);
  let returning: ReadNode | null = null;
  if (!o.minimal) {
    const scope = embedScope(q);
    returning = readNode(cat, rel, q.select, scope);
    checkScope(scope);
    // A write answers its rows; aggregates of them are not offered.
    if (returning.grouped) throw ERRORS.invalidRequest();
  }
  return {
    kind: method === 'POST' ? 'insert' : method === 'PATCH' ? 'update' : 'delete',
    qname: rel.qname,
    columns: columns.map((name) => ({ name, default: rel.columns.get(name)!.default ?? null })),
    body: method === 'DELETE' ? null : q.values.length + 1,
    where,
    missingDefault: o.missingDefault,
    onConflict: o.onConflict,
    ...(returning === null && q.values.length > filterValues(q) ? { unread: q.values.length } : {}),
    returning,
    counted: o.counted,
    count: o.count,
    singular: o.singular,
  };
}

/**
 * Upsert's conflict target (SUPABASE_COMPAT=true, `Prefer: resolution=…`): the columns of
 * `on_conflict`, each one of the relation's, or its primary key; null: a plain insert.
 */
function conflictTarget(rel: Relation, upsert: TableRequest['upsert']): OnConflict | null {
  if (upsert === undefined) return null;
  if (isRefused(upsert)) throw upsert.refused;
  const columns = upsert.columns ?? rel.pk;
  if (columns.length === 0) throw ERRORS.invalidRequestBecause('upsert needs on_conflict: the table has no primary key');
  for (const c of columns) if (!rel.columns.has(c)) throw REST_ERRORS.unknownColumn(c, rel.name);
  return { columns, action: upsert.action };
}

/** A request to /rest/v1/{table} (or a batch's operation on one). */
export function planTable(cat: Catalog, req: TableRequest): Planned {
  const rel = cat.relations.get(req.table);
  if (rel === undefined) throw REST_ERRORS.relationNotFound(req.table);
  if (isRefused(req.query)) throw req.query.refused;
  const ranged = req.method === 'GET' && req.range !== null;
  const q = ranged ? withRange(req.query, req.range) : req.query;

  let columns: string[] = [];
  let bodyParam: string | null = null;
  const onConflict = req.method === 'POST' ? conflictTarget(rel, req.upsert) : null;
  if (req.method === 'POST' || req.method === 'PATCH') {
    if (!(req.method === 'POST' ? rel.insertable : rel.updatable)) throw REST_ERRORS.methodNotAllowed();
    const body = req.body!;
    if (isRefused(body)) throw body.refused;
    columns = bodyColumns(rel, body.rows);
    checkRows(rel, body.rows);
    if (req.method === 'PATCH' && columns.length === 0) throw ERRORS.invalidBody();
    bodyParam = body.param;
  } else if (req.method === 'DELETE') {
    if (!rel.deletable) throw REST_ERRORS.methodNotAllowed();
  }
  if (req.method === 'PATCH' || req.method === 'DELETE') {
    // A filter is required (docs/api/rest.md), and paging a write is refused
    // rather than silently ignored.
    if (q.filters.length === 0 && q.logic.length === 0) throw ERRORS.invalidRequestBecause(`${req.method} needs a filter (such as ?id=eq.1): it would change every row`);
    if (q.limit !== null || q.offset !== null) throw ERRORS.invalidRequestBecause(`${req.method} takes no limit or offset`);
  }
  if (req.method !== 'POST') checkFilters(rel, q);

  const minimal = req.prefer.returnMinimal && req.method !== 'GET';
  const count = minimal ? null : req.prefer.count;
  const csv = req.method === 'GET' && req.csv;
  const singular = req.singular && !minimal && !csv;
  // `handling=strict; max-affected=N` bounds PATCH and DELETE (POST and GET are not bounded, as PostgREST).
  const maxAffected =
    req.prefer.strict && req.prefer.maxAffected !== null && (req.method === 'PATCH' || req.method === 'DELETE') ? req.prefer.maxAffected : undefined;
  const counted = minimal && maxAffected !== undefined;
  const missingDefault = req.method === 'POST' && req.prefer.missingDefault;
  const key =
    req.method + '\u0000' + rel.name + '\u0000' + shapeOf(q) + '\u0000' + columns.join('\u0001') + '\u0000' +
    (minimal ? 'm' : '') + (singular ? 's' : '') + (csv ? 'c' : '') + (counted ? 'n' : '') + (missingDefault ? 'd' : '') + (count ?? '') +
    (onConflict === null ? '' : '\u0000U' + onConflict.action + onConflict.columns.join('\u0001'));

  // POST takes only `select` from the query (filters, order and paging mean nothing there).
  const params: Param[] = [];
  bindValues(q.values, params);
  if (req.method === 'GET') {
    if (q.limit !== null) params.push(String(q.limit));
    if (q.offset !== null) params.push(String(q.offset));
  }
  if (bodyParam !== null) params.push(bodyParam);
  const tree = (): ActionPlan => tableTree(cat, rel, req.method, q, columns, { onConflict, minimal, count, singular, csv, counted, missingDefault, compat: req.compat === true });
  const p: Planned = ranged ? { key, params, offset: q.offset ?? 0, tree, ranged } : { key, params, offset: q.offset ?? 0, tree };
  return req.rollback || maxAffected !== undefined ? { ...p, rollback: req.rollback, maxAffected } : p;
}

/** A request to /rest/v1/rpc/{name} (or a batch's call). */
export function planRpc(cat: Catalog, req: RpcRequest): Planned {
  const p = req.method === 'POST' ? planPost(cat, req) : planGet(cat, req);
  const maxAffected = req.prefer.strict && req.prefer.maxAffected !== null ? req.prefer.maxAffected : undefined;
  return req.rollback || maxAffected !== undefined ? { ...p, rollback: req.rollback, maxAffected } : p;
}

function planPost(cat: Catalog, req: RpcRequest): Planned {
  const b = req.body ?? {};
  const names = Object.keys(b).sort();
  const { fn, wholeBody } = resolveFunction(cat, req.name, names, true);
  if (!wholeBody) checkArgs(fn, Object.entries(b), true);
  const bodyParam = wholeBody || names.length > 0 ? (req.bodyText ?? JSON.stringify(b)) : null;
  const rel = resultRelation(cat, fn);
  const count = req.prefer.count;
  if (rel !== null && (req.query !== '' || count !== null)) {
    return planShaped(cat, fn, rel, req.query, count, { post: true, wholeBody, names, args: bodyParam === null ? [] : [bodyParam] });
  }
  const key = 'RPC\u0000' + fn.oid + '\u0000' + (wholeBody ? '\u0002' : names.join('\u0001')) + (count === null ? '' : '\u0000n');
  const tree = (): ActionPlan => ({ kind: 'call', call: postCall(fn, wholeBody, names, 1), counted: count !== null });
  return { key, params: bodyParam === null ? [] : [bodyParam], offset: 0, tree };
}

/**
 * GET: query-string arguments, cast to the declared types. For a function whose result has
 * columns, a parameter no function of that name takes shapes the result instead.
 */
function planGet(cat: Catalog, req: RpcRequest): Planned {
  const sp = new URLSearchParams(req.query);
  const values = new Map<string, string>();
  const shaping = hasResultColumns(cat, req.name);
  const argNames = shaping ? argumentNames(cat, req.name) : null;
  const rest = new URLSearchParams();
  for (const [k, v] of sp) {
    if (argNames !== null && !argNames.has(k)) {
      rest.append(k, v);
      continue;
    }
    if (values.has(k)) throw ERRORS.invalidRequest();
    values.set(k, v);
  }
  const names = [...values.keys()].sort();
  const { fn } = resolveFunction(cat, req.name, names, false);
  checkArgs(fn, values, false);
  const rel = shaping ? resultRelation(cat, fn) : null;
  const count = req.prefer.count;
  if (rel !== null && (rest.size > 0 || count !== null)) {
    return planShaped(cat, fn, rel, rest.toString(), count, { post: false, wholeBody: false, names, args: names.map((n) => values.get(n)!) });
  }
  if (rest.size > 0) throw ERRORS.invalidRequest();
  const key = 'RPCGET\u0000' + fn.oid + '\u0000' + names.join('\u0001') + (count === null ? '' : '\u0000n');
  const tree = (): ActionPlan => ({ kind: 'call', call: getCall(fn, names, 1), counted: count !== null });
  return { key, params: names.map((n) => values.get(n)!), offset: 0, tree };
}

/**
 * A set-returning function's result shaped by the query string as a table read is: the call
 * is the row source; the query's values come first, then limit and offset, then the
 * arguments. A count (any kind) is exact: the planner cannot estimate a function's rows.
 */
function planShaped(
  cat: Catalog,
  fn: Func,
  rel: Relation,
  query: string,
  counting: Prefer['count'],
  a: { post: boolean; wholeBody: boolean; names: readonly string[]; args: readonly string[] },
): Planned {
  let q: ParsedQuery;
  try {
    q = parseQuery(query);
  } catch (err) {
    throw grammarToAppError(err);
  }
  checkFilters(rel, q);
  const count = counting === null ? null : 'exact';
  const key =
    'RPCQ\u0000' + (a.post ? 'P' : 'G') + fn.oid + '\u0000' + (a.wholeBody ? '\u0002' : a.names.join('\u0001')) + '\u0000' + shapeOf(q) + '\u0000' + (count ?? '');
  const tree = (): ReadPlan => {
    checkSelect(cat, rel, q.select);
    const first = q.values.length + (q.limit === null ? 0 : 1) + (q.offset === null ? 0 : 1) + 1;
    const call = a.post ? postCall(fn, a.wholeBody, a.names, first) : getCall(fn, a.names, first);
    return { kind: 'read', node: readLevel(cat, rel, q), from: { kind: 'call', call }, count, values: q.values.length, singular: false, csv: false };
  };
  const params: Param[] = [];
  bindValues(q.values, params);
  if (q.limit !== null) params.push(String(q.limit));
  if (q.offset !== null) params.push(String(q.offset));
  for (const v of a.args) params.push(v);
  return { key, params, offset: q.offset ?? 0, tree };
}
