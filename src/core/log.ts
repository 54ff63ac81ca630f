/**
 * Logging: one pino logger per service instance; fastify uses the same one.
 * Errors are logged with their SQLSTATE `code` and `constraint_name`, never sent to clients.
 */
import { pino } from 'pino';

export type Logger = pino.Logger;

export function createLogger(level: string): Logger {
  return pino({
    level,
    base: undefined,
    redact: {
      paths: ['req.headers.authorization', 'req.headers.apikey', 'req.headers.cookie', '*.password', '*.token', '*.refresh_token'],
      censor: '[redacted]',
    },
  });
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
