/**
 * Resumable uploads: TUS 1.0.0 (core, creation, termination, expiration) at
 * `/storage/v1/upload/resumable`, as Supabase serves it to tus-js-client and Uppy: the
 * metadata `bucketName`, `objectName`, `contentType`, `cacheControl`, the header
 * `x-upsert`, upload URLs valid 24 hours, 409 to a second writer.
 *
 * Creation runs the checks of an upload (bucket, declared length against its limit, MIME
 * type, conflict, the caller's RLS insert: begin_upload, rolled back) and records the
 * upload (resumable.sql). PATCHes stage bytes — in a file under STORAGE_DIR/.tus on the
 * disk back end, in `storage_private.resumable_parts` on the others — and the object is
 * created, as any upload is and as the creator, when the last byte arrives: nobody sees a
 * partial object. On the disk back end the staged file itself is renamed into place.
 *
 * Written here rather than with `@tus/server` (docs/decisions/0240-…): its stores keep
 * their own metadata files beside the bytes and take locks in memory, while plinth needs the
 * upload's state and its one-writer lease in PostgreSQL (several instances, one database),
 * the object created under the caller's policies in the transaction that stores it, and
 * the same three back ends as every other upload.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rm } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../core/area.ts';
import { gatedCredential } from '../core/credentials.ts';
import type { RequestContext, Sql } from '../core/db.ts';
import { AppError, ERRORS } from '../core/errors.ts';
import { toAppError } from '../core/http.ts';
import type { Backend, PendingPut } from './backends/backend.ts';
import * as sdb from './db.ts';
import { pickMimeType } from './mime.ts';
import { DIR_MODE, FILE_MODE } from './modes.ts';
import { bucketIdOk, invalidObjectPath, objectNameOk, rawPath } from './paths.ts';
import { throwUnlessOk } from './errors.ts';

const ENDPOINT = '/storage/v1/upload/resumable';
const TUS_VERSION = '1.0.0';
/** How long a PATCH holds its upload; only a crashed instance leaves a lease to run out. */
const LEASE_SECONDS = 300;
/** Bytes per staged database part. */
const PART_BYTES = 1024 * 1024;

export const RESUMABLE_ERRORS = {
  notFound: () => new AppError(404, 'upload not found'),
  busy: () => new AppError(409, 'upload in use by another request'),
  offsetMismatch: () => new AppError(409, 'upload offset mismatch'),
  badMetadata: () => new AppError(400, 'invalid upload metadata'),
  badLength: () => new AppError(400, 'invalid upload length'),
  badOffset: () => new AppError(400, 'invalid upload offset'),
  badVersion: () => new AppError(412, 'unsupported tus version'),
  badType: () => new AppError(415, 'content type must be application/offset+octet-stream'),
  pastLength: () => new AppError(413, 'upload exceeds its length'),
} as const;

/** Where the bytes of an upload in progress wait. */
export interface Staging {
  create(id: string): Promise<void>;
  /** Stage `body` from `offset` on (never past `length`); resolves (or rejects, for a cut body) with the new offset in `at`. */
  write(id: string, writer: string, offset: number, length: number, body: AsyncIterable<Buffer>, at: { offset: number }): Promise<void>;
  read(id: string, length: number): Readable;
  /** The staged file, when the bytes are one (disk). */
  file?(id: string): string;
  drop(id: string): Promise<void>;
  /** Remove staged bytes of uploads that are gone. */
  sweep(): Promise<number>;
}

/** Counts what `body` gives, stops at `room` bytes with 413 past it. */
async function* bounded(body: AsyncIterable<Buffer>, room: number): AsyncGenerator<Buffer> {
  let seen = 0;
  for await (const chunk of body) {
    seen += chunk.length;
    if (seen > room) {
      const keep = chunk.length - (seen - room);
      if (keep > 0) yield chunk.subarray(0, keep);
      throw RESUMABLE_ERRORS.pastLength();
    }
    yield chunk;
  }
}

/**
 * `bounded` as a Transform, for a stream piped to a file: a generator costs a few promises
 * per piece of the body (bench: storage-resumable; see meter in sources.ts).
 */
function boundedStream(room: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen <= room) return done(null, chunk);
      const keep = chunk.length - (seen - room);
      if (keep > 0) this.push(chunk.subarray(0, keep));
      done(RESUMABLE_ERRORS.pastLength());
    },
  });
}

