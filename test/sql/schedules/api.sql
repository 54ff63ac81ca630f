-- The SQL API of schedules and queues: cron parsing and next ticks (ranges, steps, names,
-- macros, seconds, time zones), schedule as an upsert keyed by one tick job, unschedule,
-- queues, enqueue inside a transaction (rolled back: nothing), job keys, attempts, and the rights.
begin;
select plan(31);

create function public.sq_target(p jsonb) returns void language sql as $$ select null::void $$;

select is(plinth_private.cron_next(plinth_private.cron_parse('*/15 9-17 * * mon-fri'), 'UTC', '2026-11-27 17:50:00+00'),
  '2026-11-30 09:00:00+00'::timestamptz, 'steps, ranges, weekday names: Friday evening to Monday 09:00');
select is(plinth_private.cron_next(plinth_private.cron_parse('@daily'), 'Europe/Paris', '2026-11-25 17:50:00+00'),
  '2026-11-25 23:00:00+00'::timestamptz, '@daily in Paris is 23:00 UTC in winter');
select is(plinth_private.cron_next(plinth_private.cron_parse('0 12 1 * 5-7'), 'UTC', '2026-11-25 17:50:00+00'),
  '2026-11-27 12:00:00+00'::timestamptz, 'both day fields restricted: either matches (5-7 ends on Sunday)');
select is(plinth_private.cron_next(plinth_private.cron_parse('*/2 * * * * *'), 'UTC', '2026-11-25 17:50:01.5+00'),
  '2026-11-25 17:50:02+00'::timestamptz, 'a leading seconds field');
select is(plinth_private.cron_next(plinth_private.cron_parse('@weekly'), 'UTC', '2026-11-25 00:00:00+00'),
  '2026-11-29 00:00:00+00'::timestamptz, '@weekly: Sunday midnight');
select is(plinth_private.cron_next(plinth_private.cron_parse('0 0 1 jan *'), 'UTC', '2026-11-25 00:00:00+00'),
  '2027-01-01 00:00:00+00'::timestamptz, 'month names');
select is(plinth_private.cron_next(plinth_private.cron_parse('30 2 * * *'), 'Europe/Paris', '2027-03-27 12:00:00+00'),
  '2027-03-28 01:30:00+00'::timestamptz, 'a local time that a DST change skips runs at the first instant after it');
select ok(plinth_private.cron_parse('61 * * * *') is null and plinth_private.cron_parse('* * *') is null
  and plinth_private.cron_parse('*/0 * * * *') is null and plinth_private.cron_parse('5-1 * * * *') is null, 'invalid expressions');
select is(plinth_private.cron_next(plinth_private.cron_parse('0 0 30 2 *'), 'UTC', now()), null, 'a date that never comes');

select is((plinth_private.upsert_schedule('s1', '0 3 * * *', 'sql:public.sq_target', '{}', '{}')).status, 'ok', 'a schedule');
select is((select count(*)::int from graphile_worker.jobs where key = 'plinth:schedule:s1' and task_identifier = 'plinth__tick'), 1, 'one tick job, by key');
select lives_ok($$select plinth.schedule('s1', '0 4 * * *', 'sql:public.sq_target')$$, 'plinth.schedule again: an upsert');
select is((select count(*)::int from graphile_worker.jobs where key = 'plinth:schedule:s1'), 1, 'still one tick job');
select is((select extract(hour from run_at at time zone 'UTC')::int from graphile_worker.jobs where key = 'plinth:schedule:s1'), 4, 'at the new time');
select throws_ok($$select plinth.schedule('s2', 'nope', 'sql:public.sq_target')$$, 'PT400', 'invalid cron expression', 'a bad cron raises PT400');
select throws_ok($$select plinth.schedule('s2', '@hourly', 'sql:public.missing')$$, 'PT400', 'target function not found', 'a missing target');
select throws_ok($$select plinth.schedule('s2', '@hourly', 'function:x', '{}', '{"overlapp": true}')$$, 'PT400', 'invalid options', 'an unknown option');
select ok(plinth.unschedule('s1') and not plinth.unschedule('s1'), 'unschedule: true, then false');
select is((select count(*)::int from graphile_worker.jobs where key = 'plinth:schedule:s1'), 0, 'its tick job is gone');

