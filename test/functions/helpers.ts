/**
 * Helpers of the edge functions tests: a loopback edge runtime (a real node:http server
 * that records what it was sent), catalog rows, a request whose path is sent exactly as
 * written, and waiting for a condition with a deadline.
 */
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface LoopbackRuntime {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

type Route = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/**
 * A runtime on a loopback port. `routes` by function name (first path segment); a route
 * whose name starts with `raw:` gets the request before its body is read (streaming tests).
 */
export async function loopbackRuntime(routes: Record<string, Route>, raw: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {}): Promise<LoopbackRuntime> {
  const seen: Seen[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server: Server = createServer((req, res) => {
    const name = (req.url ?? '/').split(/[/?]/)[1] ?? '';
    if (raw[name]) {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: '' });
      return raw[name](req, res);
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const route = routes[name];
      if (!route) {
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no such function"}');
        return;
      }
      route(req, res, body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Wait until `check` holds (polling), or fail after `limitMs`. */
export async function waitFor(check: () => boolean | Promise<boolean>, limitMs = 10_000, everyMs = 25): Promise<boolean> {
  const until = Date.now() + limitMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** A port nothing listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

export interface RawResult {
  status: number;
  body: string;
}

/** A GET whose path goes on the request line exactly as written (fetch would resolve `..` and `%2e%2e` first). */
export function rawGet(base: string, path: string, headers: Record<string, string> = {}): Promise<RawResult> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: 'GET', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
