/**
 * What a backup target is (a folder or S3, src/host/backup.ts and backup-s3.ts), apart from
 * both so that neither imports the other.
 */

/** Where backups go. Keys are relative: `wal/<segment>`, `base/<name>/…`. */
export interface BackupStore {
  /** The folder, or s3://bucket/prefix: for messages. */
  readonly where: string;
  /** The local folder of the WAL archive that a restore_command can read (null: fetch it first). */
  readonly localWal: string | null;
  /** The names under base/ (one per base backup, finished or not). */
  backups(): Promise<string[]>;
  /** The files of the WAL archive, with when each was stored (ms). */
  segments(): Promise<Array<{ name: string; stored: number; bytes: number }>>;
  /** The bytes stored under `key` (a folder when it ends with `/`). */
  bytes(key: string): Promise<number>;
  read(key: string): Promise<string | null>;
  write(key: string, text: string): Promise<void>;
  /** Store the local file `path` as `key`; false when the file is gone (PostgreSQL removed it). */
  putFile(key: string, path: string): Promise<boolean>;
  /** Remove `key`, or everything under it when it ends with `/`. */
  remove(key: string): Promise<void>;
  /** Copy `key` to the local file `into`, or everything under it into the folder `into` when it ends with `/`. */
  fetchTree(key: string, into: string): Promise<void>;
  close(): Promise<void>;
}

/** Run `fn` on every item, `n` at a time. */
export async function eachLimit<T>(items: readonly T[], n: number, fn: (item: T) => Promise<unknown>, signal?: AbortSignal): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      signal?.throwIfAborted();
      await fn(items[next++]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
}
