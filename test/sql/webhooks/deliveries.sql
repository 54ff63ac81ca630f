-- The delivery log: begin_attempts (ok, gone, done), record_attempts (delivered, retry due
-- after the schedule's delay in the outbox, failed after the last attempt keeping the body,
-- duplicate, gone; a batch in order), requeue, redeliver (every status), list_deliveries, the view,
-- and the 7-day purge.
begin;
select plan(36);

create table public.wh_d (id int primary key);
select is((select status from webhooks.create_hook('http://x.test/d', null, 'wh_d', 'k')), 'ok', 'a webhook');
create temp table h as select id from webhooks_private.hooks;
-- One attempt of the batch a job carries (outbox.sql), with its outcome (deliveries.sql).
create function pg_temp.item(d uuid, n int, code int, err text, w uuid default null, c timestamptz default now()) returns jsonb language sql as $$
  select jsonb_build_object('w', coalesce(w, (select id from h)), 'd', d, 'n', n, 'e', 'INSERT', 't', 'wh_d', 'c', c,
    's', code, 'x', err, 'ms', 12, 'at', now(), 'b', '{"x":1}', 'r', 'req-1')
$$;
create function pg_temp.rec(VARIADIC items jsonb[]) returns text[] language sql as $$
  select webhooks_private.record_attempts(to_jsonb(items), '{1000,4000}')
$$;
create function pg_temp.begin(VARIADIC items jsonb[]) returns text[] language sql as $$
  select array_agg(b.status || ':' || coalesce(b.url, '-') || ':' || coalesce(b.secret, '-'))
    from webhooks_private.begin_attempts(to_jsonb(items)) b
$$;
-- The outbox rows of a delivery, and the clock around a record_attempts call.
create function pg_temp.outbox(d uuid) returns setof webhooks_private.outbox language sql as $$
  select * from webhooks_private.outbox o where o.delivery_id = d order by o.id
$$;
create temp table clock (t0 timestamptz, t1 timestamptz, r text[]);
create function pg_temp.timed(VARIADIC items jsonb[]) returns text[] language plpgsql as $$
declare v text[];
begin
  delete from clock;
  insert into clock (t0) values (clock_timestamp());
  v := webhooks_private.record_attempts(to_jsonb(items), '{1000,4000}');
  update clock set t1 = clock_timestamp(), r = v;
  return v;
end
$$;

select is(pg_temp.begin(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 1, null, null),
                        pg_temp.item('00000000-0000-4000-8000-0000000000d1', 1, null, null, '00000000-0000-4000-8000-000000000000')),
  '{ok:http://x.test/d:k,gone:-:-}', 'begin_attempts in order: an attempt due (with url and secret), an unknown webhook gone');

select is(pg_temp.timed(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 1, 500, null)), '{retry}', 'a 500: retry');
select is((select row(o.hooks, o.attempt, o.event, o.table_name, o.body, o.request_id)::text from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1') o),
  row(array[(select id from h)], 2, 'INSERT', 'wh_d', '{"x":1}', 'req-1')::text, 'the second attempt waits in the outbox, with the body and the request id');
select ok((select o.due_at between c.t0 + interval '1 second' and c.t1 + interval '1 second' from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1') o, clock c),
  'due one second (the schedule''s first delay) after the attempt was recorded');
select is((select row(state, body)::text from webhooks_private.deliveries where id = '00000000-0000-4000-8000-0000000000d1'), row('pending', null::text)::text,
  'the delivery is pending, without a body');
select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 1, 500, null)), '{duplicate}', 'the same attempt again: duplicate');
select is((select count(*)::int from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1')), 1, 'a duplicate queues no further attempt');
select is(pg_temp.begin(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 1, null, null), pg_temp.item('00000000-0000-4000-8000-0000000000d1', 2, null, null)),
  '{done:http://x.test/d:k,ok:http://x.test/d:k}', 'a recorded attempt is done, the next one due');
delete from webhooks_private.outbox;

select is(pg_temp.timed(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 2, null, 'ECONNREFUSED')), '{retry}', 'a network error: retry');
select ok((select o.attempt = 3 and o.due_at between c.t0 + interval '4 seconds' and c.t1 + interval '4 seconds' from pg_temp.outbox('00000000-0000-4000-8000-0000000000d1') o, clock c),
  'the third attempt due four seconds later');
