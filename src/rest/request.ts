/**
 * The parse stage of REST (as PostgREST's `userApiRequest`): one HTTP request → an
 * `ApiRequest`, without the catalog. The headers (Accept, the profiles, Prefer, Range), the
 * query string (the grammar, once) and the body's shape are read here and nowhere else.
 *
 * A refusal whose answer the contract orders after a catalog check (a malformed query or
 * body on a relation that does not exist is 404, not 400) is kept as data (`Refused`) and
 * raised by the planner at its turn; header refusals (406, a malformed Range) are thrown here.
 * An RPC's query string stays raw: which of its parameters are arguments depends on the
 * function, so the planner splits it (and parses the shaping part with the same grammar).
 */
import type { FastifyRequest } from 'fastify';
import { ERRORS } from '../core/errors.ts';
import type { RestTxEnd } from '../core/config.ts';
import { parseQuery, type ParsedQuery } from './grammar.ts';
import { NO_PREFER, parsePrefer, type Prefer } from './prefer.ts';
import { grammarToAppError, REST_ERRORS } from './errors.ts';

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** A refusal found while parsing, raised by the planner in the contract's order. */
export interface Refused {
  readonly refused: unknown;
}

export function isRefused(v: unknown): v is Refused {
  return typeof v === 'object' && v !== null && 'refused' in v;
}

/** A plan asked for: its format and the EXPLAIN options named (analyze, verbose, settings, buffers, wal). */
export interface PlanRequest {
  format: 'json' | 'text';
  options: string[];
}

/** A write's body: its rows and the JSON text bound for them (an insert's always an array). */
export interface Body {
  readonly rows: readonly Record<string, unknown>[];
  readonly param: string;
}

export interface TableRequest {
  readonly kind: 'table';
  readonly method: Method;
  /** Relation name as it came in the path. */
  readonly table: string;
  /** The query string parsed (a POST's: `select` alone, see parseQuery). */
  readonly query: ParsedQuery | Refused;
  /** POST and PATCH: the body; null for GET and DELETE. */
  readonly body: Body | Refused | null;
  readonly prefer: Prefer;
  /** Accept: application/vnd.pgrst.object+json. */
  readonly singular: boolean;
  /** GET: `Accept: text/csv`. */
  readonly csv: boolean;
  /** GET: a `Range: from-to` header (`to` null: open). Intersected with limit/offset. */
  readonly range: { readonly from: number; readonly to: number | null } | null;
  /** End the transaction with a rollback (REST_TX_END, or `Prefer: tx=rollback` where it allows). */
  readonly rollback: boolean;
  /** An execution plan asked for instead of the answer (REST_PLAN_ENABLED). */
  readonly explain: PlanRequest | null;
  /**
   * SUPABASE_COMPAT=true, a POST with `Prefer: resolution=…`: upsert, on the columns of
   * `on_conflict` (null: the primary key). Absent otherwise: a plain insert.
   */
  /** SUPABASE_COMPAT=true: refusals in PostgREST's order. */
  readonly compat?: boolean;
  readonly upsert?: { readonly action: 'merge' | 'ignore'; readonly columns: readonly string[] | null } | Refused;
}

export interface RpcRequest {
  readonly kind: 'rpc';
  readonly method: 'GET' | 'POST';
  readonly name: string;
  /** POST: the JSON body's object (`{}` for none): the arguments by name, or the one JSON argument. */
  readonly body?: Record<string, unknown>;
  readonly bodyText?: string;
  /**
   * The raw query string. GET: a parameter the function takes is an argument; for a function
   * whose result has columns, the others shape the result (filters, select, order, paging)
   * as on a table. POST: all of it shapes the result.
   */
  readonly query: string;
  readonly prefer: Prefer;
  readonly rollback: boolean;
  readonly explain: PlanRequest | null;
}

export type ApiRequest = TableRequest | RpcRequest;

const SINGULAR_TYPE = 'application/vnd.pgrst.object+json';

export function rawQuery(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? '' : url.slice(q + 1);
}

/** The media types an answer can be given in (parameters such as `charset` aside). */
const PRODUCIBLE = new Set(['*/*', 'application/*', 'application/json', SINGULAR_TYPE, 'application/vnd.pgrst.object', 'text/csv']);

/** The execution-plan media types (PostgREST): JSON, or text (also the bare type). */
const PLAN_TYPES = new Map<string, 'json' | 'text'>([
  ['application/vnd.pgrst.plan+json', 'json'],
  ['application/vnd.pgrst.plan+text', 'text'],
  ['application/vnd.pgrst.plan', 'text'],
]);

