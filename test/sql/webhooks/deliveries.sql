-- The delivery log: begin_attempt, record_attempt (delivered, retry at +1 s / +4 s, failed,
-- duplicate, gone), requeue, list_deliveries, the view, and the 7-day purge.
begin;
select plan(22);

create table public.wh_d (id int primary key);
select is((select status from webhooks.create_hook('http://x.test/d', null, 'wh_d', 'k')), 'ok', 'a webhook');
create temp table h as select id from webhooks_private.hooks;
create function pg_temp.next_job() returns table (n int, in_ms numeric) language sql as $$
  select (j.payload->>'n')::int, round(extract(epoch from j.run_at - now()) * 1000) from graphile_worker._private_jobs j
    join graphile_worker._private_tasks k on k.id = j.task_id where k.identifier = 'webhooks__deliver' order by j.id desc limit 1
$$;
create function pg_temp.rec(d uuid, n int, code int, err text) returns text language sql as $$
  select webhooks_private.record_attempt((select id from h), d, n, 'INSERT', 'wh_d', now(), code, err, 12, now(), '{"x":1}')
$$;

select is((select status from webhooks_private.begin_attempt((select id from h), '00000000-0000-4000-8000-0000000000d1', 1)), 'ok', 'an attempt due');
select is((select secret from webhooks_private.begin_attempt((select id from h), '00000000-0000-4000-8000-0000000000d1', 1)), 'k', 'with the secret');
select is((select status from webhooks_private.begin_attempt('00000000-0000-4000-8000-000000000000', '00000000-0000-4000-8000-0000000000d1', 1)), 'gone', 'an unknown webhook');

select is(pg_temp.rec('00000000-0000-4000-8000-0000000000d1', 1, 500, null), 'retry', 'a 500: retry');
select is((select n from pg_temp.next_job()), 2, 'the second attempt is enqueued');
select ok((select in_ms from pg_temp.next_job()) between 990 and 1010, 'one second later');
select is(pg_temp.rec('00000000-0000-4000-8000-0000000000d1', 1, 500, null), 'duplicate', 'the same attempt again changes nothing');
select is((select status from webhooks_private.begin_attempt((select id from h), '00000000-0000-4000-8000-0000000000d1', 1)), 'done', 'a recorded attempt is not due');
select is(pg_temp.rec('00000000-0000-4000-8000-0000000000d1', 2, null, 'ECONNREFUSED'), 'retry', 'a network error: retry');
select ok((select in_ms from pg_temp.next_job()) between 3990 and 4010, 'the third attempt four seconds later');
select is(pg_temp.rec('00000000-0000-4000-8000-0000000000d1', 3, null, 'timeout after 10000 ms'), 'failed', 'the third failure: failed');
select is((select state from webhooks.deliveries where id = '00000000-0000-4000-8000-0000000000d1'), 'failed', 'state failed');

select is(pg_temp.rec('00000000-0000-4000-8000-0000000000d2', 1, 204, null), 'delivered', 'a 204: delivered');
select is((select status from webhooks_private.begin_attempt((select id from h), '00000000-0000-4000-8000-0000000000d2', 2)), 'done', 'nothing is due after delivery');

select webhooks_private.requeue_attempt((select id from h), '00000000-0000-4000-8000-0000000000d3', 2, 'INSERT', 'wh_d', now(), '{}', 0);
select is((select n from pg_temp.next_job()), 2, 'requeue: the same attempt again, unrecorded');

select is(
  (select jsonb_path_query_array(deliveries, '$[*].state') from webhooks.list_deliveries((select id from h), 10)),
  '["delivered", "failed"]'::jsonb, 'list: newest first (same time: by id desc)');
select is(
  (select jsonb_path_query_array(deliveries->1->'attempts', '$[*].status') || jsonb_path_query_array(deliveries->1->'attempts', '$[*].error')
     from webhooks.list_deliveries((select id from h), 10)),
  '[500, null, null, null, "ECONNREFUSED", "timeout after 10000 ms"]'::jsonb, 'each attempt with its status or error');
select is((select jsonb_array_length(deliveries->1->'attempts') from webhooks.list_deliveries((select id from h), 10)), 3, 'three attempts');
select is((select status from webhooks.list_deliveries('00000000-0000-4000-8000-000000000000', 10)), 'not_found', 'an unknown webhook');

update webhooks_private.deliveries set created_at = now() - interval '8 days' where id = '00000000-0000-4000-8000-0000000000d1';
select is(webhooks.purge_log(), '{"deliveries": 1}'::jsonb, 'the purge takes deliveries older than 7 days');
select is((select count(*)::int from webhooks_private.attempts), 1, 'with their attempts');

select * from finish();
rollback;
