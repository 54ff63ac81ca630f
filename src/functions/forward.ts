/**
 * Forwarding a call to a Deno edge runtime (docs/api/functions.md): the method, the
 * path suffix and query, the body and the request's end-to-end headers (`Content-Type`,
 * `Authorization` and `apikey` among them) go to `<runtime>/<name><suffix>`; the runtime's
 * status, headers and body come back unchanged. Both bodies stream (undici's request
 * client over keep-alive connections, its answer piped straight to the socket), so a large
 * upload or a long streamed answer costs no memory here; only a request body of a declared
 * length up to 64 KiB is read first, to go out with its headers in one write.
 *
 * - Runtime unreachable (refused, reset, closed before answering): 502 `edge runtime unavailable`.
 * - No status line within FUNCTIONS_TIMEOUT_MS: 504 `edge runtime timed out`; an answer
 *   whose body then stalls for as long is cut (undici's headersTimeout and bodyTimeout).
 * - Hop-by-hop headers are dropped both ways, and so are the runtime's `access-control-*`
 *   headers: CORS is the service's (docs/api/overview.md), whatever a function says.
 * - Every `x-plinth-*` header a caller sends is dropped; plinth sets its own: `x-plinth-function`
 *   (the function it checked, which the runtime serves and no other) and, when there is a
 *   secret, `x-plinth-runtime-secret` (which proves to the runtime that the call comes from
 *   plinth). So are `Authorization` and `apikey` when they did not verify (`drop`).
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Agent } from 'undici';
import { AppError, ERRORS } from '../core/errors.ts';
import { forwardedFor } from '../core/http.ts';

export const FUNCTION_ERRORS = {
  notFound: () => new AppError(404, 'function not found'),
  unavailable: (cause?: unknown) => new AppError(502, 'edge runtime unavailable', { cause }),
  notConfigured: () => new AppError(503, 'edge runtime not configured'),
  timedOut: (cause?: unknown) => new AppError(504, 'edge runtime timed out', { cause }),
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
  'expect',
]);

/** The headers plinth sets for the runtime; a caller's own `x-plinth-*` headers never reach it. */
export const FUNCTION_HEADER = 'x-plinth-function';
export const SECRET_HEADER = 'x-plinth-runtime-secret';
const INTERNAL_PREFIX = 'x-plinth-';

export interface ForwardTarget {
  /** The runtime's address (no trailing slash). */
  base: string;
  /** `/<name>[/suffix][?query]`, checked and encoded (path.ts). */
  path: string;
  /** The function's name, sent in `x-plinth-function`. */
  name: string;
  /** Sent in `x-plinth-runtime-secret`; null: none (an external runtime without EDGE_RUNTIME_SECRET). */
  secret: string | null;
  /** Request headers not to forward (lower case): credentials that did not verify. */
  drop: ReadonlySet<string>;
  /** Aborted at the shutdown deadline: the call stops and its caller gets 503. */
  signal?: AbortSignal;
}

export interface Forwarder {
  forward(req: FastifyRequest, reply: FastifyReply, target: ForwardTarget): Promise<FastifyReply>;
  close(): Promise<void>;
}

function requestHeaders(req: FastifyRequest, target: ForwardTarget): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const h: IncomingHttpHeaders = req.headers;
  for (const k in h) {
    const v = h[k];
    if (v !== undefined && !HOP_BY_HOP.has(k) && !k.startsWith(INTERNAL_PREFIX) && !target.drop.has(k)) out[k] = v;
  }
  out[FUNCTION_HEADER] = target.name;
  out['x-request-id'] = req.id;
  if (target.secret !== null) out[SECRET_HEADER] = target.secret;
  // The client as TRUST_PROXY resolved it, then the trusted hops: not what the client wrote.
  const xff = forwardedFor(req);
  if (xff) out['x-forwarded-for'] = xff;
  else delete out['x-forwarded-for'];
  if (h.host) out['x-forwarded-host'] = h.host;
  out['x-forwarded-proto'] = req.protocol;
  return out;
}

/** A body at most this large, with its length declared, is read before the call and sent with its headers. */
const SMALL_BODY = 64 * 1024;

/**
 * The body to send: null without one; a small one with a declared length read whole (the
 * runtime then gets headers and body in one write, not a write per stream chunk); else the
 * request stream itself.
 */
async function bodyOf(req: FastifyRequest): Promise<Buffer | FastifyRequest['raw'] | null> {
  if (!hasBody(req)) return null;
  const len = Number(req.headers['content-length']);
  if (req.headers['transfer-encoding'] !== undefined || !(len <= SMALL_BODY)) return req.raw;
  const chunks: Buffer[] = [];
  for await (const chunk of req.raw as AsyncIterable<Buffer>) chunks.push(chunk);
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}

function hasBody(req: FastifyRequest): boolean {
  const h = req.headers;
  if (h['transfer-encoding'] !== undefined) return true;
  const len = h['content-length'];
  return len !== undefined && len !== '0';
}

type Undici = typeof import('undici');

function isTimeout(undici: Undici, err: unknown): boolean {
  return err instanceof undici.errors.HeadersTimeoutError || err instanceof undici.errors.ConnectTimeoutError;
}

export function createForwarder(timeoutMs: number): Forwarder {
  // undici and its connection pool are loaded at the first call: a service whose functions
  // are never called never holds them.
  let client: Promise<{ undici: Undici; dispatcher: Agent }> | null = null;
  const load = () =>
    (client ??= import('undici').then((undici) => ({
      undici,
      dispatcher: new undici.Agent({ keepAliveTimeout: 30_000, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, connect: { timeout: timeoutMs } }),
    })));
  return {
    close: async () => {
      if (client !== null) await (await client).dispatcher.close();
    },
    async forward(req, reply, target) {
      const { undici, dispatcher } = await load();
      const requestBody = await bodyOf(req);
      let res;
      try {
        res = await undici.request(target.base + target.path, {
          dispatcher,
          method: req.method as 'GET',
          headers: requestHeaders(req, target),
          body: requestBody,
          signal: target.signal,
        });
      } catch (err) {
        if (target.signal?.aborted) throw ERRORS.shuttingDown();
        throw isTimeout(undici, err) ? FUNCTION_ERRORS.timedOut(err) : FUNCTION_ERRORS.unavailable(err);
      }
      // The answer goes straight to the socket (not through fastify's send pipeline); the
      // headers set so far (CORS) go with the runtime's.
      reply.hijack();
      const headers = reply.getHeaders() as OutgoingHttpHeaders;
      for (const k in res.headers) {
        const v = res.headers[k];
        if (v === undefined || HOP_BY_HOP.has(k) || k.startsWith('access-control-')) continue;
        headers[k] = v;
      }
      const raw = reply.raw;
      const body = res.body;
      raw.writeHead(res.statusCode, headers);
      body.on('error', () => raw.destroy());
      raw.on('close', () => {
        if (!body.readableEnded) body.destroy();
      });
      body.pipe(raw);
      return reply;
    },
  };
}
