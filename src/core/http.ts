/**
 * The HTTP shell: fastify with one JSON parser, one error handler, one not-found handler
 * and CORS (docs/api/overview.md). Every reply plinth sends, fastify's and Node's own included
 * (bad URL, head too large, shutting down), leaves as `{"error": "<message>"}` with no
 * internal code and no echo of the input; a reply after which the connection closes says
 * `Connection: close`.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyError, type FastifyBaseLogger } from 'fastify';
import type { RuntimeConfig, TrustProxy } from './config.ts';
import { lazyChildLogger, type Logger } from './log.ts';
import { requestRole, requestUserId } from './request-role.ts';
import { requestIdFrom, type RequestLog } from './request-log.ts';
import type { Metrics } from './metrics.ts';
import { randomUUID } from 'node:crypto';
import { originsFor } from './origins.ts';
import { AppError, ERRORS, isBusyError, isConnectionError, pgErrorToAppError } from './errors.ts';
import { reasonOf } from './error-reason.ts';
import { errorShapeOf, gotrueBody, postgrestBody, type ErrorShape } from './compat-errors.ts';

// node:http from process.getBuiltinModule, not an ESM import: that import reads every export,
// and reading http.WebSocket loads Node's bundled undici (about 3 MB of heap, unused here).
const { STATUS_CODES } = process.getBuiltinModule('node:http');

const CORS_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';
const CORS_HEADERS =
  'authorization, apikey, content-type, prefer, range, x-upsert, x-client-info, cache-control, tus-resumable, upload-length, upload-offset, upload-metadata, upload-defer-length, plinth-wrote';
/** Response headers a page may read: REST's count, and what resumable uploads answer with. */
const CORS_EXPOSE = 'Content-Range, Location, Tus-Resumable, Upload-Offset, Upload-Length, Upload-Expires, X-Request-Id, Plinth-Wrote';
/** Sent on every response when API_EXTERNAL_URL is https: browsers then refuse plain http to this host for a year. */
const HSTS = 'max-age=31536000; includeSubDomains';

/**
 * The client address, the one every per-IP limit and the function forwarder use: fastify's
 * `req.ip`, resolved by the trust buildHttp gives it from TRUST_PROXY (the socket's address,
 * or the right-most X-Forwarded-For hop that is not a trusted proxy; with `true`, the
 * left-most entry). The second argument is not needed: callers may still pass TRUST_PROXY.
 */
export function clientIp(req: FastifyRequest, _trustProxy?: TrustProxy): string {
  return req.ip ?? 'unknown';
}

/**
 * X-Forwarded-For for a request plinth passes on: the client address as clientIp resolved
 * it, then the trusted proxies, then the socket's address. Entries left of the resolved
 * client were written by the client and are dropped.
 */
/**
 * This instance's own URL as seen from this machine (`HOST` 0.0.0.0 or :: → loopback), once
 * it listens: what its job worker and its functions call it back on.
 */
export function ownUrl(app: FastifyInstance, config: Pick<RuntimeConfig, 'host' | 'port'>): string {
  const a = app.server.address();
  const port = typeof a === 'object' && a !== null ? a.port : config.port;
  const host = config.host;
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

export function forwardedFor(req: FastifyRequest): string | undefined {
  const hops = req.ips ?? [req.ip];
  const out = hops.filter((h): h is string => typeof h === 'string' && h !== '').reverse();
  return out.length > 0 ? out.join(', ') : undefined;
}

/**
 * TRUST_PROXY as fastify's `trustProxy`. A number is a hop count, which fastify no longer
 * takes itself: it becomes proxy-addr's own count rule, hop `i` (0 = the socket) trusted
 * while `i < n`.
 */
export function fastifyTrustProxy(trust: TrustProxy): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust === 'number') return (_address, hop) => hop < trust;
  if (typeof trust === 'boolean') return trust;
  return [...trust];
}

