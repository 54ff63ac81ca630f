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
import { startFlags } from '../../scripts/start-flags.ts';

const NEW_SPACE = "const s = require('node:v8').getHeapSpaceStatistics().find((x) => x.space_name === 'new_space'); console.log(s.space_size)";

function newSpaceBytes(flags: string[]): number {
  return Number(execFileSync(process.execPath, [...flags, '-e', NEW_SPACE], { encoding: 'utf8' }).trim());
}

/** The largest the young generation gets while objects keep surviving (a fixed amount of work, no clock). */
const GROW = `const v8 = require('node:v8'); let keep = []; let max = 0;
for (let n = 0; n < 4000; n++) {
  const a = []; for (let i = 0; i < 1000; i++) a.push({ i, s: 'x' + i });
  keep.push(a); if (keep.length > 200) keep = keep.slice(100);
  const s = v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space').space_size; if (s > max) max = s;
}
console.log(max)`;

function grownNewSpaceBytes(flags: string[]): number {
  return Number(execFileSync(process.execPath, [...flags, '-e', GROW], { encoding: 'utf8' }).trim());
}

t.test('npm start names the young generation size, and Node honours it', async (t) => {
  const flags = startFlags();
  t.ok(
    flags.some((f) => /^--min-semi-space-size=\d+$/.test(f)),
    `start script flags: ${flags.join(' ')}`,
  );
  const MB = 2 ** 20;
  const with_ = newSpaceBytes(flags);
  const without = newSpaceBytes([]);
  t.ok(with_ >= 16 * MB, `new space with the flags: ${with_ / MB} MB`);
  t.ok(without < 16 * MB, `new space without them: ${without / MB} MB (the default this guards against)`);
});

t.test('npm start caps the young generation, and Node honours it', async (t) => {
  const flags = startFlags();
  const max = flags.find((f) => /^--max-semi-space-size=\d+$/.test(f));
  t.ok(max, `start script flags: ${flags.join(' ')}`);
  const MB = 2 ** 20;
  const capped = grownNewSpaceBytes(flags);
  const uncapped = grownNewSpaceBytes(flags.filter((f) => f !== max));
  // Two semi-spaces of 32 MB, and a page or two of slack.
  t.ok(capped <= 2 * 32 * MB + 4 * MB, `grown new space with the flags: ${(capped / MB).toFixed(1)} MB`);
  t.ok(uncapped > capped, `grown new space without the cap: ${(uncapped / MB).toFixed(1)} MB (what the cap guards against)`);
});
