/**
 * Where an upload's bytes come from: the multipart part `file` or the raw body, with its
 * MIME type, declared size and Cache-Control; and the byte counter the bytes pass through.
 */
import { pipeline, Readable, Transform as ByteTransform } from 'node:stream';
import { Busboy, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../core/errors.ts';
import { STORAGE_ERRORS } from './errors.ts';

export interface Source {
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
export function multipartSource(req: FastifyRequest): Promise<Source> {
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

export function rawSource(req: FastifyRequest): Source {
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
export function meter(src: Readable, limit: number): { stream: Readable; size: () => number; over: () => boolean } {
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
