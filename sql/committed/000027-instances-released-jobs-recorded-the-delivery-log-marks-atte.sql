--! Previous: sha1:6f0039566c7a1eb815983ab8bb945b44e3583a52
--! Hash: sha1:c717cc82fc2ad47b2c2776c61bd64846468be039
--! Message: instances: released jobs recorded; the delivery log marks attempts a dead instance may have repeated

-- Enter migration here
--! Included core/instances.sql
/*
 * why: instances of plinth on one database know each other, so that one killed (kill -9, a
 * lost machine) leaves nothing locked for long. Each instance registers at start and beats
 * on its listener connection; its row names the graphile-worker pools it runs (their ids are
 * what jobs are locked by). One whose beat is older than INSTANCE_DEAD_MS is declared dead by
 * the next beat of any survivor: its locked jobs are unlocked at once (graphile-worker's
 * force_unlock_workers: they run again, from the next attempt, on a live worker), its live
 * instance row goes (the live heartbeat then removes its clients' presence and announces
 * presence_leave), and its row goes. An instance that starts under the name (host:port) of a
 * row still registered is that instance restarted: it takes the old row's jobs back the same
 * way at once, without waiting for INSTANCE_DEAD_MS.
 */
create schema if not exists plinth_private;
revoke all on schema plinth_private from public;
comment on schema plinth_private is E'plinth: the service\'s own bookkeeping across instances (internal).';

create table if not exists plinth_private.instances (
  id uuid primary key,
  name text not null,
  worker_ids text[] not null default '{}',
  started_at timestamptz not null default now(),
  seen_at timestamptz not null default now()
);
create index if not exists instances_name_idx on plinth_private.instances (name);
comment on table plinth_private.instances is E'plinth: running service instances, their graphile-worker pool ids and last heartbeat.';

/* why: the jobs a dead (or restarted) instance had locked, as they were when released: it may
   have started them (sent a webhook) without recording the outcome, so an area can tell that
   the retry may repeat them (the webhook delivery log's `repeat_possible`). The areas read the
   rows when a retry records its outcome; a row goes after a day. */
create table if not exists plinth_private.released_jobs (
  task text not null,
  payload json not null,
  released_at timestamptz not null default now()
);
create index if not exists released_jobs_task_idx on plinth_private.released_jobs (task);
comment on table plinth_private.released_jobs is E'plinth: jobs a dead instance had locked when they were unlocked (their retry may repeat an effect).';

/* why: what a dead (or restarted) instance leaves: its jobs unlocked (recorded in
   released_jobs first), its live row gone. Returns how many jobs were unlocked. */
create or replace function plinth_private.release_instance(id uuid, worker_ids text[])
  returns integer
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_jobs integer := 0;
begin
  if cardinality(release_instance.worker_ids) > 0 then
    delete from plinth_private.released_jobs r where r.released_at < now() - interval '1 day';
    insert into plinth_private.released_jobs (task, payload)
      select t.identifier, j.payload
        from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
       where j.locked_by = any(release_instance.worker_ids);
    get diagnostics v_jobs = row_count;
    perform graphile_worker.force_unlock_workers(release_instance.worker_ids);
  end if;
  delete from live_private.instances i where i.id = release_instance.id;
  return v_jobs;
end
$$;
revoke all on function plinth_private.release_instance(uuid, text[]) from public;

/* why: an instance starts: registered, and a previous run under the same name (killed,
   restarted) is released at once. Returns what was released. */
create or replace function plinth_private.instance_start(id uuid, name text)
  returns table (released_id uuid, released_name text, jobs integer, silent_ms bigint)
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  insert into plinth_private.instances as i (id, name) values (instance_start.id, instance_start.name)
  on conflict on constraint instances_pkey do update set seen_at = now();
  return query
    with gone as (
      delete from plinth_private.instances i
       where i.name = instance_start.name and i.id <> instance_start.id
      returning i.id, i.name, i.worker_ids, i.seen_at
    )
    select g.id, g.name, plinth_private.release_instance(g.id, g.worker_ids),
           (extract(epoch from now() - g.seen_at) * 1000)::bigint
      from gone g;
