/**
 * The HTTP shell: fastify with one JSON parser, one error handler, one not-found handler
 * and CORS (contract §8, §10). Every error leaves as `{"error": "<message>"}`.
 */
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyError, type FastifyBaseLogger } from 'fastify';
import type { RuntimeConfig } from './config.ts';
import type { Logger } from './log.ts';
import { AppError, ERRORS, isConnectionError, pgErrorToAppError } from './errors.ts';

const CORS_METHODS = 'GET, POST, PATCH, DELETE, OPTIONS';
const CORS_HEADERS = 'authorization, apikey, content-type, prefer, range, x-upsert, x-client-info';

/** The client address: the socket's, or the left-most X-Forwarded-For entry with TRUST_PROXY=true. */
export function clientIp(req: FastifyRequest, trustProxy: boolean): string {
  if (trustProxy) {
    const xff = req.headers['x-forwarded-for'];
    const first = (Array.isArray(xff) ? xff[0] : xff)?.split(',')[0]?.trim();
    if (first) return first;
  }
  return req.socket.remoteAddress ?? 'unknown';
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
    }
    if (typeof e.statusCode === 'number' && e.statusCode === 413) return ERRORS.bodyTooLarge();
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return pgErrorToAppError(err);
    if (isConnectionError(err)) return ERRORS.databaseUnavailable(err);
  }
  return ERRORS.internal(err);
}

export function sendError(reply: FastifyReply, err: AppError): FastifyReply {
  if (err.headers) reply.headers(err.headers);
  return reply.code(err.status).type('application/json; charset=utf-8').send(JSON.stringify({ error: err.publicMessage }));
}

export function buildHttp(config: RuntimeConfig, log: Logger): FastifyInstance {
  const app: FastifyInstance = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    // Per-request log lines only at debug and trace: at info they cost a measurable share of throughput.
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    bodyLimit: config.maxBodyBytes,
    trustProxy: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 1000 },
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: true, allErrors: false } },
  });

  // JSON bodies: an empty body is "no body" (logout and anonymous accept one); anything
  // that does not parse is 400 `invalid request body`.
  app.removeContentTypeParser(['application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(ERRORS.invalidBody(), undefined);
    }
  });

  // CORS (contract §10)
  const allowed = new Set([...config.allowedOrigins, new URL(config.siteUrl).origin]);
  app.addHook('onRequest', async (req, reply) => {
    const origin = req.headers.origin;
    if (origin !== undefined && (config.allowPermissiveCors || allowed.has(origin))) {
      reply.header('Access-Control-Allow-Origin', origin);
      reply.header('Vary', 'Origin');
      reply.header('Access-Control-Expose-Headers', 'Content-Range');
    }
    if (req.method === 'OPTIONS') {
      reply.header('Access-Control-Allow-Methods', CORS_METHODS);
      reply.header('Access-Control-Allow-Headers', CORS_HEADERS);
      reply.header('Access-Control-Max-Age', '600');
      return reply.code(204).send();
    }
  });

  app.setErrorHandler((err, req, reply) => {
    const appErr = toAppError(err);
    if (appErr.status >= 500) {
      req.log.error({ err: appErr.cause ?? err, ...appErr.internal, url: req.url, method: req.method }, appErr.publicMessage);
    } else if (appErr.internal || appErr.cause) {
      req.log.debug({ err: appErr.cause, ...appErr.internal }, appErr.publicMessage);
    }
    return sendError(reply, appErr);
  });

  app.setNotFoundHandler((_req, reply) => sendError(reply, ERRORS.notFound()));

  return app;
}

/** Send JSON text that PostgreSQL already built, without parsing it. */
export function sendJsonText(reply: FastifyReply, status: number, text: string): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send(text);
}
