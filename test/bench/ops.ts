/**
 * The cost of observing the service (issue "Operations"), each as a ratio in the same run:
 *
 * - `metrics-scrape`: REST GET by key with a `/metrics` scrape every second, against the same
 *   service without it (rounds alternate). Target ≥ 0.97.
 * - `otel-idle`: REST GET by key against a service with OTEL_EXPORTER_OTLP_ENDPOINT set (its
 *   collector up and answering, nothing else on it), against the same service without it;
 *   two fresh processes on the same database, rounds alternating. Target ≥ 0.9.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startChild } from './ipc.ts';
import { saturate, type Traffic } from './load.ts';
import type { CustomScenario, RunContext, RunResult } from './scenarios.ts';
import type { ServerReady } from './server.ts';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const ITEM_IDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17];

function getByKey(anonKey: string): Traffic {
  const headers = { apikey: anonKey, authorization: `Bearer ${anonKey}` };
  return { requests: ITEM_IDS.map((id) => ({ method: 'GET', path: `/rest/v1/bench_items?id=eq.${id}`, headers })) };
}

/** Alternating rounds of `a` and `b` at saturation; the ratio of b's 2xx rate to a's. */
async function alternate(ctx: RunContext, a: () => Promise<number>, b: () => Promise<number>): Promise<{ a: number; b: number }> {
  const rounds = ctx.quick ? 2 : 6;
  let sa = 0;
  let sb = 0;
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      sa += await a();
      sb += await b();
    } else {
      sb += await b();
      sa += await a();
    }
  }
  return { a: sa / rounds, b: sb / rounds };
}

const seconds = (ctx: RunContext) => (ctx.quick ? 0.6 : 3);

const metricsScrape: CustomScenario = {
  name: 'metrics-scrape',
  what: 'GET one row by primary key while /metrics is scraped every second',
  target: { kind: 'ratio', min: 0.97 },
  baselineLabel: 'the same service, no scrape',
  async run(ctx) {
    const traffic = getByKey(ctx.anonKey);
    const scrapeOnce = () =>
      fetch(`${ctx.serviceUrl}/metrics`, { headers: { authorization: `Bearer ${ctx.serviceRoleKey}` } }).then(
        (r) => r.text(),
        () => '',
      );
    const withScrape = async () => {
      await scrapeOnce();
      const timer = setInterval(() => void scrapeOnce(), 1000);
      try {
        return (await saturate(ctx.serviceUrl, traffic, ctx.connections, seconds(ctx))).rps;
      } finally {
        clearInterval(timer);
      }
    };
    const without = async () => (await saturate(ctx.serviceUrl, traffic, ctx.connections, seconds(ctx))).rps;
    await without(); // warm-up
    const r = await alternate(ctx, without, withScrape);
    return { rps: Math.round(r.b), baseline_rps: Math.round(r.a), ratio: r.a > 0 ? r.b / r.a : null, baseline: 'no scrape' } satisfies RunResult;
  },
};

const otelIdle: CustomScenario = {
  name: 'otel-idle',
  what: 'GET one row by primary key with OpenTelemetry exporting to an idle collector',
  target: { kind: 'ratio', min: 0.9 },
  baselineLabel: 'the same service without OpenTelemetry',
  async run(ctx) {
    let spans = 0;
    const collector = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        spans++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
    const dirs: string[] = [];
    const env = (extra: Record<string, string>) => {
      const dataDir = mkdtempSync(join(tmpdir(), 'plinth-bench-otel-'));
      dirs.push(dataDir);
      return {
        PATH: process.env.PATH ?? '',
        JWT_SECRET: 'plinth-bench-secret-plinth-bench-secret-0123456789',
        HOST: '127.0.0.1',
        PORT: '0',
        DATA_DIR: dataDir,
        LOG_LEVEL: 'error',
        MIGRATE_ON_START: 'false',
        DB_POOL_SIZE: process.env.DB_POOL_SIZE ?? '10',
        DATABASE_URL: ctx.dbUrl,
        BENCH_WORKER: 'false',
        ...extra,
      };
    };
    const [plain, traced] = await Promise.all([
      startChild<ServerReady>('service-plain', join(HERE, 'server.ts'), { env: env({}) }),
      startChild<ServerReady>('service-otel', join(HERE, 'server.ts'), { env: env({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }) }),
    ]);
    try {
      const run = (s: ServerReady) => async () => (await saturate(s.url, getByKey(s.anonKey), ctx.connections, seconds(ctx))).rps;
      await run(plain.ready)();
      await run(traced.ready)();
      const r = await alternate(ctx, run(plain.ready), run(traced.ready));
      return {
        rps: Math.round(r.b),
        baseline_rps: Math.round(r.a),
        ratio: r.a > 0 ? r.b / r.a : null,
        baseline: 'no OpenTelemetry',
        note: `${spans} OTLP exports received`,
      } satisfies RunResult;
    } finally {
      await Promise.all([plain.child.stop(), traced.child.stop()]);
      collector.close();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
};

export const OPS_SCENARIOS: readonly CustomScenario[] = [metricsScrape, otelIdle];
