/**
 * The storage routes: buckets (JSON) and objects (raw bodies), their sources, byte ranges
 * and ETags. The area (index.ts) builds the back end and hands it here.
 *
 * The object routes live in their own fastify scope whose only body parser is a `*` one
 * that reads nothing: the handler gets the raw request stream, so neither MAX_BODY_BYTES
 * (the JSON shell's limit) nor buffering applies; the bucket's file_size_limit does.
 *
 * An upload: path and credentials → the multipart part `file` or the raw body located →
 * MIME type → one transaction as the caller: `storage.begin_upload` (bucket, declared
 * size, MIME type, conflict, and the RLS insert) — a refusal is answered before the body
 * is read — then the body streams through a byte counter to the back end, then
 * `storage.finish_upload`, COMMIT, and the back end's own commit.
 */
import { pipeline, Readable, Transform as ByteTransform } from 'node:stream';
import { Busboy, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../core/area.ts';
import type { RequestContext } from '../core/db.ts';
import { AppError, ERRORS } from '../core/errors.ts';
import { sendJsonText, toAppError } from '../core/http.ts';
import { gatedCredential } from '../core/credentials.ts';
import type { Backend, ByteRange, ObjectAddress, PendingPut } from './backends/backend.ts';
import { downloadHeaders, pickMimeType } from './mime.ts';
import * as sdb from './db.ts';
import { bucketIdOk, invalidBucketId, invalidObjectPath, objectNameOk, parseBucketId, parseObjectPath, rawPath } from './paths.ts';
import { MAX_EXPIRES_IN, SIGN_ERRORS, Signer, type UploadGrant } from './signed.ts';
import { ImageCache, parseTransform, TRANSFORM_ERRORS, type Transform } from './transform.ts';

export const STORAGE_ERRORS = {
  bucketNotFound: () => new AppError(404, 'bucket not found'),
  objectNotFound: () => new AppError(404, 'object not found'),
  bucketExists: () => new AppError(409, 'bucket already exists'),
  bucketNotEmpty: () => new AppError(409, 'bucket not empty'),
  objectExists: () => new AppError(409, 'object already exists'),
  tooLarge: () => new AppError(413, 'object exceeds the bucket file size limit'),
  mimeNotAllowed: () => new AppError(415, 'mime type not allowed'),
  rangeNotSatisfiable: (size: number) => new AppError(416, 'range not satisfiable', { headers: { 'content-range': `bytes */${size}` } }),
  noFilePart: () => new AppError(400, 'missing file part'),
} as const;

const OBJECT_PREFIX = '/storage/v1/object/';
const LIST_PREFIX = '/storage/v1/object/list/';
const INFO_PREFIX = '/storage/v1/object/info/';
const PUBLIC_PREFIX = '/storage/v1/object/public/';
const AUTHENTICATED_PREFIX = '/storage/v1/object/authenticated/';
const SIGN_PREFIX = '/storage/v1/object/sign/';
const UPLOAD_SIGN_PREFIX = '/storage/v1/object/upload/sign/';
const BUCKET_PREFIX = '/storage/v1/bucket/';
const RENDER_PREFIX = '/storage/v1/render/image/';

/** Signed URLs are served with the service role's sight: the token is the permission. */
const SERVICE: RequestContext = Object.freeze({ role: 'service_role', claims: '{"role":"service_role"}', claimsObject: Object.freeze({ role: 'service_role' }) });

/** A bucket's file_size_limit as sent: a whole number of bytes, or null. */
function validLimit(v: unknown): boolean {
  return v === null || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
}

/** A bucket's allowed_mime_types as sent: `type/subtype` strings, or null. */
function validTypes(v: unknown): boolean {
  return v === null || (Array.isArray(v) && v.every((t) => typeof t === 'string' && /^[^\s/]+\/[^\s/]+$/.test(t)));
}

/** begin_upload's refusals as errors. */
export function throwUnlessOk(status: sdb.BeginUploadStatus): void {
  switch (status) {
    case 'ok':
      return;
    case 'bucket_not_found':
      throw STORAGE_ERRORS.bucketNotFound();
    case 'too_large':
      throw STORAGE_ERRORS.tooLarge();
    case 'mime_not_allowed':
      throw STORAGE_ERRORS.mimeNotAllowed();
    case 'exists':
      throw STORAGE_ERRORS.objectExists();
    case 'forbidden':
      throw ERRORS.permissionDenied();
    default:
      return status satisfies never;
  }
}

/** Read a request body to its end, at most `limit` bytes (413 past it). */
async function readBody(req: FastifyRequest, limit: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const chunk of req.raw as AsyncIterable<Buffer>) {
    n += chunk.length;
    if (n > limit) throw ERRORS.bodyTooLarge();
    parts.push(chunk);
  }
  return Buffer.concat(parts, n);
}

