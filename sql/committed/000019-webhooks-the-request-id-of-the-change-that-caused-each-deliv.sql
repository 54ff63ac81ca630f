--! Previous: sha1:eb243d0fa1bd2dce4204d9ee700d66b496323e72
--! Hash: sha1:303a8b15bbdf4f09c039699386ccbed1283cdbaa
--! Message: webhooks: the request id of the change that caused each delivery attempt

--! Included webhooks/deliveries.sql
/*
 * why: the delivery log (docs/api/webhooks.md). One row per delivery (one change for one
 * webhook; its id is the `X-Webhook-Id` of every attempt) with its state, and one row per
 * attempt (status code or error, duration, time). A delivery row appears with its first
 * recorded attempt: the trigger only enqueues, so writes to a watched table stay cheap.
 *
 * States: pending (an attempt failed and a retry is enqueued) → delivered (a 2xx) |
 * failed (3 attempts failed). Deleting a webhook deletes its log (cascade).
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
/* why: an operator goes from a request (its X-Request-Id) to the deliveries it caused. */
alter table webhooks_private.attempts add column if not exists request_id text;
comment on column webhooks_private.attempts.request_id is E'The id (X-Request-Id) of the request whose change caused the delivery; null when no request did (SQL run outside the API).';
comment on table webhooks_private.attempts is E'plinth: every delivery attempt: the HTTP status, or the error (network error, timeout), its duration and time.';

/* why: the log for the service role without reaching into webhooks_private. */
create or replace view webhooks.delivery_attempts as
  select a.delivery_id, a.attempt, a.status_code, a.error, a.duration_ms, a.attempted_at, a.request_id
    from webhooks_private.attempts a;
create or replace view webhooks.deliveries as
  select d.id, d.webhook_id, d.event, d.table_name, d.state, d.created_at, d.updated_at,
    (select coalesce(jsonb_agg(jsonb_build_object('attempt', a.attempt, 'status', a.status_code, 'error', a.error,
        'duration_ms', a.duration_ms, 'attempted_at', a.attempted_at, 'request_id', a.request_id) order by a.attempt), '[]'::jsonb)
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
 * Jobs): a 2xx → delivered; otherwise, with attempts left, the next attempt's job is added
 * here (run_at +1 s after the first failure, +4 s after the second: docs/api/webhooks.md, not the
 * worker's exponential backoff) and the delivery stays pending; after the third → failed.
 * An attempt recorded twice (a job run again) changes nothing. `body` (the bytes sent) is
 * needed only for a retry.
 * Status: delivered | retry | failed | duplicate | gone.
 */
drop function if exists webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text);
drop function if exists webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text);
create function webhooks_private.record_attempt(
  webhook_id uuid, delivery_id uuid, attempt integer, event text, table_name text, created_at timestamptz,
  status_code integer, error text, duration_ms integer, attempted_at timestamptz, body text, request_id text default null)
  returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_state text := case when record_attempt.status_code between 200 and 299 then 'delivered'
                       when record_attempt.attempt >= 3 then 'failed' else 'pending' end;
  v_new boolean;
begin
  -- The webhook must outlive this transaction (a concurrent delete waits for it).
  perform 1 from webhooks_private.hooks h where h.id = record_attempt.webhook_id for key share;
  if not found then
    return 'gone';
  end if;
  -- The first attempt creates the delivery already in its state (the common case: one insert each).
  insert into webhooks_private.deliveries as d (id, webhook_id, event, table_name, state, created_at)
    values (record_attempt.delivery_id, record_attempt.webhook_id, record_attempt.event, record_attempt.table_name,
      v_state, record_attempt.created_at)
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
    perform graphile_worker.add_job('webhooks__deliver',
      pg_catalog.json_build_object('d', record_attempt.delivery_id, 'w', record_attempt.webhook_id,
        'n', record_attempt.attempt + 1, 'e', record_attempt.event, 't', record_attempt.table_name,
        'c', record_attempt.created_at, 'b', record_attempt.body, 'r', record_attempt.request_id),
      run_at => pg_catalog.now() + case record_attempt.attempt when 1 then interval '1 second' else interval '4 seconds' end,
      max_attempts => 25);
  elsif not v_new then
    update webhooks_private.deliveries d set state = v_state, updated_at = pg_catalog.now()
      where d.id = record_attempt.delivery_id and d.state = 'pending';
  end if;
  return case v_state when 'pending' then 'retry' else v_state end;
end
$$;
comment on function webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text) is
  E'Record a delivery attempt and move the delivery on (delivered; retry enqueued at +1 s / +4 s; failed after 3). Status: delivered | retry | failed | duplicate | gone.';

