/**
 * Load: autocannon (closed loop, `connections` in flight) for the rate at saturation, and a
 * small open-loop generator for latency at a fixed moderate rate.
 *
 * Why not autocannon's `overallRate` for latency: it gives each connection a quota per
 * second and sends it back-to-back at the start of the second, so every connection bursts
 * at once and the latencies measured are those of saturation. `paced` sends request i at
 * start + i/rate whatever came back, and measures each latency from the time the request was
 * due (no coordinated omission).
 */
import net from 'node:net';
import autocannon from 'autocannon';

export interface RequestSpec {
  method: 'GET' | 'POST';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

/** A scenario's traffic: a fixed list of requests, or a function that makes each one. */
export interface Traffic {
  /** Requests sent in turn (each connection cycles through them). */
  requests?: RequestSpec[];
  /** Makes each request (e.g. hands out a distinct refresh token); null = nothing to send. */
  next?: () => RequestSpec | null;
  /** Sees each response (e.g. keeps the rotated refresh token). */
  onResponse?: (status: number, body: string) => void;
}

export interface SaturationResult {
  rps: number;
  ok: number;
  non2xx: number;
  errors: number;
  total: number;
  seconds: number;
  statusCodes: Record<string, number>;
  p50_ms: number;
  p99_ms: number;
}

function acRequests(t: Traffic): autocannon.Request[] {
  if (t.next) {
    const next = t.next;
    const onResponse = t.onResponse;
    const req: autocannon.Request = {
      setupRequest: (r) => {
        const spec = next();
        // Nothing left to send: a harmless request that is not counted as a success.
        if (!spec) return { ...r, method: 'GET', path: '/__bench_exhausted', headers: {}, body: undefined };
        return { ...r, method: spec.method, path: spec.path, headers: spec.headers ?? {}, body: spec.body };
      },
      onResponse: onResponse ? (status, body) => onResponse(status, body) : undefined,
    };
    // Two entries: autocannon resets its per-client context when it wraps around, harmless here.
    return [req, { ...req }];
  }
  return t.requests!.map((s) => ({
    method: s.method,
    path: s.path,
    headers: s.headers ?? {},
    body: s.body,
    onResponse: t.onResponse ? (status: number, body: string) => t.onResponse!(status, body) : undefined,
  }));
}

/** Closed loop: `connections` requests in flight for `seconds`. */
export async function saturate(origin: string, traffic: Traffic, connections: number, seconds: number): Promise<SaturationResult> {
  const result = await autocannon({
    url: origin,
    connections,
    duration: seconds,
    pipelining: 1,
    timeout: 10,
    sampleInt: 100,
    requests: acRequests(traffic),
  });
  const statusCodes: Record<string, number> = {};
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) statusCodes[code] = count;
  const ok = result['2xx'];
  return {
    rps: ok / result.duration,
    ok,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    total: ok + result.non2xx + result.errors + result.timeouts,
    seconds: result.duration,
    statusCodes,
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
  };
}

export interface PacedResult {
  sent: number;
  ok: number;
  non2xx: number;
  errors: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  /** Every 2xx latency, ms, sorted (to pool several slices). */
  latencies: number[];
}

