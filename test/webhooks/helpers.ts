/**
 * Helpers for the webhook tests: a real HTTP receiver on a loopback port that records
 * every request (raw bytes, headers, arrival time) and answers as the test says (a status,
 * or never), and a wait with a deadline.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { TestApp } from '../helpers/app.ts';

interface TapLike {
  teardown(fn: () => unknown): void;
}

export interface Received {
  /** performance.now() when the request's body had arrived. */
  at: number;
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  body: any;
}

/** What the receiver answers: a status code, or `hang` (never answers). */
export type Answer = number | 'hang';

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Answer of each request, by default 200; `(r, i)` sees the request and its index. */
  answer: (r: Received, i: number) => Answer;
  /** Milliseconds every answer waits (a busy receiver), default 0. */
  delayMs: number;
  /** Requests whose path is `path`. */
  on(path: string): Received[];
  /** Answer `status` to every request held so far (`hang`); how many were still connected. */
  release(status?: number): number;
  close(): Promise<void>;
}

export async function startReceiver(t: TapLike): Promise<Receiver> {
  const received: Received[] = [];
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = raw.toString('utf8');
      }
      const r: Received = { at: performance.now(), method: req.method ?? '', path: req.url ?? '', headers: req.headers, raw, body };
      const i = received.push(r) - 1;
      const a = rec.answer(r, i);
      if (a === 'hang') {
        hanging.add(res);
        return;
      }
      const send = () => res.writeHead(a, { 'content-type': 'text/plain' }).end('ok');
      if (rec.delayMs > 0) setTimeout(send, rec.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closed = false;
  const rec: Receiver = {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    answer: () => 200,
    delayMs: 0,
    on: (path) => received.filter((r) => r.path === path),
    release: (status = 200) => {
      let answered = 0;
      for (const res of hanging) {
        if (res.socket !== null && !res.socket.destroyed) {
          res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
          answered++;
        }
      }
      hanging.clear();
      return answered;
    },
    close: async () => {
      if (closed) return;
      closed = true;
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  t.teardown(() => rec.close());
  return rec;
}

/** Resolves with `cond()`'s first truthy value; rejects after `timeoutMs`. */
export async function waitFor<T>(what: string, cond: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Register a webhook through the API; fails the test on anything but 201. */
export async function createHook(app: TestApp, body: Record<string, unknown>): Promise<{ id: string; [k: string]: unknown }> {
  const r = await app.call('POST', '/rest/v1/webhooks', { token: app.serviceKey, body });
  if (r.status !== 201) throw new Error(`create webhook: ${r.status} ${r.text}`);
  return r.body;
}

export async function deliveries(app: TestApp, id: string, limit?: number): Promise<any[]> {
  const r = await app.call('GET', `/rest/v1/webhooks/${id}/deliveries${limit ? `?limit=${limit}` : ''}`, { token: app.serviceKey });
  if (r.status !== 200) throw new Error(`deliveries: ${r.status} ${r.text}`);
  return r.body;
}

/** Attempts waiting in the outbox or in a drain's batch (none left = every attempt made). */
export async function pendingDeliveries(app: TestApp): Promise<number> {
  const [{ n }] = await app.db.sql<{ n: number }[]>`
    select (select count(*) from webhooks_private.outbox)::int
      + (select count(*) from webhooks_private.batches)::int as n`;
  return n;
}