end
$$;
revoke all on function plinth_private.instance_start(uuid, text) from public;

/* why: one beat: this instance is alive (its worker pools as given); every instance silent
   for more than `dead_ms` is declared dead and released. Two survivors never release the
   same one (skip locked). Returns the instances declared dead by this beat. */
create or replace function plinth_private.instance_beat(id uuid, name text, worker_ids text[], dead_ms integer)
  returns table (released_id uuid, released_name text, jobs integer, silent_ms bigint)
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform pg_catalog.set_config('synchronous_commit', 'off', true);
  insert into plinth_private.instances as i (id, name, worker_ids) values (instance_beat.id, instance_beat.name, instance_beat.worker_ids)
  on conflict on constraint instances_pkey do update set seen_at = now(), worker_ids = excluded.worker_ids;
  return query
    with dead as (
      select i.id from plinth_private.instances i
       where i.seen_at < now() - make_interval(secs => instance_beat.dead_ms / 1000.0) and i.id <> instance_beat.id
       for update skip locked
    ), gone as (
      delete from plinth_private.instances i using dead d where i.id = d.id
      returning i.id, i.name, i.worker_ids, i.seen_at
    )
    select g.id, g.name, plinth_private.release_instance(g.id, g.worker_ids),
           (extract(epoch from now() - g.seen_at) * 1000)::bigint
      from gone g;
end
$$;
revoke all on function plinth_private.instance_beat(uuid, text, text[], integer) from public;

/* why: an instance that stops cleanly leaves the registry (its worker has released its jobs). */
create or replace function plinth_private.instance_stop(id uuid)
  returns void
  language sql
  set search_path = pg_catalog, pg_temp
as $$
  delete from plinth_private.instances i where i.id = instance_stop.id;
$$;
revoke all on function plinth_private.instance_stop(uuid) from public;
--! EndIncluded core/instances.sql
--! Included webhooks/repeats.sql
/*
 * why: a webhook receiver may see an attempt twice only where the first try's outcome was
 * never recorded: the instance making it died (kill -9) between sending and recording, and a
 * survivor released its job (core/instances.sql), which runs the attempt again. The attempt
 * the retry records says so (`repeat_possible`), read from the released job's record.
 */
alter table webhooks_private.attempts add column if not exists repeat_possible boolean not null default false;
comment on column webhooks_private.attempts.repeat_possible is E'The attempt ran again after the instance that first took it died before recording it: the receiver may have seen it twice.';

create or replace function webhooks_private.attempt_repeat_possible()
  returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  -- A released job carries its attempts as {"items": [{"d": delivery, "n": attempt, …}, …]}.
  -- The rows stay (several attempts share one); release_instance drops them after a day.
  new.repeat_possible := exists (
    select 1 from plinth_private.released_jobs r
     cross join lateral pg_catalog.json_array_elements(r.payload -> 'items') i(item)
     where r.task = 'webhooks__deliver'
       and i.item ->> 'd' = new.delivery_id::text
       and (i.item ->> 'n')::integer = new.attempt);
  return new;
end
$$;
revoke all on function webhooks_private.attempt_repeat_possible() from public;

drop trigger if exists attempts_repeat_possible on webhooks_private.attempts;
create trigger attempts_repeat_possible before insert on webhooks_private.attempts
  for each row execute function webhooks_private.attempt_repeat_possible();
--! EndIncluded webhooks/repeats.sql
--! Included webhooks/deliveries.sql
/*
 * why: the delivery log (docs/api/webhooks.md). One row per delivery (one change for one
 * webhook; its id is the `X-Webhook-Id` of every attempt) with its state, and one row per
 * attempt (status code or error, duration, time). A delivery row appears with its first
 * recorded attempt: the trigger only enqueues, so writes to a watched table stay cheap.
 *
 * States: pending (an attempt failed and a retry is enqueued) → delivered (a 2xx) |
 * failed (the schedule's last attempt failed; by default the third) → pending again when an
 * operator redelivers it. Deleting a webhook deletes its log (cascade).
 */
