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
 * Re-execute this process (same pid, arguments and flags) with NODE_COMPILE_CACHE set, when
 * it is not set yet: the variable only counts when the process starts, and a `node …`
 * command line (npm start, a Dockerfile's CMD, a unit file) should not have to carry it.
 * Not done when Node cannot replace the process (process.execve: Node 23.11+, not on
 * Windows), under NODE_DISABLE_COMPILE_CACHE, or with an IPC channel (`node --watch`'s
 * child reports its files over it; the channel would not survive the exec).
 */
export function reexecWithCompileCache(): void {
  const env = process.env;
  if (env.NODE_COMPILE_CACHE || env.NODE_DISABLE_COMPILE_CACHE || process.channel || typeof process.execve !== 'function') return;
  process.execve(process.execPath, [process.execPath, ...process.execArgv, ...process.argv.slice(1)], { ...env, NODE_COMPILE_CACHE: compileCacheDir(env) });
}
