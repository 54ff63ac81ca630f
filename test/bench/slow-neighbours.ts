/**
 * `rest-get-beside-slow`: the p99 of short GETs (one row by key, anon) at a fixed rate while
 * 2 of the DB_POOL_SIZE (10) request connections run 1 s statements (two clients calling
 * `bench_sleep(1)` as anon, one after the other, without pause), against the p99 of the same
 * GETs at the same rate without them: slices alternating, in one run. The goal is a p99
 * within 2× of the quiet one: a GET that joined a connection held by a 1 s statement would
 * wait for it (1 s in the p99 as soon as 1 % of them do).
 */
import { paced, pooled, type PacedResult, type Traffic } from './load.ts';
import type { CustomScenario, RunContext, RunResult } from './scenarios.ts';

const ITEM_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17];
export const SLOW_P99_GOAL = 2;
/** Clients each keeping one 1 s statement running. */
const SLOW_CLIENTS = 2;
const SLOW_SECONDS = 1;

function getByKey(anonKey: string): Traffic {
  const headers = { apikey: anonKey, authorization: `Bearer ${anonKey}` };
  return { requests: ITEM_IDS.map((id) => ({ method: 'GET', path: `/rest/v1/bench_items?id=eq.${id}`, headers })) };
}

/** Keeps `SLOW_CLIENTS` slow calls in flight until `stop` is called; counts them and their failures. */
function slowNeighbours(ctx: RunContext): { stop(): Promise<{ calls: number; failed: number }> } {
  let running = true;
  let calls = 0;
  let failed = 0;
  const headers = { apikey: ctx.anonKey, authorization: `Bearer ${ctx.anonKey}`, 'content-type': 'application/json' };
  const loop = async () => {
    while (running) {
      try {
        const r = await fetch(`${ctx.serviceUrl}/rest/v1/rpc/bench_sleep`, { method: 'POST', headers, body: JSON.stringify({ seconds: SLOW_SECONDS }), signal: AbortSignal.timeout(15_000) });
        await r.text();
        calls++;
        if (r.status !== 200) failed++;
      } catch {
        failed++;
      }
    }
  };
  const loops = Array.from({ length: SLOW_CLIENTS }, loop);
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return { calls, failed };
    },
  };
}

async function run(ctx: RunContext): Promise<RunResult> {
  const rate = ctx.quick ? 500 : 1000;
  const slices = ctx.quick ? 1 : 6;
  const seconds = ctx.quick ? 2 : 3;
  const traffic = getByKey(ctx.anonKey);
  await paced(ctx.serviceUrl, traffic, rate, 0.5); // warm-up
  const quiet: PacedResult[] = [];
  const beside: PacedResult[] = [];
  let calls = 0;
  let failed = 0;
  for (let i = 0; i < slices; i++) {
    for (const side of i % 2 === 0 ? ['quiet', 'slow'] : ['slow', 'quiet']) {
      if (side === 'quiet') {
        quiet.push(await paced(ctx.serviceUrl, traffic, rate, seconds));
        continue;
      }
      const slow = slowNeighbours(ctx);
      // The slow statements running first: the GETs meet them from their first request.
      await new Promise((r) => setTimeout(r, 100));
      beside.push(await paced(ctx.serviceUrl, traffic, rate, seconds));
      const n = await slow.stop();
      calls += n.calls;
      failed += n.failed;
    }
  }
  const q = pooled(quiet);
  const b = pooled(beside);
  // GETs that waited about as long as a slow statement runs: queued behind one.
  const stuck = b.latencies.filter((ms) => ms >= 0.9 * SLOW_SECONDS * 1000).length;
  const ratio = q.p99_ms > 0 ? Math.round((b.p99_ms / q.p99_ms) * 100) / 100 : null;
  const bad = q.non2xx + q.errors + b.non2xx + b.errors;
  const total = q.sent + b.sent;
  const share = total > 0 ? bad / total : 1;
  const status = share > 0.01 || failed > 0 ? 'ERROR' : ratio !== null && ratio <= SLOW_P99_GOAL ? 'PASS' : 'MISS';
  return {
    rps: null,
    ratio,
    p50_ms: b.p50_ms,
    p99_ms: b.p99_ms,
    rate_rps: rate,
    status,
    non2xx_share: share,
    baseline: `the same GETs at ${rate}/s without the slow statements (p99 ${q.p99_ms} ms); ratio = p99 beside ${SLOW_CLIENTS} × ${SLOW_SECONDS} s statements / quiet p99, goal ≤ ${SLOW_P99_GOAL}`,
    note: `${calls} slow calls (${failed} failed); p99 quiet ${q.p99_ms} ms, beside ${b.p99_ms} ms (max ${b.max_ms} ms, ${stuck} of ${b.ok} GETs ≥ ${0.9 * SLOW_SECONDS * 1000} ms); non-2xx ${b.non2xx}, errors ${b.errors}`,
    extra: { quiet_p99_ms: q.p99_ms, beside_p99_ms: b.p99_ms, beside_max_ms: b.max_ms, beside_stuck: stuck, slow_calls: calls, slow_failed: failed },
  };
}

export const SLOW_NEIGHBOUR_SCENARIOS: readonly CustomScenario[] = [
  {
    name: 'rest-get-beside-slow',
    what: 'p99 of GETs by key at a fixed rate while 2 of 10 connections run 1 s statements, against the same GETs without them',
    target: { kind: 'max', max: SLOW_P99_GOAL, unit: '× quiet p99' },
    baselineLabel: 'the same GETs at the same rate without the slow statements',
    run,
  },
];