export function fileStaging(root: string, sql: Sql): Staging {
  const dir = join(root, '.tus');
  const path = (id: string) => join(dir, id);
  return {
    async create(id) {
      await mkdir(dir, { recursive: true, mode: DIR_MODE });
      await (await open(path(id), 'wx', FILE_MODE)).close();
    },
    async write(id, _writer, offset, length, body, at) {
      // Bytes a crash left past the recorded offset are written over: the file never grows
      // past the upload's length, and the last byte arrives only once all before it did.
      const file = createWriteStream(path(id), { flags: 'r+', start: offset, highWaterMark: 1024 * 1024 });
      try {
        if (body instanceof Readable) await pipeline(body, boundedStream(length - offset), file);
        else await pipeline(Readable.from(bounded(body, length - offset), { objectMode: false }), file);
      } finally {
        // A cut request keeps what it delivered: the release records it.
        if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => resolve()));
        at.offset = offset + file.bytesWritten;
      }
    },
    read(id) {
      const stream = Readable.from(
        (async function* () {
          const fh = await open(path(id), 'r');
          try {
            yield* fh.createReadStream({ autoClose: false, highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>;
          } finally {
            await fh.close();
          }
        })(),
        { objectMode: false },
      );
      return stream;
    },
    file: path,
    async drop(id) {
      await rm(path(id), { force: true });
    },
    async sweep() {
      let names: string[];
      try {
        names = await readdir(dir);
      } catch {
        return 0;
      }
      const ids = names.filter((n) => /^[0-9a-f-]{36}$/.test(n));
      if (ids.length === 0) return 0;
      const live = new Set(
        (await sql<{ id: string }[]>`select id::text from storage_private.resumable_uploads where id = any(${ids}::uuid[])`).map((r) => r.id),
      );
      let n = 0;
      for (const id of ids) {
        if (!live.has(id)) {
          await rm(path(id), { force: true });
          n++;
        }
      }
      return n;
    },
  };
}

export function databaseStaging(sql: Sql): Staging {
  return {
    async create() {},
    async write(id, writer, offset, length, body, pos) {
      let at = offset;
      let parts: Buffer[] = [];
      let held = 0;
      const flush = async (buf: Buffer) => {
        if (!(await sdb.putResumablePart(sql, id, writer, at, buf))) throw RESUMABLE_ERRORS.busy();
        at += buf.length;
        pos.offset = at;
      };
      let failure: unknown = null;
      try {
        for await (const chunk of bounded(body, length - offset)) {
          parts.push(chunk);
          held += chunk.length;
          while (held >= PART_BYTES) {
            const all = Buffer.concat(parts, held);
            await flush(all.subarray(0, PART_BYTES));
            const rest = all.subarray(PART_BYTES);
            parts = rest.length ? [rest] : [];
            held = rest.length;
          }
        }
      } catch (err) {
        failure = err; // a cut request keeps what it delivered
      }
      if (held > 0) await flush(Buffer.concat(parts, held));
      if (failure !== null) throw failure instanceof Error ? failure : new Error('upload stream failed', { cause: failure });
    },
    read(id, length) {
      return Readable.from(
        (async function* () {
          let at = 0;
          while (at < length) {
            const rows = await sdb.resumableParts(sql, id, at, 4);
            if (rows.length === 0) throw new Error(`upload ${id}: staged bytes missing at ${at}`);
            for (const r of rows) {
              if (Number(r.offset) !== at) throw new Error(`upload ${id}: staged bytes missing at ${at}`);
              const data = Buffer.from(r.data, 'base64');
              at += data.length;
              yield data;
            }
          }
        })(),
        { objectMode: false },
      );
    },
    async drop() {}, // the parts go with the row
    async sweep() {
      return 0;
    },
  };
}

export function stagingFor(backend: Backend, storageDir: string, sql: Sql): Staging {
  return backend.name === 'disk' ? fileStaging(storageDir, sql) : databaseStaging(sql);
}

/** `Upload-Metadata`: comma-separated `key base64value` pairs. */
function parseMetadata(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (header === undefined || header.trim() === '') return out;
  for (const pair of header.split(',')) {
    const [key, value, extra] = pair.trim().split(' ');
    if (!key || extra !== undefined) throw RESUMABLE_ERRORS.badMetadata();
    out[key] = value === undefined ? '' : Buffer.from(value, 'base64').toString('utf8');
  }
  return out;
}

function whole(header: string | string[] | undefined, err: () => AppError): number {
  if (typeof header !== 'string' || !/^\d{1,15}$/.test(header)) throw err();
  return Number(header);
}

/** The claims an upload runs under: the creator's role and user id. */
function contextOf(u: sdb.Resumable): RequestContext {
  const claims: Record<string, unknown> = { role: u.role };
  if (u.sub !== null) claims.sub = u.sub;
  return { role: u.role, claims: JSON.stringify(claims), claimsObject: claims };
}

/** What the resumable routes share: the database, the back end and the staging. */
interface Tus {
  db: Deps['db'];
  log: Deps['log'];
  backend: Backend;
  staging: Staging;
}

