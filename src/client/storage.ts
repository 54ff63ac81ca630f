/**
 * Object storage (docs/api/storage.md): buckets, and objects in a bucket.
 */
import { PlinthError, type Http, type RequestBody, type Result } from './http.ts';

export interface Bucket {
  id: string;
  public: boolean;
  file_size_limit: number;
  allowed_mime_types: string[] | null;
  created_at: string;
}

export interface FileObject {
  id: string;
  /** The full object path inside the bucket (`a/1.txt`). */
  name: string;
  size: number;
  mime_type: string;
  created_at: string;
}

export interface BucketOptions {
  public?: boolean;
  /** Bytes; the service's default is 52428800. */
  fileSizeLimit?: number;
  allowedMimeTypes?: string[] | null;
}

export interface UploadOptions {
  /** Default: the File's or Blob's type, else the service guesses from the extension. */
  contentType?: string;
  /** Replace an existing object (header `x-upsert: true`); default false (409 when it exists). */
  upsert?: boolean;
}

export type UploadBody = Blob | ArrayBuffer | ArrayBufferView | ReadableStream<Uint8Array> | string;

/** An image transformation (the service's /render/image routes). */
export interface TransformOptions {
  width?: number;
  height?: number;
  /** `cover` (default), `contain` (fit inside, no padding) or `fill`. */
  resize?: 'cover' | 'contain' | 'fill';
  /** 20–100 (default 80). */
  quality?: number;
  /** `origin` (default), `webp` or `avif`. */
  format?: 'origin' | 'webp' | 'avif';
}

/**
 * What a resumable upload reads: a Blob or File, a web ReadableStream, or any async iterable
 * of bytes (a Node.js stream). A stream is read once, front to back; give its length as
 * `size`.
 */
export type ResumableSource = Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export interface ResumableOptions {
  /** The upload's length in bytes: required for a stream (a Blob knows its own). */
  size?: number;
  contentType?: string;
  cacheControl?: string;
  upsert?: boolean;
  /** Bytes per PATCH; default 6 MB, as Supabase's clients send. */
  chunkSize?: number;
  /** Called after each chunk the service has stored, with the bytes stored so far. */
  onProgress?: (uploaded: number, total: number) => void;
  /** Retries after a failed chunk (each asks the service where it stands); default 5. */
  retries?: number;
  /** The URL of an upload begun before (from `onCreated`): go on with it instead of creating one. */
  uploadUrl?: string;
  onCreated?: (uploadUrl: string) => void;
  signal?: AbortSignal;
}

/**
 * A stream source in chunks: the chunk last read stays held, so a chunk that fails can be
 * sent again from wherever the service stopped inside it (as tus-js-client does); what
 * came before it cannot.
 */
class StreamChunks {
  private readonly next: () => Promise<IteratorResult<Uint8Array>>;
  private rest: Uint8Array | null = null;
  /** The offset of the next unread byte. */
  private read = 0;
  private held: { start: number; bytes: Uint8Array } = { start: 0, bytes: new Uint8Array(0) };

  constructor(src: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>) {
    if (typeof (src as ReadableStream<Uint8Array>).getReader === 'function') {
      const reader = (src as ReadableStream<Uint8Array>).getReader();
      this.next = () => reader.read() as Promise<IteratorResult<Uint8Array>>;
    } else {
      const it = (src as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      this.next = () => it.next();
    }
  }

  /** Up to `n` bytes from the unread part (fewer only at the stream's end). */
  private async take(n: number): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    let have = 0;
    while (have < n) {
      let p = this.rest;
      this.rest = null;
      if (p === null) {
        const r = await this.next();
        if (r.done) break;
        p = r.value instanceof Uint8Array ? r.value : new Uint8Array(r.value);
      }
      if (have + p.length > n) {
        this.rest = p.subarray(n - have);
        p = p.subarray(0, n - have);
      }
      parts.push(p);
      have += p.length;
    }
    this.read += have;
    if (parts.length === 1) return parts[0];
    const out = new Uint8Array(have);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  /** The bytes from `at` on, `n` at most: from the chunk held, or read (skipping what the service has already). */
  async piece(at: number, n: number): Promise<Uint8Array> {
    const { start, bytes } = this.held;
    if (at >= start && at < start + bytes.length) return bytes.subarray(at - start, Math.min(bytes.length, at - start + n));
    if (at < this.read) throw new PlinthError('the stream cannot go back to the offset the service asks for', 0);
    while (this.read < at) {
      if ((await this.take(Math.min(at - this.read, n))).length === 0) break;
    }
    const got = await this.take(n);
    this.held = { start: at, bytes: got };
    return got;
  }
}

function transformQuery(t: TransformOptions | undefined): Record<string, string | undefined> {
  if (!t) return {};
  return {
    width: t.width?.toString(),
    height: t.height?.toString(),
    resize: t.resize,
    quality: t.quality?.toString(),
    format: t.format,
  };
}

function queryString(q: Record<string, string | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) p.append(k, v);
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** `a/b c.txt` → `a/b%20c.txt`: each segment encoded, the slashes kept. */
export function encodePath(path: string): string {
  return path
    .replace(/^\/+/, '')
    .split('/')
    .map((s) => encodeURIComponent(s))
    .join('/');
}

/** The request body and its Content-Type for an upload. */
export async function uploadBody(body: UploadBody, options: UploadOptions, browser: boolean): Promise<{ raw: RequestBody; contentType?: string; duplex?: 'half' }> {
  let contentType = options.contentType;
  if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) {
    // Browsers stream request bodies only over HTTP/2; buffer there, stream elsewhere.
    if (browser) return { raw: await new Response(body).blob(), contentType };
    return { raw: body, contentType, duplex: 'half' };
  }
  if (typeof Blob !== 'undefined' && body instanceof Blob) {
    contentType ??= body.type || undefined;
    return { raw: body, contentType };
  }
  if (typeof body === 'string') return { raw: body, contentType: contentType ?? 'text/plain;charset=UTF-8' };
  return { raw: body as RequestBody, contentType };
}

