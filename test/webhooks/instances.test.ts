/**
 * Several instances (issue 12, item 5): two services on one database, each with its
 * worker. Every attempt is made exactly once (each drain takes its own batches of attempts,
 * SKIP LOCKED); a service stopped in the middle of an attempt loses nothing: its attempt is
 * made again by the other one.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { createHook, deliveries, pendingDeliveries, startReceiver, waitFor } from './helpers.ts';

t.test('two instances: every attempt exactly once', async (t) => {
  const db = await createTestDatabase(t);
  const a = await startApp(t, { db });
  const b = await startApp(t, { db });
  const rx = await startReceiver(t);
  await db.sql`create table public.events (id int primary key, n int)`;
  const hook = await createHook(a, { url: `${rx.url}/two`, table_name: 'events' });
  // Every third row fails its first attempt, so retries are in the mix; answers take a
  // little time, so both workers are busy at once.
  rx.answer = (r) => {
    const id = r.body.record.id as number;
    const seen = rx.received.filter((x) => x.headers['x-webhook-id'] === r.headers['x-webhook-id']).length;
    return id % 3 === 0 && seen === 1 ? 500 : 200;
  };
  rx.delayMs = 20;

  // A drain's poll takes every row waiting, so one burst of rows can go whole to whichever
  // drain polls first. The rows come in small batches instead, a batch every 50 ms, until
  // both drains have taken batches (at least 60 rows, at most 600: a drain that never takes
  // one fails below).
  const BATCH = 12;
  const lockers = new Set<string>();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const rows = await db.sql<{ instance_id: string }[]>`select instance_id from webhooks_private.batches`;
      for (const r of rows) lockers.add(r.instance_id);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  let ROWS = 0;
  while (ROWS < 60 || (lockers.size < 2 && ROWS < 600)) {
    await db.sql`insert into public.events select g, g from generate_series(${ROWS + 1}::int, ${ROWS + BATCH}::int) g`;
    ROWS += BATCH;
    await new Promise((r) => setTimeout(r, 50));
  }
  await waitFor(
    'every delivery ended',
    async () => {
      const log = await deliveries(a, hook.id, 1000);
      return log.length === ROWS && log.every((d) => d.state === 'delivered') && (await pendingDeliveries(a)) === 0;
    },
    60_000,
  );
  sampling = false;
  await sampler;
  t.ok(lockers.size >= 2, `batches were taken by both instances (${lockers.size} seen, ${ROWS} rows)`);

  const log = await deliveries(b, hook.id, 1000);
  const byId = new Map<string, number>();
  for (const r of rx.received) byId.set(r.headers['x-webhook-id'] as string, (byId.get(r.headers['x-webhook-id'] as string) ?? 0) + 1);
  t.equal(byId.size, ROWS, 'one delivery id per row');
  let exact = true;
  for (const d of log) {
    const expected = d.attempts.length;
    if (byId.get(d.id) !== expected) exact = false;
  }
  t.ok(exact, 'each delivery reached the receiver exactly as often as the log has attempts', {
    diag: log.filter((d) => byId.get(d.id) !== d.attempts.length).map((d) => ({ id: d.id, received: byId.get(d.id), attempts: d.attempts })),
  });
  t.equal(rx.received.length, ROWS + ROWS / 3, 'every attempt made once: one per row plus one retry per third row');
  t.same(
    [...new Set(log.map((d) => d.attempts.map((x: any) => x.attempt).join(',')))].sort(),
    ['1', '1,2'],
    'attempts numbered without gaps or repeats',
  );
});

t.test('a service stopped mid-delivery loses nothing', async (t) => {
  const db = await createTestDatabase(t);
  const a = await startApp(t, { db });
  const rx = await startReceiver(t);
  await db.sql`create table public.jobs_t (id int primary key)`;
  const hook = await createHook(a, { url: `${rx.url}/stop`, table_name: 'jobs_t' });
  rx.answer = (_r, i) => (i === 0 ? 'hang' : 200);
  await db.sql`insert into public.jobs_t values (1)`;
  await waitFor('the first attempt in flight', () => rx.received.length === 1);
  // The second instance starts; the first stops while its attempt hangs.
  const b = await startApp(t, { db });
  await a.service.close();
  const got = await waitFor('the retry by the other instance', () => (rx.received.length >= 2 ? rx.received : null), 20_000);
  t.equal(got[1].headers['x-webhook-id'], got[0].headers['x-webhook-id'], 'the same delivery');
  t.equal(got[1].raw.toString(), got[0].raw.toString(), 'the same bytes');
  const [d] = await waitFor('delivered', async () => {
    const log = await deliveries(b, hook.id);
    return log[0]?.state === 'delivered' ? log : null;
  });
  t.same(d.attempts.map((x: any) => [x.attempt, x.status]), [[1, 200]], 'the interrupted attempt was made again, not counted as failed');
  await waitFor('the queue to drain', async () => (await pendingDeliveries(b)) === 0);
  t.equal(rx.received.length, 2);
});