/** Map anything thrown to an AppError; fastify's own codes included. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const e = err as Partial<FastifyError> & { validation?: unknown };
  if (e && typeof e === 'object') {
    if (e.validation) return ERRORS.invalidBody();
    switch (e.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return ERRORS.bodyTooLarge();
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return ERRORS.invalidBody();
      case 'FST_ERR_BAD_URL':
      case 'FST_ERR_MAX_PARAM_LENGTH':
        return ERRORS.invalidRequest();
    }
    if (typeof e.statusCode === 'number' && e.statusCode === 413) return ERRORS.bodyTooLarge();
    // Any other client error fastify raises itself: its status class, plinth's words.
    if (typeof e.code === 'string' && e.code.startsWith('FST_') && typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
      return e.code.startsWith('FST_ERR_CTP_') ? ERRORS.invalidBody() : ERRORS.invalidRequest();
    }
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return pgErrorToAppError(err);
    if (isBusyError(err)) return ERRORS.databaseBusy(err);
    if (isConnectionError(err)) return ERRORS.databaseUnavailable(err);
  }
  return ERRORS.internal(err);
}

/**
 * JSON request body text → value. Invalid JSON, or arrays and objects nested deeper than
 * `maxDepth` (MAX_JSON_DEPTH: PostgreSQL would run out of stack on them), is 400
 * `invalid request body`. Every JSON parser of the service goes through here.
 */
export function parseJsonBody(text: string, maxDepth: number): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw ERRORS.invalidBody();
  }
  if (jsonDeeperThan(text, maxDepth)) throw ERRORS.invalidBody();
  return value;
}

/**
 * true when valid JSON text nests arrays and objects deeper than `limit`. Linear, no
 * allocation; strings are skipped. Text too short to hold `limit + 1` levels is not scanned.
 */
export function jsonDeeperThan(text: string, limit: number): boolean {
  const n = text.length;
  if (n < 2 * (limit + 1)) return false;
  let depth = 0;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: to the next quote not escaped by an odd run of backslashes.
      for (;;) {
        i = text.indexOf('"', i + 1);
        if (i < 0) return false;
        let b = 0;
        while (text.charCodeAt(i - 1 - b) === 0x5c) b++;
        if ((b & 1) === 0) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** Requests being answered, per app (the shutdown deadline reports how many it cut). */
const inFlight = new WeakMap<FastifyInstance, { sockets: Set<HttpSocket>; closing: boolean }>();

/** A connection of the HTTP server; Node keeps the response it is answering on it. */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

/** Responses being answered: connections with a response not yet finished. */
function* answering(sockets: Set<HttpSocket>): Generator<ServerResponse> {
  for (const s of sockets) {
    const res = s._httpMessage;
    if (res && !res.writableFinished) yield res;
  }
}

/**
 * The shutdown deadline: every request still being answered whose answer has not begun gets
 * 503 `service shutting down` (`Connection: close`); one whose answer is streaming is cut.
 */
export function cutRequests(app: FastifyInstance): void {
  const state = inFlight.get(app);
  if (!state) return;
  const body = JSON.stringify({ error: ERRORS.shuttingDown().publicMessage });
  for (const res of [...answering(state.sockets)]) {
    if (res.headersSent) {
      res.destroy();
      continue;
    }
    for (const name of res.getHeaderNames()) if (name !== 'x-request-id' && name !== 'strict-transport-security' && !name.startsWith('access-control-') && name !== 'vary') res.removeHeader(name);
    res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), connection: 'close' });
    res.end(body);
  }
}

export function inFlightRequests(app: FastifyInstance): number {
  const state = inFlight.get(app);
  return state ? [...answering(state.sockets)].length : 0;
}

const CLIENT_ERRORS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'request header fields too large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'request timeout'],
};

/**
 * Node's HTTP parser refused the request (head over 16 KB, bad method or framing, timeout):
 * answer in plinth's shape with `Connection: close`, half-close, and discard whatever the
 * client still sends until it closes (or 2 s), so the client reads the reply instead of a
 * reset. Nothing of the input is echoed; the log line has no stack.
 */
