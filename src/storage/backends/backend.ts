/**
 * The one small interface every storage back end implements: `put` as a
 * stream, `get` as a stream with an optional byte range, `delete`.
 *
 * An object's bytes are addressed by (bucket, name, id): the id is the metadata row's,
 * new for every upload, so bytes written for an upload are unreachable until the row that
 * names them commits, and a replaced object's bytes are a different address.
 *
 * `put` runs inside the metadata transaction (`tx`, the caller's role): the database back
 * end writes its chunks there; disk and s3 stream elsewhere, before the metadata commits
 * (a committed row always finds its bytes), and undo in `abort` (after it rolled back).
 */
import type { Readable } from 'node:stream';
import type { ReservedSql, Sql } from '../../core/db.ts';

export interface ObjectAddress {
  bucket: string;
  /** The validated object path inside the bucket. */
  name: string;
  /** storage.objects.id */
  id: string;
}

/** Inclusive byte range, already checked against the object's size. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface PendingPut {
  /** The metadata committed: make the bytes reachable. */
  commit(): Promise<void>;
  /** The metadata rolled back (or never committed): remove every byte written. */
  abort(): Promise<void>;
}

export interface Backend {
  readonly name: 'database' | 'disk' | 's3';
  /** Stream `body` to the store; resolves when every byte is written. */
  put(tx: ReservedSql, obj: ObjectAddress, body: Readable, mimeType: string): Promise<PendingPut>;
  /** The object's bytes (or `range` of them), as a stream. null when the bytes are gone. */
  get(obj: ObjectAddress, size: number, range: ByteRange | null): Promise<Readable | null>;
  /** Remove an object's bytes after its row was deleted (idempotent). */
  delete(obj: ObjectAddress): Promise<void>;
  /** Take a whole file (a finished resumable upload staged on the same disk) as the object's bytes, before the metadata commits. */
  adopt?(obj: ObjectAddress, file: string): Promise<PendingPut>;
  /** Remove bytes that no committed object names and no upload in progress holds (a crash's leftovers); returns how many went. */
  sweep?(): Promise<number>;
  close?(): Promise<void>;
}

export type { Sql };