/** Several slices of one side at the same rate, pooled: counts summed, percentiles over all latencies. */
export function pooled(slices: PacedResult[]): PacedResult {
  const latencies = slices.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const sum = (k: 'sent' | 'ok' | 'non2xx' | 'errors') => slices.reduce((n, s) => n + s[k], 0);
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    sent: sum('sent'),
    ok: sum('ok'),
    non2xx: sum('non2xx'),
    errors: sum('errors'),
    p50_ms: round(percentile(latencies, 50)),
    p99_ms: round(percentile(latencies, 99)),
    max_ms: round(latencies[latencies.length - 1] ?? NaN),
    latencies,
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** The bytes of one HTTP/1.1 request (keep-alive). */
function requestBytes(host: string, spec: RequestSpec): Buffer {
  const body = spec.body === undefined ? null : Buffer.from(spec.body);
  let head = `${spec.method} ${spec.path} HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n`;
  for (const [k, v] of Object.entries(spec.headers ?? {})) head += `${k}: ${v}\r\n`;
  if (body) head += `Content-Length: ${body.length}\r\n`;
  head += '\r\n';
  return body ? Buffer.concat([Buffer.from(head), body]) : Buffer.from(head);
}

const CRLFCRLF = Buffer.from('\r\n\r\n');

/**
 * One keep-alive connection that carries one request at a time, with the least HTTP/1.1
 * response parsing the bench needs (status, Content-Length or chunked body). node:http's
 * client costs several times more CPU per request, and on two cores the load generator's
 * CPU is taken from the service.
 */
class Conn {
  readonly socket: net.Socket;
  busy = false;
  private buf: Buffer = Buffer.alloc(0);
  private status = 0;
  /** -1: headers not parsed yet; -2: chunked. */
  private length = -1;
  private bodyStart = 0;
  private done: ((status: number, body: Buffer | null) => void) | null = null;
  private readonly wantBody: boolean;

  constructor(host: string, port: number, wantBody: boolean, onClose: (c: Conn) => void) {
    this.wantBody = wantBody;
    this.socket = net.connect({ host, port, noDelay: true });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    const fail = () => {
      const d = this.done;
      this.done = null;
      this.busy = false;
      d?.(0, null);
      onClose(this);
    };
    this.socket.on('error', () => {});
    this.socket.on('close', fail);
  }

  send(bytes: Buffer, done: (status: number, body: Buffer | null) => void): void {
    this.busy = true;
    this.done = done;
    this.buf = Buffer.alloc(0);
    this.length = -1;
    this.socket.write(bytes);
  }

  private onData(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    if (this.length === -1) {
      const end = this.buf.indexOf(CRLFCRLF);
      if (end < 0) return;
      const head = this.buf.subarray(0, end).toString('latin1');
      this.status = Number(head.slice(9, 12));
      this.bodyStart = end + 4;
      const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      if (cl) this.length = Number(cl[1]);
      else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) this.length = -2;
      else this.length = 0;
    }
    let body: Buffer;
    if (this.length >= 0) {
      if (this.buf.length - this.bodyStart < this.length) return;
      body = this.buf.subarray(this.bodyStart, this.bodyStart + this.length);
    } else {
      // chunked: complete when the zero-size chunk has arrived
      const parts: Buffer[] = [];
      let at = this.bodyStart;
      for (;;) {
        const eol = this.buf.indexOf('\r\n', at);
        if (eol < 0) return;
        const size = parseInt(this.buf.subarray(at, eol).toString('latin1'), 16);
        if (size === 0) {
          if (this.buf.length < eol + 4) return;
          break;
        }
        if (this.buf.length < eol + 2 + size + 2) return;
        parts.push(this.buf.subarray(eol + 2, eol + 2 + size));
        at = eol + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    }
    const d = this.done;
    this.done = null;
    this.busy = false;
    this.buf = Buffer.alloc(0);
    this.length = -1;
    d?.(this.status, this.wantBody ? body : null);
  }
}

/**
 * Open loop: `rate` requests/s for `seconds`; request i is due at start + i/rate and its
 * latency runs from then (so a slow answer also delays nothing else: no coordinated
 * omission). Requests go to idle keep-alive connections, new ones are opened as needed
 * (up to 512), beyond that they queue (and their wait counts).
 */
export async function paced(origin: string, traffic: Traffic, rate: number, seconds: number): Promise<PacedResult> {
  const url = new URL(origin);
  const host = url.hostname;
  const port = Number(url.port);
  const hostHeader = url.host;
  const MAX_CONNS = 512;
  const wantBody = traffic.onResponse !== undefined;
  const staticBytes = traffic.requests?.map((r) => requestBytes(hostHeader, r)) ?? null;
  let cursor = 0;
  const nextBytes = (): Buffer | null => {
    if (staticBytes) return staticBytes[cursor++ % staticBytes.length];
    const spec = traffic.next!();
    return spec ? requestBytes(hostHeader, spec) : null;
  };

  const conns = new Set<Conn>();
  const idle: Conn[] = [];
  const queue: { bytes: Buffer; due: number }[] = [];
  const latencies: number[] = [];
  let ok = 0;
  let non2xx = 0;
  let errors = 0;
  let sent = 0;
  let inFlight = 0;
  let finishedSending = false;
  let settle: () => void = () => {};
  const allDone = new Promise<void>((r) => (settle = r));

  const onClose = (c: Conn) => {
    conns.delete(c);
    const i = idle.indexOf(c);
    if (i >= 0) idle.splice(i, 1);
  };
  const open = () => {
    const c = new Conn(host, port, wantBody, onClose);
    conns.add(c);
    return c;
  };
  const dispatch = (c: Conn, bytes: Buffer, due: number) => {
    c.send(bytes, (status, body) => {
      inFlight--;
      if (status === 0) errors++;
      else if (status >= 200 && status < 300) {
        ok++;
        latencies.push(performance.now() - due);
      } else non2xx++;
      if (status !== 0) traffic.onResponse?.(status, body ? body.toString('utf8') : '');
      if (starved.length > 0) fire(starved.shift()!);
      if (status !== 0) {
        const q = queue.shift();
        if (q) dispatch(c, q.bytes, q.due);
        else idle.push(c);
      }
      if (finishedSending && inFlight === 0) settle();
    });
  };
  // Requests that were due while `next` had nothing to give (no unused refresh token yet):
  // sent as soon as a response hands one back, their latency still counted from when due.
  const starved: number[] = [];
  const fire = (due: number) => {
    const bytes = nextBytes();
    if (!bytes) {
      starved.push(due);
      return;
    }
    sent++;
    inFlight++;
    const c = idle.pop() ?? (conns.size < MAX_CONNS ? open() : null);
    if (c) dispatch(c, bytes, due);
    else queue.push({ bytes, due });
  };

  // A few connections ready before the clock starts.
  for (let i = 0; i < 8; i++) idle.push(open());
  await new Promise((r) => setTimeout(r, 50));

  const total = Math.max(1, Math.round(rate * seconds));
  const start = performance.now();
  await new Promise<void>((resolve) => {
    let issued = 0;
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
      while (issued < due) {
        fire(start + (issued / rate) * 1000);
        issued++;
      }
      if (issued >= total) {
        clearInterval(timer);
        resolve();
      }
    };
    const timer = setInterval(tick, 1);
    tick();
  });
  finishedSending = true;
  if (inFlight === 0) settle();
  // Still starved with nothing in flight: nothing will ever feed them.
  errors += inFlight === 0 ? starved.splice(0).length : 0;
  // Bounded: whatever has not come back 10 s after the last send is an error.
  await Promise.race([allDone, new Promise((r) => setTimeout(r, 10_000))]);
  errors += inFlight + starved.length;
  for (const c of conns) c.socket.destroy();
  latencies.sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    sent,
    ok,
    non2xx,
    errors,
    p50_ms: round(percentile(latencies, 50)),
    p99_ms: round(percentile(latencies, 99)),
    max_ms: round(latencies[latencies.length - 1] ?? NaN),
    latencies,
  };
}

/** One request, for probing an endpoint and preparing fixtures. */
export async function once(origin: string, spec: RequestSpec): Promise<{ status: number; body: string }> {
  const res = await fetch(origin + spec.path, {
    method: spec.method,
    headers: spec.headers,
    body: spec.body,
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, body: await res.text() };
}

/**
 * `total` calls of `send` at `perSecond`, open loop: call i starts at start + i/perSecond
 * whatever the earlier ones took, and gets its index and the wall-clock time it was sent
 * (what latency is measured from); resolves when every call has settled.
 */
export async function pacedCalls(total: number, perSecond: number, send: (i: number, sentAt: number) => Promise<unknown>): Promise<void> {
  const wall = () => performance.timeOrigin + performance.now();
  const start = wall();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / perSecond - wall();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    pending.push(send(i, wall()));
  }
  await Promise.all(pending);
}
