--! Previous: sha1:2b03b7338310844cf69d8f9f45c98358c22d9573
--! Hash: sha1:bcd1b387f9d7631fea4941168ae959aea1325315
--! Message: dashboard: schema actions built and checked in SQL (dashboard_private.schema_sql); schedules can be paused

--! Included dashboard/schema.sql
/*
 * why: the dashboard makes and changes tables as migrations (docs/dashboard.md#schema-changes):
 * each action is turned into SQL text here, shown to the admin first, and in development
 * appended to the application's migrations/current.sql (which `npm run dev`'s watch applies
 * on every save, so the text must be safe to run again: `if not exists`, a drop before a
 * re-create, a rename only while the old name is there); against a production database it is
 * only offered as SQL for a migration. Nothing here runs the text.
 *
 * The text runs later as the migration role, so every part of it is checked, never pasted:
 * names are plain lower-case identifiers, a type must match a type's spelling and be known to
 * PostgreSQL, a default is a literal (optionally cast) or one of a few functions, a foreign
 * key points at a column of public (or of a table made earlier in the same change) or at
 * auth.users(id), policies come from templates.
 *
 * dashboard_private.schema_sql(actions jsonb): (status, statement) — status 'ok' with the
 * whole text, or the first problem: 'invalid_action', 'invalid_name', 'invalid_type',
 * 'invalid_default', 'invalid_reference', 'invalid_template', 'invalid_grant'.
 */
create schema if not exists dashboard_private;

create or replace function dashboard_private.schema_name_ok(n text) returns boolean
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$ select n is not null and n ~ '^[a-z_][a-z0-9_]{0,62}$' $$;

/* why: a type as written (`text`, `numeric(10,2)`, `timestamptz`, `text[]`, `double precision`) that PostgreSQL knows. */
create or replace function dashboard_private.schema_type_ok(t text) returns boolean
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if t is null or t !~ '^[a-z][a-z0-9_]*( [a-z][a-z0-9_]*){0,3}(\(\d{1,4}(, ?\d{1,4})?\))?(\[\])?$' then return false; end if;
  return to_regtype(t) is not null;
exception when others then
  return false;
end
$$;

