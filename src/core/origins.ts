/**
 * Which browser origins may call the API and open WebSockets: one rule for both.
 *
 * - `ALLOW_PERMISSIVE_CORS=true`: any origin.
 * - Always: `SITE_URL`'s origin and the origins of `ALLOWED_ORIGINS`.
 * - In development mode (no `JWT_SECRET`): any `http://localhost:*`, `http://127.0.0.1:*`
 *   and `http://[::1]:*`, so an app on another local port works with no setting.
 *
 * (WebSockets also accept the same origin as the API itself: src/live.) A refused origin is
 * logged once per origin with the setting that would allow it.
 */
import type { RuntimeConfig } from './config.ts';
import type { FastifyBaseLogger } from 'fastify';

type OriginConfig = Pick<RuntimeConfig, 'devMode' | 'allowPermissiveCors' | 'allowedOrigins' | 'siteUrl'>;

const LOCAL = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/;

export class Origins {
  readonly #config: OriginConfig;
  readonly #listed: Set<string>;
  readonly #refused = new Set<string>();

  constructor(config: OriginConfig) {
    this.#config = config;
    this.#listed = new Set([new URL(config.siteUrl).origin, ...config.allowedOrigins]);
  }

  allows(origin: string): boolean {
    return this.#config.allowPermissiveCors || this.#listed.has(origin) || (this.#config.devMode && LOCAL.test(origin));
  }

  /** One warn line per refused origin (a browser sends it with every call), naming the fix. */
  refused(origin: string, log: FastifyBaseLogger, what: string): void {
    if (this.#refused.has(origin) || this.#refused.size >= 1000) return;
    this.#refused.add(origin);
    log.warn(
      { origin, allowed: this.describe() },
      `${what} from origin ${origin} refused: add it to ALLOWED_ORIGINS (comma-separated), or set SITE_URL to it`,
    );
  }

  /** For the start banner. */
  describe(): string {
    if (this.#config.allowPermissiveCors) return 'any (ALLOW_PERMISSIVE_CORS=true)';
    const listed = [...this.#listed].join(', ');
    return this.#config.devMode ? `${listed}, and any http://localhost:*, http://127.0.0.1:* (development mode)` : listed;
  }
}

const byConfig = new WeakMap<object, Origins>();

/** The one Origins of a configuration (HTTP and WebSockets share its once-per-origin log). */
export function originsFor(config: OriginConfig): Origins {
  let o = byConfig.get(config);
  if (o === undefined) byConfig.set(config, (o = new Origins(config)));
  return o;
}
