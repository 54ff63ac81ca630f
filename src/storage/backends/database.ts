/**
 * The `database` back end (the default): bytes in `storage_private.chunks`, one size of
 * chunk per object (the last one shorter).
 *
 * Both directions use COPY in PostgreSQL's binary format, so the bytes cross the wire once,
 * as they are, and follow each other without a round trip per chunk:
 * - an upload streams its chunks of CHUNK_BYTES into `storage.chunk_copy` (copy.sql: a view
 *   whose trigger applies put_chunk's guard) with COPY FROM STDIN, in the caller's upload
 *   transaction, with the socket's backpressure: at most one chunk is held;
 * - a download reads a window of about WINDOW_BYTES per `COPY (select …) TO STDOUT` on the
 *   service's own connection, which goes back to the pool between windows (a slow reader
 *   holds no connection); the next window is read while this one is sent.
 *
 * An object's chunk size is the length of its chunk 0 (every chunk but the last has it):
 * objects stored with 512 KiB chunks keep them, new ones get CHUNK_BYTES, and reads and
 * ranges use each object's own. PostgreSQL answers octet_length of a TOASTed value from its
 * pointer, without reading the bytes.
 */
import { Readable, type Writable } from 'node:stream';
import type postgres from 'postgres';
import type { Db, ReservedSql } from '../../core/db.ts';
import type { Backend, ByteRange, ObjectAddress, PendingPut } from './backend.ts';

/**
 * The chunk size of new objects (bench: storage-upload-database). PostgreSQL stores each
 * chunk as TOAST pieces of about 2 KB whatever its size, but pays a heap row, an index
 * entry and the guard's trigger per chunk: 2 MiB chunks wrote faster than 512 KiB ones.
 */
export const CHUNK_BYTES = 2 * 1024 * 1024;
/** Bytes per download COPY, whole chunks (bench: storage-download-database); two are held at a time. */
const WINDOW_BYTES = 8 * 1024 * 1024;

const DONE: PendingPut = { commit: async () => {}, abort: async () => {} };

/** The binary COPY signature, flags and header extension length. */
export const COPY_HEADER = Buffer.concat([Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'), Buffer.alloc(8)]);
export const COPY_TRAILER = Buffer.from([0xff, 0xff]);

/** A tuple's fields up to the data's length word: (object_id uuid, seq int4, data bytea). */
export function tupleHead(id: Buffer, seq: number, length: number): Buffer {
  const b = Buffer.allocUnsafe(2 + 4 + 16 + 4 + 4 + 4);
  b.writeInt16BE(3, 0);
  b.writeInt32BE(16, 2);
  id.copy(b, 6);
  b.writeInt32BE(4, 22);
  b.writeInt32BE(seq, 26);
  b.writeInt32BE(length, 30);
  return b;
}

/** Write with the stream's backpressure. */
export async function writeWithBackpressure(out: Writable, buf: Buffer): Promise<void> {
  if (!out.write(buf)) {
    await new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        out.off('drain', done);
        out.off('error', done);
        if (err) reject(err);
        else resolve();
      };
      out.on('drain', done);
      out.on('error', done);
    });
  }
}

/**
 * The single bytea column of a binary COPY TO stream, one Buffer per row. A row that
 * arrives whole in one message (PostgreSQL sends one per row) is a view of it, not a copy.
 */
