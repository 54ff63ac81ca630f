/**
 * Instances know each other (sql/fixtures/core/instances.sql, src/core/instances.ts): an
 * instance silent for longer than INSTANCE_DEAD_MS is declared dead by a survivor (its
 * locked jobs unlocked, its live instance row gone, one log line), and an instance that
 * starts under the name of a registered one (the same host and port: a restart after
 * kill -9) takes its jobs back at once. A batch of webhook attempts a dead instance was
 * making is taken over by a survivor's drain, and the delivery log marks its attempts
 * `repeat_possible`.
 */
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { captureLog } from '../helpers/log-capture.ts';
import { instanceName } from '../../src/core/instances.ts';
import { createHook, deliveries, startReceiver, waitFor } from '../webhooks/helpers.ts';
import { freePort } from '../helpers/ports.ts';


/** A job locked by the worker pool `pool`, as a killed instance leaves it; its id. */
async function lockedJob(db: TestDatabase, pool: string): Promise<string> {
  const [{ id }] = await db.sql<{ id: string }[]>`
    select (graphile_worker.add_job('plinth_test_never', '{}'::json, run_at => now() + interval '1 hour')).id::text as id`;
  await db.sql`update graphile_worker._private_jobs set locked_by = ${pool}, locked_at = now() where id = ${id}::bigint`;
  return id;
}

async function lockedBy(db: TestDatabase, id: string): Promise<string | null> {
  const [r] = await db.sql<{ locked_by: string | null }[]>`select locked_by from graphile_worker._private_jobs where id = ${id}::bigint`;
  return r.locked_by;
}

async function until(what: string, fn: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t.test('a dead instance is released by a survivor; a restarted one releases its previous run', async (t) => {
  const db = await createTestDatabase(t);
  const { lines, log } = captureLog('info');
  const app = await startApp(t, { db, log, worker: true, env: { INSTANCE_DEAD_MS: '1000' } });
  const [{ n }] = await db.sql<{ n: number }[]>`select count(*)::int as n from plinth_private.instances where id = ${app.service.db.instanceId}::uuid`;
  t.equal(n, 1, 'the instance registered itself');
  await until('its worker pool id in its row', async () => {
    const [r] = await db.sql<{ w: string[] }[]>`select worker_ids as w from plinth_private.instances where id = ${app.service.db.instanceId}::uuid`;
    return (r?.w ?? []).length > 0;
  });

  // A killed instance: its row stops beating; it held a job and had a live row. The job and
  // the live row first: the survivor beats every 200 ms and may declare the ghost dead as
  // soon as its registry row exists.
  const ghost = randomUUID();
  const job = await lockedJob(db, 'pool-ghost');
  await db.sql`insert into live_private.heartbeats (id, seen_at) values (${ghost}::uuid, now())`;
  await db.sql`insert into plinth_private.instances (id, name, worker_ids, seen_at) values (${ghost}::uuid, 'ghost:1', '{pool-ghost}', now() - interval '5 seconds')`;
  const mine = await lockedJob(db, 'pool-alive-elsewhere');
  await until('the survivor unlocks the dead instance\'s job', async () => (await lockedBy(db, job)) === null);
  t.equal(await lockedBy(db, mine), 'pool-alive-elsewhere', 'a job of no dead instance stays locked');
  const [{ rows }] = await db.sql<{ rows: number }[]>`
    select (select count(*) from plinth_private.instances where id = ${ghost}::uuid) + (select count(*) from live_private.heartbeats where id = ${ghost}::uuid) as rows`;
  t.equal(Number(rows), 0, 'its registry row and its live row are gone');
  const line = lines.find((l) => String(l.msg).includes('declared dead'));
  t.ok(line, 'one line logged');
  t.equal(line?.instance, 'ghost:1');
  t.equal(line?.jobs_unlocked, 1);

  await app.service.close();
  const [{ gone }] = await db.sql<{ gone: number }[]>`select count(*)::int as gone from plinth_private.instances where id = ${app.service.db.instanceId}::uuid`;
  t.equal(gone, 0, 'a clean stop leaves the registry');

  // A restart (no survivor to declare it dead): a row under this host and port, recent (not dead by time), with a locked job.
  const port = await freePort();
  const before = randomUUID();
  await db.sql`insert into plinth_private.instances (id, name, worker_ids) values (${before}::uuid, ${instanceName(port)}, '{pool-before}')`;
  const left = await lockedJob(db, 'pool-before');
  const second = captureLog('info');
  await startApp(t, { db, log: second.log, worker: false, env: { PORT: String(port), INSTANCE_DEAD_MS: '600000' } });
  t.equal(await lockedBy(db, left), null, 'the restarted instance unlocked its previous run\'s job at start');
  t.ok(second.lines.some((l) => String(l.msg).includes('did not stop cleanly') && l.jobs_unlocked === 1), 'and said so');

});

t.test('a webhook attempt a dead instance had taken runs again, and the delivery log says it may be a repeat', async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(`create table public.pings (id int primary key); grant all on public.pings to service_role;`);
  const receiver = await startReceiver(t);
  // No worker here, so no drain: the change waits in the outbox.
  const writer = await startApp(t, { db, worker: false });
  await writer.call('POST', '/api/catalog/refresh', { token: writer.serviceKey });
  const hook = await createHook(writer, { url: receiver.url, table_name: 'pings', events: ['INSERT'] });
  const w = await writer.call('POST', '/rest/v1/pings', { token: writer.serviceKey, body: [{ id: 1 }] });
  t.equal(w.status, 201);
  // A killed instance's drain had taken the delivery (and may have sent it) before it died.
  const ghost = randomUUID();
  await db.sql`insert into plinth_private.instances (id, name, seen_at) values (${ghost}::uuid, 'ghost:2', now() - interval '5 seconds')`;
  const [claim] = await db.sql<{ c: { taken: number; batches: unknown[] } }[]>`select webhooks_private.claim_batches(100, ${ghost}::uuid) as c`;
  t.equal(claim.c.batches.length, 1, 'the dead instance holds the delivery in a batch');
  // A survivor with a worker: it declares the ghost dead; its drain takes the batch over.
  const survivor = await startApp(t, { db, worker: true, env: { INSTANCE_DEAD_MS: '1000' } });
  await waitFor('the delivery', () => receiver.received.length > 0, 30_000);
  const log = await waitFor('the attempt in the log', async () => {
    const d = await deliveries(survivor, hook.id);
    return d.length > 0 && d[0].attempts.length > 0 ? d : null;
  });
  t.equal(log[0].state, 'delivered');
  t.equal(log[0].attempts[0].repeat_possible, true, 'the attempt is marked: the receiver may have seen it twice');
  const [{ left }] = await db.sql<{ left: number }[]>`select count(*)::int as left from webhooks_private.batches`;
  t.equal(left, 0, 'the batch ended with its attempt recorded');

  // An ordinary delivery is not marked.
  await writer.call('POST', '/rest/v1/pings', { token: writer.serviceKey, body: [{ id: 2 }] });
  const both = await waitFor('the second delivery in the log', async () => {
    const d = await deliveries(survivor, hook.id);
    return d.length > 1 && d.every((x) => x.attempts.length > 0) ? d : null;
  });
  t.same(both.map((d) => d.attempts[0].repeat_possible).sort(), [false, true], 'a delivery no instance died on: not marked');
  const [view] = await db.sql`select repeat_possible from webhooks.delivery_attempts where repeat_possible`;
  t.ok(view, 'the delivery_attempts view has the column');
});
