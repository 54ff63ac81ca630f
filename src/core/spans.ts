/**
 * The seam between plinth's code and tracing. Nothing here loads OpenTelemetry: when
 * OTEL_EXPORTER_OTLP_ENDPOINT is unset `hooks` stays null and each instrumented place pays
 * one null check. src/core/tracing.ts sets it when tracing is on.
 */

/** A span begun by plinth's code; `end` records an error when given one. */
export interface SpanHandle {
  end(err?: unknown): void;
}

export interface SpanHooks {
  /** A span inside the trace of the request with this id (none when the request is not traced). */
  child(requestId: string | undefined, name: string, attributes: Record<string, string | number>): SpanHandle | null;
  /** A span that starts a trace of its own (a job's work), linked by attribute to the request that caused it. */
  root(name: string, attributes: Record<string, string | number>): SpanHandle;
}

export let hooks: SpanHooks | null = null;

export function setSpanHooks(h: SpanHooks | null): void {
  hooks = h;
}