create table if not exists webhooks_private.deliveries (
  id uuid primary key,
  webhook_id uuid not null references webhooks_private.hooks (id) on delete cascade,
  event text not null,
  table_name text not null,
  state text not null default 'pending',
  created_at timestamptz not null,
  updated_at timestamptz not null default now(),
  constraint deliveries_event_check check (event in ('INSERT', 'UPDATE', 'DELETE')),
  constraint deliveries_state_check check (state in ('pending', 'delivered', 'failed'))
);
create index if not exists deliveries_webhook_id_created_at_idx on webhooks_private.deliveries (webhook_id, created_at desc, id desc);
create index if not exists deliveries_created_at_idx on webhooks_private.deliveries (created_at);
revoke all on table webhooks_private.deliveries from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table webhooks_private.deliveries is E'plinth: one row per webhook delivery (its id is the X-Webhook-Id header); state pending | delivered | failed.';
/* why: a failed delivery keeps the bytes it sent, so that an operator can redeliver it. */
alter table webhooks_private.deliveries add column if not exists body text;
comment on column webhooks_private.deliveries.body is E'The request body of a failed delivery (what a redelivery sends); null otherwise.';
comment on column webhooks_private.deliveries.created_at is E'When the change that caused the delivery was made (its transaction''s time).';

create table if not exists webhooks_private.attempts (
  delivery_id uuid not null references webhooks_private.deliveries (id) on delete cascade,
  attempt smallint not null,
  status_code integer,
  error text,
  duration_ms integer not null,
  attempted_at timestamptz not null,
  primary key (delivery_id, attempt),
  constraint attempts_attempt_check check (attempt between 1 and 3),
  constraint attempts_outcome_check check (status_code is not null or error is not null),
  constraint attempts_status_code_check check (status_code is null or status_code between 100 and 999),
  constraint attempts_duration_check check (duration_ms >= 0)
);
revoke all on table webhooks_private.attempts from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
/* why: WEBHOOK_RETRY_SCHEDULE may allow more than three attempts, and a redelivery adds one. */
alter table webhooks_private.attempts drop constraint if exists attempts_attempt_check;
alter table webhooks_private.attempts add constraint attempts_attempt_check check (attempt >= 1);
/* why: an operator goes from a request (its X-Request-Id) to the deliveries it caused. */
alter table webhooks_private.attempts add column if not exists request_id text;
comment on column webhooks_private.attempts.request_id is E'The id (X-Request-Id) of the request whose change caused the delivery; null when no request did (SQL run outside the API).';
comment on table webhooks_private.attempts is E'plinth: every delivery attempt: the HTTP status, or the error (network error, timeout), its duration and time.';

/* why: the log for the service role without reaching into webhooks_private. */
create or replace view webhooks.delivery_attempts as
  select a.delivery_id, a.attempt, a.status_code, a.error, a.duration_ms, a.attempted_at, a.request_id, a.repeat_possible
    from webhooks_private.attempts a;
create or replace view webhooks.deliveries as
  select d.id, d.webhook_id, d.event, d.table_name, d.state, d.created_at, d.updated_at,
    (select coalesce(jsonb_agg(jsonb_build_object('attempt', a.attempt, 'status', a.status_code, 'error', a.error,
        'duration_ms', a.duration_ms, 'attempted_at', a.attempted_at, 'request_id', a.request_id,
        'repeat_possible', a.repeat_possible) order by a.attempt), '[]'::jsonb)
       from webhooks_private.attempts a where a.delivery_id = d.id) as attempts
    from webhooks_private.deliveries d;
revoke all on webhooks.deliveries, webhooks.delivery_attempts from public, anon, authenticated, ":ANONYMOUS_ROLE";
grant select on webhooks.deliveries, webhooks.delivery_attempts to service_role;
comment on view webhooks.deliveries is E'plinth: the webhook delivery log (readable by service_role): each delivery with its state and attempts.';
comment on view webhooks.delivery_attempts is E'plinth: every webhook delivery attempt (readable by service_role).';

