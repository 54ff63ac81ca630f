/**
 * `functions-proxy`: the trivial Deno function through plinth, against the same call
 * through a bare Node proxy (proxy.ts: the HTTP client plinth uses, nothing else) in front
 * of the same Deno process, and straight to that process; rounds alternate the three. The
 * row's ratio is plinth over the bare proxy (the limit of one Node hop, goal ≥ 0.9); the
 * ratio to the direct call is in the note and the JSON.
 *
 * Cold start: a new function is written under FUNCTIONS_DIR and added to the catalog; the
 * time from its first call to the answer is the start of its Deno process (spawn, module
 * load, listen) plus one call. Measured for a few fresh functions, the median reported.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { startChild } from './ipc.ts';
import { saturate, type Traffic } from './load.ts';
import type { CustomScenario, RunContext, RunResult } from './scenarios.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const BODY = JSON.stringify({ name: 'bench' });
const HELLO = `export default async (req: Request): Promise<Response> => {
  await req.arrayBuffer();
  return new Response('{"hello":"world"}', { headers: { 'content-type': 'application/json' } });
};
`;

/** Median time from the first call of a new function to its answer, ms (and each one). */
async function coldStarts(ctx: RunContext, n: number): Promise<number[]> {
  const sql = postgres(ctx.dbUrl, { max: 1, onnotice: () => {} });
  const out: number[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const name = `bench_cold_${Date.now().toString(36)}_${i}`;
      mkdirSync(join(ctx.functionsDir, name), { recursive: true });
      writeFileSync(join(ctx.functionsDir, name, 'index.ts'), HELLO);
      await sql`insert into edge.functions (name, runtime, verify_jwt) values (${name}, 'deno', true)`;
      const refresh = await fetch(`${ctx.serviceUrl}/functions/v1/_refresh`, { method: 'POST', headers: { authorization: `Bearer ${ctx.serviceRoleKey}`, apikey: ctx.serviceRoleKey } });
      await refresh.text();
      if (refresh.status !== 200) throw new Error(`_refresh → ${refresh.status}`);
      const t0 = performance.now();
      const r = await fetch(`${ctx.serviceUrl}/functions/v1/${name}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', apikey: ctx.anonKey, authorization: `Bearer ${ctx.anonKey}` },
        body: BODY,
      });
      await r.text();
      const ms = performance.now() - t0;
      if (r.status !== 200) throw new Error(`first call of ${name} → ${r.status}`);
      out.push(Math.round(ms));
    }
  } finally {
    await sql.end();
  }
  return out;
}

async function run(ctx: RunContext): Promise<RunResult> {
  if (ctx.edgeRuntimeUrl === null || ctx.edgeRuntimeSecret === null) throw new Error('the service started no bundled edge runtime');
  const headers = { 'content-type': 'application/json', apikey: ctx.anonKey, authorization: `Bearer ${ctx.anonKey}` };
  const service: Traffic = { requests: [{ method: 'POST', path: '/functions/v1/bench_hello', headers, body: BODY }] };
  // As plinth calls the runtime: the function it names and the runtime's per-start secret.
  const direct: Traffic = {
    requests: [{ method: 'POST', path: '/bench_hello', headers: { ...headers, 'x-plinth-function': 'bench_hello', 'x-plinth-runtime-secret': ctx.edgeRuntimeSecret }, body: BODY }],
  };
  const proxy = await startChild<{ url: string }>('bare-proxy', join(HERE, 'proxy.ts'), {
    env: { PATH: process.env.PATH ?? '', TARGET_URL: ctx.edgeRuntimeUrl },
    execArgv: ctx.profileDir === null ? [] : ['--cpu-prof', `--cpu-prof-dir=${ctx.profileDir}`],
  });
  try {
    const secs = ctx.quick ? 0.6 : 3;
    const sides = {
      service: () => saturate(ctx.serviceUrl, service, ctx.connections, secs),
      proxy: () => saturate(proxy.ready.url, direct, ctx.connections, secs),
      direct: () => saturate(ctx.edgeRuntimeUrl!, direct, ctx.connections, secs),
    };
    for (const side of Object.values(sides)) await side(); // warm-up
    const sum = { service: 0, proxy: 0, direct: 0 };
    let bad = 0;
    let total = 0;
    const rounds = ctx.quick ? 2 : 6;
    const orders: (keyof typeof sides)[][] = [
      ['service', 'proxy', 'direct'],
      ['direct', 'proxy', 'service'],
      ['proxy', 'service', 'direct'],
    ];
    for (let i = 0; i < rounds; i++) {
      for (const side of orders[i % orders.length]) {
        const r = await sides[side]();
        sum[side] += r.rps;
        bad += r.non2xx + r.errors;
        total += r.total;
      }
    }
    const rate = { service: sum.service / rounds, proxy: sum.proxy / rounds, direct: sum.direct / rounds };
    const proxyRequests = (await proxy.child.stats()).requests;
    const cold = await coldStarts(ctx, ctx.quick ? 2 : 3);
    const coldMedian = [...cold].sort((a, b) => a - b)[Math.floor(cold.length / 2)];
    const toDirect = rate.direct > 0 ? rate.service / rate.direct : null;
    const proxyToDirect = rate.direct > 0 ? rate.proxy / rate.direct : null;
    return {
      rps: Math.round(rate.service),
      baseline_rps: Math.round(rate.proxy),
      ratio: rate.proxy > 0 ? rate.service / rate.proxy : null,
      non2xx_share: total > 0 ? bad / total : 0,
      status: total > 0 && bad / total > 0.01 ? 'ERROR' : undefined,
      note:
        `direct to Deno ${Math.round(rate.direct)}/s: plinth ${toDirect?.toFixed(2) ?? '—'} of it, the bare proxy ${proxyToDirect?.toFixed(2) ?? '—'}; ` +
        `cold start (first call of a new function → answer) median ${coldMedian} ms (${cold.join(', ')} ms)`,
      extra: {
        direct_rps: Math.round(rate.direct),
        ratio_to_direct: toDirect === null ? null : Math.round(toDirect * 1000) / 1000,
        proxy_ratio_to_direct: proxyToDirect === null ? null : Math.round(proxyToDirect * 1000) / 1000,
        cold_start_ms: { median: coldMedian, each: cold },
      },
      profiledBaseline: ctx.profileDir !== null && proxy.child.proc.pid !== undefined ? { pid: proxy.child.proc.pid, requests: proxyRequests } : undefined,
    };
  } finally {
    await proxy.child.stop();
  }
}

export const FUNCTIONS_PROXY_SCENARIOS: readonly CustomScenario[] = [
  {
    name: 'functions-proxy',
    what: 'POST /functions/v1 to a trivial Deno function, against a bare Node proxy in front of the same Deno process',
    target: { kind: 'ratio', min: 0.9 },
    baselineLabel: 'a bare Node proxy (undici, as plinth) in front of the same Deno runtime',
    run,
  },
];
