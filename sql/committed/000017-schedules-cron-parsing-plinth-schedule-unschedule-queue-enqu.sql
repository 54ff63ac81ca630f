--! Previous: sha1:4765b4a821606e237ec6ccea963a92fb094ca1b7
--! Hash: sha1:9e4d131c5cf11e73f866c820d99d65bb61ff792b
--! Message: schedules: cron parsing, plinth.schedule/unschedule/queue/enqueue over graphile-worker job keys, the run log with its retention

--! Included schedules/cron.sql
/*
 * why: schedules and queues are declared in SQL (a migration is the normal place), so the
 * cron grammar lives in SQL too: `plinth.schedule` checks an expression and finds its first
 * tick in the transaction that declares it, with no service running.
 *
 * `plinth` is the surface a DBA (and the service role) calls; `plinth_private` holds the
 * state, where no API role has USAGE.
 */
create schema if not exists plinth;
revoke all on schema plinth from public;
grant usage on schema plinth to service_role;
comment on schema plinth is E'plinth: schedules, queues and their run log (entry functions a migration or the service role calls).';

create schema if not exists plinth_private;
revoke all on schema plinth_private from public;
comment on schema plinth_private is E'plinth: schedule, queue and run-log internals. No API role has USAGE.';

/*
 * why: a parsed cron expression. Standard 5 fields (minute hour day-of-month month
 * day-of-week) with lists, ranges, steps and names (jan-dec, sun-sat, 7 = Sunday), the
 * macros @yearly @annually @monthly @weekly @daily @midnight @hourly, and a leading
 * seconds field when there are 6 (an extension, as node-cron and Quartz have it).
 * dom_any/dow_any: the field starts with `*`; when both day fields are restricted, a day
 * matching either runs (Vixie cron's rule).
 */
do $$
begin
  if not exists (select 1 from pg_catalog.pg_type t join pg_catalog.pg_namespace n on n.oid = t.typnamespace
                 where n.nspname = 'plinth_private' and t.typname = 'cron_spec') then
    create type plinth_private.cron_spec as (
      seconds int[], minutes int[], hours int[], days int[], months int[], weekdays int[], dom_any boolean, dow_any boolean
    );
  end if;
end
$$;

/* why: one field of a cron expression → its sorted values, or null when it is not valid. */
create or replace function plinth_private.cron_field(spec text, lo int, hi int, names text[] default null)
  returns int[]
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_item text;
  v_range text;
  v_step int;
  v_a int;
  v_b int;
  v_parts text[];
  v_out int[] := '{}';
  v_i int;
begin
  if spec is null or spec = '' then return null; end if;
  foreach v_item in array string_to_array(lower(spec), ',') loop
    v_parts := string_to_array(v_item, '/');
    if cardinality(v_parts) > 2 then return null; end if;
    v_range := v_parts[1];
    v_step := 1;
    if cardinality(v_parts) = 2 then
      if v_parts[2] !~ '^[0-9]{1,2}$' or v_parts[2]::int = 0 then return null; end if;
      v_step := v_parts[2]::int;
    end if;
    if v_range = '*' then
      v_a := lo; v_b := hi;
    else
      v_parts := string_to_array(v_range, '-');
      if cardinality(v_parts) > 2 then return null; end if;
      for v_i in 1 .. cardinality(v_parts) loop
        if v_parts[v_i] ~ '^[0-9]{1,2}$' then
          null;
        elsif names is not null and array_position(names, v_parts[v_i]) is not null then
          v_parts[v_i] := (array_position(names, v_parts[v_i]) - 1 + lo)::text;
        else
          return null;
        end if;
      end loop;
      v_a := v_parts[1]::int;
      -- `a/s` runs from a to the end of the field.
      v_b := case when cardinality(v_parts) = 2 then v_parts[2]::int when v_step > 1 then hi else v_a end;
      -- day of week: 7 is Sunday too (as an end of range: 5-7 is Friday to Sunday).
      if lo = 0 and hi = 6 and v_b = 7 then v_b := 6; if v_a = 7 then v_a := 0; else v_out := v_out || 0; end if; end if;
      if v_a < lo or v_b > hi or v_a > v_b then return null; end if;
    end if;
    v_i := v_a;
    while v_i <= v_b loop
      v_out := v_out || v_i;
      v_i := v_i + v_step;
    end loop;
  end loop;
  return (select array_agg(distinct x order by x) from unnest(v_out) x);
