/**
 * Forwarding a call to a Deno edge runtime (interface §4.7, contract §6): the method, the
 * path suffix and query, the body and the request's end-to-end headers (`Content-Type`,
 * `Authorization` and `apikey` among them) go to `<runtime>/<name><suffix>`; the runtime's
 * status, headers and body come back unchanged. Both bodies stream (node:http piping with a
 * keep-alive agent): nothing is buffered, so a large upload or a long streamed answer
 * costs no memory here.
 *
 * - Runtime unreachable (refused, reset, closed before answering): 502 `edge runtime unavailable`.
 * - No status line within FUNCTIONS_TIMEOUT_MS, or no byte for that long while the answer
 *   streams: 504 `edge runtime timed out` (mid-stream, the response is cut instead).
 * - Hop-by-hop headers are dropped both ways, and so are the runtime's `access-control-*`
 *   headers: CORS is the service's (contract §10), whatever a function says.
 */
import http, { type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../core/errors.ts';

export const FUNCTION_ERRORS = {
  notFound: () => new AppError(404, 'function not found'),
  unavailable: (cause?: unknown) => new AppError(502, 'edge runtime unavailable', { cause }),
  notConfigured: () => new AppError(503, 'edge runtime not configured'),
  timedOut: () => new AppError(504, 'edge runtime timed out'),
} as const;

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
]);

class Timeout extends Error {}

export interface Forwarder {
  forward(req: FastifyRequest, reply: FastifyReply, base: string, path: string): Promise<FastifyReply>;
  close(): void;
}

function requestHeaders(req: FastifyRequest): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const h: IncomingHttpHeaders = req.headers;
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
  const ip = req.socket.remoteAddress;
  if (ip) out['x-forwarded-for'] = typeof h['x-forwarded-for'] === 'string' ? `${h['x-forwarded-for']}, ${ip}` : ip;
  if (h.host) out['x-forwarded-host'] = h.host;
  out['x-forwarded-proto'] = req.protocol;
  return out;
}

function hasBody(req: FastifyRequest): boolean {
  const h = req.headers;
  if (h['transfer-encoding'] !== undefined) return true;
  const len = h['content-length'];
  return len !== undefined && len !== '0';
}

export function createForwarder(timeoutMs: number): Forwarder {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64 }),
  };
  const targets = new Map<string, { protocol: 'http:' | 'https:'; hostname: string; port: string; prefix: string }>();
  return {
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
    /** `base`: the runtime's address (no trailing slash); `path`: `/<name>[/suffix][?query]`. */
    forward(req, reply, base, path) {
      let target = targets.get(base);
      if (target === undefined) {
        const u = new URL(base);
        const protocol = u.protocol === 'https:' ? 'https:' : 'http:';
        target = { protocol, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: u.port, prefix: u.pathname.replace(/\/$/, '') };
        targets.set(base, target);
      }
      const { protocol } = target;
      const client = protocol === 'https:' ? https : http;
      return new Promise<FastifyReply>((resolve, reject) => {
        let answered = false;
        const out = client.request({
          protocol,
          hostname: target.hostname,
          port: target.port || undefined,
          path: target.prefix + path,
          method: req.method,
          headers: requestHeaders(req),
          agent: agents[protocol],
        });
        // One timer: no status line within timeoutMs → 504; afterwards it restarts with each
        // chunk of the answer, so a stream that stops for timeoutMs is cut.
        const timer = setTimeout(() => out.destroy(new Timeout()), timeoutMs);
        out.on('error', (err) => {
          clearTimeout(timer);
          if (answered) return;
          answered = true;
          reject(err instanceof Timeout ? FUNCTION_ERRORS.timedOut() : FUNCTION_ERRORS.unavailable(err));
        });
        out.on('response', (res) => {
          answered = true;
          timer.refresh();
          res.on('data', () => timer.refresh());
          res.on('close', () => clearTimeout(timer));
          // The answer is piped straight to the socket (no send pipeline to go through); the
          // headers set so far (CORS) go with the runtime's.
          reply.hijack();
          const headers = reply.getHeaders();
          for (const [k, v] of Object.entries(res.headers)) {
            if (v === undefined || HOP_BY_HOP.has(k) || k.startsWith('access-control-')) continue;
            headers[k] = v;
          }
          const raw = reply.raw;
          raw.writeHead(res.statusCode ?? 502, headers as OutgoingHttpHeaders);
          res.pipe(raw);
          res.on('error', () => raw.destroy());
          res.on('aborted', () => raw.destroy());
          raw.on('close', () => {
            if (!res.complete) res.destroy();
          });
          resolve(reply);
        });
        if (hasBody(req)) {
          req.raw.pipe(out);
          req.raw.on('error', (err) => out.destroy(err));
        } else {
          out.end();
        }
      });
    },
  };
}
