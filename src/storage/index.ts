/**
 * The storage area (interface §2.4, §2.5, §4.8; contract §7, §8, §9): buckets and objects.
 *
 * Metadata and rules live in SQL (schema `storage`, functions.sql) and run as the calling
 * role, so the RLS policies decide; the bytes stream through here to one back end
 * (STORAGE_BACKEND: database, disk or s3; see backend.ts).
 *
 * The object routes live in their own fastify scope whose only body parser is a `*` one
 * that reads nothing: the handler gets the raw request stream, so neither MAX_BODY_BYTES
 * (the JSON shell's limit) nor buffering applies; the bucket's file_size_limit does.
 *
 * An upload: path and credentials → the multipart part `file` or the raw body located →
 * MIME type → one transaction as the caller: `storage.begin_upload` (bucket, declared
 * size, MIME type, conflict, and the RLS insert) — a refusal is answered before the body
 * is read — then the body streams through a byte counter to the back end, then
 * `storage.finish_upload`, COMMIT, and the back end's own commit (disk: the rename).
 */
import { Readable } from 'node:stream';
import { Busboy, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Area, Deps } from '../core/area.ts';
import { AppError, ERRORS } from '../core/errors.ts';
import { sendJsonText, toAppError } from '../core/http.ts';
import type { Backend, ByteRange, PendingPut } from './backend.ts';
import { databaseBackend } from './database.ts';
import { diskBackend } from './disk.ts';
import { downloadHeaders, pickMimeType } from './mime.ts';
import * as sdb from './db.ts';
import { bucketIdOk, invalidBucketId, parseBucketId, parseObjectPath } from './paths.ts';

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
const BUCKET_PREFIX = '/storage/v1/bucket/';

/** The S3 client (the AWS SDK, several MB of code and heap) loads only when it is the backend. */
export async function createBackend(deps: Deps): Promise<Backend> {
  const { config, db } = deps;
  switch (config.storageBackend) {
    case 'database':
      return databaseBackend(db);
    case 'disk':
      return diskBackend(config.storageDir);
    case 's3':
      return (await import('./s3.ts')).s3Backend(config.s3!);
  }
}

interface Source {
  body: Readable;
  /** Content-Type of the body or of the part; null when none. */
  mimeType: string | null;
  /** Content-Length of a raw body; null for multipart or chunked bodies. */
  declaredSize: number | null;
}

