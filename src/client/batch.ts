/**
 * Batch (docs/api/rest.md): several REST and RPC operations in one transaction, with
 * `{{op.field}}` templates that read earlier results.
 */
import { PlinthError, type Http, type Result } from './http.ts';

export type BatchMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

export interface BatchOperation {
  id?: string;
  method: BatchMethod;
  /** `/rest/v1/<table>` or `/rest/v1/rpc/<fn>`; a bare `table` or `rpc/fn` gets the prefix. */
  path: string;
  /** Query string, or an object of parameters (values may hold templates). */
  query?: string | Record<string, string | number | boolean>;
  body?: unknown;
}

export interface BatchResult {
  id: string;
  status: number;
  data?: unknown;
  error?: string;
}

const ID = /^[A-Za-z0-9_-]+$/;

/**
 * A template reading a field of an earlier operation's result: `ref('order', 'id')` is
 * `{{order.id}}`; `ref('items', 0, 'id')` is `{{items.0.id}}`; `ref('items', '*', 'id')`
 * is `{{items.*.id}}` (comma-separated, for `in.(…)`); `ref('o', 'a.b')` is `{{o.a.b}}`.
 */
export function ref(opId: string, ...path: (string | number)[]): string {
  if (!ID.test(opId)) throw new TypeError(`invalid operation id for a template: ${JSON.stringify(opId)}`);
  if (path.length === 0) throw new TypeError('a template needs a field path');
  const parts: string[] = [];
  for (const p of path) {
    for (const seg of String(p).split('.')) {
      if (!seg || /[{}\s]/.test(seg)) throw new TypeError(`invalid template path segment: ${JSON.stringify(String(p))}`);
      parts.push(seg);
    }
  }
  return `{{${opId}.${parts.join('.')}}}`;
}

/** The operation as the service takes it: full path, query string. */
export function normalizeOperation(op: BatchOperation): Record<string, unknown> {
  const out: Record<string, unknown> = { method: op.method.toUpperCase() };
  if (op.id !== undefined) out.id = op.id;
  out.path = op.path.startsWith('/') ? op.path : `/rest/v1/${op.path}`;
  if (op.query !== undefined) {
    if (typeof op.query === 'string') out.query = op.query.replace(/^\?/, '');
    else {
      // Templates stay readable: only characters that would break the query are encoded.
      out.query = Object.entries(op.query)
        .map(([k, v]) => `${encodeURIComponent(k)}=${String(v).replace(/[&#%+ ]/g, (c) => encodeURIComponent(c))}`)
        .join('&');
    }
  }
  if (op.body !== undefined) out.body = op.body;
  return out;
}

export interface BatchData {
  results: BatchResult[];
  /** 200 when every operation succeeded, 207 when some failed (atomic: false). */
  status: number;
}

/**
 * POST /rest/v1/batch. Atomic (the default): all or nothing; a failure answers `error`
 * (status 422, the service's message) with `error.body.results` and `failed_operation`.
 */
export async function runBatch(http: Http, operations: BatchOperation[], options: { atomic?: boolean } = {}): Promise<Result<BatchData>> {
  const r = await http.request<{ results?: BatchResult[] } | BatchResult[]>('POST', '/rest/v1/batch', {
    body: { atomic: options.atomic ?? true, operations: operations.map(normalizeOperation) },
  });
  if (r.error) return { data: null, error: r.error };
  const results = Array.isArray(r.data) ? r.data : (r.data?.results ?? []);
  return { data: { results, status: r.status }, error: null };
}

export { PlinthError };