/** Discard a body nobody needs (a POST that signs). */
async function drain(req: FastifyRequest): Promise<void> {
  await readBody(req, 64 * 1024);
}

/**
 * A JSON object body in the raw scope (where no parser runs: an upload's bytes are never
 * parsed): MAX_BODY_BYTES, then JSON, else 400 `invalid request body`. An empty body is `{}`.
 */
async function jsonBody(req: FastifyRequest, limit: number): Promise<Record<string, unknown>> {
  const buf = await readBody(req, limit);
  if (buf.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(buf.toString('utf8'));
  } catch {
    throw ERRORS.invalidBody();
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw ERRORS.invalidBody();
  return v as Record<string, unknown>;
}

/**
 * The Cache-Control of a download: the uploader's (storage-js sends `max-age=3600`), kept
 * `private` in a private bucket so that no shared cache keeps it; without one, `public,
 * max-age=3600` in a public bucket and `private, no-cache` otherwise.
 */
function cacheControlFor(meta: sdb.ObjectMeta): string {
  const asked = meta.cache_control;
  if (asked === null) return meta.public ? 'public, max-age=3600' : 'private, no-cache';
  if (meta.public || /\b(private|no-store)\b/i.test(asked)) return asked;
  return `private, ${asked.replace(/\bpublic\s*,?\s*/i, '')}`;
}

interface Source {
  body: Readable;
  /** Content-Type of the body or of the part; null when none. */
  mimeType: string | null;
  /** Content-Length of a raw body; null for multipart or chunked bodies. */
  declaredSize: number | null;
  /** The Cache-Control asked for: the `cache-control` header, or the multipart field `cacheControl`. */
  cacheControl: string | null;
}

/** A Cache-Control value to store: printable, bounded; a bare number of seconds is `max-age=<n>` (storage-js's form field). */
function cacheControlOf(v: unknown): string | null {
  if (typeof v !== 'string') return null;
  const t = v.trim();
  if (t === '' || t.length > 200 || !/^[\x20-\x7e]+$/.test(t)) return null;
  return /^\d+$/.test(t) ? `max-age=${t}` : t;
}

/**
 * The multipart part `file` as a stream (docs/api/storage.md), or the file part without a name
 * (storage-js sends a Blob so); other parts are skipped, but the field `cacheControl`
 * before the file is kept.
 */
function multipartSource(req: FastifyRequest): Promise<Source> {
  return new Promise((resolve, reject) => {
    let file: Readable | null = null;
    let cacheControl: string | null = null;
    let bb: BusboyInstance;
    try {
      bb = Busboy({
        headers: req.headers as BusboyHeaders,
        limits: { files: 20, fields: 100, fieldSize: 64 * 1024, parts: 200, headerPairs: 100 },
        isPartAFile: (field: string | undefined, _type: string | undefined, filename: string | undefined) => field === 'file' || filename !== undefined,
      });
    } catch (err) {
      reject(new AppError(400, 'invalid request body', { cause: err }));
      return;
    }
    const raw = req.raw;
    bb.on('field', (field: string, value: string) => {
      if (field === 'cacheControl') cacheControl = cacheControlOf(value);
    });
    bb.on('file', (field: string, stream: Readable, _filename: string, _enc: string, mimeType: string) => {
      if ((field !== 'file' && field !== '') || file !== null) {
        stream.resume();
        return;
      }
      file = stream;
      resolve({ body: stream, mimeType, declaredSize: null, cacheControl });
    });
    bb.on('error', (err: Error) => {
      if (file) file.destroy(err);
      else reject(new AppError(400, 'invalid request body', { cause: err }));
    });
    bb.on('finish', () => {
      if (!file) reject(STORAGE_ERRORS.noFilePart());
    });
    // A client that goes away mid-body: the part must fail, not hang.
    raw.once('close', () => {
      if (!raw.complete) {
        const err = new Error('request aborted');
        if (file) file.destroy(err);
        else reject(new AppError(400, 'invalid request body', { cause: err }));
      }
    });
    raw.pipe(bb);
  });
}

function rawSource(req: FastifyRequest): Source {
  const len = req.headers['content-length'];
  const declared = len !== undefined && /^\d+$/.test(len) ? Number(len) : null;
  const ct = req.headers['content-type'];
  return { body: req.raw, mimeType: ct ?? null, declaredSize: declared, cacheControl: cacheControlOf(req.headers['cache-control']) };
}

/**
 * Counts bytes and stops the stream with 413 past `limit`. A Transform, not an async
 * generator: a generator costs a few promises per piece, several times the cost of the
 * bytes' own way to a file (bench: storage-upload). The pipeline carries a client that goes
 * away mid-body to the back end as an error.
 */
function meter(src: Readable, limit: number): { stream: Readable; size: () => number; over: () => boolean } {
  let size = 0;
  let over = false;
  const counter = new ByteTransform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length;
      if (size > limit) {
        over = true;
        done(STORAGE_ERRORS.tooLarge());
        return;
      }
      done(null, chunk);
    },
  });
  pipeline(src, counter, () => {});
  return { stream: counter, size: () => size, over: () => over };
}

