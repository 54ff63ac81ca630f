/**
 * POST /rest/v1/batch (docs/api/rest.md): several REST and RPC
 * operations in one transaction under the request's role and claims.
 *
 * - Validation first: the body's shape, the number of operations (MAX_BATCH_OPERATIONS),
 *   each method and path, unique ids. Anything refused is refused before anything runs.
 * - Each operation goes through the same stages (`operationRequest`, `prepare`) and the
 *   same executor (`run`, `outcome`) as a single request, on the transaction's connection;
 *   errors through the same mapper. Nothing here knows the grammar or SQLSTATEs.
 * - Atomic (default): the first failure rolls everything back: 422 with the results so
 *   far, the failed one last, `error` = `operation <id> failed: <message>` and
 *   `failed_operation`. Partial (`atomic: false`): every operation runs inside its own
 *   savepoint (savepoint, statement and release are pipelined: one round trip); a failure
 *   rolls back to it and the batch goes on; 207 when any failed, else 200.
 * - Templates `{{id.path}}` in `query` and `body` resolve from earlier successful
 *   operations' data (parsed from their JSON text only when referenced).
 */
import type postgres from 'postgres';
import type { Db, RequestContext, ReservedSql } from '../core/db.ts';
import { AppError, ERRORS, pgErrorToAppError } from '../core/errors.ts';
import type { Catalog } from './catalog.ts';
import { RESERVED_NAMES } from './catalog.ts';
import { prepare, type Prepared } from './prepare.ts';
import { operationRequest, type Method } from './request.ts';
import { outcome, run } from './execute.ts';

export interface BatchOperation {
  readonly id: string;
  readonly method: Method;
  /** Table name or function name, decoded. */
  readonly target: string;
  readonly rpc: boolean;
  readonly query: string;
  readonly body: unknown;
}

interface Result {
  id: string;
  status: number;
  /** JSON text of the data (success). */
  data?: string;
  error?: string;
}

const PREFIX = '/rest/v1/';