/** The multipart part `file` as a stream (contract §7); other parts are skipped. */
function multipartSource(req: FastifyRequest): Promise<Source> {
  return new Promise((resolve, reject) => {
    let file: Readable | null = null;
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
    bb.on('file', (field: string, stream: Readable, _filename: string, _enc: string, mimeType: string) => {
      if (field !== 'file' || file !== null) {
        stream.resume();
        return;
      }
      file = stream;
      resolve({ body: stream, mimeType, declaredSize: null });
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
  return { body: req.raw, mimeType: ct ?? null, declaredSize: declared };
}

/** Counts bytes and stops the stream with 413 past `limit`. */
function meter(src: Readable, limit: number): { stream: Readable; size: () => number; over: () => boolean } {
  let size = 0;
  let over = false;
  async function* counted(): AsyncGenerator<Buffer> {
    for await (const chunk of src as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) {
        over = true;
        throw STORAGE_ERRORS.tooLarge();
      }
      yield chunk;
    }
  }
  return { stream: Readable.from(counted(), { objectMode: false }), size: () => size, over: () => over };
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

function routes(app: FastifyInstance, deps: Deps, backend: Backend): void {
  const { db, credentials, log, metrics, config } = deps;
  const uploaded = metrics.storageBytes.labels('upload', config.storageBackend);
  const downloaded = metrics.storageBytes.labels('download', config.storageBackend);

  // ---- buckets (JSON) ----
  app.post('/storage/v1/bucket', async (req, reply) => {
    const cred = await credentials.serviceRole(req);
    const b = req.body as Record<string, unknown> | undefined;
    if (typeof b !== 'object' || b === null || Array.isArray(b)) throw ERRORS.invalidBody();
    const id = b.id ?? b.name;
    if (typeof id !== 'string') throw ERRORS.invalidBody();
    if (!bucketIdOk(id)) throw invalidBucketId();
    if (b.public !== undefined && b.public !== null && typeof b.public !== 'boolean') throw ERRORS.invalidBody();
    const limit = b.file_size_limit;
    if (limit !== undefined && limit !== null && !(typeof limit === 'number' && Number.isSafeInteger(limit) && limit >= 0)) {
      throw ERRORS.invalidBody();
    }
    const types = b.allowed_mime_types;
    if (
      types !== undefined &&
      types !== null &&
      !(Array.isArray(types) && types.every((t) => typeof t === 'string' && /^[^\s/]+\/[^\s/]+$/.test(t)))
    ) {
      throw ERRORS.invalidBody();
    }
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

  app.delete('/storage/v1/bucket/*', async (req, reply) => {
    const cred = await credentials.serviceRole(req);
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

  // ---- objects (raw bodies) ----
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

    scope.post('/storage/v1/object/*', async (req, reply) => {
      const cred = await credentials.api(req);
      const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
      const upsert = String(req.headers['x-upsert'] ?? '').toLowerCase() === 'true';
      const contentType = String(req.headers['content-type'] ?? '');
      const source = /^multipart\/form-data\b/i.test(contentType) ? await multipartSource(req) : rawSource(req);
      const mimeType = pickMimeType(source.mimeType, name);
      const put: { pending: PendingPut | null } = { pending: null };
      let out: { id: string; replaced: string | null; size: number };
      try {
        out = await db.transactionWithContext(cred, async (tx) => {
          const r = await sdb.beginUpload(tx, { bucket, name, mimeType, declaredSize: source.declaredSize, upsert });
          switch (r.status) {
            case 'ok':
              break;
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
              return r.status satisfies never;
          }
          const id = r.object_id!;
          const m = meter(source.body, Number(r.file_size_limit));
          try {
            put.pending = await backend.put(tx, { bucket, name, id }, m.stream, mimeType);
          } catch (err) {
            if (m.over()) throw STORAGE_ERRORS.tooLarge();
            throw err;
          }
          const size = m.size();
          if ((await sdb.finishUpload(tx, id, size, id.replaceAll('-', ''))) === 'too_large') throw STORAGE_ERRORS.tooLarge();
          return { id, replaced: r.replaced, size };
        });
      } catch (err) {
        await put.pending?.abort().catch((e: unknown) => log.error({ err: e }, 'storage: could not remove the bytes of a failed upload'));
        // Refused before the body was read to its end: answer now and close the connection
        // instead of reading the rest of the body.
        if (!req.raw.complete) reply.header('connection', 'close');
        throw toAppError(err);
      }
      try {
        await put.pending!.commit();
      } catch (err) {
        // The bytes could not be put in place: take the committed row back out.
        await db.sql`delete from storage.objects where id = ${out.id}::uuid`.catch(() => {});
        throw ERRORS.internal(err);
      }
      if (out.replaced !== null) {
        backend.delete({ bucket, name, id: out.replaced }).catch((err: unknown) => log.error({ err }, 'storage: could not remove replaced bytes'));
      }
      uploaded.inc(out.size);
      return reply.code(200).send({ id: out.id, key: `${bucket}/${name}` });
    });

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

    const download = async (req: FastifyRequest, reply: FastifyReply) => {
      const cred = await credentials.api(req);
      const { bucket, name } = parseObjectPath(req.url, OBJECT_PREFIX);
      const meta = await sdb.getObject(db, cred, bucket, name);
      if (meta.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
      if (meta.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
      const size = Number(meta.size);
      const etag = `"${meta.etag ?? meta.id!.replaceAll('-', '')}"`;
      // A stored file never runs as a page of this origin: nosniff, a sandboxing CSP, and
      // types a browser runs as attachments (mime.ts). On every answer, 304 and HEAD included.
      const { 'content-type': contentType, ...safety } = downloadHeaders(meta.mime_type!, name);
      reply.headers(safety);
      reply.header('etag', etag);
      reply.header('cache-control', meta.public ? 'public, max-age=3600' : 'private, no-cache');
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
        throw STORAGE_ERRORS.objectNotFound();
      }
      reply.raw.once('finish', () => downloaded.inc(length));
      return reply.send(stream);
    };
    scope.route({ method: ['GET', 'HEAD'], url: '/storage/v1/object/*', handler: download });

    scope.delete('/storage/v1/object/*', async (req, reply) => {
      const cred = await credentials.api(req);
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
      await backend.delete({ bucket, name, id: r.id! }).catch((err: unknown) => log.error({ err }, 'storage: could not remove deleted bytes'));
      return reply.code(200).send({ message: 'object deleted' });
    });
  });
}

export const storageArea: Area = {
  name: 'storage',
  async register(app, deps) {
    const backend = await createBackend(deps);
    app.addHook('onClose', async () => {
      await backend.close?.();
    });
    routes(app, deps, backend);
  },
};
