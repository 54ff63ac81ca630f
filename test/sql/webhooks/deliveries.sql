-- The delivery log: finish_batch (delivered, retry due after the schedule's delay in the
-- outbox, failed after the last attempt keeping the body, given back, a batch in order, a
-- batch ended twice, gone), the poll's checks (done, paused), the takeover of a dead
-- instance's batch (repeat_possible), redeliver (every status), list_deliveries, the views,
-- and the 7-day purge.
begin;
select plan(42);

create table public.wh_d (id int primary key);
select is((select status from webhooks.create_hook('http://x.test/d', null, 'wh_d', 'k')), 'ok', 'a webhook');
create temp table h as select id from webhooks_private.hooks;
-- One attempt of a batch (outbox.sql, claim_batches), with its outcome (deliveries.sql).
create function pg_temp.item(d uuid, n int, code int, err text, w uuid default null, c timestamptz default now()) returns jsonb language sql as $$
  select jsonb_build_object('w', coalesce(w, (select id from h)), 'd', d, 'n', n, 'e', 'INSERT', 't', 'wh_d', 'c', c,
    's', code, 'x', err, 'ms', 12, 'at', now(), 'b', '{"x":1}', 'r', 'req-1')
$$;
-- A batch of the items, made by instance a0 (as its poll would), ended with their outcomes
-- (an item whose status and error are both null has none: it is given back).
create function pg_temp.rec(VARIADIC items jsonb[]) returns text[] language plpgsql as $$
declare v_id bigint;
begin
  insert into webhooks_private.batches (instance_id, webhook_id, items)
    values ('00000000-0000-4000-8000-0000000000a0', (items[1]->>'w')::uuid, to_jsonb(items)) returning id into v_id;
  return webhooks_private.finish_batch(v_id, '00000000-0000-4000-8000-0000000000a0',
    (select coalesce(jsonb_agg(i), '[]') from unnest(items) i where i->>'s' is not null or i->>'x' is not null), '{1000,4000}');
end
$$;
-- The outbox rows of a delivery, and the clock around a finish_batch call.
create function pg_temp.outbox(d uuid) returns setof webhooks_private.outbox language sql as $$
  select * from webhooks_private.outbox o where o.delivery_id = d order by o.id
$$;
create temp table clock (t0 timestamptz, t1 timestamptz, r text[]);
create function pg_temp.timed(VARIADIC items jsonb[]) returns text[] language plpgsql as $$
declare v text[];
begin
  delete from clock;
  insert into clock (t0) values (clock_timestamp());
  v := pg_temp.rec(VARIADIC items);
  update clock set t1 = clock_timestamp(), r = v;
  return v;
end
$$;
-- A poll of instance a0: the delivery ids of the attempts it took.
create function pg_temp.claim() returns text[] language sql as $$
  select coalesce(array_agg((i->>'d') || ':' || (i->>'n') order by i->>'d'), '{}')
    from jsonb_array_elements(webhooks_private.claim_batches(100, '00000000-0000-4000-8000-0000000000a0')->'batches') b
    cross join lateral jsonb_array_elements(b->'items') i
$$;

select is(pg_temp.timed(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 1, 500, null)), '{retry}', 'a 500: retry');
select is((select row(o.hooks, o.attempt, o.event, o.table_name, o.body, o.request_id)::text from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1') o),
  row(array[(select id from h)], 2, 'INSERT', 'wh_d', '{"x":1}', 'req-1')::text, 'the second attempt waits in the outbox, with the body and the request id');
select ok((select o.due_at between c.t0 + interval '1 second' and c.t1 + interval '1 second' from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1') o, clock c),
  'due one second (the schedule''s first delay) after the attempt was recorded');
select is((select row(state, body, jsonb_array_length(attempts))::text from webhooks_private.deliveries where id = '00000000-0000-4000-8000-0000000000d1'),
  row('pending', null::text, 1)::text, 'the delivery is pending, without a body, with its attempt');
select is((select count(*)::int from webhooks_private.batches), 0, 'the batch ended with it');
select is(webhooks_private.finish_batch(1, '00000000-0000-4000-8000-0000000000a0', '[]', '{1000,4000}'), '{taken}', 'a batch ended already (or taken over): taken, nothing recorded');
select is((select count(*)::int from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1')), 1, 'and nothing queued');
update webhooks_private.outbox set due_at = now();
insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body)
  values (array[(select id from h)], '00000000-0000-4000-8000-0000000000d1', 1, 'INSERT', 'wh_d', now(), '{"x":1}');
select is(pg_temp.claim(), '{00000000-0000-4000-8000-0000000000d1:2}', 'a poll drops a recorded attempt and takes the next one');
delete from webhooks_private.batches;

select is(pg_temp.timed(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 2, null, 'ECONNREFUSED')), '{retry}', 'a network error: retry');
select ok((select o.attempt = 3 and o.due_at between c.t0 + interval '4 seconds' and c.t1 + interval '4 seconds' from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1') o, clock c),
  'the third attempt due four seconds later');
delete from webhooks_private.outbox;
select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 3, null, 'timeout after 10000 ms')), '{failed}', 'the last failure: failed');
select is((select row(d.state, p.body)::text from webhooks.deliveries d join webhooks_private.deliveries p using (id) where id = '00000000-0000-4000-8000-0000000000d1'),
  row('failed', '{"x":1}')::text, 'state failed, the body kept for a redelivery');
