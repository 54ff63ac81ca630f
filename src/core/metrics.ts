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
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from 'prom-client';

/** Seconds: from a fast in-memory answer to a slow statement. */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const SLOW_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** The per-request metrics: counted in plain arrays on the request path, turned into samples at a scrape. */
interface RequestSeries {
  labels: Record<string, string>;
  count: number;
}
interface DurationSeries {
  labels: Record<string, string>;
  buckets: Float64Array;
  sum: number;
  count: number;
}

/** One edge function's calls: plinth_function_invocations_total, _errors_total, _timeouts_total and _duration_seconds. */
export class FunctionSeries {
  readonly labels: Record<string, string>;
  invocations = 0;
  errors = 0;
  timeouts = 0;
  readonly buckets = new Float64Array(SLOW_BUCKETS.length);
  sum = 0;
  count = 0;

  constructor(name: string) {
    this.labels = { function: name };
  }

  /** A call's time to the head of its answer. */
  observe(seconds: number): void {
    this.count++;
    this.sum += seconds;
    for (let i = 0; i < SLOW_BUCKETS.length; i++) {
      if (seconds <= SLOW_BUCKETS[i]) {
        this.buckets[i]++;
        break;
      }
    }
  }
}

type Sample = { value: number; labels: Record<string, string | number>; metricName?: string };

/**
 * A metric of the registry whose samples are computed at a scrape (prom-client's own
 * counters and histograms hash their labels on every increment: a few microseconds a
 * request, against well under one here).
 */
function customMetric(registry: Registry, name: string, help: string, type: 'counter' | 'histogram', values: () => Sample[]): void {
  const metric = {
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: values() }),
    reset: () => {},
  };
  registry.registerMetric(metric as unknown as Metric);
}

export class Metrics {
  readonly registry = new Registry();

