/**
 * OpenTelemetry, opt-in (OTEL_EXPORTER_OTLP_ENDPOINT): a trace per request (a server span
 * named by method and route), with child spans for its database round trips and edge
 * function calls, and a trace per webhook delivery attempt carrying the id of the request
 * that caused it. Spans are exported once a second over OTLP/HTTP (JSON) to
 * `<endpoint>/v1/traces` by the official exporter (`@opentelemetry/exporter-trace-otlp-http`).
 *
 * The request path only records: ids from a pool of random bytes, two clock readings, the
 * attributes. The spans the exporter reads are built once a second, off the request path: the
 * SDK's tracer (sampler, context, limits and processor per span) cost about three times a
 * bare loop's CPU per request here, its OTLP export on top. At most 4096 spans wait for an
 * export; beyond that they are dropped (and counted in a debug line), as the SDK's batch
 * processor does.
 *
 * This module is imported only when the endpoint is set (service.ts): without it no
 * OpenTelemetry code is loaded and the request path pays nothing.
 */
import { randomFillSync } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { SpanKind, SpanStatusCode, TraceFlags, type HrTime, type SpanContext } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import type { RuntimeConfig } from './config.ts';
import type { RequestTracer } from './http.ts';
import type { Logger } from './log.ts';
import { setSpanHooks, type SpanHandle } from './spans.ts';

export interface Tracing {
  requestTracer: RequestTracer;
  shutdown(): Promise<void>;
}

const MAX_QUEUED = 4096;
const EXPORT_EVERY_MS = 1000;

/** Random ids, hex, from a buffer refilled 4 KB at a time. */
class Ids {
  private readonly pool = Buffer.alloc(4096);
  private at = this.pool.length;
  private hex(bytes: number): string {
    if (this.at + bytes > this.pool.length) {
      randomFillSync(this.pool);
      this.at = 0;
    }
    const s = this.pool.toString('hex', this.at, this.at + bytes);
    this.at += bytes;
    return s;
  }
  trace(): string {
    return this.hex(16);
  }
  span(): string {
    return this.hex(8);
  }
}

/** What the request path records of a span. */
interface Recorded {
  name: string;
  kind: SpanKind;
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  /** performance.now() at start and end. */
  start: number;
  end: number;
  attributes: Record<string, string | number>;
  error: string | null;
}

/** performance.now() → OpenTelemetry's [seconds, nanoseconds] since the epoch. */
function hrTime(now: number): HrTime {
  const ms = performance.timeOrigin + now;
  const s = Math.floor(ms / 1000);
  return [s, Math.round((ms - s * 1000) * 1e6)];
}

export async function startTracing(config: RuntimeConfig, log: Logger): Promise<Tracing> {
  const exporter = new OTLPTraceExporter({ url: `${config.otelEndpoint}/v1/traces` });
  const resource = resourceFromAttributes({ 'service.name': config.otelServiceName });
  const scope = { name: 'plinth' };
  const ids = new Ids();
  let queue: Recorded[] = [];
  let dropped = 0;
  /** The server span of each request being answered, by request id. */
  const open = new Map<string, Recorded>();

  const finish = (r: Recorded): void => {
    r.end = performance.now();
    if (queue.length < MAX_QUEUED) queue.push(r);
    else dropped++;
  };
  const handle = (r: Recorded): SpanHandle => ({
    end(err?: unknown) {
      if (err !== undefined) r.error = err instanceof Error ? err.message : typeof err === 'string' ? err : 'error';
      finish(r);
    },
  });

  const toReadable = (r: Recorded) => {
    const ctx: SpanContext = { traceId: r.traceId, spanId: r.spanId, traceFlags: TraceFlags.SAMPLED };
    const startTime = hrTime(r.start);
    const endTime = hrTime(r.end);
    const d = (r.end - r.start) * 1e6;
    return {
      name: r.name,
      kind: r.kind,
      spanContext: () => ctx,
      parentSpanContext: r.parentSpanId === undefined ? undefined : { traceId: r.traceId, spanId: r.parentSpanId, traceFlags: TraceFlags.SAMPLED },
      startTime,
      endTime,
      duration: [Math.floor(d / 1e9), Math.round(d % 1e9)] as HrTime,
      status: r.error === null ? { code: SpanStatusCode.UNSET } : { code: SpanStatusCode.ERROR, message: r.error },
      attributes: r.attributes,
      links: [],
      events: [],
      ended: true,
      resource,
      instrumentationScope: scope,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    };
  };

  let exporting: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    if (queue.length === 0) return exporting;
    const batch = queue;
    queue = [];
    if (dropped > 0) {
      log.debug({ dropped }, 'OpenTelemetry: spans dropped (export queue full)');
      dropped = 0;
    }
    exporting = exporting.then(
      () =>
        new Promise<void>((resolve) => {
          exporter.export(batch.map(toReadable), (result) => {
            if (result.error !== undefined) log.debug({ err: result.error }, 'OpenTelemetry: export failed');
            resolve();
          });
        }),
    );
    return exporting;
  };
  const timer = setInterval(() => void flush(), EXPORT_EVERY_MS);
  timer.unref();

  setSpanHooks({
    child(requestId, name, attributes) {
      const parent = requestId === undefined ? undefined : open.get(requestId);
      if (parent === undefined) return null;
      return handle({ name, kind: SpanKind.CLIENT, traceId: parent.traceId, spanId: ids.span(), parentSpanId: parent.spanId, start: performance.now(), end: 0, attributes, error: null });
    },
    root(name, attributes) {
      return handle({ name, kind: SpanKind.CONSUMER, traceId: ids.trace(), spanId: ids.span(), parentSpanId: undefined, start: performance.now(), end: 0, attributes, error: null });
    },
  });
  log.info({ endpoint: config.otelEndpoint }, 'OpenTelemetry: traces exported over OTLP/HTTP');

  return {
    requestTracer: {
      start(req: FastifyRequest) {
        open.set(req.id, {
          name: req.method,
          kind: SpanKind.SERVER,
          traceId: ids.trace(),
          spanId: ids.span(),
          parentSpanId: undefined,
          start: performance.now(),
          end: 0,
          attributes: { 'http.request.method': req.method, 'plinth.request_id': req.id },
          error: null,
        });
      },
      end(req: FastifyRequest, status: number, route: string) {
        const r = open.get(req.id);
        if (r === undefined) return;
        open.delete(req.id);
        r.name = `${req.method} ${route}`;
        r.attributes['http.route'] = route;
        r.attributes['http.response.status_code'] = status;
        if (status >= 500) r.error = `status ${status}`;
        finish(r);
      },
    },
    async shutdown() {
      setSpanHooks(null);
      clearInterval(timer);
      await flush();
      await exporter.shutdown();
    },
  };
}