export async function* copyRows(src: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let pending: Buffer = Buffer.alloc(0);
  let headerLeft = COPY_HEADER.length;
  let ended = false;
  let failure: Error | null = null;
  // Read to the stream's end even past the trailer: the driver resumes its socket only for a reader.
  for await (const msg of src) {
    if (ended) continue;
    const buf = pending.length ? Buffer.concat([pending, msg]) : msg;
    let at = 0;
    if (headerLeft > 0) {
      const n = Math.min(headerLeft, buf.length);
      headerLeft -= n;
      at = n;
    }
    while (headerLeft === 0 && buf.length - at >= 2) {
      const fields = buf.readInt16BE(at);
      if (fields === -1) {
        ended = true;
        at = buf.length;
        break;
      }
      if (buf.length - at < 6) break;
      const len = buf.readInt32BE(at + 2);
      if (fields !== 1 || len < 0) {
        failure = new Error('unexpected COPY row');
        ended = true;
        at = buf.length;
        break;
      }
      if (buf.length - at < 6 + len) break;
      yield buf.subarray(at + 6, at + 6 + len);
      at += 6 + len;
    }
    pending = at === buf.length ? Buffer.alloc(0) : buf.subarray(at);
  }
  if (failure !== null) throw failure;
  if (!ended) throw new Error('COPY stream ended early');
}

/** Chunks first..last (inclusive) of an object, read whole: one COPY on a connection of the pool, released after. */
function copyWindowOf(db: Db, id: string, first: number, last: number): Promise<Buffer[]> {
  return db.sql.begin(async (tx) => {
    await tx`select pg_catalog.set_config('plinth.chunk_copy', ${`${id} ${first} ${last}`}, true)`;
    return copyWindow(tx);
  });
}

/** The COPY of the window named by plinth.chunk_copy, in `tx`. */
async function copyWindow(tx: postgres.TransactionSql<Record<string, never>>): Promise<Buffer[]> {
  const rows: Buffer[] = [];
  const out = await tx`
    copy (select c.data from storage_private.chunks c
          where c.object_id = pg_catalog.split_part(pg_catalog.current_setting('plinth.chunk_copy'), ' ', 1)::uuid
            and c.seq between pg_catalog.split_part(pg_catalog.current_setting('plinth.chunk_copy'), ' ', 2)::int
                          and pg_catalog.split_part(pg_catalog.current_setting('plinth.chunk_copy'), ' ', 3)::int
          order by c.seq) to stdout with (format binary)`.readable();
  try {
    for await (const row of copyRows(out)) rows.push(row);
  } finally {
    // The driver pauses its socket when the stream's buffer fills and resumes it only on a
    // read; the stream's end stops the reads, so a pause at the last row would keep the
    // statement's completion (and the connection) waiting for ever. One read resumes it.
    out._read(0);
  }
  return rows;
}

/** An object's bytes as chunks, by one COPY in the upload's transaction. */
async function putChunks(tx: ReservedSql, obj: ObjectAddress, body: Readable): Promise<PendingPut> {
  const id = Buffer.from(obj.id.replaceAll('-', ''), 'hex');
  // One COPY for the whole body, which arrives at the client's pace: the role's
  // statement_timeout (meant for the caller's SQL) is lifted for it and put back after.
  const [{ timeout }] = await tx<{ timeout: string }[]>`select pg_catalog.current_setting('statement_timeout') as timeout`;
  await tx`select pg_catalog.set_config('statement_timeout', '0', true)`;
  const copy = await tx`copy storage.chunk_copy (object_id, seq, data) from stdin with (format binary)`.writable();
  const finished = new Promise<void>((resolve, reject) => {
    copy.once('finish', resolve);
    copy.once('error', reject);
  });
  finished.catch(() => {});
  // The driver calls back from _final only when the COPY succeeds; a failure reported
  // after the last byte went out shows on the next statement, which waits behind it.
  const sent = new Promise<void>((resolve) => {
    const final = copy._final.bind(copy);
    copy._final = (cb) => {
      final(cb);
      resolve();
    };
  });
  let parts: Buffer[] = [];
  let held = 0;
  let seq = 0;
  const chunk = async (bufs: Buffer[], length: number) => {
    await writeWithBackpressure(copy, tupleHead(id, seq++, length));
    for (const b of bufs) await writeWithBackpressure(copy, b);
  };
  try {
    await writeWithBackpressure(copy, COPY_HEADER);
    for await (const piece of body as AsyncIterable<Buffer>) {
      if (held + piece.length < CHUNK_BYTES) {
        parts.push(piece);
        held += piece.length;
        continue;
      }
      // Complete a chunk with the head of this piece; whole chunks inside it go as they are.
      let rest = piece;
      while (held + rest.length >= CHUNK_BYTES) {
        const take = CHUNK_BYTES - held;
        parts.push(rest.subarray(0, take));
        await chunk(parts, CHUNK_BYTES);
        parts = [];
        held = 0;
        rest = rest.subarray(take);
      }
      if (rest.length) {
        parts.push(rest);
        held = rest.length;
      }
    }
    if (held > 0) await chunk(parts, held);
    await writeWithBackpressure(copy, COPY_TRAILER);
    copy.end();
    await Promise.race([finished, sent]);
    await tx`select pg_catalog.set_config('statement_timeout', ${timeout}, true)`;
    await finished;
  } catch (err) {
    // The COPY fails with the transaction, which the caller rolls back.
    if (!copy.writableEnded && !copy.destroyed) copy.destroy(err instanceof Error ? err : new Error(String(err)));
    throw err;
  }
  // The chunks are part of the metadata transaction: commit and rollback are its own.
  return DONE;
}