  // With WORKERS > 1 the scrape sums the processes' samples (src/core/cluster.ts), except where an aggregator says otherwise.
  readonly dbUp = new Gauge({ name: 'plinth_db_up', help: '1 when the database answered a select 1 within 1 s at this scrape', aggregator: 'min', registers: [this.registry] });
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
    aggregator: 'max',
    registers: [this.registry],
  });
  readonly jobsFailed = new Counter({ name: 'plinth_jobs_failed_total', help: 'Job runs that failed (the worker retries them with backoff)', registers: [this.registry] });
  readonly jobsCompleted = new Counter({ name: 'plinth_jobs_completed_total', help: 'Job runs that completed', registers: [this.registry] });

  readonly jobRuns = new Counter({
    name: 'plinth_job_runs_total',
    help: 'Attempts of schedule and queue runs recorded by this instance, by kind (schedule, queue), name and outcome (succeeded, retrying, failed)',
    labelNames: ['kind', 'name', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly webhookAttempts = new Counter({
    name: 'plinth_webhook_attempts_total',
    help: 'Webhook delivery attempts by outcome (success, failure, interrupted)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly webhookOutboxPolls = new Counter({
    name: 'plinth_webhook_outbox_polls_total',
    help: 'Polls of the webhook outbox by this instance (drain statements; the drain sleeps until a writer wakes it)',
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
  /**
   * The payload of a change carries no commit time: what is measured is this instance's
   * share of commit-to-client, from the NOTIFY's arrival to the write to the sockets.
   */
  readonly liveDelivery = new Histogram({
    name: 'plinth_live_delivery_seconds',
    help: 'Live-query messages (delta, invalidated, overflow): from their NOTIFY reaching this instance to their write to the subscribers’ sockets',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  readonly backupLast = new Gauge({
    name: 'plinth_backup_last_success_timestamp_seconds',
    help: 'When the newest base backup of the embedded PostgreSQL finished (BACKUP_DIR), in Unix seconds',
    aggregator: 'max',
    registers: [this.registry],
  });
  readonly storageBytes = new Counter({
    name: 'plinth_storage_bytes_total',
    help: 'Object bytes uploaded and downloaded, by direction and back end',
    labelNames: ['direction', 'backend'] as const,
    registers: [this.registry],
  });

  /** http_requests_total and http_request_duration_seconds, by method, then route, then status. */
  private readonly requests = new Map<string, Map<string, Map<number, RequestSeries>>>();
  private readonly durations = new Map<string, Map<string, DurationSeries>>();
  /** The plinth_function_* series, by function name (functions of the catalog only). */
  private readonly functions = new Map<string, FunctionSeries>();
  private readonly collectors: Array<() => void | Promise<void>> = [];
  /** In one process of several (WORKERS > 1): the scrape of all of them, summed (src/core/cluster-worker.ts). */
  clusterScrape: (() => Promise<{ contentType: string; body: string }>) | null = null;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    customMetric(this.registry, 'http_requests_total', 'HTTP requests answered, by method, route pattern and status', 'counter', () => {
      const out: Sample[] = [];
      for (const byRoute of this.requests.values()) for (const byStatus of byRoute.values()) for (const r of byStatus.values()) out.push({ value: r.count, labels: r.labels });
      return out;
    });
    customMetric(this.registry, 'http_request_duration_seconds', 'Time from a request’s arrival to the end of its answer, by method and route pattern', 'histogram', () => {
      const out: Sample[] = [];
      const name = 'http_request_duration_seconds';
      for (const byRoute of this.durations.values()) {
        for (const d of byRoute.values()) {
          let cumulative = 0;
          HTTP_BUCKETS.forEach((le, i) => {
            cumulative += d.buckets[i];
            out.push({ value: cumulative, labels: { ...d.labels, le }, metricName: `${name}_bucket` });
          });
          out.push({ value: d.count, labels: { ...d.labels, le: '+Inf' }, metricName: `${name}_bucket` });
          out.push({ value: d.sum, labels: d.labels, metricName: `${name}_sum` });
          out.push({ value: d.count, labels: d.labels, metricName: `${name}_count` });
        }
      }
      return out;
    });
    const perFunction = (name: string, help: string, count: (f: FunctionSeries) => number) =>
      customMetric(this.registry, name, help, 'counter', () => [...this.functions.values()].map((f) => ({ value: count(f), labels: f.labels })));
    perFunction('plinth_function_invocations_total', 'Edge function calls, by function', (f) => f.invocations);
    perFunction('plinth_function_errors_total', 'Edge function calls answered 5xx or not answered, by function', (f) => f.errors);
    perFunction('plinth_function_timeouts_total', 'Edge function calls that timed out (504), by function', (f) => f.timeouts);
    customMetric(this.registry, 'plinth_function_duration_seconds', 'Edge function calls, from the request to the answer’s head, by function', 'histogram', () => {
      const out: Sample[] = [];
      const name = 'plinth_function_duration_seconds';
      for (const f of this.functions.values()) {
        let cumulative = 0;
        SLOW_BUCKETS.forEach((le, i) => {
          cumulative += f.buckets[i];
          out.push({ value: cumulative, labels: { ...f.labels, le }, metricName: `${name}_bucket` });
        });
        out.push({ value: f.count, labels: { ...f.labels, le: '+Inf' }, metricName: `${name}_bucket` });
        out.push({ value: f.sum, labels: f.labels, metricName: `${name}_sum` });
        out.push({ value: f.count, labels: f.labels, metricName: `${name}_count` });
      }
      return out;
    });
  }

  /** The call metrics of edge function `name` (of the catalog: label values stay bounded), counted in place by the functions area. */
  function(name: string): FunctionSeries {
    let f = this.functions.get(name);
    if (f === undefined) this.functions.set(name, (f = new FunctionSeries(name)));
    return f;
  }

  /** One answered request: a few map lookups and additions, no allocation once its series exist. */
  request(method: string, route: string, status: number, seconds: number): void {
    let byRoute = this.requests.get(method);
    if (byRoute === undefined) this.requests.set(method, (byRoute = new Map<string, Map<number, RequestSeries>>()));
    let byStatus = byRoute.get(route);
    if (byStatus === undefined) byRoute.set(route, (byStatus = new Map<number, RequestSeries>()));
    let r = byStatus.get(status);
    if (r === undefined) byStatus.set(status, (r = { labels: { method, route, status: String(status) }, count: 0 }));
    r.count++;
    let dByRoute = this.durations.get(method);
    if (dByRoute === undefined) this.durations.set(method, (dByRoute = new Map<string, DurationSeries>()));
    let d = dByRoute.get(route);
    if (d === undefined) dByRoute.set(route, (d = { labels: { method, route }, buckets: new Float64Array(HTTP_BUCKETS.length), sum: 0, count: 0 }));
    d.count++;
    d.sum += seconds;
    for (let i = 0; i < HTTP_BUCKETS.length; i++) {
      if (seconds <= HTTP_BUCKETS[i]) {
        d.buckets[i]++;
        break;
      }
    }
  }

  /** Run before each scrape (gauges that read state). */
  onCollect(fn: () => void | Promise<void>): void {
    this.collectors.push(fn);
  }

  /** The exposition text of every metric. */
  async scrape(): Promise<{ contentType: string; body: string }> {
    if (this.clusterScrape !== null) return this.clusterScrape();
    await Promise.all(this.collectors.map((f) => Promise.resolve(f()).catch(() => {})));
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** This process's samples, for the primary to sum (prom-client's JSON form). */
  async local(): Promise<unknown[]> {
    await Promise.all(this.collectors.map((f) => Promise.resolve(f()).catch(() => {})));
    return this.registry.getMetricsAsJSON();
  }
}