select is((select count(*)::int from webhooks_private.outbox), 0, 'no attempt after the last');

select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d2', 1, 204, null), pg_temp.item('00000000-0000-4000-8000-0000000000d3', 1, 503, null),
                      pg_temp.item('00000000-0000-4000-8000-0000000000d5', 1, null, null)),
  '{delivered,retry,given_back}', 'a batch, in order: a 204 delivered, a 503 retry, one without an outcome given back');
select is((select array_agg(state order by id) from webhooks_private.deliveries where id in ('00000000-0000-4000-8000-0000000000d2', '00000000-0000-4000-8000-0000000000d3', '00000000-0000-4000-8000-0000000000d5')),
  '{delivered,pending}', 'each recorded in its state, nothing for the one given back');
select is((select row(o.attempt, o.body, o.request_id, o.due_at <= clock_timestamp())::text from pg_temp.outbox('00000000-0000-4000-8000-0000000000d5') o),
  row(1, '{"x":1}', 'req-1', true)::text, 'given back: the same attempt in the outbox, due at once, unrecorded');
select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d4', 1, 200, null, '00000000-0000-4000-8000-000000000000')), '{gone}', 'a batch of an unknown webhook: gone');
delete from webhooks_private.outbox;
insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body)
  select array[(select id from h)], d::uuid, n, 'INSERT', 'wh_d', now(), '{}'
    from (values ('00000000-0000-4000-8000-0000000000d2', 2), ('00000000-0000-4000-8000-0000000000d1', 4)) v(d, n);
select is(pg_temp.claim(), '{}', 'nothing is due after delivery or failure: the poll drops them');

select is((select row(status, attempt)::text from webhooks.redeliver('00000000-0000-4000-8000-000000000000', '00000000-0000-4000-8000-0000000000d1', 'req-2')),
  row('webhook_not_found', null::int)::text, 'redeliver: an unknown webhook');
select is((select status from webhooks.redeliver((select id from h), '00000000-0000-4000-8000-0000000000ff', 'req-2')), 'not_found', 'redeliver: an unknown delivery');
select is((select status from webhooks.redeliver((select id from h), '00000000-0000-4000-8000-0000000000d2', 'req-2')), 'not_failed', 'redeliver: a delivered one');
update webhooks_private.hooks set active = false;
insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body)
  values (array[(select id from h)], '00000000-0000-4000-8000-0000000000d3', 2, 'INSERT', 'wh_d', now(), '{}');
select is(pg_temp.claim(), '{}', 'an attempt of a paused webhook is dropped by the poll');
select is((select status from webhooks.redeliver((select id from h), '00000000-0000-4000-8000-0000000000d1', 'req-2')), 'paused', 'redeliver: a paused webhook');
update webhooks_private.hooks set active = true;
select is((select row(status, attempt)::text from webhooks.redeliver((select id from h), '00000000-0000-4000-8000-0000000000d1', 'req-2')),
  row('ok', 4)::text, 'redeliver a failed delivery: its fourth attempt');
