/**
 * The runtime `npm start` gives the service (issue 11): Node with a young generation that
 * does not shrink below 16 MB a semi-space (README, Performance, "The young generation").
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