end
$$;
comment on function plinth_private.cron_field(text, int, int, text[]) is E'One cron field (lists, ranges, steps, names) → its sorted values; null when not valid.';

/* why: a cron expression → cron_spec, or null when it is not valid. */
create or replace function plinth_private.cron_parse(expr text)
  returns plinth_private.cron_spec
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_f text[];
  v_s plinth_private.cron_spec;
  v_e text := lower(btrim(coalesce(expr, '')));
begin
  v_e := case v_e
    when '@yearly' then '0 0 1 1 *' when '@annually' then '0 0 1 1 *' when '@monthly' then '0 0 1 * *'
    when '@weekly' then '0 0 * * 0' when '@daily' then '0 0 * * *' when '@midnight' then '0 0 * * *'
    when '@hourly' then '0 * * * *' else v_e end;
  if length(v_e) > 200 then return null; end if;
  v_f := regexp_split_to_array(v_e, '\s+');
  if cardinality(v_f) = 5 then v_f := '{0}'::text[] || v_f; end if;
  if cardinality(v_f) <> 6 then return null; end if;
  v_s.seconds := plinth_private.cron_field(v_f[1], 0, 59);
  v_s.minutes := plinth_private.cron_field(v_f[2], 0, 59);
  v_s.hours := plinth_private.cron_field(v_f[3], 0, 23);
  v_s.days := plinth_private.cron_field(v_f[4], 1, 31);
  v_s.months := plinth_private.cron_field(v_f[5], 1, 12, '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}');
  v_s.weekdays := plinth_private.cron_field(v_f[6], 0, 6, '{sun,mon,tue,wed,thu,fri,sat}');
  if v_s.seconds is null or v_s.minutes is null or v_s.hours is null or v_s.days is null
     or v_s.months is null or v_s.weekdays is null then
    return null;
  end if;
  v_s.dom_any := v_f[4] like '*%';
  v_s.dow_any := v_f[6] like '*%';
  return v_s;
end
$$;
comment on function plinth_private.cron_parse(text) is E'A cron expression (5 fields, or 6 with leading seconds, or a macro) → cron_spec; null when not valid.';

/*
 * why: the first tick strictly after `after`, in the wall-clock time of `tz` (a local time
 * a DST change skips runs at the first instant after it). Walks down from the month:
 * a field that does not match moves to the start of the next unit, so a year is a few
 * dozen steps. Null when nothing matches within the bound (`0 0 30 2 *`).
 */
create or replace function plinth_private.cron_next(spec plinth_private.cron_spec, tz text, after timestamptz)
  returns timestamptz
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v timestamp := date_trunc('second', after at time zone tz) + interval '1 second';
  v_n int;
  v_day boolean;
  v_at timestamptz;
begin
  for i in 1 .. 20000 loop
    if not extract(month from v)::int = any (spec.months) then
      v := date_trunc('month', v) + interval '1 month';
      continue;
    end if;
    v_day := case
      when spec.dom_any and spec.dow_any then true
      when spec.dom_any then extract(dow from v)::int = any (spec.weekdays)
      when spec.dow_any then extract(day from v)::int = any (spec.days)
      else extract(day from v)::int = any (spec.days) or extract(dow from v)::int = any (spec.weekdays) end;
    if not v_day then
      v := date_trunc('day', v) + interval '1 day';
      continue;
    end if;
    if not extract(hour from v)::int = any (spec.hours) then
      v_n := (select min(h) from unnest(spec.hours) h where h > extract(hour from v)::int);
      v := case when v_n is null then date_trunc('day', v) + interval '1 day' else date_trunc('day', v) + make_interval(hours => v_n) end;
      continue;
    end if;
    if not extract(minute from v)::int = any (spec.minutes) then
      v_n := (select min(m) from unnest(spec.minutes) m where m > extract(minute from v)::int);
      v := case when v_n is null then date_trunc('hour', v) + interval '1 hour' else date_trunc('hour', v) + make_interval(mins => v_n) end;
      continue;
    end if;
    if not floor(extract(second from v))::int = any (spec.seconds) then
      v_n := (select min(s) from unnest(spec.seconds) s where s > floor(extract(second from v))::int);
      v := case when v_n is null then date_trunc('minute', v) + interval '1 minute' else date_trunc('minute', v) + make_interval(secs => v_n) end;
      continue;
    end if;
    v_at := v at time zone tz;
    if v_at > after then return v_at; end if;
    v := v + interval '1 second';
  end loop;
  return null;
