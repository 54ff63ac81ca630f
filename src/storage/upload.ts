/**
 * An upload, a copy and a move: one transaction as the caller around the back end's put,
 * then the back end's own commit, and the bytes an object no longer names removed.
 *
 * An upload: path and credentials → the multipart part `file` or the raw body located →
 * MIME type → one transaction as the caller: `storage.begin_upload` (bucket, declared
 * size, MIME type, conflict, and the RLS insert) — a refusal is answered before the body
 * is read — then the body streams through a byte counter to the back end, then
 * `storage.finish_upload`, COMMIT, and the back end's own commit.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { RequestContext } from '../core/db.ts';
import { ERRORS } from '../core/errors.ts';
import { toAppError } from '../core/http.ts';
import type { ObjectAddress, PendingPut } from './backends/backend.ts';
import * as sdb from './db.ts';
import { STORAGE_ERRORS, throwUnlessOk } from './errors.ts';
import { pickMimeType } from './mime.ts';
import { bucketIdOk, invalidObjectPath, objectNameOk } from './paths.ts';
import type { Room } from './routes/room.ts';
import { SIGN_ERRORS, type UploadGrant } from './signed.ts';
import { meter, multipartSource, rawSource } from './sources.ts';

/**
 * One upload as `ctx`: begin_upload (a refusal is answered before the body is read),
 * the body through a byte counter to the back end, finish_upload, COMMIT. `claim`: the
 * signed upload token this upload spends (in the same transaction).
 */
export async function store(
  room: Room,
  req: FastifyRequest,
  reply: FastifyReply,
  o: { ctx: RequestContext; bucket: string; name: string; upsert: boolean; claim?: UploadGrant },
): Promise<{ id: string; key: string }> {
  const { db, backend, log } = room;
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
  await committed(room, put.pending!, out.id);
  if (out.replaced !== null) void removeBytes(room, { bucket, name, id: out.replaced }, 'replaced');
  room.uploaded.inc(out.size);
  return { id: out.id, key: `${bucket}/${name}` };
}

/** After COMMIT: the back end's own commit; if the bytes cannot be put in place, the committed row goes again. */
async function committed(room: Room, pending: PendingPut, id: string): Promise<void> {
  try {
    await pending.commit();
  } catch (err) {
    await room.db.sql`delete from storage.objects where id = ${id}::uuid`.catch(() => {});
    throw ERRORS.internal(err);
  }
}

/** Bytes no object names any more, removed (a failure is logged: the sweep of a later start does not find them). */
export function removeBytes(room: Room, obj: ObjectAddress, what: string): Promise<void> {
  return room.backend.delete(obj).catch((err: unknown) => room.log.error({ err }, `storage: could not remove ${what} bytes`));
}

/** copy and move: the source as the caller sees it, the bytes into a new object, the source gone on a move. */
export async function copyOrMove(room: Room, req: FastifyRequest, cred: RequestContext, move: boolean): Promise<{ id: string; key: string }> {
  const { db, backend, log } = room;
  const b = await room.json(req);
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
  await committed(room, put.pending!, out.id);
  if (move) await removeBytes(room, { bucket: srcBucket, name: srcName, id: out.src }, 'moved');
  if (out.replaced !== null) void removeBytes(room, { bucket: dstBucket, name: dstName, id: out.replaced }, 'replaced');
  return { id: out.id, key: `${dstBucket}/${dstName}` };
}
