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
import { ownUrl } from '../core/http.ts';
import { schedulePeriodic } from '../worker/periodic.ts';
import { registerScheduleRoutes } from './routes.ts';
import { PURGE_EVERY_SECONDS, purgeTask, runTask, tickTask } from './run.ts';

const apps = new WeakMap<Deps, FastifyInstance>();

export const schedulesArea: Area = {
  name: 'schedules',
  async register(app, deps) {
    apps.set(deps, app);
    registerScheduleRoutes(app, deps);
    await schedulePeriodic(deps.db.sql, 'plinth__purge', PURGE_EVERY_SECONDS).catch((err: unknown) =>
      deps.log.warn({ err }, 'schedules: could not schedule the run-log purge; the next start will'),
    );
  },
  tasks(deps): TaskList {
    return {
      plinth__tick: tickTask(deps),
      plinth__run: runTask(deps, () => ownUrl(apps.get(deps)!, deps.config)),
      plinth__purge: purgeTask(deps),
    };
  },
};