/** An object's bytes (or a range of them), read a window of chunks at a time; null when its chunks are gone. */
async function getChunks(db: Db, obj: ObjectAddress, size: number, range: ByteRange | null): Promise<Readable | null> {
  if (size === 0) return Readable.from([]);
  const start = range?.start ?? 0;
  const end = range?.end ?? size - 1;
  const id = obj.id;
  // An object's chunks never change (a replace is a new object id) and go with its row.
  // Its chunk size and first window are read before anything is sent, in one
  // transaction: the row deleted or replaced since the caller read it shows as no chunk
  // at all, and the answer is null (the bytes are gone). Deleted later, in the middle of
  // a larger object, a missing chunk ends the stream with an error.
  const head = await db.sql.begin(async (tx) => {
    const [c0] = await tx<{ n: number }[]>`
      select pg_catalog.octet_length(c.data) as n from storage_private.chunks c where c.object_id = ${id}::uuid and c.seq = 0`;
    if (c0 === undefined) return null;
    const chunk = c0.n;
    const first = Math.floor(start / chunk);
    const last = Math.floor(end / chunk);
    const per = Math.max(1, Math.floor(WINDOW_BYTES / chunk));
    await tx`select pg_catalog.set_config('plinth.chunk_copy', ${`${id} ${first} ${Math.min(first + per - 1, last)}`}, true)`;
    return { chunk, first, last, per, rows: await copyWindow(tx) };
  });
  if (head === null || head.rows.length === 0) return null;
  const { chunk, first, last, per } = head;
  async function* chunks(): AsyncGenerator<Buffer> {
    let from = first;
    let next: Promise<Buffer[]> | null = Promise.resolve(head!.rows);
    while (next !== null) {
      const rows: Buffer[] = await next;
      const to = Math.min(from + per - 1, last);
      next = to < last ? copyWindowOf(db, id, to + 1, Math.min(to + per, last)) : null;
      if (rows.length !== to - from + 1) {
        next?.catch(() => {});
        throw new Error(`object ${id}: chunk ${from + rows.length} is missing`);
      }
      for (let i = 0; i < rows.length; i++) {
        let data = rows[i];
        rows[i] = EMPTY;
        const base = (from + i) * chunk;
        const a = Math.max(0, start - base);
        const b = Math.min(data.length, end - base + 1);
        if (a !== 0 || b !== data.length) data = data.subarray(a, b);
        yield data;
      }
      from = to + 1;
    }
  }
  return Readable.from(chunks(), { objectMode: false, highWaterMark: chunk });
}

export function databaseBackend(db: Db): Backend {
  return {
    name: 'database',
    put: putChunks,
    get: (obj, size, range) => getChunks(db, obj, size, range),
    // The chunks went with the row (ON DELETE CASCADE, in the same transaction).
    async delete(): Promise<void> {},
  };
}

const EMPTY = Buffer.alloc(0);