/*
 * why: before an attempt, the task learns where to send it and with which secret, and
 * whether the attempt is still due: `gone` when the webhook was deleted (or paused: active
 * = false) since the change, `done` when this attempt was already recorded (a job run again
 * after a crash between recording and completing) or the delivery already ended.
 * Status: ok | gone | done.
 */
drop function if exists webhooks_private.begin_attempt(uuid, uuid, integer);
create function webhooks_private.begin_attempt(webhook_id uuid, delivery_id uuid, attempt integer)
  returns table (status text, url text, secret text)
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select case
      when h.id is null or not h.active then 'gone'
      when exists (select 1 from webhooks_private.attempts a
                    where a.delivery_id = begin_attempt.delivery_id and a.attempt >= begin_attempt.attempt)
        or exists (select 1 from webhooks_private.deliveries d
                    where d.id = begin_attempt.delivery_id and d.state <> 'pending') then 'done'
      else 'ok' end,
    case when h.active then h.url end,
    case when h.active then h.secret end
  from (select 1) one
  left join webhooks_private.hooks h on h.id = begin_attempt.webhook_id
$$;
comment on function webhooks_private.begin_attempt(uuid, uuid, integer) is E'Where and with which secret an attempt goes, if it is still due. Status: ok | gone | done.';

/*
 * why: after an attempt, record it and move the delivery on, in one transaction (docs/architecture.md,
 * Jobs): a 2xx → delivered; otherwise, with attempts left, the next attempt is appended to the
 * outbox, due `delays_ms[attempt]` after this one ended (WEBHOOK_RETRY_SCHEDULE; by default
 * 1 s then 4 s: docs/api/webhooks.md, not the worker's exponential backoff), and the delivery
 * stays pending; after the schedule's last attempt (or a redelivered one) → failed, keeping
 * the body for a redelivery. An attempt recorded twice (a job run again) changes nothing.
 * `body` (the bytes sent) is needed only after a failure.
 * Status: delivered | retry | failed | duplicate | gone.
 */
drop function if exists webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text);
drop function if exists webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text);
drop function if exists webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text, integer[]);
create function webhooks_private.record_attempt(
  webhook_id uuid, delivery_id uuid, attempt integer, event text, table_name text, created_at timestamptz,
  status_code integer, error text, duration_ms integer, attempted_at timestamptz, body text, request_id text,
  delays_ms integer[])
  returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_state text := case when record_attempt.status_code between 200 and 299 then 'delivered'
                       when record_attempt.attempt > coalesce(pg_catalog.cardinality(record_attempt.delays_ms), 0) then 'failed'
                       else 'pending' end;
  v_new boolean;
begin
  -- The webhook must outlive this transaction (a concurrent delete waits for it).
  perform 1 from webhooks_private.hooks h where h.id = record_attempt.webhook_id for key share;
  if not found then
    return 'gone';
  end if;
  -- The first attempt creates the delivery already in its state (the common case: one insert each).
  insert into webhooks_private.deliveries as d (id, webhook_id, event, table_name, state, created_at, body)
    values (record_attempt.delivery_id, record_attempt.webhook_id, record_attempt.event, record_attempt.table_name,
      v_state, record_attempt.created_at, case when v_state = 'failed' then record_attempt.body end)
    on conflict (id) do nothing;
  v_new := found;
  insert into webhooks_private.attempts (delivery_id, attempt, status_code, error, duration_ms, attempted_at, request_id)
    values (record_attempt.delivery_id, record_attempt.attempt, record_attempt.status_code,
      record_attempt.error,
      greatest(record_attempt.duration_ms, 0), record_attempt.attempted_at, record_attempt.request_id)
    on conflict do nothing;
  if not found then
    return 'duplicate';
  end if;
  if v_state = 'pending' then
    insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body, request_id, due_at)
      values (array[record_attempt.webhook_id], record_attempt.delivery_id, record_attempt.attempt + 1, record_attempt.event,
        record_attempt.table_name, record_attempt.created_at, record_attempt.body, record_attempt.request_id,
        pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => record_attempt.delays_ms[record_attempt.attempt] / 1000.0));
  elsif not v_new then
    update webhooks_private.deliveries d
       set state = v_state, updated_at = pg_catalog.now(),
           body = case when v_state = 'failed' then record_attempt.body end
     where d.id = record_attempt.delivery_id and d.state = 'pending';
  end if;
  return case v_state when 'pending' then 'retry' else v_state end;