/** The EXPLAIN options a plan type may name (`options=analyze|verbose|…`, as PostgREST). */
const PLAN_OPTIONS = new Set(['analyze', 'verbose', 'settings', 'buffers', 'wal']);

/** One entry of an Accept header without its parameters, lower-cased. */
function mediaType(part: string): string {
  const semi = part.indexOf(';');
  return (semi < 0 ? part : part.slice(0, semi)).trim().toLowerCase();
}

/**
 * `Accept` negotiation: an `Accept` that names none of the types plinth produces (JSON, the
 * single object, CSV) answers 406 rather than JSON the client did not ask for.
 */
function checkAccept(accept: string | undefined, plans: boolean): void {
  if (accept === undefined || accept === '') return;
  for (const part of accept.split(',')) {
    const type = mediaType(part);
    if (type === '' || PRODUCIBLE.has(type) || (plans && PLAN_TYPES.has(type))) return;
  }
  throw REST_ERRORS.notAcceptable();
}

/**
 * The plan the first plan type in Accept asks for — its format and the EXPLAIN options of its
 * `options=` parameter (unknown names are ignored) — or null when none does.
 */
function wantsPlan(accept: string | undefined): PlanRequest | null {
  if (accept === undefined || !accept.includes('application/vnd.pgrst.plan')) return null;
  for (const part of accept.split(',')) {
    const format = PLAN_TYPES.get(mediaType(part));
    if (format === undefined) continue;
    const param = /;\s*options\s*=\s*"?([a-z|]+)"?/i.exec(part)?.[1] ?? '';
    const options = [...new Set(param.toLowerCase().split('|'))].filter((o) => PLAN_OPTIONS.has(o));
    return { format, options };
  }
  return null;
}

/** Whether the transaction ends in a rollback: REST_TX_END, overridden by `Prefer: tx=` where it allows. */
function rollsBack(txEnd: RestTxEnd, prefer: Prefer): boolean {
  switch (txEnd) {
    case 'commit':
      return false;
    case 'rollback':
      return true;
    case 'commit-allow-override':
      return prefer.tx === 'rollback';
    case 'rollback-allow-override':
      return prefer.tx !== 'commit';
  }
}

/**
 * `Accept-Profile` / `Content-Profile` (postgrest-js `.schema()`): only `public` is exposed,
 * so naming another schema is refused rather than answered from `public`.
 */
function publicProfile(req: FastifyRequest): boolean {
  for (const h of [req.headers['accept-profile'], req.headers['content-profile']]) {
    if (h !== undefined && (Array.isArray(h) || h.trim() !== 'public')) return false;
  }
  return true;
}

