/**
 * The `disk` back end: files under STORAGE_DIR.
 *
 * Layout: `STORAGE_DIR/<bucket>/<object path>/<object id>` (supabase/storage's file back end
 * keeps one file per version the same way), and `STORAGE_DIR/.tmp/<object id>` while an
 * upload streams. The temporary file is renamed into place only after the metadata
 * committed; a failed or interrupted upload removes it, so it leaves no file (and, the
 * transaction having rolled back, no row). Every resolved path is checked to stay inside
 * STORAGE_DIR, on top of the path validation every request already passed.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Backend, ByteRange, ObjectAddress, PendingPut } from './backend.ts';

const TMP = '.tmp';

export function diskBackend(root: string): Backend {
  const base = resolve(root);
  const inside = (p: string) => p.startsWith(base + sep);

  const finalPath = (obj: ObjectAddress): string => {
    const p = resolve(base, obj.bucket, ...obj.name.split('/'), obj.id);
    const bucketDir = resolve(base, obj.bucket);
    if (!inside(p) || !inside(bucketDir) || !p.startsWith(bucketDir + sep) || obj.bucket === TMP) {
      throw new Error(`object path escapes STORAGE_DIR: ${obj.bucket}/${obj.name}`);
    }
    return p;
  };

  /** Remove empty folders from `dir` up to (not including) the bucket folder. */
  const prune = async (dir: string, stop: string): Promise<void> => {
    while (dir.startsWith(stop + sep) && dir !== stop) {
      try {
        await rmdir(dir);
      } catch {
        return; // not empty (or already gone): stop
      }
      dir = dirname(dir);
    }
  };

  return {
    name: 'disk',

    async put(_tx, obj, body): Promise<PendingPut> {
      const dest = finalPath(obj);
      const tmpDir = join(base, TMP);
      const tmp = join(tmpDir, obj.id);
      await mkdir(tmpDir, { recursive: true });
      const file = createWriteStream(tmp, { flags: 'wx', highWaterMark: 1024 * 1024 });
      try {
        await pipeline(body, file);
      } catch (err) {
        // A file stream destroyed while it was still opening (a body cut off at once) opens
        // its file all the same: remove it only once the stream is closed, or it outlives
        // the upload.
        if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => resolve()));
        await rm(tmp, { force: true });
        throw err;
      }
      return {
        async commit() {
          try {
            await mkdir(dirname(dest), { recursive: true });
            await rename(tmp, dest);
          } catch (err) {
            await rm(tmp, { force: true });
            throw err;
          }
        },
        async abort() {
          await rm(tmp, { force: true });
        },
      };
    },

    async get(obj: ObjectAddress, _size: number, range: ByteRange | null): Promise<Readable | null> {
      const p = finalPath(obj);
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
      const p = finalPath(obj);
      await unlink(p).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
      await prune(dirname(p), resolve(base, obj.bucket));
    },
  };
}