/* why: a default the dashboard writes: a number, true/false/null, a quoted literal (optionally `::type`), or now(), gen_random_uuid(), auth.uid(), current_date. */
create or replace function dashboard_private.schema_default_ok(d text) returns boolean
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select d ~ '^-?\d{1,30}(\.\d{1,30})?$'
      or d in ('true', 'false', 'null', 'now()', 'current_timestamp', 'current_date', 'gen_random_uuid()', 'auth.uid()')
      or (d ~ '^''([^'']|'''')*''(::[a-z][a-z0-9_ ]*(\[\])?)?$'
          and (position('::' in d) = 0 or dashboard_private.schema_type_ok(substring(d from '::([a-z][a-z0-9_ ]*(\[\])?)$'))))
$$;

/* why: one column's definition text, or null when a part of it is not acceptable (status in `problem`). */
create or replace function dashboard_private.schema_column(c jsonb, out definition text, out problem text)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ref jsonb := c->'references';
  v_on text := coalesce(c->'references'->>'on_delete', 'no action');
begin
  if jsonb_typeof(c) <> 'object' or not dashboard_private.schema_name_ok(c->>'name') then problem := 'invalid_name'; return; end if;
  if not dashboard_private.schema_type_ok(lower(btrim(c->>'type'))) then problem := 'invalid_type'; return; end if;
  definition := format('%I %s', c->>'name', lower(btrim(c->>'type')));
  if coalesce((c->>'identity')::boolean, false) then
    definition := definition || ' generated always as identity';
  elsif nullif(btrim(c->>'default'), '') is not null then
    if not dashboard_private.schema_default_ok(btrim(c->>'default')) then problem := 'invalid_default'; definition := null; return; end if;
    definition := definition || ' default ' || btrim(c->>'default');
  end if;
  if not coalesce((c->>'nullable')::boolean, true) then definition := definition || ' not null'; end if;
  if v_ref is not null and jsonb_typeof(v_ref) <> 'null' then
    if jsonb_typeof(v_ref) <> 'object' or v_on not in ('no action', 'cascade', 'set null', 'restrict')
       or not ((v_ref->>'table' = 'auth.users' and v_ref->>'column' = 'id')
               or (dashboard_private.schema_name_ok(v_ref->>'table') and dashboard_private.schema_name_ok(v_ref->>'column')
                   and (v_ref->>'table' in (select jsonb_array_elements_text(coalesce(c->'_created', '[]')))
                        or exists (select 1 from pg_attribute a where a.attrelid = to_regclass(format('public.%I', v_ref->>'table'))
                                   and a.attname = v_ref->>'column' and a.attnum > 0 and not a.attisdropped)))) then
      problem := 'invalid_reference'; definition := null; return;
    end if;
    definition := definition || format(' references %s (%I) on delete %s',
      case when v_ref->>'table' = 'auth.users' then 'auth.users' else format('public.%I', v_ref->>'table') end, v_ref->>'column', v_on);
  end if;
  problem := 'ok';
end
$$;

/* why: one action's text, or a problem. */
create or replace function dashboard_private.schema_action(a jsonb, out status text, out statement text)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_t text := a->>'table';
  v_q text;
  v_col record;
  v_defs text[] := '{}';
  v_key text[] := '{}';
  v_c jsonb;
  v_owner text := a->>'owner_column';
  v_roles text[];
  v_privs text[];
begin
  status := 'ok';
  if jsonb_typeof(a) <> 'object' then status := 'invalid_action'; return; end if;
  if not dashboard_private.schema_name_ok(v_t) then status := 'invalid_name'; return; end if;
  v_q := format('public.%I', v_t);
  case a->>'action'
  when 'create_table' then
    if jsonb_typeof(a->'columns') <> 'array' or jsonb_array_length(a->'columns') = 0 then status := 'invalid_action'; return; end if;
    for v_c in select * from jsonb_array_elements(a->'columns') loop
      select * into v_col from dashboard_private.schema_column(v_c || jsonb_build_object('_created', coalesce(a->'_created', '[]') || to_jsonb(v_t)));
      if v_col.problem <> 'ok' then status := v_col.problem; return; end if;
      v_defs := v_defs || v_col.definition;
      if coalesce((v_c->>'primary_key')::boolean, false) then v_key := v_key || format('%I', v_c->>'name'); end if;
    end loop;
    if cardinality(v_key) > 0 then v_defs := v_defs || ('primary key (' || array_to_string(v_key, ', ') || ')'); end if;
    statement := format(E'create table if not exists %s (\n  %s\n);', v_q, array_to_string(v_defs, E',\n  '));
  when 'add_column' then
    select * into v_col from dashboard_private.schema_column(a->'column' || jsonb_build_object('_created', coalesce(a->'_created', '[]')));
    if v_col.problem <> 'ok' then status := v_col.problem; return; end if;
    statement := format('alter table %s add column if not exists %s;', v_q, v_col.definition);
  when 'rename_column' then
    if not dashboard_private.schema_name_ok(a->>'column') or not dashboard_private.schema_name_ok(a->>'to') then status := 'invalid_name'; return; end if;
    -- Only while the old name is there and the new one is not: the watch runs the file again.
    statement := format(E'do $rename$ begin\n  if exists (select 1 from information_schema.columns where table_schema = ''public'' and table_name = %1$L and column_name = %2$L)\n'
      '     and not exists (select 1 from information_schema.columns where table_schema = ''public'' and table_name = %1$L and column_name = %3$L) then\n'
      '    alter table %4$s rename column %2$I to %3$I;\n  end if;\nend $rename$;',
      v_t, a->>'column', a->>'to', v_q);
  when 'drop_column' then
    if not dashboard_private.schema_name_ok(a->>'column') then status := 'invalid_name'; return; end if;
    statement := format('alter table %s drop column if exists %I;', v_q, a->>'column');
  when 'enable_rls' then
    statement := format('alter table %s enable row level security;', v_q);
  when 'policy' then
    if not dashboard_private.schema_name_ok(v_owner) then status := 'invalid_name'; return; end if;
    if a->>'template' = 'owner_only' then
      statement := format(E'alter table %1$s enable row level security;\ndrop policy if exists %2$I on %1$s;\ncreate policy %2$I on %1$s for all to authenticated\n  using (%3$I = auth.uid()) with check (%3$I = auth.uid());',
        v_q, v_t || '_owner_only', v_owner);
    elsif a->>'template' = 'read_all_write_owner' then
      statement := format(E'alter table %1$s enable row level security;\ndrop policy if exists %2$I on %1$s;\ncreate policy %2$I on %1$s for select to anon, authenticated using (true);\n'
        'drop policy if exists %3$I on %1$s;\ncreate policy %3$I on %1$s for insert to authenticated with check (%6$I = auth.uid());\n'
        'drop policy if exists %4$I on %1$s;\ncreate policy %4$I on %1$s for update to authenticated using (%6$I = auth.uid()) with check (%6$I = auth.uid());\n'
        'drop policy if exists %5$I on %1$s;\ncreate policy %5$I on %1$s for delete to authenticated using (%6$I = auth.uid());',
        v_q, v_t || '_read_all', v_t || '_insert_owner', v_t || '_update_owner', v_t || '_delete_owner', v_owner);
    else
      status := 'invalid_template'; return;
    end if;
  when 'grant' then
    if jsonb_typeof(a->'roles') <> 'array' or jsonb_typeof(a->'privileges') <> 'array' then status := 'invalid_grant'; return; end if;
    select array_agg(x order by x) into v_roles from jsonb_array_elements_text(a->'roles') x;
    select array_agg(x order by array_position(array['select', 'insert', 'update', 'delete'], x)) into v_privs from jsonb_array_elements_text(a->'privileges') x;
    if v_roles is null or v_privs is null or not v_roles <@ array['anon', 'authenticated', 'service_role']
       or not v_privs <@ array['select', 'insert', 'update', 'delete'] then
      status := 'invalid_grant'; return;
    end if;
    statement := format('grant %s on %s to %s;', array_to_string(v_privs, ', '), v_q, array_to_string(v_roles, ', '));
  else
    status := 'invalid_action';
  end case;
end
$$;

/* why: POST /api/dashboard/schema: the actions' text in order, or the first problem (with the failing action's index). */
create or replace function dashboard_private.schema_sql(actions jsonb, out status text, out statement text, out failed int)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_r record;
  v_parts text[] := '{}';
  v_i int := 0;
  v_created jsonb := '[]';
begin
  if jsonb_typeof(actions) <> 'array' or jsonb_array_length(actions) = 0 or jsonb_array_length(actions) > 50 then
    status := 'invalid_action'; failed := 0; return;
  end if;
  for v_i in 0 .. jsonb_array_length(actions) - 1 loop
    -- A foreign key may point at a table made by an earlier action of the same change.
    select * into v_r from dashboard_private.schema_action(actions->v_i || jsonb_build_object('_created', v_created));
    if v_r.status <> 'ok' then status := v_r.status; failed := v_i; return; end if;
    if actions->v_i->>'action' = 'create_table' then v_created := v_created || to_jsonb(actions->v_i->>'table'); end if;
    v_parts := v_parts || v_r.statement;
  end loop;
  status := 'ok';
  statement := array_to_string(v_parts, E'\n');
end
$$;

revoke all on function dashboard_private.schema_name_ok(text), dashboard_private.schema_type_ok(text), dashboard_private.schema_default_ok(text),
  dashboard_private.schema_column(jsonb), dashboard_private.schema_action(jsonb), dashboard_private.schema_sql(jsonb) from public;
--! EndIncluded dashboard/schema.sql
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
-- A paused schedule keeps its definition but has no pending tick (POST /api/schedules/{name}/pause).
alter table plinth_private.schedules add column if not exists paused boolean not null default false;

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
  if not found or v_s.paused then return null; end if;
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
    'paused', s.paused,
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

/*
 * why: pause (no pending tick, so no run until resumed; a run already queued still runs) or
 * resume (armed again for the first tick after now). 'ok' | 'not_found'.
 */
create or replace function plinth_private.pause_schedule(name text, paused boolean)
  returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  update plinth_private.schedules s set paused = pause_schedule.paused, updated_at = now() where s.name = pause_schedule.name;
  if not found then return 'not_found'; end if;
  if paused then
    perform graphile_worker.remove_job('plinth:schedule:' || pause_schedule.name);
  else
    perform plinth_private.arm(pause_schedule.name, false);
  end if;
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
  if not found or v_s.paused then return 0; end if;
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

-- Scheduled by plinth_private.schedule_periodic('plinth__purge', …) (core/periodic.sql).

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