end
$$;
comment on function plinth_private.cron_next(plinth_private.cron_spec, text, timestamptz) is E'The first tick of a parsed cron expression strictly after a time, in a time zone; null when none is found.';

/* why: a time zone PostgreSQL knows, by name (an error-free check). */
create or replace function plinth_private.valid_time_zone(tz text)
  returns boolean
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if tz is null or tz = '' or length(tz) > 64 then return false; end if;
  perform now() at time zone tz;
  return true;
exception when others then
  return false;
end
$$;
comment on function plinth_private.valid_time_zone(text) is E'true when PostgreSQL knows the time zone name.';

revoke all on function plinth_private.cron_field(text, int, int, text[]), plinth_private.cron_parse(text),
  plinth_private.cron_next(plinth_private.cron_spec, text, timestamptz), plinth_private.valid_time_zone(text) from public;
--! EndIncluded schedules/cron.sql
--! Included schedules/schedules.sql
/*
 * why: schedules and queues over graphile-worker's public SQL API (graphile_worker.add_job,
 * remove_job and the jobs view; never its _private_ tables).
 *
 * - A schedule is one pending `plinth__tick` job for its next tick, with the job key
 *   `plinth:schedule:<name>`: one job for all instances, so one run per tick however many
 *   instances poll (graphile-worker locks a job for one worker). The tick job adds the
 *   tick's run and the next tick job (the running job is locked, so add_job with its key
 *   inserts a new one). Changing a schedule replaces the pending tick job.
 * - A run is a `plinth__run` job. Without options.overlap, a schedule's runs share the named
 *   queue `plinth:schedule:<name>`, which graphile-worker runs one job at a time; a queue's
 *   concurrency N spreads its jobs over N named queues.
 * - Attempts are plinth's, not graphile-worker's backoff: the task never throws for a
 *   failed target; record_run records the attempt and, while attempts remain, adds the
 *   next one after options.backoff seconds doubled per attempt (as webhooks do).
 */
