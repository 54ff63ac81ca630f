/**
 * The `disk` back end: files under STORAGE_DIR.
 *
 * Layout: `STORAGE_DIR/<bucket>/<object path>/<object id>` (supabase/storage's file back end
 * keeps one file per version the same way), and `STORAGE_DIR/.tmp/<object id>` while an
 * upload streams; folders 0700, files 0600 (modes.ts). Every resolved path is checked to
 * stay inside STORAGE_DIR, on top of the path validation every request already passed.
 *
 * Crash safety: no object row may ever name bytes that are not there. The file is renamed
 * into its place *before* the metadata transaction commits — the place carries the new
 * object id, which nothing reads until that row commits — so a crash at any step leaves
 * either the whole object or no row at all. What a crash can leave is a file no row names
 * (a temporary file, or a placed file whose transaction never committed, or the bytes of a
 * replaced or deleted object); `sweep` removes those, at start and by the `storage__sweep`
 * job, asking the database which ids are idle (sweep.sql: an upload in progress holds an
 * advisory lock on its id), so instances sharing one STORAGE_DIR never take each other's
 * uploads in progress.
 */
import { createWriteStream, type Dirent } from 'node:fs';
import { mkdir, open, readdir, rename, rm, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Db } from '../../core/db.ts';
import { DIR_MODE, FILE_MODE } from '../modes.ts';
import type { Backend, ByteRange, ObjectAddress, PendingPut } from './backend.ts';

const TMP = '.tmp';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Ids asked about per statement. */
const SWEEP_BATCH = 1000;

/** Whether `p` is inside the folder `base`. */
function inside(base: string, p: string): boolean {
  return p.startsWith(base + sep);
}

/** Where an object's bytes are placed: `<base>/<bucket>/<name…>/<id>`, never outside its bucket's folder. */
function finalPath(base: string, obj: ObjectAddress): string {
  const p = resolve(base, obj.bucket, ...obj.name.split('/'), obj.id);
  const bucketDir = resolve(base, obj.bucket);
  if (!inside(base, p) || !inside(base, bucketDir) || !p.startsWith(bucketDir + sep) || obj.bucket === TMP) {
    throw new Error(`object path escapes STORAGE_DIR: ${obj.bucket}/${obj.name}`);
  }
  return p;
}

/** Remove empty folders from `dir` up to (not including) `stop`. */
async function prune(dir: string, stop: string): Promise<void> {
  while (dir.startsWith(stop + sep) && dir !== stop) {
    try {
      await rmdir(dir);
    } catch {
      return; // not empty (or already gone): stop
    }
    dir = dirname(dir);
  }
}

/** Remove a placed file and the folders it leaves empty inside its bucket. */
async function removePlaced(p: string, bucketDir: string): Promise<void> {
  await unlink(p).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
  await prune(dirname(p), bucketDir);
}

/** Every `<object id>` file under a bucket folder, with the bucket folder. */
async function* placedFiles(base: string): AsyncGenerator<{ path: string; id: string; bucketDir: string }> {
  let buckets: Dirent[];
  try {
    buckets = await readdir(base, { withFileTypes: true });
  } catch {
    return;
  }
  for (const b of buckets) {
    if (!b.isDirectory() || b.name.startsWith('.')) continue; // .tmp, .tus: no bucket id starts with a dot
    const bucketDir = join(base, b.name);
    let entries: Dirent[];
    try {
      entries = await readdir(bucketDir, { withFileTypes: true, recursive: true });
    } catch {
      continue;
    }
    for (const e of entries) {
      if (e.isFile() && UUID.test(e.name)) yield { path: join(e.parentPath, e.name), id: e.name, bucketDir };
    }
  }
}

/** Of `ids`, those idle (no upload transaction holds them), each with whether a row names it. */
async function idle(db: Db, ids: string[]): Promise<Map<string, boolean>> {
  const out = new Map<string, boolean>();
  for (let i = 0; i < ids.length; i += SWEEP_BATCH) {
    const rows = await db.sql.begin(
      (tx) => tx<{ id: string; has_row: boolean }[]>`select id, has_row from storage_private.idle_uploads(${ids.slice(i, i + SWEEP_BATCH)}::uuid[])`,
    );
    for (const r of rows) out.set(r.id, r.has_row);
  }
  return out;
}

/** The leftovers of interrupted uploads: idle temporary files, and placed files no committed row names. */
async function sweepDisk(base: string, db: Db): Promise<number> {
  const tmpDir = join(base, TMP);
  let removed = 0;
  // Temporary files: an idle one belongs to an upload that is over, committed or not.
  let tmpNames: string[] = [];
  try {
    tmpNames = await readdir(tmpDir);
  } catch {
    // no .tmp yet
  }
  const tmpIds = tmpNames.filter((n) => UUID.test(n));
  for (const [id] of await idle(db, tmpIds)) {
    await rm(join(tmpDir, id), { force: true });
    removed++;
  }
  // Placed files: left over when idle and no committed row names them.
  const placed: { path: string; id: string; bucketDir: string }[] = [];
  for await (const f of placedFiles(base)) placed.push(f);
  const state = await idle(db, placed.map((f) => f.id));
  for (const f of placed) {
    if (state.get(f.id) === false) {
      await removePlaced(f.path, f.bucketDir);
      removed++;
    }
  }
  return removed;
}

export function diskBackend(root: string, db: Db): Backend {
  const base = resolve(root);
  const tmpDir = join(base, TMP);

  return {
    name: 'disk',

    async put(_tx, obj, body): Promise<PendingPut> {
      const dest = finalPath(base, obj);
      const bucketDir = resolve(base, obj.bucket);
      const tmp = join(tmpDir, obj.id);
      await mkdir(tmpDir, { recursive: true, mode: DIR_MODE });
      const file = createWriteStream(tmp, { flags: 'wx', mode: FILE_MODE, highWaterMark: 1024 * 1024 });
      try {
        await pipeline(body, file);
        // In place before the row commits: a committed row always finds its bytes.
        await mkdir(dirname(dest), { recursive: true, mode: DIR_MODE });
        await rename(tmp, dest);
      } catch (err) {
        // A file stream destroyed while it was still opening (a body cut off at once) opens
        // its file all the same: remove it only once the stream is closed, or it outlives
        // the upload.
        if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => resolve()));
        await rm(tmp, { force: true });
        throw err;
      }
      return {
        async commit() {},
        async abort() {
          await removePlaced(dest, bucketDir);
        },
      };
    },

    async adopt(obj, file): Promise<PendingPut> {
      const dest = finalPath(base, obj);
      const bucketDir = resolve(base, obj.bucket);
      await mkdir(dirname(dest), { recursive: true, mode: DIR_MODE });
      await rename(file, dest);
      return {
        async commit() {},
        async abort() {
          await removePlaced(dest, bucketDir);
        },
      };
    },

    async get(obj: ObjectAddress, _size: number, range: ByteRange | null): Promise<Readable | null> {
      const p = finalPath(base, obj);
      let fh: FileHandle;
      try {
        fh = await open(p, 'r'); // an open file survives a concurrent replace or delete
      } catch {
        return null;
      }
      const opts = range ? { start: range.start, end: range.end } : {};
      return fh.createReadStream({ ...opts, highWaterMark: 1024 * 1024, autoClose: true });
    },

    async delete(obj: ObjectAddress): Promise<void> {
      await removePlaced(finalPath(base, obj), resolve(base, obj.bucket));
    },

    async sweep(): Promise<number> {
      return sweepDisk(base, db);
    },
  };
}
