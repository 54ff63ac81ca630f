/**
 * The client's HTTP core: every call answers `{data, error}` and never throws for an HTTP
 * error; `error` carries the status and the service's message (`{"error": "…"}`, docs/api/overview.md).
 * No Node-only imports: this runs in browsers (through the bundle) and in Node 20+.
 */

/** An error from the service (status ≥ 400) or from the network (status 0). */
export class PlinthError extends Error {
  /** HTTP status; 0 when the request never got an answer. */
  readonly status: number;
  /** The parsed error body, when the service sent one (e.g. a batch's `failed_operation`). */
  readonly body: unknown;
  constructor(message: string, status: number, body?: unknown) {
    super(message);
    this.name = 'PlinthError';
    this.status = status;
    this.body = body;
  }
  toJSON(): { name: string; message: string; status: number } {
    return { name: this.name, message: this.message, status: this.status };
  }
}

export type Result<T> = { data: T; error: null } | { data: null; error: PlinthError };

export type Fetch = typeof fetch;
export type RequestBody = NonNullable<RequestInit['body']>;

/** Headers a request should carry: apikey always, Authorization from the session. */
export type HeaderSource = () => Promise<Record<string, string>>;

export interface RequestOptions {
  body?: unknown;
  /** Raw body (Blob, ArrayBuffer, stream, string); sent as is. */
  raw?: RequestBody | null;
  headers?: Record<string, string>;
  query?: Record<string, string | undefined>;
  /** Skip the session's Authorization (endpoints of auth level None). */
  noAuth?: boolean;
  /** How to read a 2xx body: JSON (default), Blob, or decided by Content-Type. */
  as?: 'json' | 'blob' | 'auto';
  redirect?: RequestInit['redirect'];
  signal?: AbortSignal;
  duplex?: 'half';
}

export interface Http {
  url: string;
  anonKey: string;
  fetch: Fetch;
  request<T = unknown>(method: string, path: string, opts?: RequestOptions): Promise<Result<T> & { status: number; response?: Response }>;
}

/** The service's message from an error body: `{error}`, `{message}`, or the text itself. */
export function errorFromBody(status: number, text: string, contentType: string | null): PlinthError {
  let body: unknown = text;
  let message = text || `request failed with status ${status}`;
  if ((contentType ?? '').includes('json') || text.startsWith('{')) {
    try {
      body = JSON.parse(text);
      const b = body as { error?: unknown; message?: unknown; error_description?: unknown };
      if (typeof b.error === 'string') message = b.error;
      else if (typeof b.message === 'string') message = b.message;
      else if (typeof b.error_description === 'string') message = b.error_description;
    } catch {
      /* plain text */
    }
  }
  return new PlinthError(message, status, body);
}

export function networkError(e: unknown): PlinthError {
  const msg = e instanceof Error ? e.message : String(e);
  return new PlinthError(`network error: ${msg}`, 0);
}

export function createHttp(url: string, anonKey: string, fetchImpl: Fetch, headers: HeaderSource, extra: Record<string, string> = {}): Http {
  const base = url.replace(/\/+$/, '');
  return {
    url: base,
    anonKey,
    fetch: fetchImpl,
    async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<Result<T> & { status: number; response?: Response }> {
      const h: Record<string, string> = opts.noAuth ? { ...extra, apikey: anonKey } : await headers();
      Object.assign(h, opts.headers);
      let body: RequestBody | null | undefined = opts.raw;
      if (opts.body !== undefined) {
        body = JSON.stringify(opts.body);
        if (!Object.keys(h).some((k) => k.toLowerCase() === 'content-type')) h['content-type'] = 'application/json';
      }
      let target = base + path;
      if (opts.query) {
        const q = new URLSearchParams();
        for (const [k, v] of Object.entries(opts.query)) if (v !== undefined) q.append(k, v);
        const s = q.toString();
        if (s) target += (target.includes('?') ? '&' : '?') + s;
      }
      let res: Response;
      try {
        const init: RequestInit & { duplex?: 'half' } = { method, headers: h, body, redirect: opts.redirect, signal: opts.signal };
        if (opts.duplex) init.duplex = opts.duplex;
        res = await fetchImpl(target, init);
      } catch (e) {
        return { data: null, error: networkError(e), status: 0 };
      }
      if (res.type === 'opaqueredirect' || (res.status >= 300 && res.status < 400)) {
        return { data: null as unknown as T, error: null, status: res.status, response: res };
      }
      if (!res.ok) {
        const text = await res.text().catch(() => '');
        return { data: null, error: errorFromBody(res.status, text, res.headers.get('content-type')), status: res.status, response: res };
      }
      try {
        const data = await readBody(res, opts.as ?? 'json');
        return { data: data as T, error: null, status: res.status, response: res };
      } catch (e) {
        return { data: null, error: new PlinthError(`unreadable response: ${e instanceof Error ? e.message : String(e)}`, res.status), status: res.status };
      }
    },
  };
}

export async function readBody(res: Response, as: 'json' | 'blob' | 'auto'): Promise<unknown> {
  if (as === 'blob') return res.blob();
  const type = res.headers.get('content-type') ?? '';
  if (as === 'auto' && !type.includes('json')) {
    if (type.startsWith('text/')) return res.text();
    return res.blob();
  }
  const text = await res.text();
  return text === '' ? null : JSON.parse(text);
}
