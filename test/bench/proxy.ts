/**
 * The bare proxy of `functions-proxy`, in its own process (forked by functions-proxy.ts): a
 * Node HTTP server that forwards every request to TARGET_URL with the HTTP client library
 * plinth uses (undici's `request` over a keep-alive Agent; plinth itself dispatches with a
 * handler of its own, without a response stream), the request body streamed, the answer
 * piped back; hop-by-hop headers dropped both ways. Nothing else: no routing, credentials,
 * metrics or logging. The honest limit of one proxy hop in Node.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';
import { sendFailed, sendReady, serveCommands } from './ipc.ts';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'expect']);

try {
  const target = process.env.TARGET_URL!;
  const dispatcher = new Agent({ keepAliveTimeout: 30_000 });
  const server = http.createServer((req, res) => {
    const headers: Record<string, string | string[]> = {};
    for (const k in req.headers) {
      const v = req.headers[k];
      if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    }
    const len = req.headers['content-length'];
    const body = req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0') ? req : null;
    request(target + req.url, { dispatcher, method: req.method as 'GET', headers, body }).then(
      (up) => {
        const out: Record<string, string | string[]> = {};
        for (const k in up.headers) {
          const v = up.headers[k];
          if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
        }
        res.writeHead(up.statusCode, out);
        up.body.on('error', () => res.destroy());
        up.body.pipe(res);
      },
      () => res.writeHead(502).end(),
    );
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  serveCommands({}, async () => {
    server.close();
    await dispatcher.close();
  }, server);
  sendReady({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
} catch (err) {
  sendFailed(err);
}
