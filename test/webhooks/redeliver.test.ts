/**
 * The operator's way back for a receiver that was down longer than the schedule
 * (docs/api/webhooks.md): WEBHOOK_RETRY_SCHEDULE (validated at start; its delays measured at
 * a real receiver) and POST /rest/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver: a new,
 * logged attempt carrying the redeliver request's id, with every refusal a clear status.
 */
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/core/config.ts';
import { startApp } from '../helpers/app.ts';
import { createHook, deliveries, pendingDeliveries, startReceiver, waitFor } from './helpers.ts';

const EARLY_MS = 50;

t.test('WEBHOOK_RETRY_SCHEDULE is checked at start', async (t) => {
  t.same(parseConfig({}).webhookRetryScheduleMs, [1000, 4000], 'unset: the interface\'s 1 s and 4 s');
  t.same(parseConfig({ WEBHOOK_RETRY_SCHEDULE: '1s,4s,1m,10m,1h' }).webhookRetryScheduleMs, [1000, 4000, 60_000, 600_000, 3_600_000]);
  t.same(parseConfig({ WEBHOOK_RETRY_SCHEDULE: ' 250ms , 2s ' }).webhookRetryScheduleMs, [250, 2000], 'spaces around the delays are fine');
  for (const bad of ['1', '1 s', '1s,,2s', '-1s', '1.5s', '1d', '25h', 'soon', Array(21).fill('1s').join(',')]) {
    let err: unknown = null;
    try {
      parseConfig({ WEBHOOK_RETRY_SCHEDULE: bad });
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof ConfigError && err.variable === 'WEBHOOK_RETRY_SCHEDULE' && /such as 1s,4s,1m,10m,1h/.test(err.message), `refused: ${bad.slice(0, 20)}`);
  }
});

