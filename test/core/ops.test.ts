/**
 * Operations: request ids (kept or replaced, in the log line, in SQL's `request.id`, with the
 * webhook delivery attempt a request caused), the request log line and ring
 * (`GET /api/requests`), `/ready` and its drain, and `/metrics` (parsed, not grepped) on the
 * service's port and on METRICS_PORT.
 */
import t from 'tap';
import { captureLog } from '../helpers/log-capture.ts';
import { startApp } from '../helpers/app.ts';
import { parseMetrics, sample } from '../helpers/metrics.ts';
import { createHook, startReceiver, waitFor } from '../webhooks/helpers.ts';
import { open } from '../live/helpers.ts';

t.test('operations', async (t) => {
  const { lines, log } = captureLog();
  const rx = await startReceiver(t);
  const app = await startApp(t, { log, env: { REQUEST_LOG_SIZE: '5', METRICS_PORT: '0' } });
  await app.db.sql.unsafe(`
    create table public.items (id int primary key, body text);
    grant select, insert on public.items to anon;
    create function public.whoami() returns text language sql as $$ select current_setting('request.id', true) $$;
    grant execute on function public.whoami() to anon;
    create function public.nap() returns void language sql as $$ select pg_sleep(2) $$;
    grant execute on function public.nap() to anon;`).simple();
  await app.call('POST', '/api/catalog/refresh', { token: app.serviceKey });
  const scrape = async () => {
    const r = await app.call('GET', '/metrics', { token: app.serviceKey });
    t.equal(r.status, 200);
    return parseMetrics(r.text);
  };

  await t.test('request ids: kept when well formed, replaced otherwise, seen by SQL', async (t) => {
    const kept = await app.call('POST', '/rest/v1/rpc/whoami', { apikey: app.anonKey, body: {}, headers: { 'x-request-id': 'lb-1234:abc.DEF_-' } });
    t.equal(kept.headers.get('x-request-id'), 'lb-1234:abc.DEF_-', 'an acceptable id is kept');
    t.equal(kept.body, 'lb-1234:abc.DEF_-', "SQL reads it as current_setting('request.id')");
    for (const bad of ['has space', 'x'.repeat(129), 'semi;colon']) {
      const r = await app.call('GET', '/health', { headers: { 'x-request-id': bad } });
      const id = r.headers.get('x-request-id');
      t.ok(id && id !== bad && /^[0-9a-f-]{36}$/.test(id), `replaced: ${bad.slice(0, 12)}`);
    }
    const none = await app.call('GET', '/nope');
    t.match(none.headers.get('x-request-id'), /^[0-9a-f-]{36}$/, 'a 404 carries one too');
  });

  await t.test('one log line per request, and the ring', async (t) => {
    const r = await app.call('GET', '/rest/v1/items?id=eq.1', { apikey: app.anonKey, headers: { 'x-request-id': 'trace-me-1' } });
    t.equal(r.status, 200);
    const mine = lines.filter((l) => l.request_id === 'trace-me-1' && l.msg === 'request');
    t.equal(mine.length, 1, 'one line');
    t.match(mine[0], { level: 30, method: 'GET', route: '/rest/v1/:table', status: 200, role: 'anon', user_id: null });
    t.type(mine[0].duration_ms, 'number');
    t.notOk(JSON.stringify(mine[0]).includes(app.anonKey), 'no credential in it');

    t.equal((await app.call('GET', '/api/requests')).status, 401, 'the ring needs a credential');
    t.equal((await app.call('GET', '/api/requests', { token: app.anonKey })).status, 403, 'the service role');
    const ring = await app.call('GET', '/api/requests?limit=3', { token: app.serviceKey });
    t.equal(ring.status, 200);
    t.equal(ring.body.size, 5);
    t.equal(ring.body.requests.length, 3, 'limit');
    const entry = ring.body.requests.find((e: { id: string }) => e.id === 'trace-me-1');
    t.match(entry, { method: 'GET', route: '/rest/v1/:table', path: '/rest/v1/items', status: 200, role: 'anon', user_id: null });
    for (let i = 0; i < 6; i++) await app.call('GET', '/health');
    const all = await app.call('GET', '/api/requests', { token: app.serviceKey });
    t.equal(all.body.requests.length, 5, 'bounded by REQUEST_LOG_SIZE');
    t.equal(all.body.requests[0].route, '/health', 'newest first');
    t.equal((await app.call('GET', '/api/requests?limit=x', { token: app.serviceKey })).status, 400);
  });

  await t.test('a webhook delivery attempt carries the id of the request that caused it', async (t) => {
    const hook = await createHook(app, { url: `${rx.url}/items`, table_name: 'items' });
    const w = await app.call('POST', '/rest/v1/items', { apikey: app.anonKey, body: { id: 7, body: 'x' }, headers: { 'x-request-id': 'write-77' } });
    t.equal(w.status, 201);
    await waitFor('the delivery', () => rx.on('/items').length >= 1);
    await waitFor('its attempt recorded', async () => (await app.db.sql`select 1 from webhooks.delivery_attempts where request_id = 'write-77'`).length === 1);
    const list = await app.call('GET', `/rest/v1/webhooks/${hook.id}/deliveries`, { token: app.serviceKey });
    t.equal(list.body[0]?.attempts?.[0]?.request_id, 'write-77', 'in the delivery log');
    await waitFor('its log line', () => lines.some((l) => l.msg === 'webhook delivery attempt' && l.request_id === 'write-77'));
    t.pass('and in the delivery attempt’s log line');
  });

  await t.test('/metrics', async (t) => {
    t.equal((await app.call('GET', '/metrics')).status, 401);
    t.equal((await app.call('GET', '/metrics', { token: app.anonKey })).status, 403);
    // A job run to completion (a webhooks__deliver job of an earlier version, with no attempt left in it).
    await app.db.sql`select graphile_worker.add_job('webhooks__deliver', '{"items": []}'::json)`;
    await waitFor('the job', async () => (await app.db.sql`select 1 from graphile_worker.jobs where task_identifier = 'webhooks__deliver'`).length === 0);
    const before = await scrape();
    const key = { method: 'GET', route: '/rest/v1/:table', status: '200' };
    for (let i = 0; i < 3; i++) await app.call('GET', '/rest/v1/items', { apikey: app.anonKey });
    await app.call('GET', '/rest/v1/items?id=eq.1&body=eq.' + 'y'.repeat(10), { apikey: app.anonKey });
    const after = await scrape();
    t.equal(sample(after, 'http_requests_total', key) - sample(before, 'http_requests_total', key), 4, 'requests counted by route pattern');
    t.notOk([...after.get('http_requests_total')!].some((s) => s.labels.route.includes('items')), 'never the raw URL');
    t.ok(sample(after, 'http_request_duration_seconds_count', { method: 'GET', route: '/rest/v1/:table' }) >= 4, 'a histogram');
    t.equal(sample(after, 'plinth_db_up'), 1, 'the database is up');
    // An anon statement in flight holds its lane connection (an idle one the connection budget may close for another pool).
    const nap = app.call('POST', '/rest/v1/rpc/nap', { apikey: app.anonKey, body: {} });
    const busy = await waitFor('an anon lane connection in use', async () => {
      const m = await scrape();
      return sample(m, 'plinth_db_connections', { pool: 'anon', state: 'in_use' }) >= 1 ? m : null;
    });
    const open = sample(busy, 'plinth_db_connections', { pool: 'anon', state: 'open' });
    t.ok(open >= 1 && open >= sample(busy, 'plinth_db_connections', { pool: 'anon', state: 'in_use' }), `lane connections: ${open} open, those in use among them`);
    t.equal((await nap).status, 200);
    t.ok(sample(after, 'plinth_webhook_attempts_total', { outcome: 'success' }) >= 1, 'webhook attempts');
    t.ok(sample(after, 'plinth_jobs_completed_total') >= 1, 'jobs');
    t.ok(sample(after, 'process_resident_memory_bytes') > 0, 'the process');

    const other = await fetch(app.service.metricsUrl! + '/metrics');
    t.equal(other.status, 200, 'METRICS_PORT: without credentials');
    t.ok(parseMetrics(await other.text()).has('http_requests_total'));
  });

  await t.test('/metrics: live sockets, NOTIFY payloads and the delivery time of a delta', async (t) => {
    await app.db.sql.unsafe(`create table public.feed (id int primary key); select live.subscribe('feed_all', 'select id from feed');`);
    const before = await scrape();
    const c = await open(app, '/ws/feed_all', { query: { token: app.anonKey } });
    t.teardown(() => c.close());
    await c.next((m) => m.type === 'subscribed');
    await app.db.sql`insert into public.feed values (1)`;
    t.same(await c.next((m) => m.seq === 1), { query_id: 'feed_all', seq: 1, inserted: [{ id: 1 }], deleted: [] }, 'the delta reached the client');
    const delivered = (m: ReturnType<typeof parseMetrics>) => sample(m, 'plinth_live_delivery_seconds_count') - sample(before, 'plinth_live_delivery_seconds_count');
    const after = await waitFor('the delivery observed', async () => {
      const m = await scrape();
      return delivered(m) >= 1 ? m : null;
    });
    t.equal(delivered(after), 1, 'one delivery observed in plinth_live_delivery_seconds');
    t.ok(sample(after, 'plinth_live_delivery_seconds_bucket', { le: '+Inf' }) >= 1, 'as a histogram');
    t.equal(sample(after, 'plinth_live_sockets') - sample(before, 'plinth_live_sockets'), 1, 'the open socket');
    t.ok(sample(after, 'plinth_live_subscriptions') >= 1, 'its subscription');
    t.ok(sample(after, 'plinth_live_notify_payloads_total') - sample(before, 'plinth_live_notify_payloads_total') >= 1, 'the NOTIFY payload received');
  });

  await t.test('/ready turns 503 when draining', async (t) => {
    const ok = await app.call('GET', '/ready');
    t.same([ok.status, ok.body.status], [200, 'ready']);
    t.same(ok.body.checks, { draining: 'ok', database: 'ok', connections: 'ok', migrations: 'ok' });
    t.equal((await app.call('GET', '/health')).status, 200);
    app.service.drain();
    const draining = await app.call('GET', '/ready');
    t.same([draining.status, draining.body.status, draining.body.reason], [503, 'not ready', 'service shutting down']);
    t.equal((await app.call('GET', '/health')).status, 200, '/health stays liveness');
  });
});
