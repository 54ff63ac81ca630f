/**
 * The webhooks area (issue 12; interface §2.3, §3.4, §4.6, §6.1): the registry endpoints
 * and the delivery log (routes.ts), and two worker tasks:
 * - `webhooks__deliver`: one delivery attempt (deliver.ts);
 * - `webhooks__purge`: hourly, deletes log rows older than 7 days (webhooks.purge_log),
 *   one pending job for all instances, re-enqueued by itself (as `auth__purge`).
 * The state lives in SQL (sql/fixtures/webhooks): the trigger enqueues in the transaction
 * of the change, SQL records each attempt and schedules the next.
 */
import type { Task, TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import { purgeLog, schedulePurge } from './db.ts';
import { deliverTask } from './deliver.ts';
import { registerWebhookRoutes } from './routes.ts';

const PURGE_EVERY_SECONDS = 3600;

function purgeTask(deps: Deps): Task {
  return async () => {
    const counts = await purgeLog(deps.db.sql);
    deps.log.info({ purged: counts }, 'webhooks: old delivery log rows purged');
    await schedulePurge(deps.db.sql, PURGE_EVERY_SECONDS);
  };
}

export const webhooksArea: Area = {
  name: 'webhooks',
  async register(app, deps) {
    registerWebhookRoutes(app, deps);
    await schedulePurge(deps.db.sql, PURGE_EVERY_SECONDS).catch((err: unknown) =>
      deps.log.warn({ err }, 'webhooks: could not schedule the purge job; the next start will'),
    );
  },
  tasks(deps): TaskList {
    return { webhooks__deliver: deliverTask(deps), webhooks__purge: purgeTask(deps) };
  },
};
