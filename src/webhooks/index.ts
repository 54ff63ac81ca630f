/**
 * The webhooks area (docs/api/webhooks.md): the registry endpoints
 * and the delivery log (routes.ts), and two worker tasks:
 * - `webhooks__deliver`: one delivery attempt (deliver.ts);
 * - `webhooks__purge`: hourly, deletes log rows older than 7 days (webhooks.purge_log),
 *   one pending job for all instances, re-enqueued by itself (as `auth__purge`).
 * The state lives in SQL (sql/fixtures/webhooks): the trigger appends to the outbox in the
 * transaction of the change, every instance drains the outbox into jobs (outbox.ts; it
 * sleeps until a writer wakes it), SQL
 * records each attempt and schedules the next.
 */
import type { TaskList } from 'graphile-worker';
import type { Area, Deps } from '../core/area.ts';
import { periodic } from '../worker/periodic.ts';
import { purgeLog } from './db.ts';
import { deliverTask } from './deliver.ts';
import { OutboxDrain } from './outbox.ts';
import { registerWebhookRoutes } from './routes.ts';

const purge = periodic({
  name: 'webhooks__purge',
  everySeconds: 3600,
  run: purgeLog,
  done: 'webhooks: old delivery log rows purged',
});

/** Per service instance: aborted when its HTTP server closes, the first step of a stop. */
const stopping = new WeakMap<Deps, AbortSignal>();
/** Per service instance: its outbox drain, told by the task when a retry it queued is due. */
const drains = new WeakMap<Deps, OutboxDrain>();

export const webhooksArea: Area = {
  name: 'webhooks',
  async register(app, deps) {
    registerWebhookRoutes(app, deps);
    const stop = new AbortController();
    stopping.set(deps, stop.signal);
    const drain = new OutboxDrain(deps);
    drains.set(deps, drain);
    app.addHook('onClose', async () => {
      // The drain first: once it is no longer recorded awake, the attempts given back below wake the other instances.
      await drain.stop();
      stop.abort();
    });
    drain.start();
    await purge.start(deps);
  },

  tasks(deps): TaskList {
    const signal = stopping.get(deps) ?? new AbortController().signal;
    const noteDue = (ms: number) => drains.get(deps)?.noteDue(ms);
    return { webhooks__deliver: deliverTask(deps, signal, noteDue), webhooks__purge: purge.task(deps) };
  },
};