t.test('retries and redelivery', async (t) => {
  const app = await startApp(t, { env: { WEBHOOK_RETRY_SCHEDULE: '200ms,600ms,300ms' } });
  const rx = await startReceiver(t);
  await app.db.sql.unsafe(`create table public.orders (id int primary key); create table public.other (id int primary key);`);
  let down = true;
  rx.answer = (r) => (r.path === '/down' && down ? 503 : 200);
  const hook = await createHook(app, { url: `${rx.url}/down`, table_name: 'orders' });
  const fine = await createHook(app, { url: `${rx.url}/fine`, table_name: 'other' });
  await app.db.sql`insert into public.orders values (1)`;
  await app.db.sql`insert into public.other values (1)`;

  const failed = await waitFor('the failed state', async () => {
    const [d] = await deliveries(app, hook.id);
    return d?.state === 'failed' ? d : null;
  }, 20_000);

  await t.test('the schedule: four attempts after 200, 600 and 300 ms, then failed', async (t) => {
    const got = rx.on('/down');
    t.equal(got.length, 4);
    const gaps = [1, 2, 3].map((i) => got[i].at - got[i - 1].at);
    t.comment(`measured gaps: ${gaps.map((g) => g.toFixed(0)).join(', ')} ms`);
    [200, 600, 300].forEach((want, i) => t.ok(gaps[i] >= want - EARLY_MS, `retry ${i + 1} after at least ${want} ms (${gaps[i].toFixed(0)})`));
    t.same(failed.attempts.map((a: any) => [a.attempt, a.status]), [[1, 503], [2, 503], [3, 503], [4, 503]]);
  });

  const path = (w: string, d: string) => `/rest/v1/webhooks/${w}/deliveries/${d}/redeliver`;
  const svc = { token: app.serviceKey };

  await t.test('refusals: 401, 403, 400, 404, 409', async (t) => {
    const p = path(hook.id, failed.id);
    const none = await app.call('POST', p);
    t.same([none.status, none.body], [401, { error: 'missing credentials' }]);
    const anon = await app.call('POST', p, { token: app.anonKey, apikey: app.anonKey });
    t.same([anon.status, anon.body], [403, { error: 'service role required' }]);
    const badHook = await app.call('POST', path('nope', failed.id), svc);
    t.same([badHook.status, badHook.body], [400, { error: 'invalid webhook id' }]);
    const badDelivery = await app.call('POST', path(hook.id, 'nope'), svc);
    t.same([badDelivery.status, badDelivery.body], [400, { error: 'invalid delivery id' }]);
    const unknownHook = await app.call('POST', path('00000000-0000-4000-8000-000000000000', failed.id), svc);
    t.same([unknownHook.status, unknownHook.body], [404, { error: 'webhook not found' }]);
    const unknown = await app.call('POST', path(hook.id, '00000000-0000-4000-8000-000000000000'), svc);
    t.same([unknown.status, unknown.body], [404, { error: 'delivery not found' }]);
    const otherHook = await app.call('POST', path(fine.id, failed.id), svc);
    t.same([otherHook.status, otherHook.body], [404, { error: 'delivery not found' }], "another webhook's delivery is not found under this one");
    const [delivered] = await waitFor('the other delivery', async () => {
      const l = await deliveries(app, fine.id);
      return l[0]?.state === 'delivered' ? l : null;
    });
    const notFailed = await app.call('POST', path(fine.id, delivered.id), svc);
    t.same([notFailed.status, notFailed.body], [409, { error: 'only a failed delivery can be redelivered' }]);
    t.equal(rx.on('/down').length, 4, 'no refusal sent anything');
  });

  await t.test('a failed delivery redelivered: a new logged attempt with the request id of the redeliver request', async (t) => {
    down = false;
    const r = await app.call('POST', path(hook.id, failed.id), { ...svc, headers: { 'x-request-id': 'redeliver-req-1' } });
    t.same([r.status, r.body], [202, { id: failed.id, state: 'pending', attempt: 5 }]);
    const again = await app.call('POST', path(hook.id, failed.id), svc);
    t.same([again.status, again.body], [409, { error: 'only a failed delivery can be redelivered' }], 'a second redelivery while it is pending');
    const d = await waitFor('delivered', async () => {
      const [x] = await deliveries(app, hook.id);
      return x?.state === 'delivered' ? x : null;
    });
    t.same(d.attempts.map((a: any) => [a.attempt, a.status]), [[1, 503], [2, 503], [3, 503], [4, 503], [5, 200]]);
    t.equal(d.attempts[4].request_id, 'redeliver-req-1');
    const got = rx.on('/down');
    t.equal(got.length, 5);
    t.equal(got[4].headers['x-webhook-id'], failed.id, 'the same X-Webhook-Id');
    t.equal(got[4].raw.toString(), got[0].raw.toString(), 'the same bytes');
    const delivered = await app.call('POST', path(hook.id, failed.id), svc);
    t.equal(delivered.status, 409, 'a delivered delivery is not redelivered');
  });

  await t.test('a redelivery that fails again ends failed, without further retries', async (t) => {
    down = true;
    await app.db.sql`insert into public.orders values (2)`;
    const f = await waitFor('failed', async () => {
      const [x] = await deliveries(app, hook.id);
      return x?.state === 'failed' ? x : null;
    }, 20_000);
    const r = await app.call('POST', path(hook.id, f.id), svc);
    t.equal(r.status, 202);
    const again = await waitFor('failed again', async () => {
      const [x] = await deliveries(app, hook.id);
      return x?.state === 'failed' && x.attempts.length === 5 ? x : null;
    });
    t.same(again.attempts.map((a: any) => a.attempt), [1, 2, 3, 4, 5]);
    await waitFor('the queue to drain', async () => (await pendingDeliveries(app)) === 0);
    t.equal(rx.on('/down').filter((x) => x.headers['x-webhook-id'] === f.id).length, 5, 'one attempt, no retry after it');
  });
});
