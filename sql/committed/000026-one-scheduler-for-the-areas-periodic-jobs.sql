--! Previous: sha1:223bf2d1bb3f5b1e0dace986aad7e553048a88b1
--! Hash: sha1:6f0039566c7a1eb815983ab8bb945b44e3583a52
--! Message: one scheduler for the areas' periodic jobs

-- Enter migration here
--! Included core/periodic.sql
/*
 * why: the periodic jobs of the areas (auth__purge, webhooks__purge, storage__sweep,
 * plinth__purge) are each one pending graphile-worker job for all instances, scheduled the
 * same way: the task name is the job key, `preserve_run_at` keeps a pending job's time when
 * an instance starts (restarts do not postpone it), three attempts. One function schedules
 * them all, where each area had its own copy (docs/decisions/0020-an-hourly-purge.md).
 */
create schema if not exists plinth_private;

create or replace function plinth_private.schedule_periodic(task text, delay_seconds integer)
  returns void
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job(schedule_periodic.task, '{}'::json,
    run_at => now() + make_interval(secs => schedule_periodic.delay_seconds),
    job_key => schedule_periodic.task, job_key_mode => 'preserve_run_at', max_attempts => 3)
$$;
comment on function plinth_private.schedule_periodic(text, integer) is
  E'Enqueue the periodic job `task` (one for all instances, job key = task) in delay_seconds unless one is pending, keeping a pending job''s time.';
revoke all on function plinth_private.schedule_periodic(text, integer) from public;

-- The areas' own copies, replaced by the function above.
drop function if exists auth.schedule_purge(integer);
drop function if exists webhooks.schedule_purge(integer);
drop function if exists storage_private.schedule_sweep(integer);
drop function if exists plinth_private.schedule_purge(integer);
--! EndIncluded core/periodic.sql
