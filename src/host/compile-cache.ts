/**
 * Node's compile cache for the service's modules (decision 0303). Without it, running
 * `src/*.ts` loads Node's TypeScript stripper, a WebAssembly module that stays resident for
 * the life of the process (about 16 MB of a 135 MB idle service), and compiles every module
 * from source at each start. With NODE_COMPILE_CACHE set before the first `.ts` file loads,
 * Node takes each file's stripped text and its compiled code from the cache (keyed by the
 * file's content, per Node version), never loads the stripper, and starts faster.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Where the service's compile cache lives; an operator's NODE_COMPILE_CACHE wins. */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.NODE_COMPILE_CACHE || join(tmpdir(), 'plinth-compile-cache');
}

/**
 * glibc's malloc arenas: at most 2, when the environment does not say (decision 0306). By
 * default each thread that allocates (the libuv pool, V8's workers compiling and marking)
 * gets an arena of its own, up to eight per core, and a 30-minute mixed soak left one of them
 * at 23 MB of freed but resident memory: the process grew from 190 to 205 MB over the soak,
 * against 189 to 192 MB in its first six minutes with two arenas.
 */
export const MALLOC_ARENA_MAX = '2';

/**
 * glibc's mmap threshold, fixed at its initial 128 KiB (decision 0308). By default glibc
 * raises it (and the trim threshold with it) each time a large block is freed, so that
 * later blocks of up to 32 MiB come from the arenas, where freed memory stays resident:
 * the 30-minute soak plateaued at 205 MB. Fixed, a block of 128 KiB or more is mapped and
 * unmapped on its own: in the same soak the RSS went up and down with V8's heap, 167–188 MB
 * and at most 196.
 */
export const MALLOC_MMAP_THRESHOLD = '131072';

/** What the service's process environment gets when `env` lacks it (an operator's values win). */
export function startEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const add: Record<string, string> = {};
  if (!env.NODE_COMPILE_CACHE && !env.NODE_DISABLE_COMPILE_CACHE) add.NODE_COMPILE_CACHE = compileCacheDir(env);
  if (!env.MALLOC_ARENA_MAX) add.MALLOC_ARENA_MAX = MALLOC_ARENA_MAX;
  if (!env.MALLOC_MMAP_THRESHOLD_) add.MALLOC_MMAP_THRESHOLD_ = MALLOC_MMAP_THRESHOLD;
  return add;
}

/**
 * Re-execute this process (same pid, arguments and flags) with its start environment
 * (startEnv: NODE_COMPILE_CACHE, MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_) when something of it is missing: they only
 * count when the process starts, and a `node …` command line (npm start, a Dockerfile's CMD,
 * a unit file) should not have to carry them. Not done when Node cannot replace the process
 * (process.execve: Node 23.11+, not on Windows), or with an IPC channel (`node --watch`'s
 * child reports its files over it; the channel would not survive the exec).
 */
export function reexecWithCompileCache(): void {
  const env = process.env;
  const add = startEnv(env);
  if (Object.keys(add).length === 0 || process.channel || typeof process.execve !== 'function') return;
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], { ...env, ...add });
}