/** `Range: bytes=a-b | a- | -n`, one range only (others are ignored: the whole object). */
export function parseRange(header: string | undefined, size: number): ByteRange | null | 'unsatisfiable' {
  if (header === undefined) return null;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  const wantEnd = m[2] === '' ? size - 1 : Number(m[2]);
  if (m[2] !== '' && wantEnd < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end: Math.min(wantEnd, size - 1) };
}

function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((t) => {
    const v = t.trim();
    return v === '*' || v === etag || v === `W/${etag}`;
  });
}

export function registerStorageRoutes(app: FastifyInstance, deps: Deps, backend: Backend, images: ImageCache): void {
  const { db, credentials, log, metrics, config } = deps;
  const uploaded = metrics.storageBytes.labels('upload', config.storageBackend);
  const downloaded = metrics.storageBytes.labels('download', config.storageBackend);
  const signer = new Signer(deps.config.secret);
  const json = (req: FastifyRequest) => jsonBody(req, deps.config.maxBodyBytes);

  const serviceRoleGate = credentials.requireRole('service_role');

  // ---- buckets (JSON) ----
  app.post('/storage/v1/bucket', { onRequest: serviceRoleGate }, async (req, reply) => {
    const cred = gatedCredential(req);
    const b = req.body as Record<string, unknown> | undefined;
    if (typeof b !== 'object' || b === null || Array.isArray(b)) throw ERRORS.invalidBody();
    const id = b.id ?? b.name;
    if (typeof id !== 'string') throw ERRORS.invalidBody();
    if (!bucketIdOk(id)) throw invalidBucketId();
    if (b.public !== undefined && b.public !== null && typeof b.public !== 'boolean') throw ERRORS.invalidBody();
    const limit = b.file_size_limit;
    if (limit !== undefined && !validLimit(limit)) throw ERRORS.invalidBody();
    const types = b.allowed_mime_types;
    if (types !== undefined && !validTypes(types)) throw ERRORS.invalidBody();
    const r = await sdb.createBucket(db, cred, {
      id,
      public: b.public === true,
      fileSizeLimit: typeof limit === 'number' ? limit : null,
      allowedMimeTypes: (types as string[] | null | undefined) ?? null,
    });
    if (r.status === 'exists') throw STORAGE_ERRORS.bucketExists();
    return sendJsonText(reply, 201, r.body);
  });

  app.get('/storage/v1/bucket', async (req, reply) => {
    const cred = await credentials.api(req);
    return sendJsonText(reply, 200, await sdb.listBuckets(db, cred));
  });

  app.delete('/storage/v1/bucket/*', { onRequest: serviceRoleGate }, async (req, reply) => {
    const cred = gatedCredential(req);
    const id = parseBucketId(req.url, BUCKET_PREFIX, invalidBucketId);
    const status = await sdb.deleteBucket(db, cred, id);
    switch (status) {
      case 'ok':
        return reply.code(200).send({ message: 'bucket deleted' });
      case 'not_found':
        throw STORAGE_ERRORS.bucketNotFound();
      case 'not_empty':
        throw STORAGE_ERRORS.bucketNotEmpty();
      default:
        return status satisfies never;
    }
  });

  app.get('/storage/v1/bucket/*', async (req, reply) => {
    const cred = await credentials.api(req);
    const id = parseBucketId(req.url, BUCKET_PREFIX, invalidBucketId);
    const body = await sdb.getBucket(db, cred, id);
    if (body === null) throw STORAGE_ERRORS.bucketNotFound();
    return sendJsonText(reply, 200, body);
  });

  // storage-js `updateBucket`: the fields sent are set, the others kept.
  app.put('/storage/v1/bucket/*', { onRequest: serviceRoleGate }, async (req, reply) => {
    const cred = gatedCredential(req);
    const id = parseBucketId(req.url, BUCKET_PREFIX, invalidBucketId);
    const b = req.body as Record<string, unknown> | undefined;
    if (typeof b !== 'object' || b === null || Array.isArray(b)) throw ERRORS.invalidBody();
    const patch: Record<string, unknown> = {};
    if (b.public !== undefined) {
      if (b.public !== null && typeof b.public !== 'boolean') throw ERRORS.invalidBody();
      patch.public = b.public;
    }
    if (b.file_size_limit !== undefined) {
      if (!validLimit(b.file_size_limit)) throw ERRORS.invalidBody();
      patch.file_size_limit = b.file_size_limit;
    }
    if (b.allowed_mime_types !== undefined) {
      if (!validTypes(b.allowed_mime_types)) throw ERRORS.invalidBody();
      patch.allowed_mime_types = b.allowed_mime_types;
    }
    if ((await sdb.updateBucket(db, cred, id, patch)) === 'not_found') throw STORAGE_ERRORS.bucketNotFound();
    return reply.code(200).send({ message: 'bucket updated' });
  });

  // storage-js `emptyBucket`: POST /bucket/{id}/empty.
  app.post('/storage/v1/bucket/*', { onRequest: serviceRoleGate }, async (req, reply) => {
    const cred = gatedCredential(req);
    const path = rawPath(req.url);
    if (!path.endsWith('/empty')) throw ERRORS.notFound();
    const id = parseBucketId(path.slice(0, -'/empty'.length), BUCKET_PREFIX, invalidBucketId);
    const r = await sdb.emptyBucket(db, cred, id);
    if (r.status === 'not_found') throw STORAGE_ERRORS.bucketNotFound();
    for (const o of r.removed ?? []) {
      await backend.delete({ bucket: id, name: o.name, id: o.id }).catch((err: unknown) => log.error({ err }, 'storage: could not remove deleted bytes'));
    }
    return reply.code(200).send({ message: 'bucket emptied' });
  });

  // ---- image transformations (transform.ts) ----
  /** Like serve(): `lookup` reads the row, and once more when an upsert took the bytes it named. */
  const render = async (req: FastifyRequest, reply: FastifyReply, bucket: string, name: string, lookup: () => Promise<sdb.ObjectMeta>, t: Transform, again = true): Promise<unknown> => {
    const meta = await lookup();
    if (meta.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
    if (meta.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
    const size = Number(meta.size);
    const v = await images.variant(meta.id!, meta.mime_type!, size, t, () => backend.get({ bucket, name, id: meta.id! }, size, null));
    if (v === null) {
      if (again) return render(req, reply, bucket, name, lookup, t, false);
      throw STORAGE_ERRORS.objectNotFound();
    }
    const etag = `"${v.key}"`;
    reply.header('x-content-type-options', 'nosniff');
    reply.header('etag', etag);
    reply.header('cache-control', cacheControlFor(meta));
    reply.header('last-modified', meta.updated_at!.toUTCString());
    if (etagMatches(req.headers['if-none-match'], etag)) return reply.code(304).send();
    reply.type(v.contentType);
    reply.header('content-length', v.size);
    if (req.method === 'HEAD') return reply.code(200).send();
    return reply.code(200).send(images.open(v));
  };
  const renderEnabled = () => {
    if (!deps.config.imageTransformation) throw TRANSFORM_ERRORS.disabled();
  };

  app.get(`${RENDER_PREFIX}authenticated/*`, async (req, reply) => {
    renderEnabled();
    const cred = await credentials.api(req);
    const { bucket, name } = parseObjectPath(req.url, `${RENDER_PREFIX}authenticated/`);
    const t = parseTransform(req.query as Record<string, unknown>);
    return render(req, reply, bucket, name, () => sdb.getObject(db, cred, bucket, name), t);
  });

  app.get(`${RENDER_PREFIX}public/*`, async (req, reply) => {
    renderEnabled();
    const { bucket, name } = parseObjectPath(req.url, `${RENDER_PREFIX}public/`);
    const t = parseTransform(req.query as Record<string, unknown>);
    return render(req, reply, bucket, name, () => sdb.getPublicObject(db, bucket, name), t);
  });

  app.get(`${RENDER_PREFIX}sign/*`, async (req, reply) => {
    renderEnabled();
    const { bucket, name } = parseObjectPath(req.url, `${RENDER_PREFIX}sign/`);
    const q = req.query as Record<string, unknown>;
    const signed = await signer.verifyDownload(q.token, `${bucket}/${name}`);
    const t = parseTransform(signed ?? q);
    return render(req, reply, bucket, name, () => sdb.getObject(db, SERVICE, bucket, name), t);
  });

  // ---- objects (raw bodies) ----
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

    /**
     * One upload as `ctx`: begin_upload (a refusal is answered before the body is read),
     * the body through a byte counter to the back end, finish_upload, COMMIT. `claim`: the
     * signed upload token this upload spends (in the same transaction).
     */
    const store = async (
      req: FastifyRequest,
      reply: FastifyReply,
      o: { ctx: RequestContext; bucket: string; name: string; upsert: boolean; claim?: UploadGrant },
    ): Promise<{ id: string; key: string }> => {
      const { bucket, name } = o;
      const contentType = String(req.headers['content-type'] ?? '');
      const source = /^multipart\/form-data\b/i.test(contentType) ? await multipartSource(req) : rawSource(req);
      const mimeType = pickMimeType(source.mimeType, name);
      const put: { pending: PendingPut | null } = { pending: null };
      let out: { id: string; replaced: string | null; size: number };
      try {
        out = await db.transactionWithContext(o.ctx, async (tx) => {
          if (o.claim && !(await sdb.claimUploadToken(tx, o.claim.jti, o.claim.expiresAt))) throw SIGN_ERRORS.used();
          const r = await sdb.beginUpload(tx, { bucket, name, mimeType, declaredSize: source.declaredSize, upsert: o.upsert });
          throwUnlessOk(r.status);
          const id = r.object_id!;
          const m = meter(source.body, Number(r.file_size_limit));
          try {
            put.pending = await backend.put(tx, { bucket, name, id }, m.stream, mimeType);
          } catch (err) {
            if (m.over()) throw STORAGE_ERRORS.tooLarge();
            throw err;
          }
          const size = m.size();
          if ((await sdb.finishUpload(tx, id, size, id.replaceAll('-', ''), source.cacheControl)) === 'too_large') throw STORAGE_ERRORS.tooLarge();
          return { id, replaced: r.replaced, size };
        });
      } catch (err) {
        await put.pending?.abort().catch((e: unknown) => log.error({ err: e }, 'storage: could not remove the bytes of a failed upload'));
        // Refused before the body was read to its end: answer now and close the connection
        // instead of reading the rest of the body.
        if (!req.raw.complete) reply.header('connection', 'close');
        throw toAppError(err);
      }
      await committed(put.pending!, out.id);
      if (out.replaced !== null) void removeBytes({ bucket, name, id: out.replaced }, 'replaced');
      uploaded.inc(out.size);
      return { id: out.id, key: `${bucket}/${name}` };
    };

    /** After COMMIT: the back end's own commit; if the bytes cannot be put in place, the committed row goes again. */
    const committed = async (pending: PendingPut, id: string): Promise<void> => {
      try {
        await pending.commit();
      } catch (err) {
        await db.sql`delete from storage.objects where id = ${id}::uuid`.catch(() => {});
        throw ERRORS.internal(err);
      }
    };

    const removeBytes = (obj: ObjectAddress, what: string): Promise<void> =>
      backend.delete(obj).catch((err: unknown) => log.error({ err }, `storage: could not remove ${what} bytes`));

    const upload = async (req: FastifyRequest, reply: FastifyReply) => {
      const cred = await credentials.api(req);
      const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
      const upsert = String(req.headers['x-upsert'] ?? '').toLowerCase() === 'true';
      return reply.code(200).send(await store(req, reply, { ctx: cred, bucket, name, upsert }));
    };
    scope.post('/storage/v1/object/*', upload);

    // storage-js `update`: the same upload, replacing what is there.
    const update = async (req: FastifyRequest, reply: FastifyReply) => {
      const cred = await credentials.api(req);
      const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
      return reply.code(200).send(await store(req, reply, { ctx: cred, bucket, name, upsert: true }));
    };
    scope.put('/storage/v1/object/*', update);

    /**
     * The Supabase routes under /object/<word>/… (public, authenticated, sign, info, list,
     * upload) would hide a bucket of that name from the seed's /object/{bucket}/… routes:
     * while a bucket of that name exists, the seed's route serves the request.
     */
    type Handler = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
    const unlessBucket = (word: string, seed: Handler, handler: Handler): Handler => async (req, reply) => {
      const [r] = await db.sql<{ taken: boolean }[]>`select exists (select 1 from storage.buckets where id = ${word}) as taken`;
      return r.taken ? seed(req, reply) : handler(req, reply);
    };

    // ---- signed uploads ----
    scope.post('/storage/v1/object/upload/sign/*', unlessBucket('upload', upload, async (req, reply) => {
      const cred = await credentials.api(req);
      const { bucket, name } = parseObjectPath(req.url, UPLOAD_SIGN_PREFIX);
      const upsert = String(req.headers['x-upsert'] ?? '').toLowerCase() === 'true';
      await drain(req);
      // The caller must be allowed to create the object now: begin_upload, rolled back.
      const probe = new Error('probe');
      try {
        await db.transactionWithContext(cred, async (tx) => {
          const r = await sdb.beginUpload(tx, { bucket, name, mimeType: pickMimeType(null, name), declaredSize: null, upsert });
          if (r.status !== 'mime_not_allowed') throwUnlessOk(r.status);
          throw probe;
        });
      } catch (err) {
        if (err !== probe) throw toAppError(err);
      }
      const token = await signer.upload(`${bucket}/${name}`, cred, upsert);
      return reply.code(200).send({ url: `/object/upload/sign/${bucket}/${name}?token=${token}`, token });
    }));

    scope.put('/storage/v1/object/upload/sign/*', unlessBucket('upload', update, async (req, reply) => {
      const { bucket, name } = parseObjectPath(req.url, UPLOAD_SIGN_PREFIX);
      const grant = await signer.verifyUpload((req.query as Record<string, unknown>).token, `${bucket}/${name}`);
      const r = await store(req, reply, { ctx: grant.ctx, bucket, name, upsert: grant.upsert, claim: grant });
      return reply.code(200).send({ Id: r.id, Key: r.key });
    }));

    scope.get('/storage/v1/object/list/*', async (req, reply) => {
      const cred = await credentials.api(req);
      const bucket = parseBucketId(req.url, LIST_PREFIX, () => new AppError(400, 'invalid object path'));
      const q = req.query as Record<string, unknown>;
      const prefix = q.prefix ?? '';
      if (typeof prefix !== 'string') throw ERRORS.invalidRequest();
      const r = await sdb.listObjects(db, cred, bucket, prefix);
      if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
      return sendJsonText(reply, 200, r.body);
    });

    /**
     * Send an object: headers (ETag, ranges, 304, the download safety headers), then its bytes.
     * `lookup` reads its row. An upsert that commits between that read and the back end's
     * removes the bytes the row named (they go with the old row, or right after the commit):
     * then the row is read once more and the object that replaced it is sent instead; a
     * deleted object is a 404.
     */
    const serve = async (req: FastifyRequest, reply: FastifyReply, bucket: string, name: string, lookup: () => Promise<sdb.ObjectMeta>, again = true): Promise<unknown> => {
      const meta = await lookup();
      if (meta.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
      if (meta.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
      const size = Number(meta.size);
      const etag = `"${meta.etag ?? meta.id!.replaceAll('-', '')}"`;
      // A stored file never runs as a page of this origin: nosniff, a sandboxing CSP, and
      // types a browser runs as attachments (mime.ts). On every answer, 304 and HEAD included.
      const { 'content-type': contentType, ...safety } = downloadHeaders(meta.mime_type!, name);
      reply.headers(safety);
      const download = (req.query as Record<string, unknown>).download;
      if (typeof download === 'string') {
        const file = download === '' ? name.slice(name.lastIndexOf('/') + 1) : download;
        reply.header('content-disposition', `attachment; filename*=UTF-8''${encodeURIComponent(file)}`);
      }
      reply.header('etag', etag);
      reply.header('cache-control', cacheControlFor(meta));
      reply.header('last-modified', meta.updated_at!.toUTCString());
      reply.header('accept-ranges', 'bytes');
      if (etagMatches(req.headers['if-none-match'], etag)) return reply.code(304).send();
      const range = parseRange(req.headers.range, size);
      if (range === 'unsatisfiable') throw STORAGE_ERRORS.rangeNotSatisfiable(size);
      reply.type(contentType);
      if (range) reply.header('content-range', `bytes ${range.start}-${range.end}/${size}`);
      const length = range ? range.end - range.start + 1 : size;
      reply.header('content-length', length);
      reply.code(range ? 206 : 200);
      if (req.method === 'HEAD') return reply.send();
      const stream = await backend.get({ bucket, name, id: meta.id! }, size, range);
      if (stream === null) {
        reply.removeHeader('content-length');
        reply.removeHeader('content-range');
        if (again) return serve(req, reply, bucket, name, lookup, false);
        throw STORAGE_ERRORS.objectNotFound();
      }
      reply.raw.once('finish', () => downloaded.inc(length));
      return reply.send(stream);
    };

    const download = async (req: FastifyRequest, reply: FastifyReply, prefix = OBJECT_PREFIX) => {
      const cred = await credentials.api(req);
      const { bucket, name } = parseObjectPath(req.url, prefix);
      return serve(req, reply, bucket, name, () => sdb.getObject(db, cred, bucket, name));
    };
    const seedDownload: Handler = (req, reply) => download(req, reply);
    scope.route({ method: ['GET', 'HEAD'], url: '/storage/v1/object/*', handler: seedDownload });
    scope.route({
      method: ['GET', 'HEAD'],
      url: '/storage/v1/object/authenticated/*',
      handler: unlessBucket('authenticated', seedDownload, (req, reply) => download(req, reply, AUTHENTICATED_PREFIX)),
    });

    // A public bucket's objects, to anyone, whatever the policies.
    scope.route({
      method: ['GET', 'HEAD'],
      url: '/storage/v1/object/public/*',
      handler: unlessBucket('public', seedDownload, async (req, reply) => {
        const { bucket, name } = parseObjectPath(req.url, PUBLIC_PREFIX);
        return serve(req, reply, bucket, name, () => sdb.getPublicObject(db, bucket, name));
      }),
    });

    // ---- signed URLs ----
    scope.route({
      method: ['GET', 'HEAD'],
      url: '/storage/v1/object/sign/*',
      handler: unlessBucket('sign', seedDownload, async (req, reply) => {
        const { bucket, name } = parseObjectPath(req.url, SIGN_PREFIX);
        await signer.verifyDownload((req.query as Record<string, unknown>).token, `${bucket}/${name}`);
        return serve(req, reply, bucket, name, () => sdb.getObject(db, SERVICE, bucket, name));
      }),
    });

    scope.post('/storage/v1/object/sign/*', unlessBucket('sign', upload, async (req, reply) => {
      const cred = await credentials.api(req);
      const path = rawPath(req.url).slice(SIGN_PREFIX.length);
      const body = await json(req);
      const expiresIn = body.expiresIn;
      if (typeof expiresIn !== 'number' || !Number.isSafeInteger(expiresIn) || expiresIn < 1 || expiresIn > MAX_EXPIRES_IN) {
        throw ERRORS.invalidBody();
      }
      if (!path.includes('/')) {
        // Several paths of one bucket: an entry each, with an error for those the caller cannot read.
        const bucket = parseBucketId(req.url, SIGN_PREFIX, invalidObjectPath);
        const paths = body.paths;
        if (!Array.isArray(paths) || paths.length > 1000 || !paths.every((p) => typeof p === 'string')) throw ERRORS.invalidBody();
        const valid = (paths).filter(objectNameOk);
        const visible = await sdb.visibleObjects(db, cred, bucket, valid);
        const out = [];
        for (const p of paths) {
          if (!visible.has(p)) {
            out.push({ error: 'object not found', path: p, signedURL: null });
            continue;
          }
          const token = await signer.download(`${bucket}/${p}`, expiresIn);
          out.push({ error: null, path: p, signedURL: `/object/sign/${bucket}/${p}?token=${token}` });
        }
        return reply.code(200).send(out);
      }
      const { bucket, name } = parseObjectPath(req.url, SIGN_PREFIX);
      const meta = await sdb.getObject(db, cred, bucket, name);
      if (meta.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
      if (meta.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
      if (typeof body.transform === 'object' && body.transform !== null && Object.keys(body.transform).length > 0) {
        // A signed rendition: the token carries the transformation (checked now), the URL is the render route.
        const transform = body.transform as Record<string, unknown>;
        parseTransform(transform);
        const token = await signer.download(`${bucket}/${name}`, expiresIn, transform);
        return reply.code(200).send({ signedURL: `/render/image/sign/${bucket}/${name}?token=${token}` });
      }
      const token = await signer.download(`${bucket}/${name}`, expiresIn);
      return reply.code(200).send({ signedURL: `/object/sign/${bucket}/${name}?token=${token}` });
    }));

    // ---- storage-js: info, list, copy, move, remove ----
    scope.route({
      method: ['GET'],
      url: '/storage/v1/object/info/*',
      handler: unlessBucket('info', seedDownload, async (req, reply) => {
        const cred = await credentials.api(req);
        const { bucket, name } = parseObjectPath(req.url, INFO_PREFIX);
        const r = await sdb.objectInfo(db, cred, bucket, name);
        if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
        if (r.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
        return sendJsonText(reply, 200, r.body!);
      }),
    });

    scope.post('/storage/v1/object/list/*', unlessBucket('list', upload, async (req, reply) => {
      const cred = await credentials.api(req);
      const bucket = parseBucketId(req.url, LIST_PREFIX, invalidObjectPath);
      const b = await json(req);
      const sortBy = (b.sortBy ?? {}) as Record<string, unknown>;
      const q = {
        prefix: b.prefix ?? '',
        limit: b.limit ?? 100,
        offset: b.offset ?? 0,
        search: b.search ?? '',
        sortColumn: sortBy.column ?? 'name',
        sortOrder: sortBy.order ?? 'asc',
      };
      if (
        typeof sortBy !== 'object' ||
        typeof q.prefix !== 'string' ||
        typeof q.search !== 'string' ||
        typeof q.sortColumn !== 'string' ||
        typeof q.sortOrder !== 'string' ||
        !/^(asc|desc)$/i.test(q.sortOrder) ||
        !(Number.isSafeInteger(q.limit) && (q.limit as number) >= 0 && (q.limit as number) <= 10_000) ||
        !(Number.isSafeInteger(q.offset) && (q.offset as number) >= 0)
      ) {
        throw ERRORS.invalidBody();
      }
      const r = await sdb.listFolder(db, cred, bucket, q as sdb.ListFolder);
      if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
      if (r.status === 'invalid_sort') throw ERRORS.invalidBody();
      return sendJsonText(reply, 200, r.body!);
    }));

    /** copy and move: the source as the caller sees it, the bytes into a new object, the source gone on a move. */
    const copyOrMove = async (req: FastifyRequest, move: boolean) => {
      const cred = await credentials.api(req);
      const b = await json(req);
      const srcBucket = b.bucketId;
      const dstBucket = b.destinationBucket ?? srcBucket;
      const srcName = b.sourceKey;
      const dstName = b.destinationKey;
      if (typeof srcBucket !== 'string' || typeof dstBucket !== 'string' || typeof srcName !== 'string' || typeof dstName !== 'string') {
        throw ERRORS.invalidBody();
      }
      if (!bucketIdOk(srcBucket) || !bucketIdOk(dstBucket) || !objectNameOk(srcName) || !objectNameOk(dstName)) throw invalidObjectPath();
      const upsert = !move && String(req.headers['x-upsert'] ?? '').toLowerCase() === 'true';
      const put: { pending: PendingPut | null } = { pending: null };
      let out: { id: string; src: string; replaced: string | null };
      try {
        out = await db.transactionWithContext(cred, async (tx) => {
          const r = await sdb.beginCopy(tx, { srcBucket, srcName, dstBucket, dstName, upsert, move });
          if (r.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
          throwUnlessOk(r.status);
          const size = Number(r.size);
          const bytes = await backend.get({ bucket: srcBucket, name: srcName, id: r.src_id! }, size, null);
          if (bytes === null) throw STORAGE_ERRORS.objectNotFound();
          const id = r.object_id!;
          put.pending = await backend.put(tx, { bucket: dstBucket, name: dstName, id }, bytes, r.mime_type!);
          await sdb.finishUpload(tx, id, size, id.replaceAll('-', ''), r.cache_control);
          return { id, src: r.src_id!, replaced: r.replaced };
        });
      } catch (err) {
        await put.pending?.abort().catch((e: unknown) => log.error({ err: e }, 'storage: could not remove the bytes of a failed copy'));
        throw toAppError(err);
      }
      await committed(put.pending!, out.id);
      if (move) await removeBytes({ bucket: srcBucket, name: srcName, id: out.src }, 'moved');
      if (out.replaced !== null) void removeBytes({ bucket: dstBucket, name: dstName, id: out.replaced }, 'replaced');
      return { id: out.id, key: `${dstBucket}/${dstName}` };
    };

    scope.post('/storage/v1/object/copy', async (req, reply) => {
      const r = await copyOrMove(req, false);
      return reply.code(200).send({ Id: r.id, Key: r.key });
    });

    scope.post('/storage/v1/object/move', async (req, reply) => {
      await copyOrMove(req, true);
      return reply.code(200).send({ message: 'object moved' });
    });

    scope.delete('/storage/v1/object/*', async (req, reply) => {
      const cred = await credentials.api(req);
      if (!rawPath(req.url).slice(OBJECT_PREFIX.length).includes('/')) {
        // storage-js `remove(paths)`: DELETE /object/{bucket} with {prefixes}; the deleted objects back.
        const bucket = parseBucketId(req.url, OBJECT_PREFIX, invalidObjectPath);
        const b = await json(req);
        const names = b.prefixes;
        if (!Array.isArray(names) || names.length > 1000 || !names.every((n) => typeof n === 'string')) throw ERRORS.invalidBody();
        const r = await sdb.deleteObjects(db, cred, bucket, (names).filter(objectNameOk));
        if (r.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
        const gone = JSON.parse(r.body!) as { id: string; name: string }[];
        for (const g of gone) await removeBytes({ bucket, name: g.name, id: g.id }, 'deleted');
        return sendJsonText(reply, 200, r.body!);
      }
      const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
      const r = await sdb.deleteObject(db, cred, bucket, name);
      switch (r.status) {
        case 'ok':
          break;
        case 'bucket_not_found':
          throw STORAGE_ERRORS.bucketNotFound();
        case 'not_found':
          throw STORAGE_ERRORS.objectNotFound();
        case 'forbidden':
          throw ERRORS.permissionDenied();
        default:
          return r.status satisfies never;
      }
      await removeBytes({ bucket, name, id: r.id! }, 'deleted');
      return reply.code(200).send({ message: 'object deleted' });
    });
  });
}
