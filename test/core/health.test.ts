import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { startProxy } from '../helpers/proxy.ts';

t.test('health is ok with the database up', async (t) => {
  const app = await startApp(t, { worker: false });
  const r = await app.call('GET', '/health');
  t.equal(r.status, 200);
  t.same(r.body, { status: 'ok', pg_connected: true });
});

t.test('health turns 503 when the database goes away and back to 200 when it returns', async (t) => {
  const db = await createTestDatabase(t);
  const target = new URL(db.url);
  const proxy = await startProxy(target.hostname, Number(target.port || 5432));
  t.teardown(() => proxy.close());
  const viaProxy = new URL(db.url);
  viaProxy.port = String(proxy.port);
  const app = await startApp(t, { db, databaseUrl: viaProxy.toString(), worker: true, env: { ENABLE_DEMO_ENDPOINT: 'true' } });

  t.equal((await app.call('GET', '/health')).status, 200, 'up');

  proxy.cut();
  // The proxy resets every connection: health says so rather than waiting for the pool.
  const down = await app.call('GET', '/health');
  t.equal(down.status, 503, 'down');
  t.same(down.body, { status: 'degraded', pg_connected: false });

  // Every endpoint that needs the database answers 503 `database unavailable` meanwhile.
  const rest = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'insert', title: 'x' } });
  t.equal(rest.status, 503);
  t.same(rest.body, { error: 'database unavailable' });

  proxy.restore();
  let status = 0;
  for (let i = 0; i < 40 && status !== 200; i++) {
    status = (await app.call('GET', '/health')).status;
    if (status !== 200) await new Promise((r) => setTimeout(r, 250));
  }
  t.equal(status, 200, 'the same process is healthy again');
  const again = await app.call('POST', '/api/demo', { token: app.serviceKey, body: { action: 'insert', title: 'y' } });
  t.equal(again.status, 200, 'and serves requests again');
}, );