select lives_ok($$select plinth.queue('q', 'sql:public.sq_target', '{"max_attempts": 2, "backoff": 0}')$$, 'a queue');
savepoint s;
select null from plinth.enqueue('q', '{"n": 1}');
rollback to savepoint s;
select is((select count(*)::int from graphile_worker.jobs where task_identifier = 'plinth__run'), 0, 'a rolled-back enqueue leaves no job');
select is(plinth.enqueue('q', '{"n": 2}', '{"job_key": "k"}'), plinth.enqueue('q', '{"n": 3}', '{"job_key": "k"}'), 'a job key: one job');

select is(plinth_private.record_run('queue', 'q', 1, 1, 2, null, 'req-1', now(), now(), false, 'e1', '{"k":"queue","n":"q","p":{},"a":1}'),
  'retrying', 'attempt 1 of 2 fails: retrying');
select is((select count(*)::int from graphile_worker.jobs where task_identifier = 'plinth__run'), 2, 'and its next attempt is queued');
select is(plinth_private.record_run('queue', 'q', 2, 2, 2, null, 'req-2', now(), now(), false, 'e2', '{"k":"queue","n":"q","p":{},"a":2}'),
  'failed', 'the last attempt fails: failed');
select is(plinth_private.record_run('queue', 'gone', 3, 1, null, null, 'req-3', now(), now(), false, 'the queue no longer exists', '{}'),
  'failed', 'a removed queue: failed, not retried');

-- A batch: each call in its own subtransaction; the failing one alone rolled back and retried.
create table public.sq_rows (n int, who text);
grant insert on public.sq_rows to service_role;
create function public.sq_batch(p jsonb) returns void language plpgsql as $$
begin
  insert into public.sq_rows values ((p->>'n')::int, current_user);
  if (p->>'n')::int = 2 then raise exception 'two'; end if;
end $$;
grant execute on function public.sq_batch(jsonb) to service_role;
select plinth.queue('qb', 'sql:public.sq_batch', '{"max_attempts": 2}');
select is(plinth_private.run_batch('queue', 'qb', 'sql:public.sq_batch', 'service_role', 2,
  '[{"id": 11, "rid": "b1", "job": {"k":"queue","n":"qb","p":{"n":1},"a":1}},
    {"id": 12, "rid": "b2", "job": {"k":"queue","n":"qb","p":{"n":2},"a":1}},
    {"id": 13, "rid": "b3", "job": {"k":"queue","n":"qb","p":{"n":3},"a":1}}]'),
  '{succeeded,retrying,succeeded}'::text[], 'run_batch: the outcomes in order');
select results_eq($$select n, who from public.sq_rows order by n$$, $$values (1, 'service_role'::text), (3, 'service_role')$$,
  'each call as the role; the failing one left nothing');
select results_eq($$select job_id, outcome, request_id, error from plinth_private.runs where name = 'qb' order by job_id$$,
  $$values (11::bigint, 'succeeded'::text, 'b1'::text, null::text), (12, 'retrying', 'b2', 'two'), (13, 'succeeded', 'b3', null)$$,
  'one run-log row per job, with its request id and error');

update plinth_private.runs set started_at = now() - interval '15 days' where job_id = 1;
select is(plinth_private.purge_runs(14), 1::bigint, 'retention: a run older than the days given goes, the others stay');

set local role anon;
select throws_ok($$select plinth.enqueue('q', '{}')$$, '42501', null, 'anon cannot enqueue');
reset role;

select * from finish();
rollback;
