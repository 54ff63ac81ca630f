/**
 * Retries (interface §6.1, §8): 3 attempts in total, the first at once, the next 1 s after
 * the first failure and 4 s after the second, measured at a real receiver (not slept). A
 * non-2xx, a network error (the receiver is down) and a timeout (WEBHOOK_TIMEOUT_MS) each
 * fail an attempt; every attempt carries the same X-Webhook-Id; the log records each one.
 */
import t from 'tap';
import net from 'node:net';
import { startApp } from '../helpers/app.ts';
import { createHook, deliveries, pendingDeliveries, startReceiver, waitFor } from './helpers.ts';

/** Tolerance on the retry delays: the worker polls every 250 ms on a shared machine. */
const EARLY_MS = 50;
const LATE_MS = 1500;

/** A loopback port nothing listens on. */
async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

t.test('retries', async (t) => {
  const app = await startApp(t, { env: { WEBHOOK_TIMEOUT_MS: '400' } });
  const rx = await startReceiver(t);
  await app.db.sql.unsafe(`
    create table public.a (id int primary key);
    create table public.b (id int primary key);
    create table public.c (id int primary key);
    create table public.d (id int primary key);`);

  await t.test('a receiver answering 500: three attempts at 0 s, +1 s, +4 s, then failed', async (t) => {
    rx.answer = (r) => (r.path === '/fail' ? 500 : 200);
    const hook = await createHook(app, { url: `${rx.url}/fail`, table_name: 'a' });
    await app.db.sql`insert into public.a values (1)`;
    const got = await waitFor('three attempts', () => (rx.on('/fail').length >= 3 ? rx.on('/fail') : null), 20_000);
    const gap1 = got[1].at - got[0].at;
    const gap2 = got[2].at - got[1].at;
    t.comment(`measured gaps: ${gap1.toFixed(0)} ms, ${gap2.toFixed(0)} ms`);
    t.ok(gap1 >= 1000 - EARLY_MS && gap1 <= 1000 + LATE_MS, `second attempt about 1 s after the first (${gap1.toFixed(0)} ms)`);
    t.ok(gap2 >= 4000 - EARLY_MS && gap2 <= 4000 + LATE_MS, `third attempt about 4 s after the second (${gap2.toFixed(0)} ms)`);
    t.equal(new Set(got.map((r) => r.headers['x-webhook-id'])).size, 1, 'the same X-Webhook-Id on every attempt');
    t.same(got.map((r) => r.raw.toString()), [got[0].raw.toString(), got[0].raw.toString(), got[0].raw.toString()], 'the same bytes');
    const [d] = await waitFor('the failed state', async () => {
      const log = await deliveries(app, hook.id);
      return log[0]?.state === 'failed' ? log : null;
    });
    t.equal(d.id, got[0].headers['x-webhook-id']);
    t.same(d.attempts.map((a: any) => [a.attempt, a.status, a.error]), [[1, 500, null], [2, 500, null], [3, 500, null]]);
    await waitFor('the queue to drain', async () => (await pendingDeliveries(app)) === 0);
    t.equal(rx.on('/fail').length, 3, 'no fourth attempt');
  });

  await t.test('failing once, then 2xx: delivered on the second attempt', async (t) => {
    rx.answer = (r) => (r.path === '/flaky' && rx.on('/flaky').length === 1 ? 503 : 200);
    const hook = await createHook(app, { url: `${rx.url}/flaky`, table_name: 'b' });
    await app.db.sql`insert into public.b values (1)`;
    const [d] = await waitFor('delivered', async () => {
      const log = await deliveries(app, hook.id);
      return log[0]?.state === 'delivered' ? log : null;
    });
    t.same(d.attempts.map((a: any) => a.status), [503, 200]);
    t.equal(rx.on('/flaky').length, 2);
  });

  await t.test('the receiver down for every attempt: network errors, failed', async (t) => {
    const port = await deadPort();
    const hook = await createHook(app, { url: `http://127.0.0.1:${port}/down`, table_name: 'c' });
    await app.db.sql`insert into public.c values (1)`;
    const [d] = await waitFor(
      'failed',
      async () => {
        const log = await deliveries(app, hook.id);
        return log[0]?.state === 'failed' ? log : null;
      },
      20_000,
    );
    t.equal(d.attempts.length, 3);
    for (const a of d.attempts) {
      t.equal(a.status, null);
      t.equal(a.error, 'ECONNREFUSED');
    }
    const at = d.attempts.map((a: any) => Date.parse(a.attempted_at));
    t.ok(at[1] - at[0] >= 1000 - EARLY_MS, 'retry after 1 s');
    t.ok(at[2] - at[1] >= 4000 - EARLY_MS, 'retry after 4 s');
  });

  await t.test('a receiver that does not answer: a timeout after WEBHOOK_TIMEOUT_MS', async (t) => {
    rx.answer = (r) => (r.path === '/slow' && rx.on('/slow').length === 1 ? 'hang' : 200);
    const hook = await createHook(app, { url: `${rx.url}/slow`, table_name: 'd' });
    await app.db.sql`insert into public.d values (1)`;
    const [d] = await waitFor('delivered', async () => {
      const log = await deliveries(app, hook.id);
      return log[0]?.state === 'delivered' ? log : null;
    });
    t.equal(d.attempts.length, 2);
    t.same([d.attempts[0].status, d.attempts[0].error], [null, 'timeout after 400 ms']);
    t.ok(d.attempts[0].duration_ms >= 390, `the attempt lasted at least the timeout (${d.attempts[0].duration_ms} ms)`);
    t.equal(d.attempts[1].status, 200);
  });
});
