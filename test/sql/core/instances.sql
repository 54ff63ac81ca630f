-- The registry of instances (sql/fixtures/core/instances.sql): one table of that name
-- (live keeps its heartbeats apart), and the one read of graphile-worker's private tables,
-- plinth_private.worker_locked_jobs, which a graphile-worker upgrade must not break silently.
begin;
select plan(11);

select has_table('plinth_private', 'instances', 'the registry of instances');
select has_table('live_private', 'heartbeats', 'live''s own beat has its own name');
select hasnt_table('live_private', 'instances', 'no second table named instances');

do $$
begin
  perform graphile_worker.add_job('tests__locked', '{"n": 1}'::json, job_key => 'tests-a');
  perform graphile_worker.add_job('tests__locked', '{"n": 2}'::json, job_key => 'tests-b');
  perform graphile_worker.add_job('tests__other', '{"n": 3}'::json, job_key => 'tests-c');
end
$$;
-- As a worker of pool-a would take two of them, and a worker of pool-b the third.
update graphile_worker._private_jobs j set locked_by = 'pool-a', locked_at = now() where j.key in ('tests-a', 'tests-c');
update graphile_worker._private_jobs j set locked_by = 'pool-b', locked_at = now() where j.key = 'tests-b';

select results_eq(
  $$select task, payload::text from plinth_private.worker_locked_jobs('{pool-a}') order by payload::text$$,
  $$values ('tests__locked', '{"n": 1}'), ('tests__other', '{"n": 3}')$$,
  'worker_locked_jobs: the task and payload of each job the pools hold');
select is((select count(*)::int from plinth_private.worker_locked_jobs('{pool-a,pool-b}')), 3, 'of every pool named');
select is((select count(*)::int from plinth_private.worker_locked_jobs('{pool-z}')), 0, 'none of a pool that holds none');
select is((select count(*)::int from plinth_private.worker_locked_jobs('{}')), 0, 'none for no pool');

-- A dead instance released: its jobs recorded and unlocked, its live heartbeat gone.
insert into plinth_private.instances (id, name, worker_ids) values ('00000000-0000-4000-8000-00000000d1e0', 'dead:1', '{pool-a}');
insert into live_private.heartbeats (id) values ('00000000-0000-4000-8000-00000000d1e0');
select is(plinth_private.release_instance('00000000-0000-4000-8000-00000000d1e0', '{pool-a}'), 2, 'release_instance: two jobs unlocked');
select is((select count(*)::int from plinth_private.released_jobs where task in ('tests__locked', 'tests__other')), 2, 'recorded as released first');
select is((select count(*)::int from graphile_worker.jobs where locked_by = 'pool-a'), 0, 'no longer locked');
select is((select count(*)::int from live_private.heartbeats where id = '00000000-0000-4000-8000-00000000d1e0'), 0, 'its live heartbeat gone');

select * from finish();
rollback;
