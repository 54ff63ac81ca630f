/**
 * Logging: one pino logger per service instance; fastify uses the same one.
 * Errors are logged with their SQLSTATE `code` and `constraint_name`, never sent to clients.
 *
 * Secrets are kept out of the log in three layers:
 * - credential headers and `password` / `token` / `refresh_token` fields are censored;
 * - the request line (LOG_LEVEL=debug or trace) carries its URL with the values of
 *   credential-bearing query parameters (`token`, `apikey`, `code`, `state`, …) replaced;
 * - outside development mode, a backstop: mail objects' `text`, `html`, `body` and `link`
 *   are censored, and any `token=<value>` (and the other names) inside a URL anywhere on a
 *   line, message included, loses its value. In development mode (no JWT_SECRET) the mail
 *   log is how a developer without SMTP reads their links, so the backstop is off there.
 */
import { createRequire } from 'node:module';
import { Logger as WorkerLogger } from 'graphile-worker';
import { pino } from 'pino';

export type Logger = pino.Logger;

export interface LoggerOptions {
  /** Development mode (JWT_SECRET unset): emailed links may be logged. Default false. */
  development?: boolean;
  /** Where lines go (default stdout). */
  destination?: pino.DestinationStream;
  /** LOG_FORMAT: `pretty` writes readable lines through pino-pretty (loaded only then). Default `json`. */
  format?: 'json' | 'pretty';
}

/** pino-pretty, in process and synchronous (so the last lines before an exit are written), loaded only when asked for. */
function prettyStream(): pino.DestinationStream {
  const pretty = createRequire(import.meta.url)('pino-pretty') as (opts: Record<string, unknown>) => pino.DestinationStream;
  return pretty({ sync: true, colorize: process.stdout.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
}

const CENSOR = '[redacted]';

/** Query parameters whose values are credentials or would let someone finish a sign-in. */
const SECRET_PARAMS = new Set(['token', 'token_hash', 'apikey', 'code', 'state', 'access_token', 'refresh_token', 'id_token', 'password', 'secret']);

/** The same names inside a URL in any text (after `?`, `&`, `#` or the `;` of `&amp;`). */
const SECRET_IN_URL = /([?&#;](?:token|token_hash|apikey|code|state|access_token|refresh_token|id_token|password|secret)=)[^&#;\s"'\\<>]+/gi;

/** A request URL with the values of credential-bearing query parameters replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url.slice(q + 1).split('&');
  let changed = false;
  for (let i = 0; i < parts.length; i++) {
    const eq = parts[i].indexOf('=');
    const raw = eq < 0 ? parts[i] : parts[i].slice(0, eq);
    let name = raw;
    try {
      name = decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      /* undecodable: compared as it is */
    }
    if (SECRET_PARAMS.has(name.toLowerCase())) {
      parts[i] = `${raw}=${CENSOR}`;
      changed = true;
    }
  }
  return changed ? `${url.slice(0, q)}?${parts.join('&')}` : url;
}

/** Any text with the values of `token=` (and the other names) inside URLs replaced. */
export function redactText(text: string): string {
  return text.includes('=') ? text.replace(SECRET_IN_URL, `$1${CENSOR}`) : text;
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

const MAIL_FIELDS = ['text', 'html', 'body', 'link'];

export function createLogger(level: string, opts: LoggerOptions = {}): Logger {
  const backstop = opts.development !== true;
  const paths = [
    'req.headers.authorization',
    'req.headers.apikey',
    'req.headers.cookie',
    'req.headers["sec-websocket-protocol"]',
    '*.password',
    '*.token',
    '*.refresh_token',
    ...(backstop ? ['link', ...['email', 'mail', 'message'].flatMap((o) => MAIL_FIELDS.map((f) => `${o}.${f}`))] : []),
  ];
  const options: pino.LoggerOptions = {
    level,
    base: undefined,
    redact: { paths, censor: CENSOR },
    serializers: {
      // fastify's request serializer, with the URL's secrets removed.
      req: (req: LoggedRequest) => ({
        method: req.method,
        url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
        host: req.host,
        remoteAddress: req.ip,
        remotePort: req.socket?.remotePort,
      }),
    },
    ...(backstop ? { hooks: { streamWrite: redactText } } : {}),
  };
  const destination = opts.destination ?? (opts.format === 'pretty' ? prettyStream() : undefined);
  return destination ? pino(options, destination) : pino(options);
}

/**
 * A request's logger, made only when the request logs something: pino's `child` (with the
 * redaction of its bindings) costs a measurable share of a fast request, and most requests
 * never log at the default level.
 */
class LazyChild {
  readonly #parent: Logger;
  readonly #bindings: pino.Bindings;
  readonly #opts: pino.ChildLoggerOptions;
  #made: Logger | null = null;

  constructor(parent: Logger, bindings: pino.Bindings, opts: pino.ChildLoggerOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#opts = opts;
  }

  get #log(): Logger {
    return (this.#made ??= this.#parent.child(this.#bindings, this.#opts));
  }

  get level(): string {
    return this.#made?.level ?? this.#opts.level ?? this.#parent.level;
  }

  set level(level: string) {
    this.#log.level = level;
  }

  fatal(...args: Parameters<Logger['fatal']>): void {
    this.#log.fatal(...args);
  }
  error(...args: Parameters<Logger['error']>): void {
    this.#log.error(...args);
  }
  warn(...args: Parameters<Logger['warn']>): void {
    this.#log.warn(...args);
  }
  info(...args: Parameters<Logger['info']>): void {
    this.#log.info(...args);
  }
  debug(...args: Parameters<Logger['debug']>): void {
    this.#log.debug(...args);
  }
  trace(...args: Parameters<Logger['trace']>): void {
    this.#log.trace(...args);
  }
  silent(): void {}
  child(bindings: pino.Bindings, opts?: pino.ChildLoggerOptions): Logger {
    return this.#log.child(bindings, opts);
  }
}

/** fastify's `childLoggerFactory`: the request logger, made on first use. */
export function lazyChildLogger(parent: Logger, bindings: pino.Bindings, opts: pino.ChildLoggerOptions): Logger {
  return new LazyChild(parent, bindings, opts) as unknown as Logger;
}

/**
 * graphile-worker's log lines into ours: its errors and warnings at error and warn, the rest
 * at debug. One warning is a choice made here, not news, and goes to debug: the pool
 * (1 connection) smaller than the concurrency (64 jobs), since a job mostly waits on SMTP,
 * a webhook's endpoint or the service's own pool rather than on the worker's connections
 * (src/worker/index.ts).
 */
export function workerLogger(log: Logger): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const chosen = message.startsWith('WARNING: having maxPoolSize');
    const l = level === 'error' ? 'error' : level === 'warning' && !chosen ? 'warn' : 'debug';
    log[l]({ scope, ...meta }, message);
  });
}
