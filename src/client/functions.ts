/** Edge functions (docs/api/functions.md): `functions.invoke(name, options)`. */
import type { Http, RequestBody, Result } from './http.ts';

export interface InvokeOptions {
  /** An object is sent as JSON; a string as text; Blob, ArrayBuffer, FormData as they are. */
  body?: unknown;
  /** Default POST, as supabase-js. */
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  headers?: Record<string, string>;
}

function isRaw(b: unknown): b is RequestBody {
  return (
    typeof b === 'string' ||
    (typeof Blob !== 'undefined' && b instanceof Blob) ||
    b instanceof ArrayBuffer ||
    ArrayBuffer.isView(b) ||
    (typeof FormData !== 'undefined' && b instanceof FormData) ||
    (typeof URLSearchParams !== 'undefined' && b instanceof URLSearchParams)
  );
}

export class FunctionsClient {
  private readonly http: Http;
  constructor(http: Http) {
    this.http = http;
  }

  /**
   * Call `/functions/v1/<name>`. `data` is the parsed JSON result (text for text/*, a Blob
   * otherwise); an HTTP error gives `error` with the status and the service's message.
   */
  async invoke<T = unknown>(name: string, options: InvokeOptions = {}): Promise<Result<T>> {
    const method = options.method ?? 'POST';
    const headers = { ...options.headers };
    const hasType = Object.keys(headers).some((k) => k.toLowerCase() === 'content-type');
    let raw: RequestBody | undefined;
    let body: unknown;
    if (options.body !== undefined && method !== 'GET') {
      if (isRaw(options.body)) {
        raw = options.body;
        if (typeof options.body === 'string' && !hasType) headers['content-type'] = 'text/plain';
      } else body = options.body;
    }
    const r = await this.http.request<T>(method, `/functions/v1/${encodeURIComponent(name)}`, { headers, body, raw, as: 'auto' });
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
  }
}
