/**
 * The REST compiler, parse → plan → build joined: (catalog, operation) → one SQL statement whose single row carries
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

import { parseQuery, type ParsedQuery, type Value } from './grammar.ts';
import { shapeOf } from './shape.ts';
import type { Catalog, Func, Relation } from './catalog.ts';
import { ERRORS } from '../core/errors.ts';
import { checkArgs, checkFilters, checkRows, checkSelect } from './limits.ts';
import { grammarToAppError, REST_ERRORS } from './errors.ts';
import { argumentNames, bodyColumns, bodyError, hasResultColumns, isPlainObject, resolveFunction, resultRelation, rpcPlan, withRange, type Param, type Plan, type Prepared, type RpcRequest, type TableRequest } from './plan.ts';
import { compileTable, rpcCall, rpcSelect } from './sql/build.ts';
import { arrayLiteral, castParam } from './sql/fragments.ts';
import { ident } from './catalog.ts';

function bindValues(values: readonly Value[], out: Param[]): void {
  for (const v of values) out.push(typeof v === 'string' ? v : arrayLiteral(v));
}

/** Compile (or fetch from the catalog's cache) and bind one table operation. */
export function prepareTable(cat: Catalog, req: TableRequest): Prepared {
  const rel = cat.relations.get(req.table);
  if (rel === undefined) throw REST_ERRORS.relationNotFound(req.table);
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
    // A filter is required (docs/api/rest.md), and paging a write is refused
    // rather than silently ignored.
    if (q.filters.length === 0 && q.logic.length === 0) throw ERRORS.invalidRequestBecause(`${req.method} needs a filter (such as ?id=eq.1): it would change every row`);
    if (q.limit !== null || q.offset !== null) throw ERRORS.invalidRequestBecause(`${req.method} takes no limit or offset`);
  }
  if (req.method !== 'POST') checkFilters(rel, q);

  const minimal = req.prefer.returnMinimal && req.method !== 'GET';
  const count = minimal ? null : req.prefer.count;
  const csv = req.method === 'GET' && req.csv === true;
  const singular = req.singular && !minimal && !csv;
  // `handling=strict; max-affected=N` bounds PATCH and DELETE (POST and GET are not bounded, as PostgREST).
  const maxAffected =
    req.prefer.strict && req.prefer.maxAffected !== null && (req.method === 'PATCH' || req.method === 'DELETE') ? req.prefer.maxAffected : undefined;
  const counted = minimal && maxAffected !== undefined;
  const missingDefault = req.method === 'POST' && req.prefer.missingDefault;
  const key =
    req.method + '\u0000' + rel.name + '\u0000' + shapeOf(q) + '\u0000' + columns.join('\u0001') + '\u0000' +
    (minimal ? 'm' : '') + (singular ? 's' : '') + (csv ? 'c' : '') + (counted ? 'n' : '') + (missingDefault ? 'd' : '') + (count ?? '');
  let plan = cat.cached<Plan>(key);
  if (plan === undefined) {
    checkSelect(cat, rel, q.select);
    plan = cat.remember(key, compileTable(cat, rel, req.method, q, columns, { minimal, count, singular, csv, counted, missingDefault }));
  }

  // POST takes only `select` from the query (filters, order and paging mean nothing there).
  const params: Param[] = [];
  bindValues(q.values, params);
  if (req.method === 'GET') {
    if (q.limit !== null) params.push(String(q.limit));
    if (q.offset !== null) params.push(String(q.offset));
  }
  if (bodyParam !== null) params.push(bodyParam);
  const p: Prepared = ranged ? { plan, params, offset: q.offset ?? 0, ranged } : { plan, params, offset: q.offset ?? 0 };
  return req.rollback === true || maxAffected !== undefined ? { ...p, rollback: req.rollback === true, maxAffected } : p;
}

