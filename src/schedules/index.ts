/**
 * The schedules area: schedules, queues and their run log, declared in SQL
 * (sql/fixtures/schedules: plinth.schedule, plinth.queue, plinth.enqueue) and run by
 * graphile-worker on every instance (one run per tick: one job per schedule's tick, by job
 * key). routes.ts is the service role's HTTP surface; run.ts the worker tasks:
 * `plinth__tick`, `plinth__run`, and `plinth__purge` (hourly, JOB_RUN_RETENTION_DAYS).
 */
import type { FastifyInstance } from 'fastify';
import type { TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import { schedulePurge } from './db.ts';
import { registerScheduleRoutes } from './routes.ts';
import { PURGE_EVERY_SECONDS, purgeTask, runTask, tickTask } from './run.ts';

const apps = new WeakMap<Deps, FastifyInstance>();

/** This instance's own URL, for function targets (the worker starts once the service listens). */
function selfUrl(app: FastifyInstance | undefined, deps: Deps): string {
  const a = app?.server.address();
  const port = typeof a === 'object' && a !== null ? a.port : deps.config.port;
  const host = deps.config.host;
  const h = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${h}:${port}`;
}

export const schedulesArea: Area = {
  name: 'schedules',
  async register(app, deps) {
    apps.set(deps, app);
    registerScheduleRoutes(app, deps);
    await schedulePurge(deps.db.sql, PURGE_EVERY_SECONDS).catch((err: unknown) =>
      deps.log.warn({ err }, 'schedules: could not schedule the run-log purge; the next start will'),
    );
  },
  tasks(deps): TaskList {
    return {
      plinth__tick: tickTask(deps),
      plinth__run: runTask(deps, () => selfUrl(apps.get(deps), deps)),
      plinth__purge: purgeTask(deps),
    };
  },
};