/** Every answer says the protocol's version (the refusals of the hooks below included). */
async function tus(_req: FastifyRequest, reply: FastifyReply): Promise<void> {
  reply.header('tus-resumable', TUS_VERSION);
}

/** POST and PATCH: a version other than ours is refused, before the caller's credential is asked for. */
async function checkVersion(req: FastifyRequest): Promise<void> {
  const v = req.headers['tus-resumable'];
  if (v !== undefined && v !== TUS_VERSION) throw RESUMABLE_ERRORS.badVersion();
}

/** PATCH: bytes only as application/offset+octet-stream from a whole offset, before the caller's credential is asked for. */
async function checkPatch(req: FastifyRequest): Promise<void> {
  if (String(req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase() !== 'application/offset+octet-stream') {
    throw RESUMABLE_ERRORS.badType();
  }
  whole(req.headers['upload-offset'], RESUMABLE_ERRORS.badOffset);
}

/** The upload id of the URL (404 for anything else). */
function uploadId(req: FastifyRequest): string {
  const id = rawPath(req.url).slice(ENDPOINT.length + 1);
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) throw RESUMABLE_ERRORS.notFound();
  return id;
}

/** The upload of the URL, if the caller created it. */
async function mine(t: Tus, req: FastifyRequest): Promise<sdb.Resumable> {
  const cred = gatedCredential(req);
  const id = uploadId(req);
  const u = await sdb.getResumable(t.db.sql, id);
  const sub = cred.claimsObject.sub ?? null;
  if (u === null || u.role !== cred.role || u.sub !== sub) throw RESUMABLE_ERRORS.notFound();
  return u;
}

/** The last byte is in: create the object as any upload, as the creator. The upload is over either way. */
async function finish(t: Tus, u: sdb.Resumable): Promise<void> {
  const { db, backend, staging, log } = t;
  const length = Number(u.length);
  const put: { pending: PendingPut | null } = { pending: null };
  let out: { id: string; replaced: string | null };
  const addr = (id: string) => ({ bucket: u.bucket_id, name: u.name, id });
  try {
    out = await db.transactionWithContext(contextOf(u), async (tx) => {
      const r = await sdb.beginUpload(tx, { bucket: u.bucket_id, name: u.name, mimeType: u.mime_type, declaredSize: length, upsert: u.upsert });
      throwUnlessOk(r.status);
      const id = r.object_id!;
      const file = staging.file?.(u.id);
      put.pending =
        file !== undefined && backend.adopt
          ? await backend.adopt(addr(id), file)
          : await backend.put(tx, addr(id), staging.read(u.id, length), u.mime_type);
      await sdb.finishUpload(tx, id, length, id.replaceAll('-', ''), u.cache_control);
      return { id, replaced: r.replaced };
    });
  } catch (err) {
    await put.pending?.abort().catch((e: unknown) => log.error({ err: e }, 'storage: could not remove the bytes of a failed upload'));
    await sdb.deleteResumable(db.sql, u.id).catch(() => {});
    await staging.drop(u.id).catch(() => {});
    throw toAppError(err);
  }
  try {
    await put.pending!.commit();
  } catch (err) {
    await db.sql`delete from storage.objects where id = ${out.id}::uuid`.catch(() => {});
    throw ERRORS.internal(err);
  } finally {
    await sdb.deleteResumable(db.sql, u.id).catch(() => {});
    await staging.drop(u.id).catch(() => {});
  }
  if (out.replaced !== null) {
    backend.delete(addr(out.replaced)).catch((err: unknown) => log.error({ err }, 'storage: could not remove replaced bytes'));
  }
}

/** POST: a new upload, after the checks of an upload (begin_upload, rolled back). */
async function createUpload(t: Tus, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { db, staging } = t;
  const cred = gatedCredential(req);
  if (req.headers['upload-defer-length'] !== undefined) throw RESUMABLE_ERRORS.badLength();
  const length = whole(req.headers['upload-length'], RESUMABLE_ERRORS.badLength);
  const meta = parseMetadata(req.headers['upload-metadata'] as string | undefined);
  const bucket = meta.bucketName;
  const name = meta.objectName;
  if (bucket === undefined || name === undefined) throw RESUMABLE_ERRORS.badMetadata();
  if (!bucketIdOk(bucket) || !objectNameOk(name)) throw invalidObjectPath();
  const upsert = String(req.headers['x-upsert'] ?? '').toLowerCase() === 'true';
  const mimeType = pickMimeType(meta.contentType ?? null, name);
  const cc = meta.cacheControl;
  const cacheControl = cc === undefined || cc === '' ? null : /^\d+$/.test(cc) ? `max-age=${cc}` : cc.slice(0, 200);
  // The checks of an upload, now: begin_upload, rolled back.
  const probe = new Error('probe');
  try {
    await db.transactionWithContext(cred, async (tx) => {
      throwUnlessOk((await sdb.beginUpload(tx, { bucket, name, mimeType, declaredSize: length, upsert })).status);
      throw probe;
    });
  } catch (err) {
    if (err !== probe) throw toAppError(err);
  }
  const sub = cred.claimsObject.sub;
  const u = await sdb.createResumable(db.sql, {
    bucket,
    name,
    role: cred.role,
    sub: typeof sub === 'string' ? sub : null,
    mimeType,
    cacheControl,
    upsert,
    length,
  });
  await staging.create(u.id);
  reply.header('location', `${ENDPOINT}/${u.id}`);
  reply.header('upload-expires', u.expires_at.toUTCString());
  if (length === 0) await finish(t, u);
  return reply.code(201).send();
}

