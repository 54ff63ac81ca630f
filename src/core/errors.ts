/**
 * Errors: one class, one catalogue, one SQLSTATE mapper (docs/api/overview.md).
 *
 * An AppError carries the HTTP status and the public message; `cause` and `internal`
 * go to the log only. Database text is never forwarded to the client.
 */

export class AppError extends Error {
  readonly status: number;
  readonly publicMessage: string;
  readonly internal: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;
  constructor(
    status: number,
    publicMessage: string,
    opts: { cause?: unknown; internal?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(publicMessage, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.status = status;
    this.publicMessage = publicMessage;
    this.internal = opts.internal;
    this.headers = opts.headers;
  }
}

/** The catalogue of messages that more than one area uses. Area-specific ones live beside their routes. */
export const ERRORS = {
  invalidBody: () => new AppError(400, 'invalid request body'),
  bodyTooLarge: () => new AppError(413, 'request body too large'),
  notFound: () => new AppError(404, 'not found'),
  invalidRequest: (cause?: unknown) => new AppError(400, 'invalid request', { cause }),
  /** 400 `invalid request` whose log line says why (`reason`: plinth's words, never a value of the request's). */
  invalidRequestBecause: (reason: string) => new AppError(400, 'invalid request', { internal: { reason } }),
  missingCredentials: () => new AppError(401, 'missing credentials'),
  invalidToken: () => new AppError(401, 'invalid or expired token'),
  serviceRoleRequired: () => new AppError(403, 'service role required'),
  /** GoTrue's name: the session must be verified with its second factor (aal2) first. */
  insufficientAal: () => new AppError(403, 'insufficient_aal'),
  permissionDenied: (cause?: unknown) => new AppError(403, 'permission denied', { cause }),
  databaseUnavailable: (cause?: unknown) => new AppError(503, 'database unavailable', { cause }),
  databaseBusy: (cause?: unknown) => new AppError(503, 'database busy', { cause }),
  shuttingDown: () => new AppError(503, 'service shutting down'),
  internal: (cause?: unknown) => new AppError(500, 'internal error', { cause }),
  internalDatabase: (cause?: unknown) => new AppError(500, 'internal database error', { cause }),
} as const;

interface PgLikeError {
  code?: unknown;
  errno?: unknown;
  message?: unknown;
  constraint_name?: unknown;
}

/** Node / driver codes that mean the database cannot be reached right now. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
]);

/**
 * No connection could be had in time: the instance's budget stayed spent for
 * DB_POOL_TIMEOUT_MS (`DB_BUSY`), or the server (or a pooler in front of it) refused a new
 * connection for want of room (53300 too_many_connections).
 */
/**
 * The `default:` of an exhaustive switch over a status union (`default: return unreachable(r.status)`):
 * the compiler proves it is never reached; at run time a status SQL added and TypeScript does not know is a bug, thrown.
 */
export function unreachable(status: never): never {
  throw new Error(`unexpected status ${String(status)}`);
}

export function isBusyError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as PgLikeError).code;
  return code === 'DB_BUSY' || code === '53300';
}

export function isConnectionError(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const raw = (err as PgLikeError).code;
  const code = typeof raw === 'string' ? raw : '';
  // 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot connect now
  return CONNECTION_CODES.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03';
}

/**
 * SQLSTATE → HTTP, exactly as docs/api/overview.md ("Database errors") gives it. `PTnnn` codes carry their own status and
 * a safe message, but only when `trusted` (the service's own SQL functions, called from
 * the typed wrappers in `src/<area>/db.ts`); anywhere else they are internal errors.
 */
export function pgErrorToAppError(err: unknown, opts: { trusted?: boolean } = {}): AppError {
  if (err instanceof AppError) return err;
  if (isBusyError(err)) return ERRORS.databaseBusy(err);
  if (isConnectionError(err)) return ERRORS.databaseUnavailable(err);
  const e = (typeof err === 'object' && err !== null ? err : {}) as PgLikeError;
  const code = typeof e.code === 'string' ? e.code : '';
  const internal = { code, constraint_name: e.constraint_name };
  if (opts.trusted && /^PT\d{3}$/.test(code)) {
    const status = Number(code.slice(2));
    if (status >= 400 && status < 600) {
      return new AppError(status, typeof e.message === 'string' ? e.message : 'invalid request', { cause: err, internal });
    }
  }
  if (code === '23505') return new AppError(409, 'duplicate value violates unique constraint', { cause: err, internal });
  if (code === '42501') return new AppError(403, 'permission denied', { cause: err, internal });
  if (code.startsWith('42') || code.startsWith('22') || code.startsWith('23')) {
    return new AppError(400, 'invalid request', { cause: err, internal });
  }
  return new AppError(500, 'internal database error', { cause: err, internal });
}