function clientErrorHandler(log: Logger, hsts: boolean): (err: NodeJS.ErrnoException, socket: Socket) => void {
  const handled = new WeakSet<Socket>();
  return (err, socket) => {
    if (handled.has(socket)) return;
    handled.add(socket);
    if (err.code === 'ECONNRESET' || socket.destroyed) {
      socket.destroy();
      return;
    }
    const [status, message] = CLIENT_ERRORS[err.code ?? ''] ?? [400, 'invalid request'];
    // As Node: reply only when no response of this socket has begun.
    const current = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!socket.writable || (current && current.headersSent)) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify({ error: message });
    const id = randomUUID();
    log.info({ request_id: id, status, code: err.code }, message);
    socket.removeAllListeners('data');
    socket.on('data', () => {});
    socket.on('error', () => {});
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${id}\r\n${hsts ? `Strict-Transport-Security: ${HSTS}\r\n` : ''}Connection: close\r\n\r\n${body}`,
    );
    setTimeout(() => socket.destroy(), 2000).unref();
  };
}

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  if (err.headers) reply.headers(err.headers);
  // SUPABASE_COMPAT=true: the shape of the area's Supabase counterpart (compat-errors.ts).
  const shape = reply.request.errorShape;
  if (shape === 'gotrue') {
    const g = gotrueBody(err, reply.request.url);
    return reply.code(g.status).type('application/json; charset=utf-8').send(JSON.stringify(g.body));
  }
  if (shape === 'postgrest') {
    const body = postgrestBody(err, reply.request.method);
    // PostgREST answers an ambiguous embed 300 Multiple Choices.
    return reply.code(body.code === 'PGRST201' ? 300 : err.status).type('application/json; charset=utf-8').send(JSON.stringify(body));
  }
  return reply.code(err.status).type('application/json; charset=utf-8').send(JSON.stringify({ error: err.publicMessage }));
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A JSON body's text, as received (undefined: no JSON body). */
    bodyText: string | undefined;
    /** SUPABASE_COMPAT=true: the error shape of the request's area; null: plinth's `{"error": …}`. */
    errorShape: ErrorShape | null;
  }
}

/** What the HTTP shell records of every request: its line in the log, the ring, the metrics, the trace. */
export interface RequestObservers {
  requestLog: RequestLog;
  metrics: Metrics;
  /** Ends the request's trace (OpenTelemetry, when configured): set by the tracing module. */
  trace?: RequestTracer;
}

/** The request tracing hooks OpenTelemetry installs (src/core/tracing.ts); absent, nothing is traced. */
export interface RequestTracer {
  start(req: FastifyRequest): void;
  end(req: FastifyRequest, status: number, route: string): void;
}

export function buildHttp(config: RuntimeConfig, log: Logger, observers?: RequestObservers): FastifyInstance {
  const hsts = new URL(config.apiExternalUrl).protocol === 'https:';
  // Typed as fastify's logger so that the instance is FastifyInstance's default (not one generic over pino's).
  const loggerInstance: FastifyBaseLogger = log;
  const app: FastifyInstance = Fastify({
    loggerInstance,
    childLoggerFactory: (logger, bindings, opts) => lazyChildLogger(logger as Logger, bindings, opts) as FastifyBaseLogger,
    // One line per request, written by the onResponse hook below; fastify's own two (with the
    // URL, its credentials redacted) only at debug and trace.
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace', requestIdLogLabel: 'request_id' }),
    // X-Request-Id: the caller's when it is well formed, a new one otherwise.
    requestIdHeader: false,
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    bodyLimit: config.maxBodyBytes,
    trustProxy: fastifyTrustProxy(config.trustProxy),
    // Requests that arrive while closing get plinth's 503 (onRequest below); fastify adds
    // `Connection: close` to them.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    frameworkErrors: (err, _req, reply) => {
      if (hsts) reply.header('Strict-Transport-Security', HSTS);
      void sendError(reply, toAppError(err));
    },
    clientErrorHandler: clientErrorHandler(log, hsts),
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 1000 },
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: false } },
  });

  // JSON bodies: an empty body is "no body" (logout and anonymous accept one); anything
  // that does not parse is 400 `invalid request body`.
  // The text is kept as `req.bodyText`: REST writes and RPC bind it as is, without a stringify.
  app.decorateRequest('bodyText', undefined);
  app.decorateRequest('errorShape', null);
  app.removeContentTypeParser(['application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    // A body that opens with a bracket is not blank: the common case skips the trim's copy.
    const first = text.charCodeAt(0);
    if (first !== 0x7b && first !== 0x5b && text.trim() === '') return done(null, undefined);
    let value: unknown;
    try {
      value = parseJsonBody(text, config.maxJsonDepth);
    } catch (err) {
      return done(err as AppError, undefined);
    }
    req.bodyText = text;
    done(null, value);
  });

  // Requests in flight are found through their connections (tracked once per connection, not per request).
  const state = { sockets: new Set<HttpSocket>(), closing: false };
  inFlight.set(app, state);
  app.server.on('connection', (socket: HttpSocket) => {
    state.sockets.add(socket);
    socket.once('close', () => state.sockets.delete(socket));
  });
  app.addHook('preClose', async () => {
    state.closing = true;
    // Requests in flight finish, then their connections close (a keep-alive client would
    // otherwise hold the drain open).
    for (const res of answering(state.sockets)) if (!res.headersSent) res.setHeader('connection', 'close');
  });

  // CORS (docs/api/overview.md)
  const origins = originsFor(config);
  // A callback hook, not an async one: no promise per request.
  app.addHook('onRequest', (req, reply, next) => {
    reply.header('X-Request-Id', req.id);
    if (config.supabaseCompat) req.errorShape = errorShapeOf(req.url);
    if (hsts) reply.header('Strict-Transport-Security', HSTS);
    // Shutting down: requests still arriving on kept-alive connections are refused.
    if (state.closing) {
      sendError(reply, ERRORS.shuttingDown());
      return;
    }
    const origin = req.headers.origin;
    if (origin !== undefined) {
      if (origins.allows(origin)) {
        reply.header('Access-Control-Allow-Origin', origin);
        reply.header('Access-Control-Expose-Headers', CORS_EXPOSE);
      } else if (req.method === 'OPTIONS' || !sameOrigin(origin, req.headers.host)) {
        origins.refused(origin, req.log, 'a request');
      }
      reply.header('Vary', 'Origin');
    }
    if (req.method === 'OPTIONS') {
      reply.header('Access-Control-Allow-Methods', CORS_METHODS);
      reply.header('Access-Control-Allow-Headers', CORS_HEADERS);
      reply.header('Access-Control-Max-Age', '600');
      reply.code(204).send();
      return;
    }
    next();
  });

  app.setErrorHandler((err, req, reply) => {
    // Answered already (the shutdown deadline gave it its 503): nothing more to send.
    if (reply.raw.writableEnded) return reply;
    const appErr = toAppError(err);
    if (observers && (appErr.cause as { code?: unknown } | undefined)?.code === '57014') observers.metrics.dbStatementTimeouts.inc();
    logError(req, reply, appErr, err, state.closing, config.devMode);
    return sendError(reply, appErr);
  });

  app.setNotFoundHandler((_req, reply) => sendError(reply, ERRORS.notFound()));

  if (observers) observeRequests(app, log, config, observers);

  return app;
}

/**
 * Each answered request: one info line (request id, method, route, status, duration, role,
 * user id; never a credential, and no query string), one entry of the request ring, the
 * HTTP metrics, and the end of its trace.
 */
function observeRequests(app: FastifyInstance, log: Logger, config: RuntimeConfig, o: RequestObservers): void {
  const debug = config.logLevel === 'debug' || config.logLevel === 'trace';
  const { trace } = o;
  if (trace) app.addHook('onRequest', (req, _reply, next) => {
    trace.start(req);
    next();
  });
  app.addHook('onResponse', (req, reply, next) => {
    const route = req.routeOptions.url ?? null;
    const status = reply.statusCode;
    const ms = reply.elapsedTime;
    const raw = req.raw;
    const url = raw.url ?? '';
    const q = url.indexOf('?');
    const entry = {
      id: req.id,
      time: new Date().toISOString(),
      method: req.method,
      route,
      path: q < 0 ? url : url.slice(0, q),
      status,
      duration_ms: Math.round(ms * 1000) / 1000,
      role: requestRole(raw) ?? null,
      user_id: requestUserId(raw),
    };
    o.requestLog.add(entry);
    o.metrics.request(req.method, route ?? '(unmatched)', status, ms / 1000);
    trace?.end(req, status, route ?? '(unmatched)');
    if (debug) log.info({ request_id: entry.id, method: entry.method, route, path: entry.path, status, duration_ms: entry.duration_ms, role: entry.role, user_id: entry.user_id }, 'request');
    else log.info({ request_id: entry.id, method: entry.method, route, status, duration_ms: entry.duration_ms, role: entry.role, user_id: entry.user_id }, 'request');
    next();
  });
}

/** A page served by the API itself (same scheme-less host): no CORS needed, nothing to log. */
function sameOrigin(origin: string, host: string | undefined): boolean {
  return host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
}

/** The privilege a REST method needs on a table. */
const PRIVILEGE: Record<string, string> = { GET: 'select', HEAD: 'select', POST: 'insert', PATCH: 'update', PUT: 'update', DELETE: 'delete' };

/**
 * For the log line of a refused request (never the body, which keeps the interface's
 * message): which table or function, which role, and the statement that would allow it.
 */
export function refusalHint(req: FastifyRequest, appErr: AppError): Record<string, string> {
  const cause = appErr.cause as { code?: unknown; message?: unknown; table_name?: unknown } | undefined;
  if (!cause || cause.code !== '42501' || typeof cause.message !== 'string') return {};
  const role = requestRole(req.raw) ?? 'the calling role';
  const m = /^permission denied for (table|view|materialized view|function|procedure|sequence|schema) (.+)$/.exec(cause.message);
  if (m) {
    const [, kind, name] = m;
    const qualified = kind === 'schema' || name.includes('.') ? name : `public.${name}`;
    if (kind === 'function' || kind === 'procedure') return { function: qualified, role, fix: `grant execute on function ${qualified} to ${role};` };
    if (kind === 'sequence') return { sequence: qualified, role, fix: `grant usage on sequence ${qualified} to ${role};` };
    if (kind === 'schema') return { schema: name, role, fix: `grant usage on schema ${name} to ${role};` };
    const rpc = (req.routeOptions.url ?? '').includes('/rpc/');
    const privilege = rpc ? 'select' : (PRIVILEGE[req.method] ?? 'select');
    return { table: qualified, role, fix: `grant ${privilege} on ${qualified} to ${role};` };
  }
  const rls = /^new row violates row-level security policy (?:for|\(USING expression\) for) table "(.+)"$/.exec(cause.message);
  if (rls) {
    const table = `public.${rls[1]}`;
    const command = req.method === 'POST' ? 'insert' : 'update';
    return {
      table,
      role,
      fix: `a row-level security policy must allow it: create policy … on ${table} for ${command} to ${role} with check (…);`,
    };
  }
  return { role };
}

/**
 * One line per error. Client errors (4xx) at info, 503 at warn, without a stack: a client
 * cannot flood the log with traces. A database error (raised exception, lost connection)
 * is logged with its SQLSTATE and message but no driver stack; only errors of plinth's own
 * code carry a stack. The URL is not logged (it may be 16 KB of anything): the route is.
 * In development mode a 4xx line also says why, in words (`reason`, src/core/error-reason.ts).
 */
function logError(req: FastifyRequest, reply: FastifyReply, appErr: AppError, err: unknown, closing: boolean, devMode: boolean): void {
  const route = req.routeOptions.url;
  const base = { status: appErr.status, method: req.method, route, ...appErr.internal };
  if (appErr.status < 500) {
    // In development mode, the reason in words (src/core/error-reason.ts).
    req.log.info({ ...base, ...refusalHint(req, appErr), ...(devMode ? reasonOf(appErr, err) : {}) }, appErr.publicMessage);
    return;
  }
  const cause = (appErr.cause ?? err) as { code?: unknown; message?: unknown } | null;
  const sqlstate = cause && typeof cause === 'object' && typeof cause.code === 'string' ? cause.code : undefined;
  if (appErr.status === 503 || (closing && reply.raw.destroyed)) {
    req.log.warn({ ...base, code: sqlstate }, appErr.publicMessage);
  } else if (sqlstate !== undefined && /^[0-9A-Z]{5}$/.test(sqlstate)) {
    req.log.error({ ...base, code: sqlstate, db_message: typeof cause!.message === 'string' ? cause!.message : '' }, appErr.publicMessage);
  } else {
    req.log.error({ ...base, err: cause }, appErr.publicMessage);
  }
}

/** Send JSON text that PostgreSQL already built, without parsing it. */
export function sendJsonText(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(text);
}
