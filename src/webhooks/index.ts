/**
 * The webhooks area (docs/api/webhooks.md): the registry endpoints and the delivery log
 * (routes.ts), the outbox drain that makes the attempts (outbox.ts, deliver.ts: in every
 * process that runs the job worker; it sleeps until a writer wakes it), and two worker tasks:
 * - `webhooks__purge`: hourly, deletes log rows older than 7 days (webhooks.purge_log),
 *   one pending job for all instances, re-enqueued by itself (as `auth__purge`);
 * - `webhooks__deliver`: only for jobs left by former versions (their attempts go back to
 *   the outbox).
 * The state lives in SQL (sql/fixtures/webhooks): the trigger appends to the outbox in the
 * transaction of the change, SQL hands out the batches, records each attempt and schedules
 * the next.
 */
import type { TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import { periodic } from '../worker/periodic.ts';
import { purgeLog } from './db.ts';
import { legacyDeliverTask } from './deliver.ts';
import { OutboxDrain } from './outbox.ts';
import { registerWebhookRoutes } from './routes.ts';

const purge = periodic({
  name: 'webhooks__purge',
  everySeconds: 3600,
  run: purgeLog,
  done: 'webhooks: old delivery log rows purged',
});

/** Per service instance: its outbox drain, started with the job worker. */
const drains = new WeakMap<Deps, OutboxDrain>();

export const webhooksArea: Area = {
  name: 'webhooks',
  async register(app, deps) {
    registerWebhookRoutes(app, deps);
    app.addHook('onClose', async () => {
      // The attempts in flight are cut short and given back; the other instances' drains are woken for them.
      await drains.get(deps)?.stop();
    });
    await purge.start(deps);
  },

  startJobs(deps) {
    const drain = new OutboxDrain(deps);
    drains.set(deps, drain);
    drain.start();
  },

  tasks(deps): TaskList {
    return { webhooks__deliver: legacyDeliverTask(deps), webhooks__purge: purge.task(deps) };
  },
};