function notAllowed(id: string, method: unknown, path: unknown): AppError {
  return new AppError(400, `operation ${id} is not allowed: ${String(method)} ${String(path)}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Checks the whole request before anything runs; returns the operations and the mode. */
export function validateBatch(body: unknown, maxOperations: number): { atomic: boolean; operations: BatchOperation[] } {
  if (!isObject(body)) throw ERRORS.invalidBody();
  const { atomic = true, operations } = body;
  if (typeof atomic !== 'boolean' || !Array.isArray(operations)) throw ERRORS.invalidBody();
  if (operations.length > maxOperations) {
    throw new AppError(400, `too many operations: at most ${maxOperations} (MAX_BATCH_OPERATIONS)`);
  }
  const ids = new Set<string>();
  const out: BatchOperation[] = [];
  operations.forEach((raw: unknown, i: number) => {
    if (!isObject(raw)) throw ERRORS.invalidBody();
    const { id = `op${i}`, method, path, query = '', body: opBody } = raw;
    if (typeof id !== 'string' || id === '' || typeof method !== 'string' || typeof path !== 'string' || typeof query !== 'string') {
      throw ERRORS.invalidBody();
    }
    if (opBody !== undefined && typeof opBody !== 'object') throw ERRORS.invalidBody();
    if (ids.has(id)) throw new AppError(400, `duplicate operation id ${id}`);
    ids.add(id);
    if (method !== 'GET' && method !== 'POST' && method !== 'PATCH' && method !== 'DELETE') throw notAllowed(id, method, path);
    if (!path.startsWith(PREFIX)) throw notAllowed(id, method, path);
    // A query string in the path is taken too, before `query`.
    const q = path.indexOf('?');
    const rest = path.slice(PREFIX.length, q < 0 ? undefined : q);
    const pathQuery = q < 0 ? '' : path.slice(q + 1);
    const fullQuery = pathQuery === '' ? query : query === '' ? pathQuery : pathQuery + '&' + query;
    let name: string;
    let rpc = false;
    try {
      if (rest.startsWith('rpc/')) {
        rpc = true;
        name = decodeURIComponent(rest.slice(4));
      } else name = decodeURIComponent(rest);
    } catch {
      throw notAllowed(id, method, path);
    }
    if (name === '' || name.includes('/')) throw notAllowed(id, method, path);
    if (rpc && method !== 'GET' && method !== 'POST') throw notAllowed(id, method, path);
    if (!rpc && RESERVED_NAMES.has(name)) throw notAllowed(id, method, path);
    out.push({ id, method, target: name, rpc, query: fullQuery, body: opBody === null ? undefined : opBody });
  });
  return { atomic, operations: out };
}

// ---------------------------------------------------------------------------
// templates
// ---------------------------------------------------------------------------

const TEMPLATE = /\{\{([^{}]*)\}\}/g;
const MISSING: unique symbol = Symbol('missing');

/** Values of a `*` segment: joined with ',' in text, an array where a whole value. */
class Spread {
  readonly items: unknown[];
  constructor(items: unknown[]) {
    this.items = items;
  }
}

/** A JSON value, a `Spread` or `MISSING` (told apart with `instanceof` and `===`). */
type Resolved = unknown;

function unresolved(template: string): AppError {
  return new AppError(400, `unresolved template ${template}`);
}

function walk(v: unknown, segs: readonly string[], i: number): Resolved {
  if (i === segs.length) return v;
  const s = segs[i];
  if (Array.isArray(v)) {
    if (s === '*') {
      const items: unknown[] = [];
      for (const e of v) {
        const r = walk(e, segs, i + 1);
        if (r === MISSING || r instanceof Spread) return MISSING;
        items.push(r);
      }
      return new Spread(items);
    }
    if (/^\d+$/.test(s)) {
      const k = Number(s);
      return k < v.length ? walk(v[k], segs, i + 1) : MISSING;
    }
    // `{{op.field}}` on a one-element array reads that element (docs/api/rest.md).
    return v.length === 1 ? walk(v[0], segs, i) : MISSING;
  }
  if (isObject(v) && Object.hasOwn(v, s)) return walk(v[s], segs, i + 1);
  return MISSING;
}

function scalarText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === null || typeof v !== 'object') return String(v);
  return JSON.stringify(v);
}

/** An element of a `*` list as an `in.(…)` element: quoted when it would not survive bare. */
function listElement(v: unknown): string {
  const s = scalarText(v);
  return /[,()"\\]|^\s|\s$|^$/.test(s) ? '"' + s.replaceAll('\\', '\\\\').replaceAll('"', '\\"') + '"' : s;
}

class Templates {
  private readonly data = new Map<string, { text: string; parsed?: unknown }>();

  record(id: string, text: string): void {
    this.data.set(id, { text });
  }

  private resolve(template: string, inner: string): Resolved {
    const segs = inner.trim().split('.');
    const entry = this.data.get(segs[0]);
    if (entry === undefined) throw unresolved(template);
    if (!('parsed' in entry)) entry.parsed = JSON.parse(entry.text) as unknown;
    const r = walk(entry.parsed, segs, 1);
    if (r === MISSING || r === undefined) throw unresolved(template);
    return r;
  }

  private text(template: string, inner: string, encode: (s: string) => string): string {
    const r = this.resolve(template, inner);
    if (r instanceof Spread) return r.items.map((x) => encode(listElement(x))).join(',');
    return encode(scalarText(r));
  }

  query(q: string): string {
    if (!q.includes('{{')) return q;
    return q.replace(TEMPLATE, (m, inner: string) => this.text(m, inner, encodeURIComponent));
  }

  body(v: unknown): unknown {
    if (typeof v === 'string') {
      if (!v.includes('{{')) return v;
      const whole = /^\{\{([^{}]*)\}\}$/.exec(v);
      if (whole) {
        const r = this.resolve(v, whole[1]);
        return r instanceof Spread ? r.items : r;
      }
      return v.replace(TEMPLATE, (m, inner: string) => this.text(m, inner, (s) => s));
    }
    if (Array.isArray(v)) return v.map((x) => this.body(x));
    if (isObject(v)) {
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(v)) out[k] = this.body(v[k]);
      return out;
    }
    return v;
  }
}

// ---------------------------------------------------------------------------
// running
// ---------------------------------------------------------------------------

/** Thrown inside the transaction to roll an atomic batch back. */
class Abort extends Error {
  readonly result: Result;
  constructor(result: Result) {
    super('batch aborted');
    this.result = result;
  }
}

/** One operation through the same stages as a request of its own (templates resolved first). */
function prepareOperation(cat: Catalog, op: BatchOperation, t: Templates): Prepared {
  if (op.rpc) return prepare(cat, operationRequest({ ...op, body: op.method === 'POST' ? t.body(op.body) : undefined }));
  const body = op.body === undefined ? undefined : t.body(op.body);
  return prepare(cat, operationRequest({ ...op, query: t.query(op.query), body }));
}

function failure(id: string, err: unknown): Result {
  const e = pgErrorToAppError(err);
  // A lost connection is the whole request's failure, not one operation's.
  if (e.status === 503) throw e;
  return { id, status: e.status, error: e.publicMessage };
}

async function runPartial(c: ReservedSql, p: Prepared): Promise<readonly postgres.Row[]> {
  const [, res] = await Promise.allSettled([
    c`savepoint plinth_batch_op`.execute(),
    run(c, p).execute(),
    c`release savepoint plinth_batch_op`.execute(),
  ]);
  if (res.status === 'fulfilled') return res.value;
  await Promise.all([c`rollback to savepoint plinth_batch_op`.execute(), c`release savepoint plinth_batch_op`.execute()]);
  throw res.reason;
}

function render(results: readonly Result[], extra: string): string {
  let out = '{"results":[';
  results.forEach((r, i) => {
    if (i > 0) out += ',';
    out += `{"id":${JSON.stringify(r.id)},"status":${r.status}`;
    if (r.data !== undefined) out += `,"data":${r.data}`;
    if (r.error !== undefined) out += `,"error":${JSON.stringify(r.error)}`;
    out += '}';
  });
  return out + ']' + extra + '}';
}

export async function runBatch(
  db: Db,
  cat: Catalog,
  ctx: RequestContext,
  batch: { atomic: boolean; operations: readonly BatchOperation[] },
): Promise<{ status: number; body: string }> {
  const results: Result[] = [];
  const t = new Templates();
  let failed = false;
  try {
    await db.transactionWithContext(ctx, async (c) => {
      for (const op of batch.operations) {
        let result: Result;
        try {
          const p = prepareOperation(cat, op, t);
          const rows = batch.atomic ? await run(c, p).execute() : await runPartial(c, p);
          const out = outcome(p, rows);
          result = { id: op.id, status: out.status, data: out.body ?? 'null' };
          t.record(op.id, result.data!);
        } catch (err) {
          result = failure(op.id, err);
          if (batch.atomic) throw new Abort(result);
          failed = true;
        }
        results.push(result);
      }
    });
  } catch (err) {
    if (!(err instanceof Abort)) throw pgErrorToAppError(err);
    results.push(err.result);
    const extra = `,"error":${JSON.stringify(`operation ${err.result.id} failed: ${err.result.error}`)},"failed_operation":${JSON.stringify(err.result.id)}`;
    return { status: 422, body: render(results, extra) };
  }
  return { status: failed ? 207 : 200, body: render(results, '') };
}
