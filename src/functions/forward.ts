/**
 * Forwarding a call to a Deno edge runtime (docs/api/functions.md): the method, the
 * path suffix and query, the body and the request's end-to-end headers (`Content-Type`,
 * `Authorization` and `apikey` among them) go to `<runtime>/<name><suffix>`; the runtime's
 * status, headers and body come back unchanged. Both bodies stream (undici's request
 * client over keep-alive connections, its answer piped straight to the socket), so a large
 * upload or a long streamed answer costs no memory here; only a request body of a declared
 * length up to 64 KiB is read first, to go out with its headers in one write. The answer
 * is written by an undici dispatch handler (Call): no response stream, no pipe.
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
import type { Readable } from 'node:stream';
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

/** A body at most this large that has arrived whole is sent as one buffer. */
const SMALL_BODY = 64 * 1024;

/**
 * The body to send: null without one; one of a declared length up to 64 KiB as one buffer,
 * so that the runtime gets headers and body in one write (taken from the stream's buffer at
 * once when Node's parser already holds it whole, the common case of a small request in
 * the packet of its headers; else read first); any other the request stream itself, piped
 * as it arrives.
 */
function bodyOf(req: FastifyRequest): Buffer | FastifyRequest['raw'] | null | Promise<Buffer> {
  if (!hasBody(req)) return null;
  const raw = req.raw;
  const len = Number(req.headers['content-length']);
  if (req.headers['transfer-encoding'] !== undefined || !(len <= SMALL_BODY)) return raw;
  // read() without a size returns the whole buffer (and lets the stream end).
  if (raw.complete) return (raw.read() as Buffer | null) ?? Buffer.alloc(0);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    raw.on('data', (chunk: Buffer) => chunks.push(chunk));
    raw.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    raw.once('error', reject);
  });
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

/**
 * One call, as an undici dispatch handler: the runtime's head goes to the client's socket
 * as it arrives, then each chunk of its body (undici stops reading the runtime's socket
 * while the client's is full, and goes on at its `drain`). No response stream and no pipe
 * in between. `settled` resolves once the head is written, or rejects with the error that
 * came before it (no head written: the caller answers 502/503/504).
 */
class Call {
  readonly settled: Promise<void>;
  private resolve!: () => void;
  private reject!: (err: Error) => void;
  private abort: ((err?: Error) => void) | null = null;
  private headWritten = false;
  private done = false;
  private readonly reply: FastifyReply;
  private readonly body: Buffer | Readable | null;

  constructor(reply: FastifyReply, body: Buffer | Readable | null) {
    this.reply = reply;
    this.body = body;
    this.settled = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abort = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    // A 1xx interim answer is not passed on (as undici's request does).
    if (statusCode < 200) return true;
    // The answer goes straight to the socket (not through fastify's send pipeline); the
    // headers set so far (CORS, the request id) go with the runtime's.
    const reply = this.reply;
    reply.hijack();
    const own: Record<string, string | string[]> = {};
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const k = rawHeaders[i].toString('latin1').toLowerCase();
      if (HOP_BY_HOP.has(k) || k.startsWith('access-control-') || k === '__proto__') continue;
      const v = rawHeaders[i + 1].toString('latin1');
      const prev = own[k];
      own[k] = prev === undefined ? v : typeof prev === 'string' ? [prev, v] : [...prev, v];
    }
    const headers = reply.getHeaders() as OutgoingHttpHeaders;
    for (const k in own) headers[k] = own[k];
    const raw = reply.raw;
    raw.writeHead(statusCode, headers);
    raw.on('drain', resume);
    raw.on('close', () => {
      // The client went away before the end: the call to the runtime stops too.
      if (!this.done) this.abort?.();
    });
    this.headWritten = true;
    this.resolve();
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.reply.raw.write(chunk);
  }

  onComplete(): void {
    this.done = true;
    this.reply.raw.end();
  }

  onError(err: Error): void {
    this.done = true;
    if (this.headWritten) {
      this.reply.raw.destroy();
      return;
    }
    // A request stream undici did not read to its end is drained (as Node drains a body
    // nobody read), so that the error answer can go out on the connection.
    if (this.body !== null && !Buffer.isBuffer(this.body) && !this.body.readableEnded) this.body.resume();
    this.reject(err);
  }
}

/** A runtime address split as undici's dispatch takes it: the origin, and a path prefix (an external runtime may have one). */
function splitBase(base: string): { origin: string; prefix: string } {
  const url = new URL(base);
  return { origin: url.origin, prefix: url.pathname.replace(/\/+$/, '') };
}

/**
 * `cut` is aborted at the shutdown deadline: the connection pool is destroyed then, which
 * stops every call in flight (its caller gets 503) without a listener per call.
 */
export function createForwarder(timeoutMs: number, cut: AbortSignal): Forwarder {
  // undici and its connection pool are loaded at the first call: a service whose functions
  // are never called never holds them.
  interface Client {
    undici: Undici;
    dispatcher: Agent;
  }
  let loading: Promise<Client> | null = null;
  let client: Client | null = null;
  const load = () =>
    (loading ??= import('undici').then((undici) => {
      const dispatcher = new undici.Agent({ keepAliveTimeout: 30_000, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, connect: { timeout: timeoutMs } });
      if (cut.aborted) void dispatcher.destroy().catch(() => {});
      else cut.addEventListener('abort', () => void dispatcher.destroy().catch(() => {}), { once: true });
      return (client = { undici, dispatcher });
    }));
  // The runtime's address, split once per address (one per function process, while it runs).
  let lastBase = '';
  let lastSplit = { origin: '', prefix: '' };
  return {
    close: async () => {
      if (loading !== null) await (await loading).dispatcher.close().catch(() => {});
    },
    async forward(req, reply, target) {
      const { undici, dispatcher } = client ?? (await load());
      if (target.base !== lastBase) {
        lastSplit = splitBase(target.base);
        lastBase = target.base;
      }
      const { origin, prefix } = lastSplit;
      const pending = bodyOf(req);
      const body = pending instanceof Promise ? await pending : pending;
      const call = new Call(reply, body);
      try {
        dispatcher.dispatch({ origin, path: prefix + target.path, method: req.method, headers: requestHeaders(req, target), body }, call);
        await call.settled;
      } catch (err) {
        if (cut.aborted) throw ERRORS.shuttingDown();
        throw isTimeout(undici, err) ? FUNCTION_ERRORS.timedOut(err) : FUNCTION_ERRORS.unavailable(err);
      }
      return reply;
    },
  };
}
