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

  /** The object's content as a Blob (its `type` is the stored MIME type). */
  async download(path: string): Promise<Result<Blob>> {
    const r = await this.http.request<Blob>('GET', this.objectPath(path), { as: 'blob' });
    return r.error ? { data: null, error: r.error } : { data: r.data, error: null };
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
  getPublicUrl(path: string): { data: { publicUrl: string } } {
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
