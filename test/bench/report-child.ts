/**
 * A bench run in miniature for test/bench/report.test.ts: the bench's report (report.ts) over
 * three scenarios, the first finished, the second running until the run is stopped (by its
 * limit, argv[3] seconds, or a signal), the third never begun. Prints `ready` once the second
 * is running.
 */
import { BenchReport, type Row } from './report.ts';

const [json, limit] = process.argv.slice(2);
const emptyRow = (s: { name: string }): Row => ({
  name: s.name,
  status: 'ERROR',
  rps: null,
  baseline_rps: null,
  ratio: null,
  p50_ms: null,
  p99_ms: null,
  rss_mb: null,
  target: '≥ 1',
  baseline: 'none',
  rate_rps: null,
  elu: null,
  eld_p99_ms: null,
  non2xx_share: null,
});
const report = new BenchReport({ scenarios: [{ name: 'first' }, { name: 'second' }, { name: 'third' }], emptyRow, json, meta: () => ({ child: true }) });
let cleaned = false;
report.guard(Number(limit), {
  cleanup: async () => {
    cleaned = true;
  },
  exit: (code) => {
    console.log(`cleaned up: ${cleaned}`);
    process.exit(code);
  },
});
report.begin('first');
report.add({ ...emptyRow({ name: 'first' }), status: 'PASS', ratio: 1.5, rps: 100 });
report.begin('second');
console.log('ready');
setInterval(() => {}, 1000);
