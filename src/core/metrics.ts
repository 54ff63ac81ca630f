/**
 * Prometheus metrics (prom-client), one registry per service instance. Areas count what
 * happens as it happens (a counter's increment, a histogram's observation: no I/O); gauges
 * read the state they report when scraped, from memory. A scrape runs no query that scans a
 * table: `plinth_db_up` is one `select 1`, and the job counts come from a count refreshed at
 * most every 10 s in the background (the scrape reports the last one).
 *
 * Label values are bounded: `route` is the route pattern (`/rest/v1/:table`), never the URL;
 * a function's name only for functions of the catalog.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Seconds: from a fast in-memory answer to a slow statement. */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const SLOW_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

type Child = { inc(v?: number): void };
type Observer = { observe(v: number): void };

export class Metrics {
  readonly registry = new Registry();

  readonly httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from a request’s arrival to the end of its answer, by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: HTTP_BUCKETS,
    registers: [this.registry],
  });

  readonly dbUp = new Gauge({ name: 'plinth_db_up', help: '1 when the database answered a select 1 within 1 s at this scrape', registers: [this.registry] });
  readonly dbConnections = new Gauge({
    name: 'plinth_db_connections',
    help: 'Request lane connections by API role and state (open, in_use)',
    labelNames: ['pool', 'state'] as const,
    registers: [this.registry],
  });
  readonly dbWaiting = new Gauge({
    name: 'plinth_db_requests_waiting',
    help: 'Requests waiting for a request lane connection, by API role',
    labelNames: ['pool'] as const,
    registers: [this.registry],
  });
  readonly dbStatementTimeouts = new Counter({
    name: 'plinth_db_statement_timeouts_total',
    help: 'Request statements cancelled by their statement_timeout (SQLSTATE 57014)',
    registers: [this.registry],
  });

  readonly jobs = new Gauge({
    name: 'plinth_jobs',
    help: 'graphile-worker jobs: queued (waiting to run, all instances; refreshed every 10 s at most) and running (this instance)',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly jobsFailed = new Counter({ name: 'plinth_jobs_failed_total', help: 'Job runs that failed (the worker retries them with backoff)', registers: [this.registry] });
  readonly jobsCompleted = new Counter({ name: 'plinth_jobs_completed_total', help: 'Job runs that completed', registers: [this.registry] });

  readonly webhookAttempts = new Counter({
    name: 'plinth_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (success, failure, interrupted)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly webhookLatency = new Histogram({
    name: 'plinth_webhook_delivery_seconds',
    help: 'Time from the change to its successful delivery',
    buckets: SLOW_BUCKETS,
    registers: [this.registry],
  });

  readonly liveSockets = new Gauge({ name: 'plinth_live_sockets', help: 'Open live-query WebSockets', registers: [this.registry] });
  readonly liveSubscriptions = new Gauge({ name: 'plinth_live_subscriptions', help: 'Live-query subscriptions of this instance', registers: [this.registry] });
  readonly liveBroadcasts = new Counter({ name: 'plinth_live_broadcast_messages_total', help: 'Broadcast messages sent to sockets', registers: [this.registry] });
  readonly liveNotifies = new Counter({ name: 'plinth_live_notify_payloads_total', help: 'NOTIFY payloads received on the live channels', registers: [this.registry] });
  readonly storageBytes = new Counter({
    name: 'plinth_storage_bytes_total',
    help: 'Object bytes uploaded and downloaded, by direction and back end',
    labelNames: ['direction', 'backend'] as const,
    registers: [this.registry],
  });

  readonly functionInvocations = new Counter({ name: 'plinth_function_invocations_total', help: 'Edge function calls, by function', labelNames: ['function'] as const, registers: [this.registry] });
  readonly functionErrors = new Counter({ name: 'plinth_function_errors_total', help: 'Edge function calls answered 5xx or not answered, by function', labelNames: ['function'] as const, registers: [this.registry] });
  readonly functionTimeouts = new Counter({ name: 'plinth_function_timeouts_total', help: 'Edge function calls that timed out (504), by function', labelNames: ['function'] as const, registers: [this.registry] });
  readonly functionDuration = new Histogram({
    name: 'plinth_function_duration_seconds',
    help: 'Edge function calls, from the request to the answer’s head, by function',
    labelNames: ['function'] as const,
    buckets: SLOW_BUCKETS,
    registers: [this.registry],
  });

  /** Children by label key: prom-client hashes the labels of every call otherwise. */
  private readonly requestChildren = new Map<string, Child>();
  private readonly durationChildren = new Map<string, Observer>();
  private readonly collectors: Array<() => void | Promise<void>> = [];

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** One answered request. */
  request(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let c = this.requestChildren.get(key);
    if (c === undefined) this.requestChildren.set(key, (c = this.httpRequests.labels(method, route, String(status))));
    c.inc();
    const dkey = `${method} ${route}`;
    let h = this.durationChildren.get(dkey);
    if (h === undefined) this.durationChildren.set(dkey, (h = this.httpDuration.labels(method, route)));
    h.observe(seconds);
  }

  /** Run before each scrape (gauges that read state). */
  onCollect(fn: () => void | Promise<void>): void {
    this.collectors.push(fn);
  }

  /** The exposition text of every metric. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    await Promise.all(this.collectors.map((f) => Promise.resolve(f()).catch(() => {})));
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
