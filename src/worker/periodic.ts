/**
 * A periodic job of graphile-worker (the hourly purges of auth and webhooks): one pending
 * job for all instances, re-enqueued by itself after each run, its time kept across
 * restarts. The SQL side is `plinth_private.schedule_periodic`, which adds the job with the
 * task's name as its job key and `job_key_mode => 'preserve_run_at'`
 * (docs/decisions/0020-an-hourly-purge.md); this is the TypeScript side the areas share: the
 * task, and the first scheduling at start.
 */
import type { Task } from 'graphile-worker';
import type { Deps } from '../core/area.ts';
import type { Sql } from '../core/db.ts';

export interface PeriodicJob {
  /** The task's name, `<area>__<action>`: what the log lines say. */
  name: string;
  everySeconds: number;
  /** The work of one run; what it returns (counts) is logged. */
  run(sql: Sql, deps: Deps): Promise<unknown>;
  /** The log line of a finished run. */
  done: string;
}

export interface Periodic {
  /** The graphile-worker task: run, log, schedule the next run. */
  task(deps: Deps): Task;
  /** At start: schedule the first run unless one is pending. A failure is logged; the next start tries again. */
  start(deps: Deps): Promise<void>;
}

export function periodic(job: PeriodicJob): Periodic {
  return {
    task(deps) {
      return async () => {
        const counts = await job.run(deps.db.sql, deps);
        deps.log.info({ task: job.name, result: counts }, job.done);
        await schedulePeriodic(deps.db.sql, job.name, job.everySeconds);
      };
    },
    async start(deps) {
      await schedulePeriodic(deps.db.sql, job.name, job.everySeconds)
        .catch((err: unknown) => deps.log.warn({ err, task: job.name }, `${job.name}: could not schedule the job; the next start will`));
    },
  };
}

/** Add the periodic job `task`'s next run `delaySeconds` from now, unless one is pending (its time is kept). */
export async function schedulePeriodic(sql: Sql, task: string, delaySeconds: number): Promise<void> {
  await sql`select plinth_private.schedule_periodic(${task}, ${delaySeconds}::int)`;
}
