/**
 * OpenTelemetry, opt-in (OTEL_EXPORTER_OTLP_ENDPOINT): a trace per request (a server span
 * named by method and route), with child spans for its database round trips and edge
 * function calls, and a trace per webhook delivery attempt carrying the id of the request
 * that caused it. Spans are batched and exported over OTLP/HTTP (JSON) to
 * `<endpoint>/v1/traces` with the official packages.
 *
 * This module is imported only when the endpoint is set (service.ts): without it no
 * OpenTelemetry code is loaded and the request path pays nothing.
 */
import type { FastifyRequest } from 'fastify';
import { SpanKind, SpanStatusCode, context, trace, type Span } from '@opentelemetry/api';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
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

function handle(span: Span): SpanHandle {
  return {
    end(err?: unknown) {
      if (err !== undefined) {
        span.recordException(err instanceof Error ? err : String(err));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    },
  };
}

export async function startTracing(config: RuntimeConfig, log: Logger): Promise<Tracing> {
  const exporter = new OTLPTraceExporter({ url: `${config.otelEndpoint}/v1/traces` });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.otelServiceName }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 })],
  });
  const tracer = provider.getTracer('plinth');
  /** The server span of each request being answered, by request id. */
  const open = new Map<string, Span>();

  setSpanHooks({
    child(requestId, name, attributes) {
      const parent = requestId === undefined ? undefined : open.get(requestId);
      if (parent === undefined) return null;
      return handle(tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, trace.setSpan(context.active(), parent)));
    },
    root(name, attributes) {
      return handle(tracer.startSpan(name, { kind: SpanKind.CONSUMER, attributes, root: true }));
    },
  });
  log.info({ endpoint: config.otelEndpoint }, 'OpenTelemetry: traces exported over OTLP/HTTP');

  return {
    requestTracer: {
      start(req: FastifyRequest) {
        open.set(
          req.id,
          tracer.startSpan(`${req.method}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method, 'plinth.request_id': req.id } }),
        );
      },
      end(req: FastifyRequest, status: number, route: string) {
        const span = open.get(req.id);
        if (span === undefined) return;
        open.delete(req.id);
        span.updateName(`${req.method} ${route}`);
        span.setAttributes({ 'http.route': route, 'http.response.status_code': status });
        if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      },
    },
    async shutdown() {
      setSpanHooks(null);
      await provider.shutdown();
    },
  };
}
