--! Previous: sha1:63833a2867e4e833ca3fc95af75fe40575db8083
--! Hash: sha1:6dfc6887ed4195049152321ae80243ca565d88a7
--! Message: schedules: jobs of one SQL target run as one batch

-- Enter migration here
--! Included schedules/batch.sql
/*
 * why: the jobs of one `sql:` queue or schedule that a worker takes together run in one
 * statement and one transaction (one round trip, one commit) instead of one each: the drain
 * rate of a queue was bound by per-job round trips and commits. Each call keeps what a lone
 * call has: its own subtransaction (a failing call rolls back alone and is recorded with
 * its error, retried like any other), its role, claims and request id, and its own run-log
 * row with its own start and finish. The statement timeout is the batch's; a batch that
 * exceeds it rolls back whole and the worker runs each job of it alone, with its own.
 */

/*
 * why: one attempt of each job of `jobs` ([{"id": job id, "rid": request id, "job": the run
 * job's payload}]), all of the queue or schedule `name`, whose target is `target` run as
 * `role`. Returns the outcomes (record_run's), in the order of `jobs`. Called by the
 * connecting role (it becomes `role` for each call and comes back after it); query_canceled
 * (the statement timeout) is not caught, so it ends the whole batch.
 */
create or replace function plinth_private.run_batch(kind text, name text, target text, role text, max_attempts int, jobs jsonb)
  returns text[]
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_m text[] := regexp_match(target, '^sql:([A-Za-z_][A-Za-z0-9_$]*)\.([A-Za-z_][A-Za-z0-9_$]*)$');
  v_call text;
  v_claims text := jsonb_build_object('role', role)::text;
  v_j jsonb;
  v_start timestamptz;
  v_error text;
  v_out text[] := '{}';
  -- The succeeded attempts' rows, written together at the end.
  v_i int[] := '{}';
  v_started timestamptz[] := '{}';
  v_finished timestamptz[] := '{}';
begin
  if v_m is null then raise exception 'not a sql target: %', target; end if;
  v_call := format('select %I.%I($1)', v_m[1], v_m[2]);
  perform set_config('synchronous_commit', 'off', true);
  for v_j in select value from jsonb_array_elements(jobs) loop
    v_start := clock_timestamp();
    begin
      perform set_config('request.jwt.claims', v_claims, true), set_config('request.id', v_j->>'rid', true),
              set_config('role', run_batch.role, true);
      execute v_call using v_j->'job'->'p';
      perform set_config('role', 'none', true);
      v_error := null;
    exception when others then
      -- The subtransaction's rollback also undid its set_config calls (the role among them).
      v_error := coalesce(nullif(sqlerrm, ''), 'failed');
    end;
    if v_error is null then
      v_out := v_out || 'succeeded'::text;
      v_i := v_i || cardinality(v_out);
      v_started := v_started || v_start;
      v_finished := v_finished || clock_timestamp();
    else
      -- A failed attempt: record_run decides between retrying and failed, as for a lone call.
      v_out := v_out || plinth_private.record_run(kind, name, (v_j->>'id')::bigint, (v_j->'job'->>'a')::int, max_attempts,
        (v_j->'job'->>'at')::timestamptz, v_j->>'rid', v_start, clock_timestamp(), false, v_error, v_j->'job');
    end if;
  end loop;
  insert into plinth_private.runs (kind, name, job_id, scheduled_for, attempt, max_attempts, started_at, finished_at, outcome, request_id)
    select run_batch.kind, run_batch.name, (j->>'id')::bigint, (j->'job'->>'at')::timestamptz, (j->'job'->>'a')::int,
           coalesce(run_batch.max_attempts, (j->'job'->>'a')::int), s.started, s.finished, 'succeeded', j->>'rid'
      from unnest(v_i, v_started, v_finished) s (i, started, finished)
      cross join lateral (select jobs->(s.i - 1) as j) x
     order by s.i;
  return v_out;
end
$$;
revoke all on function plinth_private.run_batch(text, text, text, text, int, jsonb) from public;

/* why: runs by outcome are counted by each instance's worker as it records them (/metrics), not by a scan of the run log. */
drop function if exists plinth_private.run_counts();
--! EndIncluded schedules/batch.sql
