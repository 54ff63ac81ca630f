/**
 * Stored bytes are private to the service's user: every folder plinth creates for them (the
 * disk back end under STORAGE_DIR, its `.tmp` and `.tus` staging, the image variants under
 * DATA_DIR/image-cache) is made 0700 and every file 0600, with the mode given explicitly
 * (the process umask can only take bits away from it).
 *
 * Files an older plinth wrote 0644 in folders 0755 are tightened at start: a walk of those
 * folders alone, bounded (MAX_ENTRIES entries; past them the caller logs a warning naming
 * the folders, for `chmod -R go-rwx`), that never follows a symbolic link and only takes
 * bits away (group and others), so nothing it touches can open further.
 */
import type { Dirent } from 'node:fs';
import { chmod, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

export const DIR_MODE = 0o700;
export const FILE_MODE = 0o600;
/** Entries one start looks at, at most. */
const MAX_ENTRIES = 200_000;

export interface Tightened {
  /** Files and folders whose mode was changed. */
  changed: number;
  /** Entries looked at. */
  seen: number;
  /** false: the walk stopped at MAX_ENTRIES. */
  complete: boolean;
}

/** Take group and others' bits off `roots` and everything under them (missing roots are skipped). */
export async function tightenModes(roots: readonly string[], maxEntries = MAX_ENTRIES): Promise<Tightened> {
  const out: Tightened = { changed: 0, seen: 0, complete: true };
  const tighten = async (path: string): Promise<void> => {
    const s = await lstat(path);
    if ((s.mode & 0o077) === 0) return;
    await chmod(path, s.mode & 0o700);
    out.changed++;
  };
  for (const root of roots) {
    let rootStat;
    try {
      rootStat = await lstat(root);
    } catch {
      continue; // nothing stored there yet
    }
    if (!rootStat.isDirectory()) continue;
    const stack = [root];
    await tighten(root).catch(() => {}); // a root that is not ours (a mount point): its contents still are
    while (stack.length > 0) {
      const dir = stack.pop()!;
      let entries: Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        continue; // gone meanwhile, or not ours to read
      }
      for (const e of entries) {
        if (++out.seen > maxEntries) {
          out.complete = false;
          return out;
        }
        const p = join(dir, e.name);
        if (e.isSymbolicLink()) continue; // never followed, never changed
        try {
          if (e.isDirectory()) {
            await tighten(p);
            stack.push(p);
          } else if (e.isFile()) {
            await tighten(p);
          }
        } catch {
          // removed meanwhile (a sweep, a delete): nothing to tighten
        }
      }
    }
  }
  return out;
}
