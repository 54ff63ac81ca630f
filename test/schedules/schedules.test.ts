/**
 * Schedules and queues over graphile-worker (docs/api/schedules.md), with real instances on
 * one database: backfill of ticks missed while no instance ran; one run per tick with three
 * instances up (a seconds-field schedule: the same machinery as `* * * * *`); a failing SQL
 * target retried and recorded as failed; a queue fed by a trigger (a rolled-back
 * transaction runs nothing); a job key de-duplicates; the service role's HTTP surface.
 */
import t from 'tap';
import { startApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { waitFor } from '../functions/helpers.ts';

const db = await createTestDatabase(t);
await db.sql.unsafe(`
  create table public.ticks (id serial primary key, kind text, payload jsonb, request_id text, role text);
  create function public.record_tick(p jsonb) returns void language sql as $$
    insert into public.ticks (kind, payload, request_id, role)
      values (p->>'kind', p, current_setting('request.id', true), current_user) $$;
  grant insert on public.ticks to service_role; grant usage on sequence public.ticks_id_seq to service_role;
  grant execute on function public.record_tick(jsonb) to service_role;
  create function public.always_fails(p jsonb) returns void language plpgsql as $$ begin raise exception 'no luck %', p->>'n'; end $$;
  grant execute on function public.always_fails(jsonb) to service_role;
  create function public.slow(p jsonb) returns void language sql as $$ select pg_sleep(5) $$;
  grant execute on function public.slow(jsonb) to service_role;
  create table public.orders (id int primary key, total int);
  create function public.tg_orders__enqueue() returns trigger language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
    begin perform plinth.enqueue('orders', jsonb_build_object('kind', 'order', 'id', new.id)); return new; end $$;
  create trigger _100_enqueue after insert on public.orders for each row execute function public.tg_orders__enqueue();
`);

// Declared while no instance runs: the ticks of the next seconds are missed.
await db.sql`select plinth.schedule('backfilled', '* * * * * *', 'sql:public.record_tick', '{"kind":"backfilled"}', '{"backfill":"1 hour"}')`;
await db.sql`select plinth.schedule('not_backfilled', '* * * * * *', 'sql:public.record_tick', '{"kind":"not_backfilled"}')`;
const [{ declared }] = await db.sql<{ declared: Date }[]>`select now() as declared`;
await waitFor(async () => (await db.sql`select 1 from (select now() as n) x where n > ${declared}::timestamptz + interval '3.5 seconds'`).length > 0, 10_000, 100);

const [{ started }] = await db.sql<{ started: Date }[]>`select now() as started`;
const apps: TestApp[] = [await startApp(t, { db })];
apps.push(await startApp(t, { db }), await startApp(t, { db }));
const app = apps[0];

const count = async (kind: string): Promise<number> => (await db.sql<{ n: number }[]>`select count(*)::int as n from public.ticks where kind = ${kind}`)[0].n;
const runs = async (query: string) => (await app.call('GET', `/api/runs?${query}`, { token: app.serviceKey })).body as Array<Record<string, any>>;

t.test('ticks missed while no instance ran: backfilled within options.backfill, else skipped', async (t) => {
  t.ok(await waitFor(async () => (await count('backfilled')) >= 3, 20_000, 100), 'the missed ticks ran');
  const missed = await db.sql<{ n: number; distinct_ticks: number }[]>`
    select count(*)::int as n, count(distinct scheduled_for)::int as distinct_ticks from plinth.runs
     where name = 'backfilled' and scheduled_for < ${started}::timestamptz`;
  t.ok(missed[0].n >= 3, `${missed[0].n} runs for ticks before the start`);
  t.equal(missed[0].distinct_ticks, missed[0].n, 'one run per missed tick');
  const skipped = await db.sql<{ n: number }[]>`
    select count(*)::int as n from plinth.runs where name = 'not_backfilled' and scheduled_for < ${started}::timestamptz`;
  t.ok(skipped[0].n <= 1, 'without backfill only the first late tick (within a minute) ran');
  await db.sql`select plinth.unschedule('backfilled'), plinth.unschedule('not_backfilled')`;
});

t.test('three instances up: one run per tick', async (t) => {
  await db.sql`select plinth.schedule('every_second', '* * * * * *', 'sql:public.record_tick', '{"kind":"every_second"}')`;
  t.ok(await waitFor(async () => (await count('every_second')) >= 4, 20_000, 100), 'four ticks ran');
  t.ok(await db.sql`select plinth.unschedule('every_second')`, 'unscheduled');
  // Runs already queued finish; then count.
  t.ok(await waitFor(async () => (await db.sql`select 1 from graphile_worker.jobs where queue_name = 'plinth:schedule:every_second'`).length === 0, 10_000, 100));
  const [r] = await db.sql<{ n: number; ticks: number; ok: number }[]>`
    select count(*)::int as n, count(distinct scheduled_for)::int as ticks, count(*) filter (where outcome = 'succeeded')::int as ok
      from plinth.runs where name = 'every_second'`;
  t.equal(r.ticks, r.n, 'no tick ran twice');
  t.equal(await count('every_second'), r.ok, 'the target ran once per recorded run');
  const workers = await db.sql<{ n: number }[]>`select count(distinct application_name)::int as n from pg_stat_activity where application_name = 'plinth-worker' and datname = current_database()`;
  t.ok(workers[0].n >= 1, 'the workers were up');
  const [row] = await db.sql<{ request_id: string; role: string }[]>`select request_id, role from public.ticks where kind = 'every_second' limit 1`;
  t.equal(row.role, 'service_role', 'the target ran as service_role');
  const [run] = await db.sql<{ n: number }[]>`select count(*)::int as n from plinth.runs where request_id = ${row.request_id}`;
  t.equal(run.n, 1, 'the request id of the call is the run\'s');
});

t.test('a failing SQL target: retried, then recorded as failed with its error', async (t) => {
  await db.sql`select plinth.queue('flaky', 'sql:public.always_fails', '{"max_attempts": 2, "backoff": 0}')`;
  const r = await app.call('POST', '/api/queues/flaky', { token: app.serviceKey, body: { payload: { n: 7 } } });
  t.equal(r.status, 202);
  t.match(r.body, { job_id: /^\d+$/ });
  t.ok(await waitFor(async () => (await runs('name=flaky&outcome=failed')).length === 1, 20_000, 100), 'failed after the last attempt');
  const all = await runs('name=flaky');
  t.same(all.map((x) => [x.attempt, x.outcome]), [[2, 'failed'], [1, 'retrying']], 'attempt 1 retried, attempt 2 failed');
  t.match(all[0].error, /no luck 7/, 'with the error text');
  t.equal(typeof all[0].duration_ms, 'number');
  t.same((await runs('name=flaky&limit=1&before=' + all[0].id)).map((x) => x.id), [all[1].id], 'paging by before');
});

t.test('a SQL target runs with the statement timeout of options.timeout', async (t) => {
  await db.sql`select plinth.queue('slow', 'sql:public.slow', '{"max_attempts": 1, "timeout": 0.2}')`;
  await db.sql`select plinth.enqueue('slow')`;
  t.ok(await waitFor(async () => (await runs('name=slow')).length === 1, 20_000, 100), 'recorded');
  const [r] = await runs('name=slow');
  t.equal(r.outcome, 'failed');
  t.match(r.error, /statement timeout/);
});

t.test('a queue fed by a trigger: a rolled-back transaction runs nothing', async (t) => {
  await db.sql`select plinth.queue('orders', 'sql:public.record_tick', '{"concurrency": 2}')`;
  await db.sql.begin(async (tx) => {
    await tx`insert into public.orders values (1, 10)`;
    await tx`select 1/0`;
  }).catch(() => {});
  await db.sql`insert into public.orders values (2, 20)`;
  t.ok(await waitFor(async () => (await count('order')) >= 1, 20_000, 100), 'the committed order ran');
  t.ok(await waitFor(async () => (await db.sql`select 1 from graphile_worker.jobs where queue_name like 'plinth:queue:orders:%'`).length === 0, 10_000, 100));
  const rows = await db.sql<{ id: number }[]>`select (payload->>'id')::int as id from public.ticks where kind = 'order'`;
  t.same(rows.map((r) => r.id), [2], 'only the committed one');
});

t.test('a job key de-duplicates pending jobs', async (t) => {
  await db.sql`select plinth.queue('digest', 'sql:public.record_tick')`;
  const a = await app.call('POST', '/api/queues/digest', { token: app.serviceKey, body: { payload: { kind: 'digest', v: 1 }, options: { job_key: 'u1', delay: 1 } } });
  const b = await app.call('POST', '/api/queues/digest', { token: app.serviceKey, body: { payload: { kind: 'digest', v: 2 }, options: { job_key: 'u1', delay: 1 } } });
  t.equal(a.status, 202);
  t.equal(b.body.job_id, a.body.job_id, 'the same job');
  t.ok(await waitFor(async () => (await runs('name=digest&outcome=succeeded')).length === 1, 20_000, 100));
  const rows = await db.sql<{ v: number }[]>`select (payload->>'v')::int as v from public.ticks where kind = 'digest'`;
  t.same(rows.map((r) => r.v), [2], 'one run, with the latest payload');
});

t.test('the HTTP surface: service role only, checked input, upsert, run now, delete', async (t) => {
  t.equal((await app.call('GET', '/api/schedules', { apikey: app.anonKey })).status, 403);
  t.equal((await app.call('GET', '/api/runs')).status, 401);
  const post = (body: unknown) => app.call('POST', '/api/schedules', { token: app.serviceKey, body });
  t.same((await post({ name: 'x', cron: '61 * * * *', target: 'sql:public.record_tick' })).body, { error: 'invalid cron expression' });
  t.same((await post({ name: 'x y', cron: '@daily', target: 'sql:public.record_tick' })).body, { error: 'invalid name' });
  t.same((await post({ name: 'x', cron: '@daily', target: 'public.record_tick' })).body, { error: 'target must be sql:<schema>.<function> or function:<name>' });
  t.same((await post({ name: 'x', cron: '@daily', target: 'sql:public.nope' })).body, { error: 'target function not found' });
  t.same((await post({ name: 'x', cron: '@daily', target: 'sql:public.record_tick', options: { timezone: 'Mars/Olympus' } })).body, { error: 'invalid options' });
  t.same((await post({ name: 'x', cron: '@daily', target: 'sql:public.record_tick', options: { role: 'postgres' } })).body, { error: 'invalid options' });
  const created = await post({ name: 'nightly', cron: '0 3 * * *', target: 'sql:public.record_tick', payload: { kind: 'nightly' }, options: { timezone: 'Europe/Paris' } });
  t.equal(created.status, 201);
  t.match(created.body, { name: 'nightly', cron: '0 3 * * *', options: { timezone: 'Europe/Paris', max_attempts: 3 }, next_run_at: /T0[12]:00:00.000Z$/ });
  const changed = await post({ name: 'nightly', cron: '30 4 * * *', target: 'sql:public.record_tick', payload: { kind: 'nightly' } });
  t.equal(changed.status, 200, 'an upsert');
  t.match(changed.body, { next_run_at: /T04:30:00.000Z$/ });
  const list = await app.call('GET', '/api/schedules', { token: app.serviceKey });
  t.same(list.body.map((s: { name: string }) => s.name), ['nightly']);
  const now = await app.call('POST', '/api/schedules/nightly/run', { token: app.serviceKey });
  t.equal(now.status, 202);
  t.ok(await waitFor(async () => (await count('nightly')) === 1, 20_000, 100), 'run now ran');
  t.same((await app.call('DELETE', '/api/schedules/nightly', { token: app.serviceKey })).body, { message: 'schedule deleted' });
  t.same((await app.call('DELETE', '/api/schedules/nightly', { token: app.serviceKey })).body, { error: 'schedule not found' });
  t.same((await app.call('POST', '/api/schedules/nightly/run', { token: app.serviceKey })).body, { error: 'schedule not found' });
  t.equal((await db.sql`select 1 from graphile_worker.jobs where key = 'plinth:schedule:nightly'`).length, 0, 'its tick job is gone');
  t.same((await app.call('POST', '/api/queues/nope', { token: app.serviceKey, body: {} })).body, { error: 'queue not found' });
  t.same((await app.call('POST', '/api/queues/digest', { token: app.serviceKey, body: { options: { delay: 'soon' } } })).body, { error: 'invalid options' });
  t.same((await app.call('GET', '/api/runs?outcome=meh', { token: app.serviceKey })).body, { error: 'outcome must be succeeded, retrying or failed' });
  t.same((await app.call('GET', '/api/runs?limit=0', { token: app.serviceKey })).body, { error: 'limit must be an integer from 1 to 1000' });
});