end
$$;
comment on function webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text, integer[]) is
  E'Record a delivery attempt and move the delivery on (delivered; next attempt queued after delays_ms[attempt]; failed after the last). Status: delivered | retry | failed | duplicate | gone.';

revoke all on function webhooks_private.begin_attempt(uuid, uuid, integer),
  webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text, integer[]) from public;

/*
 * why: a job carries a batch of attempts (outbox.sql): the task asks about all of them in one
 * statement and records all of them in one transaction. `items` is the job's array of
 * attempts (`d` delivery, `w` webhook, `n` attempt, …); begin_attempts answers in its order.
 * record_attempts takes, per attempt, its fields and its outcome (`s` status code, `x` error,
 * `ms` duration, `at` time) and returns record_attempt's status for each, in order.
 */
create or replace function webhooks_private.begin_attempts(items jsonb)
  returns table (status text, url text, secret text)
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select b.status, b.url, b.secret
    from pg_catalog.jsonb_array_elements(begin_attempts.items) with ordinality x(v, ord)
    cross join lateral webhooks_private.begin_attempt((x.v->>'w')::uuid, (x.v->>'d')::uuid, (x.v->>'n')::integer) b
   order by x.ord
$$;
comment on function webhooks_private.begin_attempts(jsonb) is E'begin_attempt for each attempt of a batch, in its order.';
revoke all on function webhooks_private.begin_attempts(jsonb) from public;

create or replace function webhooks_private.record_attempts(items jsonb, delays_ms integer[])
  returns text[]
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v jsonb;
  v_out text[] := '{}';
begin
  for v in select x.v from pg_catalog.jsonb_array_elements(record_attempts.items) with ordinality x(v, ord) order by x.ord loop
    v_out := v_out || webhooks_private.record_attempt((v->>'w')::uuid, (v->>'d')::uuid, (v->>'n')::integer, v->>'e', v->>'t',
      (v->>'c')::timestamptz, (v->>'s')::integer, v->>'x', (v->>'ms')::integer, (v->>'at')::timestamptz, v->>'b', v->>'r',
      record_attempts.delays_ms);
  end loop;
  return v_out;
end
$$;
comment on function webhooks_private.record_attempts(jsonb, integer[]) is E'record_attempt for each attempt of a batch, in one transaction; their statuses in order.';
revoke all on function webhooks_private.record_attempts(jsonb, integer[]) from public;

/*
 * why: GET /rest/v1/webhooks/{id}/deliveries: the newest `lim`
 * deliveries, each with its id, event, table, state, time and attempts.
 * Status: ok | not_found.
 */