select is((select row(o.attempt, o.body, o.request_id, o.due_at <= now(), d.state, d.body)::text
             from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1') o join webhooks_private.deliveries d on d.id = o.delivery_id),
  row(4, '{"x":1}', 'req-2', true, 'pending', null::text)::text, 'the attempt is due at once in the outbox with the body and the request id; the delivery pending');
select is((select status from webhooks.redeliver((select id from h), '00000000-0000-4000-8000-0000000000d1', 'req-2')), 'not_failed', 'redeliver twice: the second finds it pending');
select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 4, 502, null)), '{failed}', 'a failed redelivery: failed again, no retry');
select is((select row(d.state, d.body, (select count(*) from webhooks_private.outbox o where o.attempt > 4))::text from webhooks_private.deliveries d where d.id = '00000000-0000-4000-8000-0000000000d1'),
  row('failed', '{"x":1}', 0)::text, 'state failed with its body, nothing queued');
delete from webhooks_private.outbox;

-- A batch of an instance gone from the registry is taken over, its attempts marked a possible repeat.
insert into plinth_private.instances (id, name) values ('00000000-0000-4000-8000-0000000000a0', 'a0');
insert into webhooks_private.batches (instance_id, webhook_id, items, taken_at)
  values ('00000000-0000-4000-8000-0000000000b0', (select id from h), jsonb_build_array(pg_temp.item('00000000-0000-4000-8000-0000000000d6', 1, null, null)), now() - interval '3 seconds');
select is((select row(b->>'repeat', b->'items'->0->>'d', b->>'url')::text
             from jsonb_array_elements(webhooks_private.claim_batches(100, '00000000-0000-4000-8000-0000000000a0')->'batches') b),
  row('true', '00000000-0000-4000-8000-0000000000d6', 'http://x.test/d')::text, 'a poll takes over the batch of an unregistered instance, as a repeat');
select is((select row(instance_id, repeat)::text from webhooks_private.batches), row('00000000-0000-4000-8000-0000000000a0'::uuid, true)::text, 'the batch is now the poller''s');
select is(webhooks_private.finish_batch((select id from webhooks_private.batches), '00000000-0000-4000-8000-0000000000a0',
  jsonb_build_array(pg_temp.item('00000000-0000-4000-8000-0000000000d6', 1, 200, null)), '{1000,4000}'), '{delivered}', 'its attempt recorded');
select is((select array_agg(repeat_possible) from webhooks.delivery_attempts where delivery_id = '00000000-0000-4000-8000-0000000000d6'), '{t}',
  'and marked repeat_possible (the view delivery_attempts)');
select is(pg_temp.claim(), '{}', 'a registered instance''s batch is never taken over');

-- d9 has the highest id but the oldest change: the list orders by time first, then by id.
select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d9', 1, 200, null, null, now() - interval '1 hour')), '{delivered}', 'an older delivery');
delete from webhooks_private.deliveries where id = '00000000-0000-4000-8000-0000000000d6';
select is(
  (select jsonb_path_query_array(deliveries, '$[*].id') from webhooks.list_deliveries((select id from h), 10)),
  '["00000000-0000-4000-8000-0000000000d3", "00000000-0000-4000-8000-0000000000d2", "00000000-0000-4000-8000-0000000000d1", "00000000-0000-4000-8000-0000000000d9"]'::jsonb,
  'list: newest first (same time: by id desc)');
select is((select jsonb_array_length(deliveries) from webhooks.list_deliveries((select id from h), 2)), 2, 'list: at most lim');
select is(
  (select jsonb_path_query_array(deliveries->2->'attempts', '$[*].status') || jsonb_path_query_array(deliveries->2->'attempts', '$[*].error')
       || jsonb_path_query_array(deliveries->2->'attempts', '$[*].request_id')
     from webhooks.list_deliveries((select id from h), 10)),
  '[500, null, null, 502, null, "ECONNREFUSED", "timeout after 10000 ms", null, "req-1", "req-1", "req-1", "req-1"]'::jsonb, 'each attempt with its status or error, in order');
select is((select status from webhooks.list_deliveries('00000000-0000-4000-8000-000000000000', 10)), 'not_found', 'an unknown webhook');

update webhooks_private.deliveries set created_at = now() - interval '8 days' where id = '00000000-0000-4000-8000-0000000000d1';
select is(webhooks.purge_log(), '{"deliveries": 1}'::jsonb, 'the purge takes deliveries older than 7 days');
select is((select count(*)::int from webhooks.delivery_attempts where delivery_id = '00000000-0000-4000-8000-0000000000d1'), 0, 'with their attempts');
select is((select count(*)::int from webhooks.delivery_attempts), 3, 'and keeps the others');

select * from finish();
rollback;
