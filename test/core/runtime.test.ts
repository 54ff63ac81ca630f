/**
 * The runtime `npm start` gives the service (issue 11): Node with a young generation that
 * does not shrink below 16 MB a semi-space (README, Performance, "The young generation")
 * and does not grow beyond 32 MB a semi-space (README, Performance, "A fourth machine").
 * The flags are read from package.json's start script as the bench reads them
 * (`startFlags`), and each is checked by running Node with it: a misspelt flag, or one that
 * a Node update drops, would stop `npm start` or do nothing.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFlags } from '../../src/cli/start-flags.ts';

const MB = 2 ** 20;
const NEW_SPACE = "require('node:v8').getHeapSpaceStatistics().find((x) => x.space_name === 'new_space').space_size";

/** The young generation's size at start. */
const AT_START = `console.log(${NEW_SPACE})`;

/** The largest the young generation gets while objects keep surviving (a fixed amount of work, no clock). */
const GROWN = `let keep = []; let max = 0;
for (let n = 0; n < 4000; n++) {
  const a = []; for (let i = 0; i < 1000; i++) a.push({ i, s: 'x' + i });
  keep.push(a); if (keep.length > 200) keep = keep.slice(100);
  max = Math.max(max, ${NEW_SPACE});
}
console.log(max)`;

/** Bytes of new space that `script` prints, run by this Node with `flags`. */
function newSpaceBytes(flags: string[], script: string): number {
  return Number(execFileSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8' }).trim());
}

const flags = startFlags();

/** The start script's `--<bound>-semi-space-size=N` flag and its N (MB), or NaN when absent. */
function semiSpaceFlag(bound: 'min' | 'max'): { flag: string | undefined; mb: number } {
  const flag = flags.find((f) => new RegExp(`^--${bound}-semi-space-size=\\d+$`).test(f));
  return { flag, mb: Number(flag?.split('=')[1]) };
}

t.test('npm start names the young generation size, and Node honours it', async (t) => {
  const { flag: min, mb: semiMb } = semiSpaceFlag('min');
  t.ok(min, `start script flags: ${flags.join(' ')}`);
  const with_ = newSpaceBytes(flags, AT_START);
  const without = newSpaceBytes([], AT_START);
  t.ok(with_ >= semiMb * MB, `new space with the flags: ${with_ / MB} MB (at least ${semiMb} MB a semi-space)`);
  t.ok(without < semiMb * MB, `new space without them: ${without / MB} MB (the default this guards against)`);
});

t.test('npm start caps the young generation, and Node honours it', async (t) => {
  const { flag: max, mb: semiMb } = semiSpaceFlag('max');
  t.ok(max, `start script flags: ${flags.join(' ')}`);
  const capped = newSpaceBytes(flags, GROWN);
  const uncapped = newSpaceBytes(flags.filter((f) => f !== max), GROWN);
  // Two semi-spaces of the cap, and a page or two of slack.
  t.ok(capped <= (2 * semiMb + 4) * MB, `grown new space with the flags: ${(capped / MB).toFixed(1)} MB (cap ${semiMb} MB a semi-space)`);
  t.ok(uncapped > capped, `grown new space without the cap: ${(uncapped / MB).toFixed(1)} MB (what the cap guards against)`);
});

t.test('src/main.ts re-executes itself with the compile cache: a second start runs without the type stripper', async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'plinth-cc-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const main = new URL('../../src/main.ts', import.meta.url).pathname;
  // Whether Node's TypeScript stripper (amaro) was loaded, printed as the process exits.
  const probe = `--import=data:text/javascript,process.on('exit',()=>process.stderr.write('stripper:'+process.moduleLoadList.some((m)=>m.includes('amaro'))+'\\n'))`;
  // An invalid PORT stops the start at the configuration check, after every module of a start loaded.
  const start = (extra: Record<string, string>) => {
    try {
      execFileSync(process.execPath, [...flags, probe, main], { env: { PATH: process.env.PATH ?? '', TMPDIR: tmp, PORT: 'none', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', ...extra }, encoding: 'utf8', stdio: 'pipe' });
      return 'exited 0';
    } catch (err) {
      return String((err as { stderr: string }).stderr);
    }
  };
  t.match(start({}), /PORT must be/, 'the first start fills the cache');
  t.ok(readdirSync(join(tmp, 'plinth-compile-cache')).length > 0, 'in plinth-compile-cache under the temporary folder');
  const warm = start({});
  t.match(warm, /stripper:false/, 'the second start strips nothing');
  t.match(start({ NODE_DISABLE_COMPILE_CACHE: '1' }), /stripper:true/, 'without the cache the stripper loads (what the cache saves)');
});

t.test('src/main.ts re-executes itself with at most two malloc arenas and a fixed mmap threshold, unless the environment says otherwise', async (t) => {
  const tmp = mkdtempSync(join(tmpdir(), 'plinth-arena-'));
  t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
  const main = new URL('../../src/main.ts', import.meta.url).pathname;
  const probe = `--import=data:text/javascript,process.on('exit',()=>process.stderr.write('arenas:'+process.env.MALLOC_ARENA_MAX+' mmap:'+process.env.MALLOC_MMAP_THRESHOLD_+'\\n'))`;
  const start = (extra: Record<string, string>) => {
    try {
      execFileSync(process.execPath, [...flags, probe, main], { env: { PATH: process.env.PATH ?? '', TMPDIR: tmp, PORT: 'none', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', ...extra }, encoding: 'utf8', stdio: 'pipe' });
      return 'exited 0';
    } catch (err) {
      return String((err as { stderr: string }).stderr);
    }
  };
  t.match(start({}), /arenas:2 mmap:131072\n/, 'MALLOC_ARENA_MAX=2 and MALLOC_MMAP_THRESHOLD_=131072 by default');
  t.match(start({ NODE_COMPILE_CACHE: join(tmp, 'cc') }), /arenas:2 mmap:131072\n/, 'also when the compile cache is set already (as in the container image)');
  t.match(start({ MALLOC_ARENA_MAX: '4' }), /arenas:4 mmap:131072\n/, "an operator's arena count wins");
  t.match(start({ MALLOC_MMAP_THRESHOLD_: '1048576' }), /arenas:2 mmap:1048576\n/, "an operator's mmap threshold wins");
});