export class StorageFileApi {
  private readonly http: Http;
  private readonly bucket: string;
  private readonly browser: boolean;
  constructor(http: Http, bucket: string, browser: boolean) {
    this.http = http;
    this.bucket = bucket;
    this.browser = browser;
  }

  private objectPath(path: string): string {
    return `/storage/v1/object/${encodeURIComponent(this.bucket)}/${encodePath(path)}`;
  }

  /** POST the object; `data.path` is the path inside the bucket. */
  async upload(path: string, body: UploadBody, options: UploadOptions = {}): Promise<Result<{ id: string; key: string; path: string }>> {
    const b = await uploadBody(body, options, this.browser);
    const headers: Record<string, string> = {};
    if (b.contentType) headers['content-type'] = b.contentType;
    if (options.upsert) headers['x-upsert'] = 'true';
    const r = await this.http.request<{ id: string; key: string }>('POST', this.objectPath(path), { raw: b.raw, headers, duplex: b.duplex });
    if (r.error) return { data: null, error: r.error };
    return { data: { ...r.data, path }, error: null };
  }

  /** The object's content as a Blob (its `type` is the stored MIME type); with `transform`, the transformed image. */
  async download(path: string, options: { transform?: TransformOptions } = {}): Promise<Result<Blob>> {
    const route = options.transform
      ? `/storage/v1/render/image/authenticated/${encodeURIComponent(this.bucket)}/${encodePath(path)}`
      : this.objectPath(path);
    const r = await this.http.request<Blob>('GET', route, { as: 'blob', query: transformQuery(options.transform) });
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
  }

  /** A URL anyone may read the object with (no credentials) until `expiresIn` seconds have passed. */
  async createSignedUrl(path: string, expiresIn: number, options: { transform?: TransformOptions } = {}): Promise<Result<{ signedUrl: string }>> {
    const body: Record<string, unknown> = { expiresIn };
    if (options.transform) body.transform = options.transform;
    const r = await this.http.request<{ signedURL: string }>('POST', `/storage/v1/object/sign/${encodeURIComponent(this.bucket)}/${encodePath(path)}`, { body });
    return r.error ? { data: null, error: r.error } : { data: { signedUrl: this.signed(r.data.signedURL) }, error: null };
  }

  /** Signed URLs for several paths: `signedUrl` null (and `error` set) for those the caller cannot read. */
  async createSignedUrls(paths: string[], expiresIn: number): Promise<Result<{ path: string; signedUrl: string | null; error: string | null }[]>> {
    const r = await this.http.request<{ path: string; signedURL: string | null; error: string | null }[]>(
      'POST',
      `/storage/v1/object/sign/${encodeURIComponent(this.bucket)}`,
      { body: { expiresIn, paths } },
    );
    if (r.error) return { data: null, error: r.error };
    return { data: r.data.map((d) => ({ path: d.path, error: d.error, signedUrl: d.signedURL ? this.signed(d.signedURL) : null })), error: null };
  }

