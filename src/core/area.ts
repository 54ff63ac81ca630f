/**
 * What an API area (auth, rest, storage …) is given and what it gives back. These types
 * live in `src/core` so that the import graph rises from here: areas import core, the
 * service (`src/service.ts`) imports the areas, and nothing imports the service but the
 * entry points.
 */
import type { FastifyInstance } from 'fastify';
import type { TaskList } from 'graphile-worker';
import type { RuntimeConfig } from './config.ts';
import type { Credentials } from './credentials.ts';
import type { Db } from './db.ts';
import type { Logger } from './log.ts';
import type { Metrics } from './metrics.ts';
import type { RequestLog } from './request-log.ts';

/** Where this service instance is in its stop. */
export interface Lifecycle {
  /** true from the stop's first moment (SIGTERM): /ready answers 503. */
  readonly draining: boolean;
  /** Aborted at the shutdown deadline: calls still in flight (edge functions) stop, and their callers get 503. */
  readonly cut: AbortSignal;
}

export interface Deps {
  config: RuntimeConfig;
  db: Db;
  log: Logger;
  credentials: Credentials;
  metrics: Metrics;
  requestLog: RequestLog;
  lifecycle: Lifecycle;
  /** This instance's listeners besides the API's, bound before the API listens (what edge functions must not reach). */
  listeners: Listeners;
}

export interface Listeners {
  /** The METRICS_PORT listener's bound port (null: none). */
  metricsPort: number | null;
}

export interface Area {
  name: string;
  register(app: FastifyInstance, deps: Deps): void | Promise<void>;
  /** graphile-worker tasks, named `<area>__<action>`, bound to this service's deps. */
  tasks?(deps: Deps): TaskList;
  /** Called once the job worker runs in this process (not at all without it): background work that goes with the jobs. */
  startJobs?(deps: Deps): void;
  /** Called on shutdown after the HTTP server stopped accepting. */
  close?(): void | Promise<void>;
}
