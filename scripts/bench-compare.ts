/**
 * `npm run bench:compare -- --against DIR [--rounds N] [--only a,b] [--quick]`
 *
 * This build's bench and another build's (DIR: a checkout with its own `npm ci`), side by
 * side on the same machine: the two run one after the other, alternating (other, this,
 * other, this …) so that a drift in the machine's load touches both, each scenario's ratio
 * measured against its own bare-server baseline within the same bench run. Prints, per
 * scenario, the median over the rounds of each build's rate and ratio, and this build's
 * ratio over the other's. Default scenarios: the REST reads, insert and RPC.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { values: args } = parseArgs({
  options: {
    against: { type: 'string' },
    rounds: { type: 'string', default: '2' },
    only: { type: 'string', default: 'rest-get-by-key,rest-list-embed,rest-insert,rpc-stable' },
    quick: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (args.help || args.against === undefined) {
  console.log('npm run bench:compare -- --against DIR [--rounds N] [--only a,b] [--quick]');
  process.exit(args.help ? 0 : 2);
}
const other = resolve(args.against);
if (!existsSync(join(other, 'test/bench/index.ts')) || !existsSync(join(other, 'node_modules'))) {
  console.error(`${other}: not a checkout of plinth with its node_modules (git worktree add or git archive, then npm ci)`);
  process.exit(2);
}

interface Scenario {
  name: string;
  rps: number | null;
  ratio: number | null;
  status: string;
}

const tmp = mkdtempSync(join(tmpdir(), 'bench-compare-'));
const runs: Record<'this' | 'other', Scenario[][]> = { this: [], other: [] };

/** One bench run of the checkout at `dir`; its scenarios as it wrote them. */
function bench(dir: string, label: 'this' | 'other', round: number): void {
  const json = join(tmp, `${label}-${round}.json`);
  const argv = [join(dir, 'test/bench/index.ts'), '--only', args.only, '--json', json, ...(args.quick ? ['--quick'] : [])];
  console.error(`round ${round + 1}, ${label} (${dir}), load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  const r = spawnSync(process.execPath, argv, { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'], env: process.env });
  if (!existsSync(json)) throw new Error(`${label}: the bench wrote no report (exit ${r.status})`);
  runs[label].push((JSON.parse(readFileSync(json, 'utf8')) as { scenarios: Scenario[] }).scenarios);
}

function median(xs: number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function of(label: 'this' | 'other', name: string, key: 'rps' | 'ratio'): number | null {
  return median(runs[label].flatMap((r) => r.filter((s) => s.name === name && s[key] !== null).map((s) => s[key]!)));
}

const fmt = (x: number | null, digits: number) => (x === null ? '—' : x.toFixed(digits));

try {
  const rounds = Number(args.rounds);
  for (let i = 0; i < rounds; i++) {
    bench(other, 'other', i);
    bench(ROOT, 'this', i);
  }
  const names = args.only.split(',');
  console.log(`\n| scenario | this build /s | ratio | other build /s | ratio | ratio this / other |`);
  console.log(`| --- | ---: | ---: | ---: | ---: | ---: |`);
  for (const n of names) {
    const [tr, to] = [of('this', n, 'ratio'), of('other', n, 'ratio')];
    console.log(`| ${n} | ${fmt(of('this', n, 'rps'), 0)} | ${fmt(tr, 2)} | ${fmt(of('other', n, 'rps'), 0)} | ${fmt(to, 2)} | ${tr !== null && to !== null ? (tr / to).toFixed(2) : '—'} |`);
  }
  console.log(
    `\nmedians of ${rounds} alternating rounds${args.quick ? ' (quick)' : ''}; ratio = the build's rate over its own bare-server baseline in the same bench run; other build: ${other}; load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}`,
  );
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