  /** `/object/sign/<bucket>/<path>?token=…` (as the service answers it) → an absolute URL, the path encoded. */
  private signed(rel: string): string {
    const q = rel.indexOf('?');
    const [route, rest] = [rel.slice(0, q), rel.slice(q)];
    const m = /^\/(object\/sign|render\/image\/sign)\/([^/]+)\/(.*)$/.exec(route);
    const path = m ? `/${m[1]}/${encodeURIComponent(m[2])}/${encodePath(m[3])}` : route;
    return `${this.http.url}/storage/v1${path}${rest}`;
  }

  /** A URL and token that let anyone upload this one object, once, within two hours. */
  async createSignedUploadUrl(path: string, options: { upsert?: boolean } = {}): Promise<Result<{ signedUrl: string; token: string; path: string }>> {
    const headers: Record<string, string> = options.upsert ? { 'x-upsert': 'true' } : {};
    const r = await this.http.request<{ url: string; token: string }>('POST', `/storage/v1/object/upload/sign/${encodeURIComponent(this.bucket)}/${encodePath(path)}`, {
      body: {},
      headers,
    });
    if (r.error) return { data: null, error: r.error };
    const signedUrl = `${this.http.url}/storage/v1/object/upload/sign/${encodeURIComponent(this.bucket)}/${encodePath(path)}?token=${encodeURIComponent(r.data.token)}`;
    return { data: { signedUrl, token: r.data.token, path }, error: null };
  }

  /** Upload with a token from `createSignedUploadUrl` (no session needed). */
  async uploadToSignedUrl(path: string, token: string, body: UploadBody, options: UploadOptions = {}): Promise<Result<{ path: string; fullPath: string }>> {
    const b = await uploadBody(body, options, this.browser);
    const headers: Record<string, string> = {};
    if (b.contentType) headers['content-type'] = b.contentType;
    const r = await this.http.request<{ Key: string }>('PUT', `/storage/v1/object/upload/sign/${encodeURIComponent(this.bucket)}/${encodePath(path)}`, {
      raw: b.raw,
      headers,
      duplex: b.duplex,
      query: { token },
      noAuth: true,
    });
    return r.error ? { data: null, error: r.error } : { data: { path, fullPath: r.data.Key }, error: null };
  }

  /**
   * A resumable upload (TUS 1.0.0, `/storage/v1/upload/resumable`): the Blob goes in chunks;
   * a chunk that fails is retried from the offset the service kept. Keep the URL given to
   * `onCreated` to go on after a reload (`uploadUrl`). A stream (ReadableStream, Node.js
   * stream) goes the same way with its length in `size`; after a reload, pass it again from
   * its start: what the service has already is skipped.
   */
  async uploadResumable(path: string, file: ResumableSource, options: ResumableOptions = {}): Promise<Result<{ path: string }>> {
    const chunk = options.chunkSize ?? 6 * 1000 * 1000;
    const blob = typeof Blob !== 'undefined' && file instanceof Blob ? file : null;
    const total = blob?.size ?? options.size;
    if (total === undefined || !Number.isSafeInteger(total) || total < 0) {
      return { data: null, error: new PlinthError('a stream needs its length in bytes (options.size)', 0) };
    }
    const stream = blob === null ? new StreamChunks(file as ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>) : null;
    const tus = { 'tus-resumable': '1.0.0' };
    let url = options.uploadUrl;
    if (url === undefined) {
      const b64 = (v: string) => btoa(String.fromCharCode(...new TextEncoder().encode(v)));
      const meta: Record<string, string> = { bucketName: this.bucket, objectName: path.replace(/^\/+/, '') };
      const type = options.contentType ?? (blob?.type || undefined);
      if (type) meta.contentType = type;
      if (options.cacheControl) meta.cacheControl = options.cacheControl;
      const headers: Record<string, string> = {
        ...tus,
        'upload-length': String(total),
        'upload-metadata': Object.entries(meta)
          .map(([k, v]) => `${k} ${b64(v)}`)
          .join(','),
      };
      if (options.upsert) headers['x-upsert'] = 'true';
      const c = await this.http.request('POST', '/storage/v1/upload/resumable', { headers, as: 'auto', signal: options.signal });
      if (c.error) return { data: null, error: c.error };
      const loc = c.response?.headers.get('location');
      if (!loc) return { data: null, error: new PlinthError('no upload location in the answer', c.status) };
      url = new URL(loc, this.http.url).pathname;
      options.onCreated?.(url);
    }
    const where = async (): Promise<Result<number>> => {
      const h = await this.http.request('HEAD', url, { headers: tus, as: 'auto', signal: options.signal });
      if (h.error) return { data: null, error: h.error };
      return { data: Number(h.response?.headers.get('upload-offset') ?? 0), error: null };
    };
    let at: number;
    const first = await where();
    if (first.error) return { data: null, error: first.error };
    at = first.data;
    let retries = options.retries ?? 5;
    while (at < total) {
      let piece: Blob | Uint8Array;
      try {
        piece = blob !== null ? blob.slice(at, Math.min(total, at + chunk)) : await stream!.piece(at, Math.min(total - at, chunk));
      } catch (err) {
        return { data: null, error: err instanceof PlinthError ? err : new PlinthError(`reading the stream failed: ${String(err)}`, 0) };
      }
      const size = piece instanceof Uint8Array ? piece.length : piece.size;
      if (size === 0) return { data: null, error: new PlinthError(`the stream ended at ${at} of ${total} bytes`, 0) };
      const p = await this.http.request('PATCH', url, {
        raw: piece as RequestBody,
        headers: { ...tus, 'upload-offset': String(at), 'content-type': 'application/offset+octet-stream' },
        as: 'auto',
        signal: options.signal,
      });
      if (p.error) {
        if (options.signal?.aborted || retries-- <= 0 || (p.status >= 400 && p.status < 500 && p.status !== 409)) return { data: null, error: p.error };
        const again = await where();
        if (again.error) return { data: null, error: again.error };
        at = again.data;
        options.onProgress?.(at, total); // what the service kept of the failed chunk
        continue;
      }
      at = Number(p.response?.headers.get('upload-offset') ?? at + size);
      options.onProgress?.(at, total);
    }
    return { data: { path }, error: null };
  }