drop function if exists webhooks.list_deliveries(uuid, integer);
create function webhooks.list_deliveries(webhook_id uuid, lim integer)
  returns table (status text, deliveries pg_catalog.jsonb)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select case when h.id is null then 'not_found' else 'ok' end,
    case when h.id is not null then (
      select coalesce(jsonb_agg(jsonb_build_object(
          'id', d.id,
          'event', d.event,
          'table', d.table_name,
          'state', d.state,
          'created_at', to_char(timezone('UTC', d.created_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
          'attempts', (select coalesce(jsonb_agg(jsonb_build_object(
                'attempt', a.attempt,
                'status', a.status_code,
                'error', a.error,
                'duration_ms', a.duration_ms,
                'request_id', a.request_id,
                'repeat_possible', a.repeat_possible,
                'attempted_at', to_char(timezone('UTC', a.attempted_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
                order by a.attempt), '[]'::jsonb)
              from webhooks_private.attempts a where a.delivery_id = d.id))
          order by d.created_at desc, d.id desc), '[]'::jsonb)
        from (select * from webhooks_private.deliveries d0
               where d0.webhook_id = h.id
               order by d0.created_at desc, d0.id desc
               limit greatest(list_deliveries.lim, 0)) d)
    end
  from (select 1) one
  left join webhooks_private.hooks h on h.id = list_deliveries.webhook_id
$$;
comment on function webhooks.list_deliveries(uuid, integer) is E'The newest deliveries of a webhook with their attempts (JSON array). Status: ok | not_found.';
revoke all on function webhooks.list_deliveries(uuid, integer) from public;

/*
 * why: a service that stops in the middle of an attempt gives the attempt back instead of
 * counting it as failed: the same attempt (same delivery id, same number) goes back to the
 * outbox and the next instance makes it. `delay_ms` lets a stopping instance leave a job it
 * has just taken to the others.
 */
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer);
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text);
create function webhooks_private.requeue_attempt(
  webhook_id uuid, delivery_id uuid, attempt integer, event text, table_name text, created_at timestamptz, body text, delay_ms integer, request_id text default null)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body, request_id, due_at)
    values (array[requeue_attempt.webhook_id], requeue_attempt.delivery_id, requeue_attempt.attempt, requeue_attempt.event,
      requeue_attempt.table_name, requeue_attempt.created_at, requeue_attempt.body, requeue_attempt.request_id,
      pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => requeue_attempt.delay_ms / 1000.0))
$$;
comment on function webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text) is
  E'Give an attempt back to the outbox, unrecorded (the instance making it is stopping).';
revoke all on function webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text) from public;

/*
 * why: POST /rest/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver (docs/api/webhooks.md):
 * an operator sends a failed delivery once more, after its receiver is back. The delivery
 * turns pending and its next attempt (numbered after the last) goes to the outbox at once,
 * carrying the redeliver request's id; that attempt is logged like any other, and its
 * failure makes the delivery failed again (no further retries). The row lock makes two
 * concurrent redeliveries one: the second finds the delivery pending.
 * Status: ok | webhook_not_found | paused | not_found | not_failed.
 */
drop function if exists webhooks.redeliver(uuid, uuid, text);
create function webhooks.redeliver(webhook_id uuid, delivery_id uuid, request_id text)
  returns table (status text, attempt integer)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_d webhooks_private.deliveries;
  v_next integer;
  v_active boolean;
begin
  select h.active into v_active from webhooks_private.hooks h where h.id = redeliver.webhook_id for key share;
  if not found then
    return query select 'webhook_not_found'::text, null::integer;
    return;
  end if;
  if not v_active then
    return query select 'paused'::text, null::integer;
    return;
  end if;
  select * into v_d from webhooks_private.deliveries d
   where d.id = redeliver.delivery_id and d.webhook_id = redeliver.webhook_id for update;
  if not found then
    return query select 'not_found'::text, null::integer;
    return;
  end if;
  if v_d.state <> 'failed' or v_d.body is null then
    return query select 'not_failed'::text, null::integer;
    return;
  end if;
  select coalesce(max(a.attempt), 0) + 1 into v_next from webhooks_private.attempts a where a.delivery_id = v_d.id;
  update webhooks_private.deliveries d set state = 'pending', body = null, updated_at = pg_catalog.now() where d.id = v_d.id;
  insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body, request_id)
    values (array[v_d.webhook_id], v_d.id, v_next, v_d.event, v_d.table_name, v_d.created_at, v_d.body,
      nullif(redeliver.request_id, ''));
  return query select 'ok'::text, v_next;
end
$$;
comment on function webhooks.redeliver(uuid, uuid, text) is E'Send a failed delivery once more (a new, logged attempt). Status: ok | webhook_not_found | paused | not_found | not_failed.';
revoke all on function webhooks.redeliver(uuid, uuid, text) from public;
--! EndIncluded webhooks/deliveries.sql
