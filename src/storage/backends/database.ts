/**
 * The `database` back end (the default): bytes in `storage_private.chunks`, CHUNK_BYTES per
 * row (the last one shorter), written in the caller's upload transaction through
 * `storage.put_chunk` and read back a few chunks per statement. Neither direction holds more than a
 * couple of chunks in memory.
 */
import { Readable } from 'node:stream';
import type { Db, ReservedSql } from '../../core/db.ts';
import type { Backend, ByteRange, ObjectAddress, PendingPut } from './backend.ts';

export const CHUNK_BYTES = 512 * 1024;
/** Chunks per read statement. */
const BATCH = 2;

const DONE: PendingPut = { commit: async () => {}, abort: async () => {} };

export function databaseBackend(db: Db): Backend {
  return {
    name: 'database',

    async put(tx: ReservedSql, obj: ObjectAddress, body: Readable): Promise<PendingPut> {
      let parts: Buffer[] = [];
      let held = 0;
      let seq = 0;
      // One chunk in flight while the next one is read: network in and database out overlap.
      // (Declared with `as`: it is set inside `write`, which TypeScript's narrowing does not follow.)
      let inflight = null as Promise<unknown> | null;
      const write = async (chunk: Buffer) => {
        if (inflight) await inflight;
        // base64 text: 4/3 of the bytes on the wire and in memory, against 2x for the driver's hex bytea.
        inflight = tx`select storage.put_chunk(${obj.id}::uuid, ${seq++}::int, pg_catalog.decode(${chunk.toString('base64')}, 'base64'))`.execute();
      };
      try {
        for await (const piece of body as AsyncIterable<Buffer>) {
          parts.push(piece);
          held += piece.length;
          while (held >= CHUNK_BYTES) {
            const all = parts.length === 1 ? parts[0] : Buffer.concat(parts, held);
            await write(all.subarray(0, CHUNK_BYTES));
            const rest = all.subarray(CHUNK_BYTES);
            parts = rest.length ? [rest] : [];
            held = rest.length;
          }
        }
        if (held > 0) await write(parts.length === 1 ? parts[0] : Buffer.concat(parts, held));
        if (inflight) await inflight;
      } catch (err) {
        if (inflight) await inflight.catch(() => {});
        throw err;
      }
      // The chunks are part of the metadata transaction: commit and rollback are its own.
      return DONE;
    },

    async get(obj: ObjectAddress, size: number, range: ByteRange | null): Promise<Readable | null> {
      if (size === 0) return Readable.from([]);
      const start = range?.start ?? 0;
      const end = range?.end ?? size - 1;
      const first = Math.floor(start / CHUNK_BYTES);
      const last = Math.floor(end / CHUNK_BYTES);
      const id = obj.id;
      const fetch = (from: number) =>
        db.sql<{ seq: number; data: string }[]>`
          select seq, pg_catalog.encode(data, 'base64') as data from storage_private.chunks
          where object_id = ${id}::uuid and seq between ${from}::int and ${Math.min(from + BATCH - 1, last)}::int
          order by seq`.execute();
      // BATCH chunks per statement, the next batch asked for while this one is sent. An
      // object's chunks never change (a replace is a new object id); if the object is
      // deleted meanwhile, a missing chunk ends the stream with an error.
      async function* chunks(): AsyncGenerator<Buffer> {
        let expect = first;
        let next: Promise<{ seq: number; data: string }[]> | null = fetch(first);
        while (next !== null) {
          const rows = await next;
          const after = expect + BATCH;
          next = after <= last ? fetch(after) : null;
          for (const row of rows) {
            if (row.seq !== expect) break;
            let data = Buffer.from(row.data, 'base64');
            const base = row.seq * CHUNK_BYTES;
            const from = Math.max(0, start - base);
            const to = Math.min(data.length, end - base + 1);
            if (from !== 0 || to !== data.length) data = data.subarray(from, to);
            expect++;
            yield data;
          }
          if (expect !== Math.min(after, last + 1)) {
            next?.catch(() => {});
            throw new Error(`object ${id}: chunk ${expect} is missing`);
          }
        }
      }
      return Readable.from(chunks(), { objectMode: false, highWaterMark: CHUNK_BYTES });
    },

    // The chunks went with the row (ON DELETE CASCADE, in the same transaction).
    async delete(): Promise<void> {},
  };
}