/** `Range: from-to` / `from-` (items; PostgREST, 0-based, inclusive); malformed: 400. */
function parseRange(req: FastifyRequest): { from: number; to: number | null } | null {
  const h = req.headers.range;
  if (h === undefined) return null;
  const unit = req.headers['range-unit'];
  if (unit !== undefined && unit !== 'items') return null;
  const m = /^\s*(\d{1,15})-(\d{0,15})\s*$/.exec(h);
  if (m === null) throw ERRORS.invalidRequest();
  const from = Number(m[1]);
  const to = m[2] === '' ? null : Number(m[2]);
  if (to !== null && to < from) throw ERRORS.invalidRequest();
  return { from, to };
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The query string through the grammar, once; a syntax error is kept for the planner. */
export function tableQuery(method: Method, query: string, compat = false): ParsedQuery | Refused {
  try {
    return parseQuery(query, method === 'POST', compat);
  } catch (err) {
    return { refused: grammarToAppError(err) };
  }
}

/** A write's body: POST an object or an array of objects, PATCH an object. */
export function tableBody(method: Method, body: unknown, bodyText: string | undefined): Body | Refused | null {
  if (method === 'POST') {
    if (Array.isArray(body)) {
      for (const r of body) if (!isPlainObject(r)) return { refused: ERRORS.invalidBody() };
      return { rows: body as Record<string, unknown>[], param: bodyText ?? JSON.stringify(body) };
    }
    if (isPlainObject(body)) return { rows: [body], param: '[' + (bodyText ?? JSON.stringify(body)) + ']' };
    return { refused: ERRORS.invalidBody() };
  }
  if (method === 'PATCH') {
    if (!isPlainObject(body)) return { refused: ERRORS.invalidBody() };
    return { rows: [body], param: bodyText ?? JSON.stringify(body) };
  }
  return null;
}

/** An RPC's body: an object (none: `{}`); anything else is refused at once, before the function is looked up. */
function rpcBody(body: unknown): Record<string, unknown> {
  const b = body === undefined ? {} : body;
  if (!isPlainObject(b)) throw ERRORS.invalidBody();
  return b;
}

/** How the routes read a request: the service's settings that bear on it. */
export interface ParseOptions {
  readonly txEnd: RestTxEnd;
  /** REST_PLAN_ENABLED: the plan media types are accepted. */
  readonly plans: boolean;
  /** SUPABASE_COMPAT=true: upsert, embedded filters and `rel(count)` (docs/api/supabase.md). */
  readonly compat?: boolean;
}

/** `on_conflict=a,b`: the conflict target's column names; a blank name is refused. */
function upsertOf(query: string, resolution: 'merge' | 'ignore'): NonNullable<TableRequest['upsert']> {
  const raw = query.includes('on_conflict') ? new URLSearchParams(query).getAll('on_conflict') : [];
  if (raw.length === 0) return { action: resolution, columns: null };
  const columns = raw.length === 1 ? raw[0].split(',').map((c) => c.trim()) : [];
  if (columns.some((c) => c === '') || columns.length === 0) return { refused: ERRORS.invalidRequest() };
  return { action: resolution, columns };
}

/** A request to /rest/v1/{table}. */
export function parseTableRequest(req: FastifyRequest, table: string, method: Method, o: ParseOptions): TableRequest {
  if (!publicProfile(req)) throw REST_ERRORS.schemaNotExposed();
  const accept = req.headers.accept;
  checkAccept(accept, o.plans);
  const parsed = parsePrefer(req.headers.prefer);
  // SUPABASE_COMPAT=true: a write answers its rows only when `Prefer: return=representation` asks (PostgREST).
  const prefer = o.compat === true && method !== 'GET' && !parsed.returnMinimal && !/return\s*=\s*representation/i.test(String(req.headers.prefer ?? '')) ? { ...parsed, returnMinimal: true } : parsed;
  const query = rawQuery(req.url);
  const upsert = o.compat === true && method === 'POST' && prefer.resolution !== null ? { upsert: upsertOf(query, prefer.resolution) } : {};
  return {
    ...upsert,
    ...(o.compat === true ? { compat: true } : {}),
    kind: 'table',
    method,
    table,
    query: tableQuery(method, query, o.compat === true),
    body: tableBody(method, req.body, req.bodyText),
    prefer,
    singular: accept !== undefined && accept.includes(SINGULAR_TYPE),
    csv: method === 'GET' && accept !== undefined && accept.includes('text/csv'),
    range: method === 'GET' ? parseRange(req) : null,
    rollback: method !== 'GET' && rollsBack(o.txEnd, prefer),
    explain: o.plans ? wantsPlan(accept) : null,
  };
}

/** A request to /rest/v1/rpc/{name}. */
export function parseRpcRequest(req: FastifyRequest, name: string, method: 'GET' | 'POST', o: ParseOptions): RpcRequest {
  // A function outside `public` is not found (docs/api/rest.md, RPC), whatever the profile names.
  if (!publicProfile(req)) throw REST_ERRORS.functionNotFound();
  checkAccept(req.headers.accept, o.plans);
  const prefer = parsePrefer(req.headers.prefer);
  const base = { kind: 'rpc' as const, name, query: rawQuery(req.url), prefer, rollback: rollsBack(o.txEnd, prefer), explain: o.plans ? wantsPlan(req.headers.accept) : null };
  return method === 'POST' ? { ...base, method, body: rpcBody(req.body), bodyText: req.bodyText } : { ...base, method };
}

/** One operation of a batch, as a request: no headers, so no preferences. */
export function operationRequest(op: { method: Method; target: string; rpc: boolean; query: string; body: unknown }): ApiRequest {
  const common = { prefer: NO_PREFER, rollback: false, explain: null };
  if (op.rpc) {
    // For RPC paths only `body` supplies arguments; `query` is ignored for any method.
    return op.method === 'POST' ? { ...common, kind: 'rpc', method: 'POST', name: op.target, body: rpcBody(op.body), query: '' } : { ...common, kind: 'rpc', method: 'GET', name: op.target, query: '' };
  }
  return {
    ...common,
    kind: 'table',
    method: op.method,
    table: op.target,
    query: tableQuery(op.method, op.query),
    body: tableBody(op.method, op.body, undefined),
    singular: false,
    csv: false,
    range: null,
  };
}
