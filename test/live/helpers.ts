/**
 * Real WebSocket clients (`ws`) for the live tests: connect, collect messages, wait for one
 * matching a predicate with a deadline; a refused upgrade resolves with its HTTP status and
 * `{error}` body.
 */
import WebSocket from 'ws';
import type { TestApp } from '../helpers/app.ts';

export interface LiveClient {
  ws: WebSocket;
  /** The headers of the server's 101 answer. */
  upgradeHeaders: Record<string, string | string[] | undefined>;
  messages: any[];
  closed: Promise<{ code: number; reason: string }>;
  /** The first message (from now on, or already received and not yet taken) matching `pred`. */
  next(pred?: (m: any) => boolean, timeoutMs?: number): Promise<any>;
  send(msg: unknown): void;
  close(): void;
}

export interface Refusal {
  status: number;
  body: any;
}

export interface ConnectOptions {
  headers?: Record<string, string>;
  /** Query string parameters. */
  query?: Record<string, string>;
  /** Subprotocols offered (Sec-WebSocket-Protocol). */
  protocols?: string[];
}

export function wsUrl(app: TestApp, path: string, query?: Record<string, string>): string {
  const u = new URL(app.url.replace(/^http/, 'ws') + path);
  for (const [k, v] of Object.entries(query ?? {})) u.searchParams.set(k, v);
  return u.toString();
}

export function connect(app: TestApp, path: string, opts: ConnectOptions = {}): Promise<LiveClient | Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl(app, path, opts.query), opts.protocols ?? [], { headers: opts.headers });
    let upgradeHeaders: LiveClient['upgradeHeaders'] = {};
    ws.on('upgrade', (res) => (upgradeHeaders = res.headers));
    const messages: any[] = [];
    const waiters: Array<{ pred: (m: any) => boolean; resolve: (m: any) => void }> = [];
    ws.on('message', (data) => {
      const m = JSON.parse((data as Buffer).toString('utf8'));
      messages.push(m);
      for (const w of [...waiters]) {
        if (w.pred(m)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(m);
          return;
        }
      }
      pendingUntaken.push(m);
    });
    const pendingUntaken: any[] = [];
    const closed = new Promise<{ code: number; reason: string }>((res) => ws.on('close', (code, reason) => res({ code, reason: String(reason) })));
    ws.on('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d));
      res.on('end', () => {
        let body: any = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* text */
        }
        resolve({ status: res.statusCode ?? 0, body });
        ws.terminate();
      });
    });
    ws.on('error', (err) => reject(err));
    ws.on('open', () => {
      resolve({
        ws,
        upgradeHeaders,
        messages,
        closed,
        next(pred = () => true, timeoutMs = 5000) {
          const i = pendingUntaken.findIndex(pred);
          if (i >= 0) {
            return Promise.resolve(pendingUntaken.splice(i, 1)[0]);
          }
          return new Promise((res, rej) => {
            const w = { pred, resolve: (m: any) => (clearTimeout(timer), res(m)) };
            const timer = setTimeout(() => {
              waiters.splice(waiters.indexOf(w), 1);
              rej(new Error(`no matching message within ${timeoutMs} ms; got ${JSON.stringify(messages).slice(0, 2000)}`));
            }, timeoutMs);
            waiters.push(w);
          });
        },
        send(msg) {
          ws.send(JSON.stringify(msg));
        },
        close() {
          ws.close();
        },
      });
    });
  });
}

export async function open(app: TestApp, path: string, opts: ConnectOptions = {}): Promise<LiveClient> {
  const c = await connect(app, path, opts);
  if (!('ws' in c)) throw new Error(`refused: ${c.status} ${JSON.stringify(c.body)}`);
  return c;
}

export async function refused(app: TestApp, path: string, opts: ConnectOptions = {}): Promise<Refusal> {
  const c = await connect(app, path, opts);
  if ('ws' in c) {
    c.ws.terminate();
    throw new Error('the upgrade was accepted');
  }
  return c;
}

/** Poll `fn` until it returns a truthy value or the deadline passes. */
export async function waitFor<T>(fn: () => T | Promise<T>, timeoutMs = 5000, what = 'condition'): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
