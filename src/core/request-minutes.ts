/**
 * Per-minute counts of the answered requests over the last hour, for the dashboard's chart
 * (GET /api/requests/minutes): requests, errors (5xx) and the 95th percentile of the
 * duration, for the application's requests apart from the dashboard's own (its files under
 * /_/, and its calls, which send an X-Request-Id starting with `dashboard-`). Durations go
 * into buckets a quarter of a power of two wide (about 19 % apart), so the percentile is the
 * upper edge of its bucket.
 */

/** The dashboard's own requests: its page and files (/_/…), and its calls, whose X-Request-Id starts with `dashboard-`. */
export const isDashboards = (e: { id: string; path: string }) => e.id.startsWith('dashboard-') || e.path === '/_' || e.path.startsWith('/_/');

const MINUTES = 60;
const BUCKETS = 84; // 2^(83/4) ms: about 1.7 million ms, over 28 minutes
const bucketOf = (ms: number) => Math.min(BUCKETS - 1, Math.max(0, Math.ceil(4 * Math.log2(Math.max(ms, 1)))));
const edge = (i: number) => Math.round(2 ** (i / 4) * 10) / 10;

interface Minute {
  at: number;
  requests: number;
  errors: number;
  client_errors: number;
  hist: Uint32Array;
}

export interface MinuteRow {
  /** The minute's start, ISO 8601 UTC. */
  minute: string;
  requests: number;
  /** Answers 500 and above. */
  errors: number;
  /** Answers 400 to 499. */
  client_errors: number;
  /** The 95th percentile of the duration in ms (null without requests). */
  p95_ms: number | null;
}

export class RequestMinutes {
  private readonly app = new Map<number, Minute>();
  private readonly dashboard = new Map<number, Minute>();

  add(e: { id: string; path: string; status: number; duration_ms: number }, now = Date.now()): void {
    const at = Math.floor(now / 60_000);
    const table = isDashboards(e) ? this.dashboard : this.app;
    let m = table.get(at);
    if (m === undefined) {
      m = { at, requests: 0, errors: 0, client_errors: 0, hist: new Uint32Array(BUCKETS) };
      table.set(at, m);
      for (const k of table.keys()) if (k <= at - MINUTES) table.delete(k);
    }
    m.requests++;
    if (e.status >= 500) m.errors++;
    else if (e.status >= 400) m.client_errors++;
    m.hist[bucketOf(e.duration_ms)]++;
  }

  /** The last hour, oldest minute first, one row per minute (zeros included). */
  lastHour(source: 'app' | 'dashboard' = 'app', now = Date.now()): MinuteRow[] {
    const table = source === 'app' ? this.app : this.dashboard;
    const current = Math.floor(now / 60_000);
    const rows: MinuteRow[] = [];
    for (let at = current - MINUTES + 1; at <= current; at++) {
      const m = table.get(at);
      rows.push({
        minute: new Date(at * 60_000).toISOString(),
        requests: m?.requests ?? 0,
        errors: m?.errors ?? 0,
        client_errors: m?.client_errors ?? 0,
        p95_ms: m ? p95(m) : null,
      });
    }
    return rows;
  }
}

function p95(m: Minute): number {
  const want = Math.ceil(m.requests * 0.95);
  let seen = 0;
  for (let i = 0; i < BUCKETS; i++) {
    seen += m.hist[i];
    if (seen >= want) return edge(i);
  }
  return edge(BUCKETS - 1);
}