create table if not exists plinth_private.schedules (
  name text primary key,
  cron text not null,
  target text not null,
  payload jsonb not null default '{}',
  options jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint schedules_name_check check (name ~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$')
);
revoke all on table plinth_private.schedules from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table plinth_private.schedules is E'plinth: schedules (plinth.schedule). The pending tick is the graphile_worker job keyed plinth:schedule:<name>.';

create table if not exists plinth_private.queues (
  name text primary key,
  target text not null,
  options jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint queues_name_check check (name ~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$')
);
revoke all on table plinth_private.queues from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table plinth_private.queues is E'plinth: queues (plinth.queue): the target each job of the queue runs.';

create table if not exists plinth_private.runs (
  id bigint generated always as identity primary key,
  kind text not null,
  name text not null,
  job_id bigint,
  scheduled_for timestamptz,
  attempt int not null default 1,
  max_attempts int not null default 1,
  started_at timestamptz not null,
  finished_at timestamptz not null,
  outcome text not null,
  error text,
  request_id text,
  constraint runs_kind_check check (kind in ('schedule', 'queue')),
  constraint runs_outcome_check check (outcome in ('succeeded', 'retrying', 'failed'))
);
create index if not exists runs_name_idx on plinth_private.runs (name, id);
create index if not exists runs_started_at_idx on plinth_private.runs (started_at);
revoke all on table plinth_private.runs from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table plinth_private.runs is E'plinth: the run log, one row per attempt of a schedule''s or queue''s run. Kept JOB_RUN_RETENTION_DAYS.';
comment on column plinth_private.runs.outcome is E'succeeded; retrying (this attempt failed, another is queued); failed (the last attempt failed). A row is written when its attempt is over.';

/*
 * why: a target is `sql:<schema>.<function>` (a function taking one jsonb, which must exist)
 * or `function:<name>` (an edge function, called by name: the runtime may learn it later).
 * Returns 'ok', 'invalid_target' or 'target_not_found'.
 */
create or replace function plinth_private.check_target(target text)
  returns text
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_m text[];
begin
  if target is null or length(target) > 200 then return 'invalid_target'; end if;
  v_m := regexp_match(target, '^function:([A-Za-z0-9_][A-Za-z0-9_-]*)$');
  if v_m is not null then return 'ok'; end if;
  v_m := regexp_match(target, '^sql:([A-Za-z_][A-Za-z0-9_$]*)\.([A-Za-z_][A-Za-z0-9_$]*)$');
  if v_m is null then return 'invalid_target'; end if;
  if to_regprocedure(format('%I.%I(jsonb)', v_m[1], v_m[2])) is null then return 'target_not_found'; end if;
  return 'ok';
end
$$;

/*
 * why: the options a schedule or a queue takes, each checked (unknown keys are refused, so a
 * typo is not silently ignored). Returns the options with defaults filled in, or null.
 *   role          sql targets run as this role (default service_role; not a superuser, and
 *                 one the service can become)
 *   max_attempts  1..25 (default 3)
 *   backoff       seconds before the second attempt, doubled for each further one (default 10)
 *   timeout       seconds a run may take (default 60): statement_timeout for sql targets,
 *                 the call's deadline for edge functions
 *   schedules:    timezone (default UTC), backfill (an interval, default none), overlap (default false)
 *   queues:       concurrency (1..100; default none: as many as the worker takes)
 */
create or replace function plinth_private.check_options(kind text, options jsonb)
  returns jsonb
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_key text;
  v_allowed text[] := case kind when 'schedule' then '{role,max_attempts,backoff,timeout,timezone,backfill,overlap}'::text[]
                                 else '{role,max_attempts,backoff,timeout,concurrency}'::text[] end;
  v_o jsonb := coalesce(options, '{}');
  v_i interval;
begin
  if jsonb_typeof(v_o) <> 'object' then return null; end if;
  for v_key in select jsonb_object_keys(v_o) loop
    if not v_key = any (v_allowed) then return null; end if;
  end loop;
  v_o := jsonb_build_object('role', 'service_role', 'max_attempts', 3, 'backoff', 10, 'timeout', 60) || v_o;
  if jsonb_typeof(v_o->'role') <> 'string'
     or not exists (select 1 from pg_roles r where r.rolname = v_o->>'role' and not r.rolsuper
                    and pg_has_role(current_user, r.oid, 'member')) then
    return null;
  end if;
  if jsonb_typeof(v_o->'max_attempts') <> 'number' or (v_o->>'max_attempts') !~ '^[0-9]{1,2}$'
     or (v_o->>'max_attempts')::int not between 1 and 25 then
    return null;
  end if;
  if jsonb_typeof(v_o->'backoff') <> 'number' or (v_o->>'backoff')::numeric not between 0 and 86400 then return null; end if;
  if jsonb_typeof(v_o->'timeout') <> 'number' or (v_o->>'timeout')::numeric not between 0.001 and 86400 then return null; end if;
  if kind = 'schedule' then
    v_o := jsonb_build_object('timezone', 'UTC', 'overlap', false) || v_o;
    if jsonb_typeof(v_o->'timezone') <> 'string' or not plinth_private.valid_time_zone(v_o->>'timezone') then return null; end if;
    if jsonb_typeof(v_o->'overlap') <> 'boolean' then return null; end if;
    if v_o ? 'backfill' then
      if jsonb_typeof(v_o->'backfill') <> 'string' then return null; end if;
      begin
        v_i := (v_o->>'backfill')::interval;
      exception when others then
        return null;
      end;
      if v_i <= interval '0' or v_i > interval '366 days' then return null; end if;
    end if;
  elsif v_o ? 'concurrency' and (jsonb_typeof(v_o->'concurrency') <> 'number' or (v_o->>'concurrency') !~ '^[0-9]{1,3}$'
     or (v_o->>'concurrency')::int not between 1 and 100) then
    return null;
  end if;
  return v_o;
end
$$;

/* why: the named queue of a run job (see the header): serial per schedule unless overlap; N lanes for a queue's concurrency N. */
create or replace function plinth_private.lane(kind text, name text, options jsonb)
  returns text
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select case
    when kind = 'schedule' and not coalesce((options->>'overlap')::boolean, false) then 'plinth:schedule:' || name
    when kind = 'queue' and options ? 'concurrency' then
      'plinth:queue:' || name || ':' || floor(random() * (options->>'concurrency')::int)::int
    end
$$;

/* why: (re)arm a schedule: its tick job for the first tick after now (or keep the pending one's time). */
create or replace function plinth_private.arm(name text, keep_time boolean)
  returns timestamptz
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s plinth_private.schedules;
  v_next timestamptz;
begin
  select * into v_s from plinth_private.schedules s where s.name = arm.name;
  if not found then return null; end if;
  v_next := plinth_private.cron_next(plinth_private.cron_parse(v_s.cron), v_s.options->>'timezone', now());
  if v_next is null then return null; end if;
  perform graphile_worker.add_job('plinth__tick', json_build_object('s', v_s.name, 'at', v_next),
    run_at => v_next, max_attempts => 5, job_key => 'plinth:schedule:' || v_s.name,
    job_key_mode => case when keep_time then 'preserve_run_at' else 'replace' end);
  return v_next;
end
$$;

/* why: a schedule as the service role reads it (GET /api/schedules). */
create or replace function plinth_private.schedule_json(s plinth_private.schedules)
  returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('name', s.name, 'cron', s.cron, 'target', s.target, 'payload', s.payload, 'options', s.options,
    'next_run_at', to_char((select j.run_at from graphile_worker.jobs j where j.key = 'plinth:schedule:' || s.name)
                           at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'created_at', to_char(s.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'updated_at', to_char(s.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
$$;

/*
 * why: declare or change a schedule (an upsert), outcome as data for the REST surface:
 * status 'ok' | 'invalid_name' | 'invalid_cron' | 'invalid_target' | 'target_not_found' |
 * 'invalid_options', created (true for a new name) and the schedule.
 */
drop function if exists plinth_private.upsert_schedule(text, text, text, jsonb, jsonb);
create function plinth_private.upsert_schedule(name text, cron text, target text, payload jsonb, options jsonb,
  out status text, out created boolean, out schedule jsonb)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_o jsonb;
  v_old plinth_private.schedules;
  v_new plinth_private.schedules;
  v_t text;
begin
  created := false;
  if name is null or name !~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$' then status := 'invalid_name'; return; end if;
  v_o := plinth_private.check_options('schedule', options);
  if v_o is null then status := 'invalid_options'; return; end if;
  if plinth_private.cron_parse(cron) is null
     or plinth_private.cron_next(plinth_private.cron_parse(cron), v_o->>'timezone', now()) is null then
    status := 'invalid_cron'; return;
  end if;
  v_t := plinth_private.check_target(target);
  if v_t <> 'ok' then status := v_t; return; end if;
  select * into v_old from plinth_private.schedules s where s.name = upsert_schedule.name for update;
  created := not found;
  insert into plinth_private.schedules as s (name, cron, target, payload, options)
    values (upsert_schedule.name, btrim(upsert_schedule.cron), upsert_schedule.target, coalesce(upsert_schedule.payload, '{}'), v_o)
    on conflict on constraint schedules_pkey do update
      set cron = excluded.cron, target = excluded.target, payload = excluded.payload, options = excluded.options, updated_at = now()
    returning * into v_new;
  -- The same cron and time zone keep the pending tick (a re-run migration does not move it).
  perform plinth_private.arm(v_new.name,
    not created and v_old.cron = v_new.cron and v_old.options->>'timezone' = v_new.options->>'timezone');
  status := 'ok';
  schedule := plinth_private.schedule_json(v_new);
end
$$;

/* why: remove a schedule and its pending tick (a run already queued still runs). */
create or replace function plinth_private.delete_schedule(name text)
  returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from plinth_private.schedules s where s.name = delete_schedule.name;
  if not found then return 'not_found'; end if;
  perform graphile_worker.remove_job('plinth:schedule:' || delete_schedule.name);
  return 'ok';
end
$$;

/* why: add a run job (first attempt) of a schedule or a queue. */
create or replace function plinth_private.add_run(kind text, name text, payload jsonb, options jsonb, scheduled_for timestamptz,
  run_at timestamptz default null, job_key text default null)
  returns bigint
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select (graphile_worker.add_job('plinth__run',
    json_build_object('k', kind, 'n', name, 'p', payload, 'a', 1, 'at', scheduled_for),
    queue_name => plinth_private.lane(kind, name, options), run_at => run_at, max_attempts => 5,
    job_key => case when job_key is not null then 'plinth:' || kind || ':' || name || ':' || job_key end)).id
$$;

/* why: POST /api/schedules/{name}/run: one run now, beside the ticks. Null: no such schedule. */
create or replace function plinth_private.run_now(name text)
  returns bigint
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select plinth_private.add_run('schedule', s.name, s.payload, s.options, now()) from plinth_private.schedules s where s.name = run_now.name
$$;

/*
 * why: the tick job of a schedule, at its tick `at`: add the run(s) due and arm the next
 * tick. Ticks missed while no instance ran (the job ran late) are run when they are within
 * options.backfill of now, oldest first; without backfill a tick more than a minute late is
 * skipped, as graphile-worker's own crontab does. Returns how many runs it added.
 */
create or replace function plinth_private.tick(name text, at timestamptz)
  returns int
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_s plinth_private.schedules;
  v_spec plinth_private.cron_spec;
  v_t timestamptz := at;
  v_from timestamptz;
  v_n int := 0;
begin
  select * into v_s from plinth_private.schedules s where s.name = tick.name;
  if not found then return 0; end if;
  v_spec := plinth_private.cron_parse(v_s.cron);
  v_from := now() - coalesce((v_s.options->>'backfill')::interval, interval '1 minute');
  while v_t is not null and v_t <= now() and v_n < 1000 loop
    if v_t >= v_from then
      perform plinth_private.add_run('schedule', v_s.name, v_s.payload, v_s.options, v_t);
      v_n := v_n + 1;
    end if;
    exit when not v_s.options ? 'backfill';
    v_t := plinth_private.cron_next(v_spec, v_s.options->>'timezone', v_t);
  end loop;
  perform plinth_private.arm(v_s.name, false);
  return v_n;
end
$$;

/*
 * why: bind a queue to a target; status 'ok' | 'invalid_name' | 'invalid_target' |
 * 'target_not_found' | 'invalid_options'.
 */
create or replace function plinth_private.upsert_queue(name text, target text, options jsonb)
  returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_o jsonb;
  v_t text;
begin
  if name is null or name !~ '^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$' then return 'invalid_name'; end if;
  v_o := plinth_private.check_options('queue', options);
  if v_o is null then return 'invalid_options'; end if;
  v_t := plinth_private.check_target(target);
  if v_t <> 'ok' then return v_t; end if;
  insert into plinth_private.queues as q (name, target, options) values (upsert_queue.name, upsert_queue.target, v_o)
    on conflict on constraint queues_pkey do update set target = excluded.target, options = excluded.options, updated_at = now();
  return 'ok';
end
$$;

/*
 * why: one job for a queue, in the caller's transaction (a rolled-back transaction enqueues
 * nothing). Options: run_at (a timestamp), delay (seconds), job_key (one pending job per key:
 * a second enqueue with the key replaces the pending job's payload and time). Status 'ok' |
 * 'queue_not_found' | 'invalid_options', and the job id.
 */
drop function if exists plinth_private.enqueue(text, jsonb, jsonb);
create function plinth_private.enqueue(queue text, payload jsonb, options jsonb, out status text, out job_id bigint)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_q plinth_private.queues;
  v_o jsonb := coalesce(options, '{}');
  v_key text;
  v_at timestamptz;
begin
  select * into v_q from plinth_private.queues q where q.name = enqueue.queue;
  if not found then status := 'queue_not_found'; return; end if;
  if jsonb_typeof(v_o) <> 'object' or exists (select 1 from jsonb_object_keys(v_o) k where k not in ('run_at', 'delay', 'job_key'))
     or (v_o ? 'run_at' and v_o ? 'delay') then
    status := 'invalid_options'; return;
  end if;
  if v_o ? 'job_key' then
    if jsonb_typeof(v_o->'job_key') <> 'string' or length(v_o->>'job_key') not between 1 and 200 then status := 'invalid_options'; return; end if;
    v_key := v_o->>'job_key';
  end if;
  if v_o ? 'delay' then
    if jsonb_typeof(v_o->'delay') <> 'number' or (v_o->>'delay')::numeric not between 0 and 31622400 then status := 'invalid_options'; return; end if;
    v_at := now() + make_interval(secs => (v_o->>'delay')::double precision);
  elsif v_o ? 'run_at' then
    begin
      v_at := (v_o->>'run_at')::timestamptz;
    exception when others then
      status := 'invalid_options'; return;
    end;
    if jsonb_typeof(v_o->'run_at') <> 'string' or v_at is null then status := 'invalid_options'; return; end if;
  end if;
  job_id := plinth_private.add_run('queue', v_q.name, coalesce(payload, 'null'), v_q.options, null, v_at, v_key);
  status := 'ok';
end
$$;

/*
 * why: what the task needs to run an attempt: the target, the role, the timeout and the
 * attempts allowed. Nothing (all null) when the schedule or queue no longer exists.
 */
drop function if exists plinth_private.run_target(text, text);
create function plinth_private.run_target(kind text, name text,
  out target text, out role text, out timeout_ms int, out max_attempts int)
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select t.target, t.options->>'role', ceil((t.options->>'timeout')::numeric * 1000)::int, (t.options->>'max_attempts')::int
    from (select s.target, s.options from plinth_private.schedules s where run_target.kind = 'schedule' and s.name = run_target.name
          union all
          select q.target, q.options from plinth_private.queues q where run_target.kind = 'queue' and q.name = run_target.name) t
$$;

/*
 * why: an attempt, once over, in one statement (one row per attempt). started_at and
 * finished_at null: the transaction's start and now (a sql target's call and its record in
 * one transaction). Succeeded; or failed with
 * attempts left: 'retrying', and the next attempt is added after backoff * 2^(attempt-1)
 * seconds (at most an hour); or 'failed'. A schedule or queue removed meanwhile: 'failed'
 * (never dropped silently). `job` is the attempt's job payload, passed on with the next
 * attempt number.
 */
drop function if exists plinth_private.record_run(text, text, bigint, int, int, timestamptz, text, timestamptz, timestamptz, boolean, text, jsonb);
create function plinth_private.record_run(kind text, name text, job_id bigint, attempt int, max_attempts int,
  scheduled_for timestamptz, request_id text, started_at timestamptz, finished_at timestamptz, ok boolean, error text, job jsonb)
  returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_options jsonb;
  v_outcome text;
begin
  -- The job's completion (a later, synchronous commit) makes this row durable; a crash
  -- before it runs the attempt again.
  perform set_config('synchronous_commit', 'off', true);
  if kind = 'schedule' then
    select s.options into v_options from plinth_private.schedules s where s.name = record_run.name;
  else
    select q.options into v_options from plinth_private.queues q where q.name = record_run.name;
  end if;
  if ok then
    v_outcome := 'succeeded';
  elsif v_options is not null and attempt < max_attempts then
    v_outcome := 'retrying';
    perform graphile_worker.add_job('plinth__run', (job || jsonb_build_object('a', attempt + 1))::json,
      queue_name => plinth_private.lane(kind, name, v_options),
      run_at => now() + make_interval(secs => least(3600, coalesce((v_options->>'backoff')::double precision, 10) * 2 ^ (attempt - 1))),
      max_attempts => 5);
  else
    v_outcome := 'failed';
  end if;
  insert into plinth_private.runs (kind, name, job_id, scheduled_for, attempt, max_attempts, started_at, finished_at, outcome, error, request_id)
    values (kind, name, job_id, scheduled_for, attempt, coalesce(max_attempts, attempt), coalesce(started_at, now()),
            coalesce(finished_at, clock_timestamp()), v_outcome,
            left(record_run.error, 2000), request_id);
  return v_outcome;
end
$$;

/* why: one row of the run log as the service role reads it (GET /api/runs). */
create or replace function plinth_private.run_json(r plinth_private.runs)
  returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object('id', r.id, 'kind', r.kind, 'name', r.name, 'job_id', r.job_id,
    'scheduled_for', to_char(r.scheduled_for at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'attempt', r.attempt, 'max_attempts', r.max_attempts,
    'started_at', to_char(r.started_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'finished_at', to_char(r.finished_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'duration_ms', round(extract(epoch from r.finished_at - r.started_at) * 1000),
    'outcome', r.outcome, 'error', r.error, 'request_id', r.request_id)
$$;

/* why: the run log, newest first, `before` a run id (the next page), filtered by name, kind and outcome. */
create or replace function plinth_private.list_runs(name text, kind text, outcome text, before bigint, lim int)
  returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(plinth_private.run_json(r) order by r.id desc), '[]')
    from (select * from plinth_private.runs r
           where (list_runs.name is null or r.name = list_runs.name)
             and (list_runs.kind is null or r.kind = list_runs.kind)
             and (list_runs.outcome is null or r.outcome = list_runs.outcome)
             and (list_runs.before is null or r.id < list_runs.before)
           order by r.id desc limit lim) r
$$;

create or replace function plinth_private.list_schedules()
  returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(plinth_private.schedule_json(s) order by s.name), '[]') from plinth_private.schedules s
$$;

/* why: runs by outcome, for the metrics of the operations page. */
create or replace function plinth_private.run_counts()
  returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_object_agg(o.outcome, o.n), '{}') from (select r.outcome, count(*) n from plinth_private.runs r group by r.outcome) o
$$;

/* why: retention (JOB_RUN_RETENTION_DAYS): runs older than that go. Run hourly by `plinth__purge`. */
create or replace function plinth_private.purge_runs(days int)
  returns bigint
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_n bigint;
begin
  delete from plinth_private.runs r where r.started_at < now() - make_interval(days => days);
  get diagnostics v_n = row_count;
  return v_n;
end
$$;

create or replace function plinth_private.schedule_purge(delay_seconds integer)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job('plinth__purge', '{}'::json,
    run_at => now() + make_interval(secs => schedule_purge.delay_seconds),
    job_key => 'plinth__purge', job_key_mode => 'preserve_run_at', max_attempts => 3)
$$;

/*
 * why: the SQL surface a migration (or a DBA) calls. Input that is not valid raises with
 * SQLSTATE PT400 and the message the REST surface would send; nothing is changed then.
 */
create or replace function plinth_private.raise_status(status text)
  returns void
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if status = 'ok' then return; end if;
  raise exception '%', case status
    when 'invalid_name' then 'invalid name'
    when 'invalid_cron' then 'invalid cron expression'
    when 'invalid_target' then 'target must be sql:<schema>.<function> or function:<name>'
    when 'target_not_found' then 'target function not found'
    when 'invalid_options' then 'invalid options'
    when 'queue_not_found' then 'queue not found'
    when 'not_found' then 'schedule not found'
    else status end using errcode = 'PT400';
end
$$;

create or replace function plinth.schedule(name text, cron text, target text, payload jsonb default '{}', options jsonb default '{}')
  returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform plinth_private.raise_status((plinth_private.upsert_schedule(name, cron, target, payload, options)).status);
end
$$;
comment on function plinth.schedule(text, text, text, jsonb, jsonb) is E'Declare or change a schedule: cron (5 fields, 6 with seconds, or @hourly/@daily/@weekly…), target sql:<schema>.<function> or function:<name>, payload, options (timezone, backfill, overlap, role, max_attempts, backoff, timeout).';

create or replace function plinth.unschedule(name text)
  returns boolean
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  select plinth_private.delete_schedule(name) = 'ok'
$$;
comment on function plinth.unschedule(text) is E'Remove a schedule and its pending tick; false when there was none.';

create or replace function plinth.queue(queue text, target text, options jsonb default '{}')
  returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform plinth_private.raise_status(plinth_private.upsert_queue(queue, target, options));
end
$$;
comment on function plinth.queue(text, text, jsonb) is E'Bind a queue to a target (options: concurrency, max_attempts, backoff, timeout, role).';

create or replace function plinth.enqueue(queue text, payload jsonb default '{}', options jsonb default '{}')
  returns bigint
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v record;
begin
  v := plinth_private.enqueue(queue, payload, options);
  perform plinth_private.raise_status(v.status);
  return v.job_id;
end
$$;
comment on function plinth.enqueue(text, jsonb, jsonb) is E'Add a job to a queue in the current transaction (options: run_at, delay in seconds, job_key). Returns the job id.';

create or replace view plinth.runs as select * from plinth_private.runs;
comment on view plinth.runs is E'plinth: the run log (one row per attempt).';

revoke all on all functions in schema plinth_private from public;
revoke all on function plinth.schedule(text, text, text, jsonb, jsonb), plinth.unschedule(text), plinth.queue(text, text, jsonb),
  plinth.enqueue(text, jsonb, jsonb) from public;
grant execute on function plinth.schedule(text, text, text, jsonb, jsonb), plinth.unschedule(text), plinth.queue(text, text, jsonb),
  plinth.enqueue(text, jsonb, jsonb) to service_role;
revoke all on plinth.runs from public, anon, authenticated, ":ANONYMOUS_ROLE";
grant select on plinth.runs to service_role;
--! EndIncluded schedules/schedules.sql
