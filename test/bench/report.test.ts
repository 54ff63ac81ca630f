/**
 * The bench always reports: whatever stops a run (its own time limit, SIGINT, SIGTERM), the
 * JSON and the table of every scenario that finished are written, the others listed as
 * NOT RUN with why. Runs the bench's report code (report.ts) in a child process
 * (report-child.ts), not the whole bench.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { BenchReport, type Row } from './report.ts';

const CHILD = fileURLToPath(new URL('./report-child.ts', import.meta.url));

interface Report {
  meta: { stopped: string | null; child?: boolean };
  scenarios: Array<{ name: string; status: string; ratio: number | null; note?: string }>;
}

/** Runs the child with `limitS`; `signal` is sent once it is ready. Its exit code, stdout and JSON. */
async function runChild(t: Test, limitS: number, signal?: NodeJS.Signals): Promise<{ code: number | null; out: string; report: Report }> {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-bench-report-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const json = join(dir, 'out.json');
  const p = spawn(process.execPath, [CHILD, json, String(limitS)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    if (signal && out.includes('ready\n')) p.kill(signal);
  });
  p.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => p.on('close', resolve));
  return { code, out, report: JSON.parse(readFileSync(json, 'utf8')) as Report };
}

function checkReport(t: Test, r: Report, why: RegExp): void {
  t.match(r.meta.stopped, why, 'the JSON says what stopped the run');
  t.equal(r.meta.child, true, 'with the run\'s meta');
  t.same(
    r.scenarios.map((s) => [s.name, s.status]),
    [
      ['first', 'PASS'],
      ['second', 'NOT RUN'],
      ['third', 'NOT RUN'],
    ],
  );
  t.equal(r.scenarios[0].ratio, 1.5, 'the finished scenario with its figures');
  t.match(r.scenarios[1].note, /^stopped while it ran: /, 'the one running: stopped while it ran');
  t.match(r.scenarios[1].note, why);
  t.match(r.scenarios[2].note, /^not run: /);
  t.match(r.scenarios[2].note, why);
}

t.test('its own time limit: the JSON and the table are written, then the clean-up, exit 1', async (t) => {
  const { code, out, report } = await runChild(t, 0.2);
  t.equal(code, 1);
  checkReport(t, report, /limit of 0\.2 s/);
  t.match(out, /first +.*PASS/, 'the table lists the finished scenario');
  t.match(out, /third +.*NOT RUN/, 'and the others as not run');
  t.match(out, /cleaned up: true/, 'cleaned up after writing');
});

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal}: the JSON and the table are written, then the clean-up, exit 130`, async (t) => {
    const { code, out, report } = await runChild(t, 60, signal);
    t.equal(code, 130);
    checkReport(t, report, new RegExp(signal));
    t.match(out, /second +.*NOT RUN/);
    t.match(out, /cleaned up: true/);
  });
}

t.test('the end of a run: every scenario with its row, written once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'plinth-bench-report-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const json = join(dir, 'out.json');
  const lines: string[] = [];
  const row = (name: string, status: Row['status']): Row => ({
    name, status, rps: 1, baseline_rps: 2, ratio: 0.5, p50_ms: 1, p99_ms: 2, rss_mb: 3, target: '≥ 0.6', baseline: 'b', rate_rps: 1, elu: 0.5, eld_p99_ms: 5, non2xx_share: 0,
  });
  const report = new BenchReport({ scenarios: [{ name: 'a' }, { name: 'b' }], emptyRow: (s) => row(s.name, 'ERROR'), json, meta: () => ({}), print: (l) => lines.push(l) });
  report.begin('b');
  report.add(row('b', 'MISS'));
  report.begin('a');
  report.add(row('a', 'ERROR'));
  t.same(report.finish(null)?.map((r) => [r.name, r.status]), [['a', 'ERROR'], ['b', 'MISS']], 'in the report\'s order');
  t.equal(report.finish('SIGTERM'), null, 'a second stop writes nothing more');
  const written = JSON.parse(readFileSync(json, 'utf8')) as Report;
  t.equal(written.meta.stopped, null);
  t.same(written.scenarios.map((s) => s.status), ['ERROR', 'MISS']);
  t.notOk(lines.some((l) => l.includes('stopped early')));
});
