/**
 * Interface §6.1 over real HTTP, with a real receiver on loopback: the body of each event
 * (record / old_record), the three headers, the signature over the exact bytes, one
 * X-Webhook-Id per delivery, the matching rules (events, table, `*`), nothing for a
 * rolled-back change, and the delivery log.
 */
import t from 'tap';
import { createHmac } from 'node:crypto';
import { startApp } from '../helpers/app.ts';
import { createHook, deliveries, pendingDeliveries, startReceiver, waitFor } from './helpers.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

t.test('deliveries (§6.1)', async (t) => {
  const app = await startApp(t);
  const rx = await startReceiver(t);
  await app.db.sql.unsafe(`
    create table public.orders (id bigint primary key, item text, qty int, meta jsonb, big numeric);
    create table public.notes (id int primary key, body text);
    create table public.quiet (id int primary key);
    grant select, insert, update, delete on public.orders, public.notes, public.quiet to anon;`);

  const signed = await createHook(app, { url: `${rx.url}/signed`, table_name: 'orders', secret: 'shh-s3cret' });
  const plain = await createHook(app, { url: `${rx.url}/plain`, table_name: 'orders' });
  const inserts = await createHook(app, { url: `${rx.url}/inserts`, table_name: 'orders', events: ['INSERT'] });
  const all = await createHook(app, { url: `${rx.url}/all`, events: ['UPDATE', 'DELETE'] });
  t.equal(all.table_name, '*');

  await app.db.sql`insert into public.orders values (9007199254740993, 'ünïcode "quoted"', 2, '{"a": [1, 2]}', 1.50)`;
  await app.db.sql`update public.orders set qty = 3 where id = 9007199254740993`;
  await app.db.sql`delete from public.orders where id = 9007199254740993`;
  await app.db.sql`insert into public.quiet values (1)`;
  await app.db.sql`update public.quiet set id = 2`;

  await waitFor('all deliveries', () => rx.received.length >= 8 && rx.on('/all').length >= 2);
  await waitFor('the queue to drain', async () => (await pendingDeliveries(app)) === 0);

  await t.test('INSERT: record, no old_record', async (t) => {
    const [r] = rx.on('/plain').filter((x) => x.body.event === 'INSERT');
    t.same(Object.keys(r.body), ['event', 'table', 'record']);
    t.equal(r.body.table, 'orders');
    // JSON.parse rounds the id to 2^53; the raw text below keeps its digits.
    t.same(r.body.record, { id: 2 ** 53, item: 'ünïcode "quoted"', qty: 2, meta: { a: [1, 2] }, big: 1.5 });
    // The digits of a bigint beyond 2^53 arrive exactly.
    t.match(r.raw.toString('utf8'), /"id":9007199254740993,/);
  });
  await t.test('UPDATE: record and old_record', async (t) => {
    const [r] = rx.on('/plain').filter((x) => x.body.event === 'UPDATE');
    t.same(Object.keys(r.body), ['event', 'table', 'record', 'old_record']);
    t.equal(r.body.record.qty, 3);
    t.equal(r.body.old_record.qty, 2);
  });
  await t.test('DELETE: old_record, no record', async (t) => {
    const [r] = rx.on('/plain').filter((x) => x.body.event === 'DELETE');
    t.same(Object.keys(r.body), ['event', 'table', 'old_record']);
    t.equal(r.body.old_record.qty, 3);
  });
  await t.test('headers', async (t) => {
    for (const r of rx.received) {
      t.equal(r.method, 'POST');
      t.equal(r.headers['content-type'], 'application/json');
      t.equal(r.headers['user-agent'], 'service-webhooks/1.0');
      t.match(r.headers['x-webhook-id'], UUID);
    }
    const ids = rx.received.map((r) => r.headers['x-webhook-id']);
    t.equal(new Set(ids).size, ids.length, 'one id per delivery');
  });
  await t.test('signature: HMAC-SHA256 of the exact bytes, only with a secret', async (t) => {
    const s = rx.on('/signed');
    t.equal(s.length, 3);
    for (const r of s) {
      const want = 'sha256=' + createHmac('sha256', 'shh-s3cret').update(r.raw).digest('hex');
      t.equal(r.headers['x-webhook-signature'], want);
      const other = 'sha256=' + createHmac('sha256', 'wrong').update(r.raw).digest('hex');
      t.not(r.headers['x-webhook-signature'], other);
    }
    for (const r of rx.received.filter((x) => x.path !== '/signed')) t.equal(r.headers['x-webhook-signature'], undefined);
  });
  await t.test('matching rules', async (t) => {
    t.same(rx.on('/inserts').map((r) => r.body.event), ['INSERT'], 'events filter');
    t.same(rx.on('/all').map((r) => `${r.body.event} ${r.body.table}`).sort(), ['DELETE orders', 'UPDATE orders'],
      '`*` receives the events of watched tables only (quiet has no trigger)');
    const [{ n }] = await app.db.sql`select count(*)::int as n from pg_trigger where tgrelid = 'public.quiet'::regclass and not tgisinternal`;
    t.equal(n, 0, 'an unwatched table has no trigger');
  });
  await t.test('the delivery log', async (t) => {
    const log = await deliveries(app, signed.id);
    t.equal(log.length, 3);
    t.same(log.map((d) => d.event), ['DELETE', 'UPDATE', 'INSERT'], 'newest first');
    const ids = rx.on('/signed').map((r) => r.headers['x-webhook-id']).sort();
    t.same(log.map((d) => d.id).sort(), ids, 'the log id is the X-Webhook-Id');
    for (const d of log) {
      t.equal(d.state, 'delivered');
      t.equal(d.table, 'orders');
      t.equal(d.attempts.length, 1);
      t.equal(d.attempts[0].status, 200);
      t.equal(d.attempts[0].error, null);
      t.ok(Number.isInteger(d.attempts[0].duration_ms) && d.attempts[0].duration_ms >= 0);
      t.match(d.attempts[0].attempted_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    }
    t.equal((await deliveries(app, signed.id, 1)).length, 1, 'limit');
    t.equal((await deliveries(app, plain.id)).length, 3);
    t.equal((await deliveries(app, inserts.id)).length, 1);
    const view = await app.db.sql`select state, jsonb_array_length(attempts) as n from webhooks.deliveries where webhook_id = ${signed.id}`;
    t.equal(view.length, 3, 'the webhooks.deliveries view');
  });

  await t.test('a rolled-back change delivers nothing; a committed one is delivered', async (t) => {
    const before = rx.received.length;
    await app.db.sql
      .begin(async (tx) => {
        await tx`insert into public.notes values (1, 'x')`;
        throw new Error('roll back');
      })
      .catch(() => {});
    await createHook(app, { url: `${rx.url}/notes`, table_name: 'notes' });
    await app.db.sql
      .begin(async (tx) => {
        await tx`insert into public.notes values (2, 'rolled back')`;
        throw new Error('roll back');
      })
      .catch(() => {});
    await app.db.sql`insert into public.notes values (3, 'kept')`;
    await waitFor('the committed note', () => rx.on('/notes').length >= 1);
    await waitFor('the queue to drain', async () => (await pendingDeliveries(app)) === 0);
    t.same(rx.on('/notes').map((r) => r.body.record.id), [3]);
    t.equal(rx.received.length, before + 1);
  });
});
