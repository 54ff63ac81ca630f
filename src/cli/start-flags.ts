import { readFileSync } from 'node:fs';

/**
 * The runtime flags of `npm start` (the options in package.json's start script before the
 * file it runs, e.g. the young generation's size). The start script is the one place they
 * are written; the dev loop (src/cli/dev.ts), the bench's children (test/bench/ipc.ts) and
 * test/core/runtime.test.ts read them here.
 */
export function startFlags(): string[] {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } };
  // `exec node …`: the shell npm starts becomes node, so a supervisor's SIGTERM to npm reaches the service.
  const words = pkg.scripts.start.split(/\s+/).filter((w, i) => !(i === 0 && w === 'exec'));
  const flags: string[] = [];
  for (const w of words.slice(1)) {
    if (!w.startsWith('--')) break;
    flags.push(w);
  }
  return flags;
}