/** HEAD: where an upload of the caller's is. */
async function uploadStatus(t: Tus, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const u = await mine(t, req);
  reply.header('upload-offset', u.offset);
  reply.header('upload-length', u.length);
  reply.header('upload-expires', u.expires_at.toUTCString());
  reply.header('cache-control', 'no-store');
  return reply.code(200).send();
}

/** PATCH: bytes from the offset on, under a lease (one writer); the object made when the last byte is in. */
async function appendBytes(t: Tus, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const { db, staging } = t;
  const offset = whole(req.headers['upload-offset'], RESUMABLE_ERRORS.badOffset);
  const cred = gatedCredential(req);
  const id = uploadId(req);
  const writer = randomUUID();
  const sub = cred.claimsObject.sub;
  const took = await sdb.takeResumable(db.sql, { id, writer, expectedOffset: offset, leaseSeconds: LEASE_SECONDS, role: cred.role, sub: typeof sub === 'string' ? sub : null });
  switch (took.status) {
    case 'ok':
      break;
    case 'not_found':
      throw RESUMABLE_ERRORS.notFound();
    case 'busy':
      reply.header('connection', 'close');
      throw RESUMABLE_ERRORS.busy();
    case 'offset_mismatch':
      reply.header('connection', 'close');
      throw RESUMABLE_ERRORS.offsetMismatch();
    default:
      return took.status satisfies never;
  }
  const length = Number(took.length);
  const pos = { offset };
  let failure: unknown = null;
  try {
    await staging.write(id, writer, offset, length, req.raw as AsyncIterable<Buffer>, pos);
  } catch (err) {
    failure = err;
  }
  const held = await sdb.releaseResumable(db.sql, id, writer, pos.offset);
  if (!held) throw RESUMABLE_ERRORS.busy();
  const at = pos.offset;
  // The last byte is in (even when more followed it: 413 after the object is made).
  if (at === length) {
    const u = await sdb.getResumable(db.sql, id);
    if (u === null) throw RESUMABLE_ERRORS.notFound();
    await finish(t, u);
  }
  if (failure !== null) throw failure instanceof Error ? failure : new Error('upload stream failed', { cause: failure });
  reply.header('upload-offset', String(at));
  return reply.code(204).send();
}

/** DELETE: the caller's upload and its staged bytes go. */
async function cancelUpload(t: Tus, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const u = await mine(t, req);
  await sdb.deleteResumable(t.db.sql, u.id);
  await t.staging.drop(u.id);
  return reply.code(204).send();
}

export function registerResumableRoutes(app: FastifyInstance, deps: Deps, backend: Backend, staging: Staging): void {
  const t: Tus = { db: deps.db, log: deps.log, backend, staging };
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
    // The checks each route made first, then the caller's credential, set once (gatedCredential(req) in the handlers).
    const { caller } = deps.credentials;
    scope.post(ENDPOINT, { preHandler: [tus, checkVersion, caller] }, (req, reply) => createUpload(t, req, reply));
    scope.head(`${ENDPOINT}/*`, { preHandler: [tus, caller] }, (req, reply) => uploadStatus(t, req, reply));
    scope.patch(`${ENDPOINT}/*`, { preHandler: [tus, checkVersion, checkPatch, caller] }, (req, reply) => appendBytes(t, req, reply));
    scope.delete(`${ENDPOINT}/*`, { preHandler: [tus, caller] }, (req, reply) => cancelUpload(t, req, reply));
  });
}

/** The job's part: expired uploads and the staged bytes of uploads that are gone. */
export async function sweepResumable(sql: Sql, staging: Staging): Promise<number> {
  const expired = await sdb.expiredResumables(sql);
  for (const id of expired) await staging.drop(id);
  return expired.length + (await staging.sweep());
}