revoke all on function webhooks_private.begin_attempt(uuid, uuid, integer),
  webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text) from public;

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
 * counting it as failed: the same attempt (same delivery id, same number) is enqueued again
 * and the next instance makes it. `delay_ms` lets a stopping instance
 * leave a job it has just taken to the others.
 */
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer);
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text);
create function webhooks_private.requeue_attempt(
  webhook_id uuid, delivery_id uuid, attempt integer, event text, table_name text, created_at timestamptz, body text, delay_ms integer, request_id text default null)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job('webhooks__deliver',
    pg_catalog.json_build_object('d', requeue_attempt.delivery_id, 'w', requeue_attempt.webhook_id,
      'n', requeue_attempt.attempt, 'e', requeue_attempt.event, 't', requeue_attempt.table_name,
      'c', requeue_attempt.created_at, 'b', requeue_attempt.body, 'r', requeue_attempt.request_id),
    run_at => pg_catalog.now() + pg_catalog.make_interval(secs => requeue_attempt.delay_ms / 1000.0),
    max_attempts => 25)
$$;
comment on function webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text) is
  E'Enqueue an attempt again, unrecorded (the instance making it is stopping).';
revoke all on function webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text) from public;
--! EndIncluded webhooks/deliveries.sql
--! Included webhooks/enqueue.sql
/*
 * why: the row trigger function of every watched table (docs/api/webhooks.md; docs/architecture.md,
 * Jobs and Triggers on application tables). For each active webhook whose table_name is
 * this table or `*` and whose events hold this operation or `*`, it adds one
 * `webhooks__deliver` job in the transaction of the change: a rolled-back change delivers
 * nothing, a committed one is never lost.
 *
 * The job carries the delivery id (the `X-Webhook-Id` of every attempt), the webhook id,
 * the attempt number (1), the event, the table, the change's time and the request body as
 * text, built here once for all matching webhooks: `{"event", "table", "record"?,
 * "old_record"?}` (docs/api/webhooks.md; record omitted for DELETE, old_record for INSERT) with the
 * row's columns in table order. As text, the body keeps every number exact (a bigint beyond
 * 2^53 would lose digits through a JavaScript parse); the task sends these bytes and signs
 * them. The secret never enters the job: the task reads it when it makes the attempt.
 *
 * NOTIFY has a price (docs/architecture.md): graphile_worker.add_job notifies `jobs:insert` for every
 * job, and a notifying commit holds a cluster-wide lock until its WAL flush, so the writes
 * to a watched table would commit one at a time (measured: 150–180 single-row inserts/s
 * against 1900–2600 on the same table unwatched, 16 writers; waking the worker only while
 * its queue was short still left moderate write rates serialised). So the job row is
 * inserted the way add_jobs inserts it (same columns and defaults, no key, no queue) and
 * nothing is notified: the worker polls every 50 ms (src/worker), which bounds the wait
 * for an idle worker. If the task row is missing (the worker schema was reset) add_job
 * does it all.
 *
 * SECURITY DEFINER with a pinned search_path (STYLE): the writer needs no right on
 * webhooks_private or graphile_worker. A table without a webhook has no trigger and pays
 * nothing; `*` webhooks ride on the triggers of table-specific ones (docs/api/webhooks.md).
 */
insert into graphile_worker._private_tasks (identifier) values ('webhooks__deliver') on conflict do nothing;

create or replace function webhooks_private.tg__enqueue() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_hook uuid;
  v_body text;
  v_task integer;
  v_payload json;
begin
  for v_hook in
    select h.id from webhooks_private.hooks h
     where h.active
       and (h.table_name = TG_TABLE_NAME or h.table_name = '*')
       and (TG_OP = any (h.events) or '*' = any (h.events))
  loop
    if v_body is null then
      v_body := '{"event":"' || TG_OP || '","table":' || pg_catalog.to_json(TG_TABLE_NAME::text)::text
        || case when TG_OP <> 'DELETE' then ',"record":' || pg_catalog.to_json(NEW)::text else '' end
        || case when TG_OP <> 'INSERT' then ',"old_record":' || pg_catalog.to_json(OLD)::text else '' end
        || '}';
      select t.id into v_task from graphile_worker._private_tasks t where t.identifier = 'webhooks__deliver';
    end if;
    v_payload := pg_catalog.json_build_object('d', pg_catalog.gen_random_uuid(), 'w', v_hook, 'n', 1, 'e', TG_OP,
      't', TG_TABLE_NAME, 'c', pg_catalog.now(), 'b', v_body,
      'r', nullif(pg_catalog.current_setting('request.id', true), ''));
    if v_task is null then
      perform graphile_worker.add_job('webhooks__deliver', v_payload, max_attempts => 25);
    else
      insert into graphile_worker._private_jobs (task_id, payload, run_at, max_attempts, priority)
        values (v_task, v_payload, pg_catalog.now(), 25, 0);
    end if;
  end loop;
  return null;
end
$$;
comment on function webhooks_private.tg__enqueue() is E'plinth: trigger of watched tables; enqueues one webhooks__deliver job per matching webhook in the transaction of the change (notifies the worker only when no job was waiting).';
revoke all on function webhooks_private.tg__enqueue() from public;
--! EndIncluded webhooks/enqueue.sql