export function prepareRpc(cat: Catalog, req: RpcRequest): Prepared & { fn: Func } {
  if (req.method === 'POST') {
    const b = req.body === undefined ? {} : req.body;
    if (!isPlainObject(b)) throw ERRORS.invalidBody();
    const names = Object.keys(b).sort();
    const { fn, wholeBody } = resolveFunction(cat, req.name, names, true);
    if (!wholeBody) checkArgs(fn, Object.entries(b), true);
    const bodyParam = wholeBody || names.length > 0 ? req.bodyText ?? JSON.stringify(b) : null;
    const rel = resultRelation(cat, fn);
    if (rel !== null && ((req.query !== undefined && req.query !== '') || req.count != null)) {
      return prepareRpcQuery(cat, fn, rel, req, { post: true, wholeBody, names, args: bodyParam === null ? [] : [bodyParam] });
    }
    const key = 'RPC\u0000' + fn.oid + '\u0000' + (wholeBody ? '\u0002' : names.join('\u0001')) + (req.count == null ? '' : '\u0000n');
    let plan = cat.cached<Plan>(key);
    if (plan === undefined) {
      const c = postCall(fn, wholeBody, names, 1);
      plan = cat.remember(key, countedRpc(rpcPlan(fn, rpcSelect(fn, c.call, c.from)), req));
    }
    return { plan, params: bodyParam === null ? [] : [bodyParam], offset: 0, fn };
  }

  // GET: query-string arguments, cast to the declared types. For a function whose result has
  // columns, a parameter no function of that name takes shapes the result instead.
  const sp = new URLSearchParams(req.query ?? '');
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
  if (rel !== null && (rest.size > 0 || req.count != null)) {
    return prepareRpcQuery(cat, fn, rel, { ...req, query: rest.toString() }, { post: false, wholeBody: false, names, args: names.map((n) => values.get(n)!) });
  }
  if (rest.size > 0) throw ERRORS.invalidRequest();
  const key = 'RPCGET\u0000' + fn.oid + '\u0000' + names.join('\u0001') + (req.count == null ? '' : '\u0000n');
  let plan = cat.cached<Plan>(key);
  if (plan === undefined) plan = cat.remember(key, countedRpc(rpcPlan(fn, rpcSelect(fn, getCall(fn, names, 1), '')), req));
  return { plan, params: names.map((n) => values.get(n)!), offset: 0, fn };
}

/**
 * A function without result columns under `Prefer: count=`: Content-Range counts what it
 * returned (a scalar is one row, a set its rows), exactly, as PostgREST answers.
 */
function countedRpc(plan: Plan, req: RpcRequest): Plan {
  return req.count == null ? plan : { ...plan, contentRange: true, count: 'exact' };
}

/** A POST call whose arguments come from the JSON body bound as `$first`: the call, and the FROM item it reads them from. */
function postCall(fn: Func, wholeBody: boolean, names: readonly string[], first: number): { call: string; from: string } {
  if (wholeBody) return { call: rpcCall(fn, [`$${first}::text::${fn.inputs[0].cast}`]), from: '' };
  if (names.length === 0) return { call: rpcCall(fn, []), from: '' };
  const args = names.map((n) => fn.inputs.find((a) => a.name === n)!);
  const defs = args.map((a) => `${ident(a.name)} ${a.cast}`).join(', ');
  const call = rpcCall(
    fn,
    args.map((a) => `${a.mode === 'v' ? 'variadic ' : ''}${ident(a.name)} => _a.${ident(a.name)}`),
  );
  return { call, from: `json_to_record($${first}::text::json) as _a(${defs})` };
}

/** A GET call whose arguments are bound as text from `$first` on, in `names` order. */
function getCall(fn: Func, names: readonly string[], first: number): string {
  return rpcCall(
    fn,
    names.map((n, i) => {
      const a = fn.inputs.find((x) => x.name === n)!;
      return `${a.mode === 'v' ? 'variadic ' : ''}${ident(a.name)} => ${castParam(first + i, a.cast)}`;
    }),
  );
}

/**
 * A set-returning function's result shaped by the query string as a table read is: the call
 * is the row source `_t0`; the query's values come first, then limit and offset, then the
 * arguments. A count (any kind) is exact: the planner cannot estimate a function's rows.
 */
function prepareRpcQuery(
  cat: Catalog,
  fn: Func,
  rel: Relation,
  req: RpcRequest,
  a: { post: boolean; wholeBody: boolean; names: readonly string[]; args: readonly string[] },
): Prepared & { fn: Func } {
  let q: ParsedQuery;
  try {
    q = parseQuery(req.query ?? '');
  } catch (err) {
    throw grammarToAppError(err);
  }
  checkFilters(rel, q);
  const count = req.count == null ? null : 'exact';
  const key =
    'RPCQ\u0000' + (a.post ? 'P' : 'G') + fn.oid + '\u0000' + (a.wholeBody ? '\u0002' : a.names.join('\u0001')) + '\u0000' + shapeOf(q) + '\u0000' + (count ?? '');
  let plan = cat.cached<Plan>(key);
  if (plan === undefined) {
    checkSelect(cat, rel, q.select);
    const first = q.values.length + (q.limit === null ? 0 : 1) + (q.offset === null ? 0 : 1) + 1;
    let source: string;
    if (a.post) {
      const c = postCall(fn, a.wholeBody, a.names, first);
      source = (c.from === '' ? '' : c.from + ', ') + c.call + ' _t0';
    } else source = getCall(fn, a.names, first) + ' _t0';
    const table = compileTable(cat, rel, 'GET', q, [], { minimal: false, count, singular: false, source });
    plan = cat.remember(key, { ...rpcPlan(fn, table.text), contentRange: true, count });
  }
  const params: Param[] = [];
  bindValues(q.values, params);
  if (q.limit !== null) params.push(String(q.limit));
  if (q.offset !== null) params.push(String(q.offset));
  for (const v of a.args) params.push(v);
  return { plan, params, offset: q.offset ?? 0, fn };
}
