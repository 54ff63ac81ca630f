/**
 * The outbox (docs/api/webhooks.md, Deliveries): a watched table's change is appended to
 * webhooks_private.outbox in the writer's transaction, notifying nothing; the instances
 * drain it in batches into jobs (up to 25 attempts of one webhook each) through
 * graphile-worker's add_jobs. Seen here: the row the writer leaves (one per changed row,
 * naming every matching webhook), nothing left by a rolled-back write, a 300-row statement
 * handed over in one or two add_jobs calls (counted on a real LISTEN of `jobs:insert`) and
 * delivered once per webhook; and the due-check of every
 * attempt: a job run again after a crash does not post its attempt twice. And the drain's
 * sleep: idle, it runs (almost) no statement; a writer wakes it with one NOTIFY when no
 * drain is awake, none when one is (docs/decisions/0302-the-outbox-drain-sleeps-until-woken.md,
 * 0305).
 */
import t from 'tap';
import { startApp } from '../helpers/app.ts';
import { parseMetrics, sample } from '../helpers/metrics.ts';
import { createHook, deliveries, pendingDeliveries, startReceiver, waitFor } from './helpers.ts';

t.test('the outbox', async (t) => {
  const app = await startApp(t, { env: { WEBHOOK_RETRY_SCHEDULE: '1h' } });
  const rx = await startReceiver(t);
  const sql = app.db.sql;
  await sql.unsafe(`
    create table public.items (id int primary key, name text);
    create table public.other (id int primary key);`);
  const first = await createHook(app, { url: `${rx.url}/first`, table_name: 'items' });
  const second = await createHook(app, { url: `${rx.url}/second`, table_name: 'items', events: ['INSERT'] });
  const star = await createHook(app, { url: `${rx.url}/star`, events: ['DELETE'] });

  await t.test("the writer's transaction appends one row per changed row, naming the matching webhooks", async (t) => {
    const seen = await sql.begin(async (tx) => {
      await tx`insert into public.items values (1, 'a'), (2, 'b')`;
      await tx`delete from public.items where id = 2`;
      return tx<{ hooks: string[]; event: string; table_name: string; body: string; delivery_id: string | null; attempt: number }[]>`
        select hooks::text[] as hooks, event, table_name, body, delivery_id, attempt from webhooks_private.outbox order by id`;
    });
    t.same(seen.map((r) => [r.event, r.hooks]), [
      ['INSERT', [first.id, second.id]],
      ['INSERT', [first.id, second.id]],
      ['DELETE', [first.id, star.id]],
    ], 'each row names the webhooks it matched, in registration order');
    t.same(JSON.parse(seen[0].body), { event: 'INSERT', table: 'items', record: { id: 1, name: 'a' } }, 'the body is built once, in SQL');
    t.ok(seen.every((r) => r.delivery_id === null && r.attempt === 1 && r.table_name === 'items'));
    await waitFor('six deliveries', () => rx.received.length >= 6);
    await waitFor('the outbox and the queue to drain', async () => (await pendingDeliveries(app)) === 0);
    t.equal(rx.received.length, 6, 'one delivery per (row, webhook), no more');
    t.equal(new Set(rx.received.map((r) => r.headers['x-webhook-id'])).size, 6, 'each with an id of its own');
  });

  await t.test('a rolled-back write leaves nothing in the outbox and sends nothing', async (t) => {
    const before = rx.received.length;
    await sql
      .begin(async (tx) => {
        await tx`insert into public.items values (10, 'rolled back')`;
        const [{ n }] = await tx<{ n: number }[]>`select count(*)::int as n from webhooks_private.outbox`;
        t.equal(n, 1, 'appended inside the transaction');
        throw new Error('roll back');
      })
      .catch(() => {});
    const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from webhooks_private.outbox`;
    t.equal(n, 0, 'gone with the rollback');
    // A committed marker after it: once it is delivered, the rolled-back one would have been too.
    await sql`insert into public.other values (1)`;
    await sql`insert into public.items values (11, 'marker')`;
    await waitFor('the marker', () => rx.on('/first').some((r) => r.body.record?.id === 11));
    await waitFor('the queue to drain', async () => (await pendingDeliveries(app)) === 0);
    t.notOk(rx.received.slice(before).some((r) => r.body.record?.id === 10), 'the rolled-back insert was never delivered');
  });

  await t.test('a 300-row statement is taken by the drain in batches and delivered once per webhook', async (t) => {
    const batches = new Set<string>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const b of await sql<{ id: string; n: number }[]>`select id::text, jsonb_array_length(items) as n from webhooks_private.batches`) {
          batches.add(`${b.id}:${b.n}`);
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const before = rx.received.length;
    await sql`insert into public.items select g, 'bulk' from generate_series(1000, 1299) g`;
    await waitFor('600 deliveries', () => rx.received.length - before >= 600, 60_000);
    await waitFor('the queue to drain', async () => (await pendingDeliveries(app)) === 0, 60_000);
    sampling = false;
    await sampler;
    const bulk = rx.received.slice(before);
    t.equal(bulk.length, 600, 'no duplicate');
    t.equal(new Set(bulk.map((r) => `${r.path} ${r.body.record.id}`)).size, 600, 'every (row, webhook) once');
    t.ok([...batches].every((b) => Number(b.split(':')[1]) <= 100), `batches of at most 100 attempts (${[...batches].join(' ')})`);
    const [{ logged, rows }] = await sql<{ logged: number; rows: number }[]>`
      select coalesce(sum(jsonb_array_length(d.attempts)), 0)::int as logged, count(*)::int as rows from webhooks_private.deliveries d
       where d.webhook_id in (${first.id}::uuid, ${second.id}::uuid)`;
    t.ok(logged >= 600 && rows >= 600, 'every attempt recorded, one log row per delivery');
  });

  await t.test('an attempt already recorded is not made again: jobs of the former task run again post nothing', async (t) => {
    rx.answer = (r) => (r.path === '/second' && r.body.record?.id === 21 ? 500 : 200);
    const before = rx.received.length;
    await sql`insert into public.items values (20, 'delivered'), (21, 'failing')`;
    const got = await waitFor('both first attempts', () => {
      const ours = rx.received.slice(before).filter((r) => r.path === '/second');
      return ours.length >= 2 ? ours : null;
    });
    const ids = got.map((r) => r.headers['x-webhook-id'] as string);
    const log = await waitFor('both attempts recorded', async () => {
      const l = (await deliveries(app, second.id, 10)).filter((d: any) => ids.includes(d.id));
      return l.length === 2 && l.every((d: any) => d.attempts.length === 1) ? l : null;
    });
    const jobs = log.map((d: any) => {
      const r = got.find((x) => x.headers['x-webhook-id'] === d.id)!;
      t.equal(d.state, r.body.record.id === 20 ? 'delivered' : 'pending');
      return { d: d.id, w: second.id, n: 1, e: 'INSERT', t: 'items', c: d.created_at, b: r.raw.toString('utf8'), r: null };
    });
    t.same(log.map((d: any) => d.state).sort(), ['delivered', 'pending'], 'one delivered, one waiting for its retry (an hour away)');
    // The first webhook's two deliveries too (another job, which may come later), before counting.
    await waitFor('the first webhook\'s two', () => rx.received.slice(before).filter((r) => r.path === '/first').length >= 2);
    const sent = rx.received.length;
    // Jobs of the former webhooks__deliver task (left by an upgrade) carrying these attempts: their
    // attempts go back to the outbox, and the drain drops them as already recorded.
    await sql`select graphile_worker.add_job('webhooks__deliver', ${sql.json({ items: jobs })}::json)`;
    for (const job of jobs) await sql`select graphile_worker.add_job('webhooks__deliver', ${sql.json(job)}::json)`;
    await waitFor('the re-run jobs to finish', async () => {
      const [{ n }] = await sql<{ n: number }[]>`select (select count(*) from graphile_worker.jobs where task_identifier = 'webhooks__deliver')
        + (select count(*) from webhooks_private.outbox where due_at <= now()) + (select count(*) from webhooks_private.batches) as n`;
      return Number(n) === 0;
    });
    t.equal(rx.received.length, sent, 'neither attempt was posted again');
    const after = (await deliveries(app, second.id, 10)).filter((d: any) => ids.includes(d.id));
    t.same(after.map((d: any) => d.attempts.length), [1, 1], 'and nothing new was logged');
  });
  await t.test('the drain sleeps until a writer wakes it, and a writer wakes it only when no drain is awake', async (t) => {
    const wakes: string[] = [];
    const listening = await sql.listen('plinth_webhooks', (payload) => wakes.push(payload));
    t.teardown(() => listening.unlisten());
    const polls = async () => sample(parseMetrics((await app.call('GET', '/metrics', { token: app.serviceKey })).body), 'plinth_webhook_outbox_polls_total');
    // What is left of the earlier tests: one retry an hour away, not due.

    // Idle: after the last work its polls thin out to the safety poll (every 5 s). Seen over a
    // window (not a time asserted): with a 20 ms poll this was about 100 statements.
    await new Promise((r) => setTimeout(r, 2500));
    const p0 = await polls();
    await new Promise((r) => setTimeout(r, 2000));
    const idle = (await polls()) - p0;
    t.ok(idle <= 1, `idle for 2 s, the drain polled ${idle} time(s)`);

    // An empty outbox: the writer's commit wakes the drains, once for a statement of three rows.
    wakes.length = 0;
    const before = rx.on('/first').length;
    await sql`insert into public.items select g, 'wake' from generate_series(2000, 2002) g`;
    await waitFor('the wake-up', () => wakes.length >= 1);
    // A generous deadline: on a loaded machine the worker's pick-up and three POSTs took over 10 s once.
    await waitFor('the three deliveries', () => rx.on('/first').length - before >= 3, 30_000);
    // A marker from this session after it: notifications arrive in commit order.
    await sql`select pg_notify('plinth_webhooks', 'marker')`;
    await waitFor('the marker', () => wakes.includes('marker'));
    t.same(wakes, ['', 'marker'], 'one wake-up for the statement');

    // A drain is awake (a row in webhooks_private.drains, as a drain that took rows writes:
    // it will poll again soon): the writer sends no wake-up.
    wakes.length = 0;
    const awake = '00000000-0000-4000-8000-00000000d7a1';
    await sql`insert into webhooks_private.drains (instance_id, awake_until) values (${awake}::uuid, now() + interval '1 hour')`;
    const before2 = rx.on('/first').length;
    await sql`insert into public.items values (2010, 'no wake-up')`;
    await sql`select pg_notify('plinth_webhooks', 'marker')`;
    await waitFor('the marker', () => wakes.includes('marker'));
    t.same(wakes, ['marker'], 'no wake-up from a writer that saw a drain awake');
    await sql`delete from webhooks_private.drains where instance_id = ${awake}::uuid`;
    // Delivered all the same: by the drain's safety poll.
    await waitFor('the delivery', () => rx.on('/first').length - before2 >= 1, 20_000);
    t.ok(rx.on('/first').some((r) => r.body.record?.id === 2010), 'the change is delivered without a wake-up');
  });
});
