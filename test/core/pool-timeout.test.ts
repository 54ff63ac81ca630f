/**
 * No request waits behind another for longer than DB_POOL_TIMEOUT_MS: a request never joins a
 * request connection held by a slow statement (pipelined behind it, it would wait for that
 * statement however long it ran). With DB_POOL_SIZE=1 and a 5 s call in flight, a
 * service-role GET is 503 `database busy` (it was 200 once the call ended); with a second
 * connection in the budget, it is served on that one while the call still runs.
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

const SETUP = `
  create table public.quick (id int primary key, body text);
  insert into public.quick values (1, 'one');
  grant select on public.quick to service_role;
  create function public.slow(seconds float8) returns int language sql security invoker as $f$
    select 1 from (select pg_catalog.pg_sleep(seconds)) s
  $f$;
  grant execute on function public.slow(float8) to service_role;
`;

/** Waits (with a deadline) until PostgreSQL runs the slow call. */
async function sleeping(db: TestDatabase): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const [r] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from pg_catalog.pg_stat_activity
       where datname = current_database() and state = 'active' and wait_event = 'PgSleep' and pid <> pg_catalog.pg_backend_pid()`;
    if (r.n > 0) return;
    if (Date.now() > deadline) throw new Error('the slow call never ran');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

t.test('DB_POOL_SIZE=1, a 5 s call in flight: a service-role GET is 503 database busy, not served after the call', async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(SETUP);
  const app = await startApp(t, { db, worker: false, env: { DB_POOL_SIZE: '1', DB_POOL_TIMEOUT_MS: '500' } });
  const service = { token: app.serviceKey, apikey: app.serviceKey };
  t.equal((await app.call('GET', '/rest/v1/quick?id=eq.1', service)).status, 200, 'served while nothing else runs');

  let done = false;
  const slow = app.call('POST', '/rest/v1/rpc/slow', { ...service, body: { seconds: 5 } }).finally(() => (done = true));
  await sleeping(db);
  const busy = await app.call('GET', '/rest/v1/quick?id=eq.1', service);
  t.equal(busy.status, 503, 'not queued behind the running call');
  t.same(busy.body, { error: 'database busy' });
  t.equal(done, false, 'answered while the call still runs');
  t.equal((await slow).status, 200, 'the call itself finishes');
  t.equal((await app.call('GET', '/rest/v1/quick?id=eq.1', service)).status, 200, 'served once the connection is free');
});

t.test('DB_POOL_SIZE=2, a 5 s call in flight: a service-role GET is served on the other connection', async (t) => {
  const db = await createTestDatabase(t);
  await db.sql.unsafe(SETUP);
  const app = await startApp(t, { db, worker: false, env: { DB_POOL_SIZE: '2', DB_POOL_TIMEOUT_MS: '500' } });
  const service = { token: app.serviceKey, apikey: app.serviceKey };
  t.equal((await app.call('GET', '/rest/v1/quick?id=eq.1', service)).status, 200);

  let done = false;
  const slow = app.call('POST', '/rest/v1/rpc/slow', { ...service, body: { seconds: 5 } }).finally(() => (done = true));
  await sleeping(db);
  const got = await app.call('GET', '/rest/v1/quick?id=eq.1', service);
  t.equal(got.status, 200, 'served');
  t.same(got.body, [{ id: 1, body: 'one' }]);
  t.equal(done, false, 'while the call still runs');
  t.equal((await slow).status, 200);
});