delete from webhooks_private.outbox;
select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d1', 3, null, 'timeout after 10000 ms')), '{failed}', 'the last failure: failed');
select is((select row(d.state, p.body)::text from webhooks.deliveries d join webhooks_private.deliveries p using (id) where id = '00000000-0000-4000-8000-0000000000d1'),
  row('failed', '{"x":1}')::text, 'state failed, the body kept for a redelivery');
select is((select count(*)::int from webhooks_private.outbox), 0, 'no attempt after the last');

select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d2', 1, 204, null), pg_temp.item('00000000-0000-4000-8000-0000000000d3', 1, 503, null),
                      pg_temp.item('00000000-0000-4000-8000-0000000000d4', 1, 200, null, '00000000-0000-4000-8000-000000000000')),
  '{delivered,retry,gone}', 'a batch, in order: a 204 delivered, a 503 retry, an unknown webhook gone');
select is((select array_agg(state order by id) from webhooks_private.deliveries where id in ('00000000-0000-4000-8000-0000000000d2', '00000000-0000-4000-8000-0000000000d3', '00000000-0000-4000-8000-0000000000d4')),
  '{delivered,pending}', 'each recorded in its state, nothing for the gone one');
select is(pg_temp.begin(pg_temp.item('00000000-0000-4000-8000-0000000000d2', 2, null, null), pg_temp.item('00000000-0000-4000-8000-0000000000d1', 4, null, null)),
  '{done:http://x.test/d:k,done:http://x.test/d:k}', 'nothing is due after delivery or failure');
delete from webhooks_private.outbox;

select is((select row(status, attempt)::text from webhooks.redeliver('00000000-0000-4000-8000-000000000000', '00000000-0000-4000-8000-0000000000d1', 'req-2')),
  row('webhook_not_found', null::int)::text, 'redeliver: an unknown webhook');
select is((select status from webhooks.redeliver((select id from h), '00000000-0000-4000-8000-0000000000ff', 'req-2')), 'not_found', 'redeliver: an unknown delivery');
select is((select status from webhooks.redeliver((select id from h), '00000000-0000-4000-8000-0000000000d2', 'req-2')), 'not_failed', 'redeliver: a delivered one');
update webhooks_private.hooks set active = false;
select is(pg_temp.begin(pg_temp.item('00000000-0000-4000-8000-0000000000d3', 2, null, null)), '{gone:-:-}',
  'an attempt of a paused webhook is gone, without its url or secret');
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

select webhooks_private.requeue_attempt((select id from h), '00000000-0000-4000-8000-0000000000d5', 2, 'INSERT', 'wh_d', now(), '{"x":2}', 0, 'req-3');
select is((select row(o.hooks, o.attempt, o.body, o.request_id, o.due_at <= clock_timestamp(),
                      exists (select 1 from webhooks_private.attempts a where a.delivery_id = o.delivery_id))::text
             from pg_temp.outbox('00000000-0000-4000-8000-0000000000d5') o),
  row(array[(select id from h)], 2, '{"x":2}', 'req-3', true, false)::text, 'requeue: the same attempt back in the outbox, unrecorded');
delete from webhooks_private.outbox;

-- d9 has the highest id but the oldest change: the list orders by time first, then by id.
select is(pg_temp.rec(pg_temp.item('00000000-0000-4000-8000-0000000000d9', 1, 200, null, null, now() - interval '1 hour')), '{delivered}', 'an older delivery');
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
select is((select count(*)::int from webhooks_private.attempts where delivery_id = '00000000-0000-4000-8000-0000000000d1'), 0, 'with their attempts');
select is((select count(*)::int from webhooks_private.attempts), 3, 'and keeps the others');

select * from finish();
rollback;
