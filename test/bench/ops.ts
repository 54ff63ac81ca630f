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
import { procCpuMs } from './webhooks.ts';
import { randomBytes } from 'node:crypto';
import { SpanKind, SpanStatusCode, TraceFlags, type HrTime, type SpanContext } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';

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

/**
 * CPU µs per span of the official exporter's OTLP/JSON encoding (what the service's export
 * does once a second, synchronously, before the POST), in this process: `n` spans shaped
 * as the service's (a server span, a database span), exported to `endpoint`.
 */
async function exportCostPerSpan(endpoint: string, n: number): Promise<number> {
  const exporter = new OTLPTraceExporter({ url: `${endpoint}/v1/traces` });
  const resource = resourceFromAttributes({ 'service.name': 'plinth' });
  const hex = (bytes: number) => randomBytes(bytes).toString('hex');
  const now = Math.floor(Date.now() / 1000);
  const spans = Array.from({ length: n }, (_, i) => {
    const ctx: SpanContext = { traceId: hex(16), spanId: hex(8), traceFlags: TraceFlags.SAMPLED };
    const server = i % 2 === 0;
    return {
      name: server ? 'GET /rest/v1/:table' : 'db',
      kind: server ? SpanKind.SERVER : SpanKind.CLIENT,
      spanContext: () => ctx,
      parentSpanContext: server ? undefined : { traceId: ctx.traceId, spanId: hex(8), traceFlags: TraceFlags.SAMPLED },
      startTime: [now, 1000] as HrTime,
      endTime: [now, 900_000] as HrTime,
      duration: [0, 899_000] as HrTime,
      status: { code: SpanStatusCode.UNSET },
      attributes: server
        ? { 'http.request.method': 'GET', 'plinth.request_id': hex(8), 'http.route': '/rest/v1/:table', 'http.response.status_code': 200 }
        : { 'db.system': 'postgresql' },
      links: [],
      events: [],
      ended: true,
      resource,
      instrumentationScope: { name: 'plinth' },
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    };
  }) as unknown as Parameters<OTLPTraceExporter['export']>[0];
  let cpu = 0;
  for (let round = 0; round < 3; round++) {
    const c0 = process.cpuUsage();
    const done = new Promise<void>((resolve) => exporter.export(spans, () => resolve()));
    // The encoding is synchronous: the CPU until export() returns (the POST is sent after).
    const c = process.cpuUsage(c0);
    if (round > 0) cpu += c.user + c.system;
    await done;
  }
  await exporter.shutdown();
  return cpu / 2 / n;
}

/** The spans of an OTLP/HTTP JSON export body (0 when it is not one). */
function countSpans(body: Buffer): number {
  try {
    const doc = JSON.parse(body.toString('utf8')) as { resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[] };
    let n = 0;
    for (const rs of doc.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) n += ss.spans?.length ?? 0;
    return n;
  } catch {
    return 0;
  }
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
    let exports = 0;
    let spans = 0;
    const collector = http.createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        exports++;
        spans += countSpans(Buffer.concat(parts));
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
    // With --cpu-prof: each service's profile under <dir>/otel-idle-plain and <dir>/otel-idle-traced.
    const prof = (side: string) => (ctx.profileDir === null ? [] : ['--cpu-prof', `--cpu-prof-dir=${join(ctx.profileDir, `otel-idle-${side}`)}`]);
    const [plain, traced] = await Promise.all([
      startChild<ServerReady>('service-plain', join(HERE, 'server.ts'), { env: env({}), execArgv: prof('plain'), readyTimeoutMs: 90_000 }),
      startChild<ServerReady>('service-otel', join(HERE, 'server.ts'), { env: env({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }), execArgv: prof('traced'), readyTimeoutMs: 90_000 }),
    ]);
    try {
      // CPU time of each service per request answered (exports included: they run in the
      // rounds, once a second): on a shared machine the rates move with the neighbours' load,
      // the CPU per request much less. It says what OpenTelemetry itself costs.
      const cpu = new Map<ServerReady, { ms: number; n: number }>();
      const run = (s: ServerReady, pid: number) => async () => {
        const c0 = procCpuMs(pid);
        const r = await saturate(s.url, getByKey(s.anonKey), ctx.connections, seconds(ctx));
        const c = cpu.get(s) ?? { ms: 0, n: 0 };
        cpu.set(s, { ms: c.ms + procCpuMs(pid) - c0, n: c.n + r.total });
        return r.rps;
      };
      await run(plain.ready, plain.child.proc.pid!)();
      await run(traced.ready, traced.child.proc.pid!)();
      cpu.clear();
      const spans0 = spans;
      const r = await alternate(ctx, run(plain.ready, plain.child.proc.pid!), run(traced.ready, traced.child.proc.pid!));
      const us = (s: ServerReady) => ((cpu.get(s)?.ms ?? 0) * 1000) / Math.max(1, cpu.get(s)?.n ?? 0);
      const [a, b] = [us(plain.ready), us(traced.ready)];
      const tracedN = cpu.get(traced.ready)?.n ?? 0;
      const perRequest = tracedN > 0 ? (spans - spans0) / tracedN : 0;
      const exportsSeen = exports;
      const encodeUs = await exportCostPerSpan(endpoint, 4096);
      return {
        rps: Math.round(r.b),
        baseline_rps: Math.round(r.a),
        ratio: r.a > 0 ? r.b / r.a : null,
        baseline: 'no OpenTelemetry',
        note:
          `${exportsSeen} OTLP exports received; service CPU per request ${a.toFixed(0)} µs without, ${b.toFixed(0)} µs with OpenTelemetry ` +
          `(${b >= a ? '+' : ''}${(b - a).toFixed(0)} µs, ${a > 0 ? (b / a).toFixed(2) : '?'}×; a CPU-bound ratio cannot pass ${b > 0 ? (a / b).toFixed(2) : '?'}): ` +
          `${perRequest.toFixed(1)} spans exported per request, the official exporter's OTLP/JSON encoding ${encodeUs.toFixed(1)} µs per span here ` +
          `(${(encodeUs * perRequest).toFixed(0)} µs per request), the rest the spans' records and the POST`,
        extra: { plain_cpu_us: Math.round(a), otel_cpu_us: Math.round(b), spans_exported: spans - spans0, encode_us_per_span: Math.round(encodeUs * 10) / 10 },
      } satisfies RunResult;
    } finally {
      await Promise.all([plain.child.stop(), traced.child.stop()]);
      collector.close();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  },
};

export const OPS_SCENARIOS: readonly CustomScenario[] = [metricsScrape, otelIdle];
