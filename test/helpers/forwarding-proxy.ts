/**
 * A real reverse proxy on loopback, as nginx with `$proxy_add_x_forwarded_for` is: each
 * request goes on to `target` with the address it came from appended to X-Forwarded-For
 * (whatever the client wrote there stays in front of it). `localAddress` picks the address
 * the proxy connects onward from (any of 127.0.0.0/8), so a chain of proxies shows distinct
 * hops. Also: one request sent from a chosen loopback address, as a client elsewhere would.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

interface TapLike {
  teardown(fn: () => unknown): void;
}

export interface ForwardingProxy {
  url: string;
}

export async function startForwardingProxy(t: TapLike, target: string, opts: { localAddress?: string } = {}): Promise<ForwardingProxy> {
  const agent = new http.Agent({ keepAlive: false });
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', target);
    const xff = req.headers['x-forwarded-for'];
    const peer = req.socket.remoteAddress ?? '';
    const headers = { ...req.headers, host: u.host, 'x-forwarded-for': typeof xff === 'string' && xff !== '' ? `${xff}, ${peer}` : peer };
    const up = http.request(u, { method: req.method, headers, agent, localAddress: opts.localAddress }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

export interface Sent {
  status: number;
  body: any;
}

/** One JSON request to `base + path`, its connection opened from `localAddress`. */
export function sendFrom(
  localAddress: string,
  base: string,
  method: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(new URL(path, base), {
      method,
      localAddress,
      agent: false,
      headers: { ...headers, ...(text === undefined ? {} : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) }) },
    });
    req.on('response', (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (data += d));
      res.on('end', () => {
        let parsed: unknown = data;
        try {
          parsed = JSON.parse(data);
        } catch {
          /* text */
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
      });
    });
    req.on('error', reject);
    req.end(text);
  });
}
