/**
 * The database-side limit of the `database` storage back end: the same bytes moved by
 * PostgreSQL alone, from this process over one connection, the way the back end moves them
 * (src/storage/backends/database.ts):
 * - up: a binary `COPY … FROM STDIN` of CHUNK_BYTES chunks, in one transaction, into a table
 *   made `like storage_private.chunks` (same columns, storage and keys; no view, no trigger);
 * - down: a binary `COPY (select data … order by seq) TO STDOUT` of an object's chunks.
 * No HTTP, no service: what PostgreSQL itself takes to store and return the bytes (WAL, heap
 * and TOAST pieces of about 2 KB each with their index entries) on the same cores.
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { CHUNK_BYTES, COPY_HEADER, COPY_TRAILER, copyRows, tupleHead, writeWithBackpressure } from '../../src/storage/backends/database.ts';

const PROBE_TABLE = 'public.bench_chunk_probe';

export interface PostgresSide {
  /** The connection (for looking up the object to read). */
  sql: postgres.Sql;
  /** Seconds to store `bytes` bytes (the repeated `slice`) as one object's chunks. */
  upload(bytes: number, slice: Buffer): Promise<number>;
  /** Seconds to read the chunks of the stored object `objectId`; its bytes are checked against `bytes`. */
  download(objectId: string, bytes: number): Promise<number>;
  close(): Promise<void>;
}

export async function postgresSide(url: string): Promise<PostgresSide> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  await sql.unsafe(`create table if not exists ${PROBE_TABLE} (like storage_private.chunks including all)`);
  return {
    sql,
    async upload(bytes, slice) {
      const id = randomBytes(16);
      const t0 = performance.now();
      await sql.begin(async (tx) => {
        const copy = await tx.unsafe(`copy ${PROBE_TABLE} (object_id, seq, data) from stdin with (format binary)`).writable();
        const finished = new Promise<void>((resolve, reject) => {
          copy.once('finish', resolve);
          copy.once('error', reject);
        });
        const put = (b: Buffer) => writeWithBackpressure(copy, b);
        await put(COPY_HEADER);
        let seq = 0;
        for (let left = bytes; left > 0; left -= CHUNK_BYTES) {
          const n = Math.min(left, CHUNK_BYTES);
          await put(tupleHead(id, seq++, n));
          for (let at = 0; at < n; at += slice.length) await put(slice.subarray(0, Math.min(slice.length, n - at)));
        }
        await put(COPY_TRAILER);
        copy.end();
        await finished;
      });
      return (performance.now() - t0) / 1000;
    },
    async download(objectId, bytes) {
      // COPY takes no parameters: the id is checked to be a uuid and written in.
      if (!/^[0-9a-f-]{36}$/.test(objectId)) throw new Error(`not a uuid: ${objectId}`);
      const t0 = performance.now();
      let got = 0;
      await sql.begin(async (tx) => {
        const out = await tx.unsafe(`copy (select c.data from storage_private.chunks c where c.object_id = '${objectId}'::uuid order by c.seq) to stdout with (format binary)`).readable();
        try {
          for await (const row of copyRows(out)) got += row.length;
        } finally {
          // As the back end does: a read resumes a driver paused at the last row.
          out._read(0);
        }
      });
      if (got !== bytes) throw new Error(`postgres download: ${got} bytes, expected ${bytes}`);
      return (performance.now() - t0) / 1000;
    },
    async close() {
      await sql.unsafe(`drop table if exists ${PROBE_TABLE}`).catch(() => {});
      await sql.end({ timeout: 5 });
    },
  };
}
