/**
 * `rest-get-by-key-workers`: the same GET by key as `rest-get-by-key`, against the service
 * as `npm start` runs it with `WORKERS=2`, beside the same with `WORKERS=1`, in one run
 * (rounds alternating between the two, both on the bench database, the same DB_POOL_SIZE).
 * INFO: on the two cores the bench shares with its load generator and PostgreSQL, a second
 * process has no core of its own; what a larger machine should show is in docs/performance.md.
 */
import { availableParallelism } from 'node:os';
import { startMain } from './idle-rss.ts';
import { saturate, type Traffic } from './load.ts';
import type { CustomScenario, RunContext, RunResult } from './scenarios.ts';

/** Published item ids of the bench data (as rest-get-by-key). */
const ITEM_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17];

async function run(ctx: RunContext): Promise<RunResult> {
  const headers = { apikey: ctx.anonKey, authorization: `Bearer ${ctx.anonKey}` };
  const traffic: Traffic = { requests: ITEM_IDS.map((id) => ({ method: 'GET', path: `/rest/v1/bench_items?id=eq.${id}`, headers })) };
  const env = { DATABASE_URL: ctx.dbUrl, JWT_SECRET: ctx.jwtSecret, DB_POOL_SIZE: process.env.DB_POOL_SIZE ?? '10' };
  const one = await startMain({ ...env, WORKERS: '1' });
  const two = await startMain({ ...env, WORKERS: '2' }).catch(async (err: unknown) => {
    await one.stop();
    throw err;
  });
  try {
    const seconds = ctx.quick ? 0.6 : 3;
    const rounds = ctx.quick ? 2 : 6;
    // Warm-up: every process compiles its request path and opens its connections (the first
    // windows of a cold process are several times slower).
    for (let i = 0; i < 2; i++) for (const m of [one, two]) await saturate(m.url, traffic, ctx.connections, Math.max(1, seconds));
    let a = 0;
    let b = 0;
    let p99 = 0;
    let failed = 0;
    for (let i = 0; i < rounds; i++) {
      const order = i % 2 === 0 ? [one, two] : [two, one];
      for (const m of order) {
        const r = await saturate(m.url, traffic, ctx.connections, seconds);
        failed += r.non2xx + r.errors;
        if (m === one) a += r.rps;
        else {
          b += r.rps;
          p99 = Math.max(p99, r.p99_ms);
        }
      }
    }
    a /= rounds;
    b /= rounds;
    return {
      rps: Math.round(b),
      baseline_rps: Math.round(a),
      ratio: a > 0 ? Math.round((b / a) * 100) / 100 : null,
      p99_ms: p99,
      status: failed > 0 ? 'ERROR' : 'INFO',
      baseline: 'the same service, WORKERS=1',
      note: `WORKERS=2 ${Math.round(b)}/s against WORKERS=1 ${Math.round(a)}/s on ${availableParallelism()} cores shared with the load generator and PostgreSQL${failed > 0 ? `; ${failed} requests failed` : ''}`,
    };
  } finally {
    await Promise.all([one.stop(), two.stop()]);
  }
}

export const WORKERS_SCENARIOS: readonly CustomScenario[] = [
  {
    name: 'rest-get-by-key-workers',
    what: 'GET one row by primary key, anon key, RLS on: WORKERS=2 against WORKERS=1',
    target: { kind: 'none' },
    baselineLabel: 'the same service, WORKERS=1 (INFO on two shared cores)',
    run,
  },
];
