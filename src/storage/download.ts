/**
 * Sending an object or a rendition of it: ETag, byte ranges, 304, Cache-Control and the
 * download safety headers (mime.ts), then its bytes from the back end or the image cache.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ByteRange } from './backends/backend.ts';
import type * as sdb from './db.ts';
import { STORAGE_ERRORS } from './errors.ts';
import { downloadHeaders } from './mime.ts';
import type { Room } from './routes/room.ts';
import type { Transform } from './transform.ts';

/**
 * The Cache-Control of a download: the uploader's (storage-js sends `max-age=3600`), kept
 * `private` in a private bucket so that no shared cache keeps it; without one, `public,
 * max-age=3600` in a public bucket and `private, no-cache` otherwise.
 */
export function cacheControlFor(meta: sdb.ObjectMeta): string {
  const asked = meta.cache_control;
  if (asked === null) return meta.public ? 'public, max-age=3600' : 'private, no-cache';
  if (meta.public || /\b(private|no-store)\b/i.test(asked)) return asked;
  return `private, ${asked.replace(/\bpublic\s*,?\s*/i, '')}`;
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

export function etagMatches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((t) => {
    const v = t.trim();
    return v === '*' || v === etag || v === `W/${etag}`;
  });
}

/**
 * Send an object: headers (ETag, ranges, 304, the download safety headers), then its bytes.
 * `lookup` reads its row. An upsert that commits between that read and the back end's
 * removes the bytes the row named (they go with the old row, or right after the commit):
 * then the row is read once more and the object that replaced it is sent instead; a
 * deleted object is a 404.
 */
export async function serve(
  room: Room,
  req: FastifyRequest,
  reply: FastifyReply,
  bucket: string,
  name: string,
  lookup: () => Promise<sdb.ObjectMeta>,
  again = true,
): Promise<unknown> {
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
  const stream = await room.backend.get({ bucket, name, id: meta.id! }, size, range);
  if (stream === null) {
    reply.removeHeader('content-length');
    reply.removeHeader('content-range');
    if (again) return serve(room, req, reply, bucket, name, lookup, false);
    throw STORAGE_ERRORS.objectNotFound();
  }
  reply.raw.once('finish', () => room.downloaded.inc(length));
  return reply.send(stream);
}

/** Like serve(): `lookup` reads the row, and once more when an upsert took the bytes it named. */
export async function render(
  room: Room,
  req: FastifyRequest,
  reply: FastifyReply,
  bucket: string,
  name: string,
  lookup: () => Promise<sdb.ObjectMeta>,
  t: Transform,
  again = true,
): Promise<unknown> {
  const { images, backend } = room;
  const meta = await lookup();
  if (meta.status === 'bucket_not_found') throw STORAGE_ERRORS.bucketNotFound();
  if (meta.status === 'not_found') throw STORAGE_ERRORS.objectNotFound();
  const size = Number(meta.size);
  const v = await images.variant(meta.id!, meta.mime_type!, size, t, () => backend.get({ bucket, name, id: meta.id! }, size, null));
  if (v === null) {
    if (again) return render(room, req, reply, bucket, name, lookup, t, false);
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
}