  /** Objects whose path starts with `prefix` (all when omitted). */
  async list(options: { prefix?: string } = {}): Promise<Result<FileObject[]>> {
    const r = await this.http.request<FileObject[]>('GET', `/storage/v1/object/list/${encodeURIComponent(this.bucket)}`, {
      query: { prefix: options.prefix },
    });
    return r.error ? { data: null, error: r.error } : { data: r.data ?? [], error: null };
  }

  /** Delete one object or several, in order; stops at the first failure. */
  async remove(paths: string | string[]): Promise<Result<{ path: string }[]>> {
    const removed: { path: string }[] = [];
    for (const path of Array.isArray(paths) ? paths : [paths]) {
      const r = await this.http.request('DELETE', this.objectPath(path));
      if (r.error) return { data: null, error: new PlinthError(r.error.message, r.error.status, { removed, path }) };
      removed.push({ path });
    }
    return { data: removed, error: null };
  }

  /**
   * The object's address. Objects of a public bucket are readable by anyone with the anon
   * key; where the service runs with JWT_SECRET set, the request still needs that key
   * (`apikey` header), so use `download` from code.
   */
  getPublicUrl(path: string, options: { transform?: TransformOptions } = {}): { data: { publicUrl: string } } {
    if (options.transform) {
      const route = `/storage/v1/render/image/public/${encodeURIComponent(this.bucket)}/${encodePath(path)}`;
      return { data: { publicUrl: this.http.url + route + queryString(transformQuery(options.transform)) } };
    }
    return { data: { publicUrl: this.http.url + this.objectPath(path) } };
  }
}

export class StorageClient {
  private readonly http: Http;
  private readonly browser: boolean;
  constructor(http: Http, browser: boolean) {
    this.http = http;
    this.browser = browser;
  }

  from(bucket: string): StorageFileApi {
    return new StorageFileApi(this.http, bucket, this.browser);
  }

  /** POST /storage/v1/bucket (service role). */
  async createBucket(id: string, options: BucketOptions = {}): Promise<Result<Bucket>> {
    const body: Record<string, unknown> = { id, public: options.public ?? false };
    if (options.fileSizeLimit !== undefined) body.file_size_limit = options.fileSizeLimit;
    if (options.allowedMimeTypes !== undefined) body.allowed_mime_types = options.allowedMimeTypes;
    const r = await this.http.request<Bucket>('POST', '/storage/v1/bucket', { body });
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
  }

  async listBuckets(): Promise<Result<Bucket[]>> {
    const r = await this.http.request<Bucket[]>('GET', '/storage/v1/bucket');
    return r.error ? { data: null, error: r.error } : { data: r.data ?? [], error: null };
  }

  /** DELETE /storage/v1/bucket/{id} (service role; the bucket must be empty, else 409). */
  async deleteBucket(id: string): Promise<Result<{ message: string }>> {
    const r = await this.http.request<{ message: string }>('DELETE', `/storage/v1/bucket/${encodeURIComponent(id)}`);
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
  }
}
