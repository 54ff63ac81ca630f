--! Previous: sha1:12d31c61fa8ad118fd74cc74ebae01e725a96dc5
--! Hash: sha1:0e559975b0738e53026e70441bd67851b9515ea2
--! Message: webhooks: the outbox drain sleeps until woken; attempts recorded per table

-- Enter migration here
--! Included webhooks/outbox.sql
/*
 * why: webhook deliveries leave the writer's path (docs/api/webhooks.md, Deliveries;
 * docs/decisions/0046-webhook-changes-go-through-an-outbox.md). A watched table's trigger appends one row here per
 * changed row (the matching webhooks as an array, the body built once). Each instance
 * drains the outbox in batches (webhooks_private.drain_outbox): one transaction deletes up
 * to `lim` due rows and hands one job per (row, webhook) to graphile-worker through its
 * public `add_jobs`, whose single NOTIFY wakes the workers.
 *
 * The drains sleep until woken (src/webhooks/outbox.ts; docs/decisions/0302-the-outbox-drain-sleeps-until-woken.md):
 * a writer notifies `plinth_webhooks` only when no due row waits, since a notifying commit
 * holds a cluster-wide lock until its WAL flush (one NOTIFY per write made the writers of a
 * watched table commit one at a time); while rows keep coming, a drain that took some polls
 * again shortly and finds the next ones. A slow safety poll covers a missed wake-up.
 *
 * The outbox also carries the later attempts of a delivery (a retry after a failure, an
 * attempt given back by a stopping instance, an operator's redelivery), due at `due_at`:
 * each drain learns when the next row is due (outbox_next_due_ms) and sleeps until then.
 * A rolled-back change leaves no outbox row; a committed one is drained exactly once
 * (delete and add_jobs in one transaction, rows taken with SKIP LOCKED).
 */
create table if not exists webhooks_private.outbox (
  id bigint generated always as identity primary key,
  hooks uuid[] not null,
  delivery_id uuid,
  attempt integer not null default 1,
  event text not null,
  table_name text not null,
  created_at timestamptz not null,
  body text not null,
  request_id text,
  due_at timestamptz not null default now(),
  constraint outbox_hooks_check check (cardinality(hooks) >= 1),
  constraint outbox_attempt_check check (attempt >= 1),
  constraint outbox_delivery_check check (delivery_id is null and attempt = 1 or delivery_id is not null and cardinality(hooks) = 1)
);
create index if not exists outbox_due_at_id_idx on webhooks_private.outbox (due_at, id);
revoke all on table webhooks_private.outbox from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table webhooks_private.outbox is E'plinth: webhook attempts waiting to be handed to the job worker: a change (delivery_id null: one new delivery per webhook in hooks) or a later attempt of one delivery, due at due_at.';
comment on column webhooks_private.outbox.hooks is E'The webhooks the change matched when it was made, in registration order.';

/*
 * why: move up to `lim` due outbox rows into webhooks__deliver jobs, in one transaction,
 * through graphile-worker's public add_jobs (never its private tables). A change gets a new
 * delivery id per webhook here, once (the row is gone after this transaction). One job
 * carries up to 25 attempts of one webhook (`{"items": [...]}`, in (due_at, id) order): the
 * task asks about, posts and records them together, so an attempt's statements are shared by
 * the batch, and a slow receiver holds up only its own webhook's batch. Returns how many
 * outbox rows were taken: `lim` means more may be waiting.
 */
create or replace function webhooks_private.drain_outbox(lim integer)
  returns integer
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_rows integer;
  v_specs graphile_worker.job_spec[];
begin
  with taken as (
    delete from webhooks_private.outbox o
     where o.id = any (array(
       select o2.id from webhooks_private.outbox o2
        where o2.due_at <= pg_catalog.now()
        order by o2.due_at, o2.id
        limit greatest(drain_outbox.lim, 1)
        for update skip locked))
    returning o.*
  ), items as (
    select t.due_at, t.id, h.i, h.w,
      pg_catalog.json_build_object('d', coalesce(t.delivery_id, pg_catalog.gen_random_uuid()), 'w', h.w, 'n', t.attempt,
        'e', t.event, 't', t.table_name, 'c', t.created_at, 'b', t.body, 'r', t.request_id) as item,
      (pg_catalog.row_number() over (partition by h.w order by t.due_at, t.id, h.i) - 1) / 25 as chunk
    from taken t cross join lateral pg_catalog.unnest(t.hooks) with ordinality h(w, i)
  ), jobs as (
    select min(x.due_at) as due_at, min(x.id) as first_id,
      pg_catalog.json_build_object('items', pg_catalog.json_agg(x.item order by x.due_at, x.id, x.i)) as payload
    from items x group by x.w, x.chunk
  )
  select (select count(*)::integer from taken),
         (select array_agg(row('webhooks__deliver', j.payload, null, null, 25, null, null, null)::graphile_worker.job_spec
                   order by j.due_at, j.first_id) from jobs j)
    into v_rows, v_specs;
  if v_specs is not null then
    perform graphile_worker.add_jobs(v_specs);
  end if;
  return v_rows;
end
$$;
comment on function webhooks_private.drain_outbox(integer) is E'Hand up to lim due outbox rows to graphile-worker (add_jobs; a job carries up to 25 attempts of one webhook). Returns the rows taken.';
revoke all on function webhooks_private.drain_outbox(integer) from public;

/*
 * why: whether an instance should poll the outbox at all: only while some webhook is
 * active (an idle service with no webhook sends no query).
 */
create or replace function webhooks_private.any_active_hook()
  returns boolean
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select exists (select 1 from webhooks_private.hooks h where h.active)
    or exists (select 1 from webhooks_private.outbox)
$$;
comment on function webhooks_private.any_active_hook() is E'Whether any webhook is active or any outbox row waits: the instances poll the outbox only then.';
revoke all on function webhooks_private.any_active_hook() from public;

/*
 * why: a drain sleeps until the next row is due (a retry, an attempt given back with a
 * delay) rather than polling for it: milliseconds until the earliest row of the outbox is
 * due (0 when one is due now, rows other drains are taking included), null when it is empty.
 * Volatile: called after drain_outbox in the same statement, it sees that drain's delete.
 */
create or replace function webhooks_private.outbox_next_due_ms()
  returns integer
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select greatest(0, ceil(extract(epoch from (min(o.due_at) - pg_catalog.clock_timestamp())) * 1000))::integer
    from webhooks_private.outbox o
$$;
comment on function webhooks_private.outbox_next_due_ms() is E'Milliseconds until the earliest outbox row is due (0: now); null when the outbox is empty.';
revoke all on function webhooks_private.outbox_next_due_ms() from public;

/*
 * why: the writers' wake-up for the sleeping drains (see above): a NOTIFY on
 * `plinth_webhooks`, sent only when no due row waits, so once per burst at most, never once
 * per write. Called by the trigger before it appends its row (a transaction's later rows
 * see its first one and send nothing more), and by the rare writers of later attempts
 * (an operator's redelivery, an attempt given back).
 */
create or replace function webhooks_private.wake_drains()
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from webhooks_private.outbox o where o.due_at <= pg_catalog.now()) then
    perform pg_catalog.pg_notify('plinth_webhooks', '');
  end if;
end
$$;
comment on function webhooks_private.wake_drains() is E'plinth: wakes the outbox drains (NOTIFY plinth_webhooks) when no due outbox row waits.';
revoke all on function webhooks_private.wake_drains() from public;
--! EndIncluded webhooks/outbox.sql
--! Included webhooks/enqueue.sql
/*
 * why: the row trigger function of every watched table (docs/api/webhooks.md; docs/architecture.md,
 * Jobs and Triggers on application tables). It finds the active webhooks whose table_name is
 * this table or `*` and whose events hold this operation or `*`, and appends one row to
 * webhooks_private.outbox (outbox.sql) naming them all, in the transaction of the change: a
 * rolled-back change delivers nothing, a committed one is never lost. The instances drain the
 * outbox into webhooks__deliver jobs, one per webhook (webhooks_private.drain_outbox).
 *
 * The row carries the event, the table, the change's time, the id of the request that made
 * it and the request body as text, built here once for all matching webhooks: `{"event",
 * "table", "record"?, "old_record"?}` (docs/api/webhooks.md; record omitted for DELETE,
 * old_record for INSERT) with the row's columns in table order. As text, the body keeps every
 * number exact (a bigint beyond 2^53 would lose digits through a JavaScript parse); the task
 * sends these bytes and signs them. The secret never enters the outbox or a job: the task
 * reads it when it makes the attempt.
 *
 * The drains are woken only when no due row waits (outbox.sql says why): the writer pays
 * one indexed lookup of the registry, one indexed look at the outbox's head and one insert
 * into a table with two indexes. SECURITY DEFINER with a pinned
 * search_path (STYLE): the writer needs no right on webhooks_private. A table without a
 * webhook has no trigger and pays nothing; `*` webhooks ride on the triggers of
 * table-specific ones (docs/api/webhooks.md).
 */
create or replace function webhooks_private.tg__enqueue() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_hooks uuid[];
begin
  select pg_catalog.array_agg(h.id order by h.created_at, h.id) into v_hooks
    from webhooks_private.hooks h
   where h.active
     and (h.table_name = TG_TABLE_NAME or h.table_name = '*')
     and (TG_OP = any (h.events) or '*' = any (h.events));
  if v_hooks is null then
    return null;
  end if;
  -- webhooks_private.wake_drains, inlined (one function call less per write).
  if not exists (select 1 from webhooks_private.outbox o where o.due_at <= pg_catalog.now()) then
    perform pg_catalog.pg_notify('plinth_webhooks', '');
  end if;
  insert into webhooks_private.outbox (hooks, event, table_name, created_at, body, request_id)
    values (v_hooks, TG_OP, TG_TABLE_NAME, pg_catalog.now(),
      '{"event":"' || TG_OP || '","table":' || pg_catalog.to_json(TG_TABLE_NAME::text)::text
        || case when TG_OP <> 'DELETE' then ',"record":' || pg_catalog.to_json(NEW)::text else '' end
        || case when TG_OP <> 'INSERT' then ',"old_record":' || pg_catalog.to_json(OLD)::text else '' end
        || '}',
      nullif(pg_catalog.current_setting('request.id', true), ''));
  return null;
end
$$;
comment on function webhooks_private.tg__enqueue() is E'plinth: trigger of watched tables; appends the change to webhooks_private.outbox for the webhooks it matches (drained into webhooks__deliver jobs).';
revoke all on function webhooks_private.tg__enqueue() from public;
--! EndIncluded webhooks/enqueue.sql
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
  -- A batch naming one delivery twice (never made by the drain) goes one attempt at a time, in order.
  if (select count(distinct x.v->>'d') <> count(*) from pg_catalog.jsonb_array_elements(record_attempts.items) x(v)) then
    for v in select x.v from pg_catalog.jsonb_array_elements(record_attempts.items) with ordinality x(v, ord) order by x.ord loop
      v_out := v_out || webhooks_private.record_attempt((v->>'w')::uuid, (v->>'d')::uuid, (v->>'n')::integer, v->>'e', v->>'t',
        (v->>'c')::timestamptz, (v->>'s')::integer, v->>'x', (v->>'ms')::integer, (v->>'at')::timestamptz, v->>'b', v->>'r',
        record_attempts.delays_ms);
    end loop;
    return v_out;
  end if;
  -- record_attempt for the whole batch in one statement: a statement per table, not per attempt.
  with x as (
    select x.ord, (x.v->>'w')::uuid as w, (x.v->>'d')::uuid as d, (x.v->>'n')::integer as n, x.v->>'e' as e, x.v->>'t' as t,
      (x.v->>'c')::timestamptz as c, (x.v->>'s')::integer as s, x.v->>'x' as err, greatest((x.v->>'ms')::integer, 0) as ms,
      (x.v->>'at')::timestamptz as at, x.v->>'b' as b, x.v->>'r' as r,
      case when (x.v->>'s')::integer between 200 and 299 then 'delivered'
           when (x.v->>'n')::integer > coalesce(pg_catalog.cardinality(record_attempts.delays_ms), 0) then 'failed'
           else 'pending' end as state
    from pg_catalog.jsonb_array_elements(record_attempts.items) with ordinality x(v, ord)
  ), live as (
    -- The webhooks must outlive this transaction (a concurrent delete waits for it).
    select x.* from x where x.w in (select h.id from webhooks_private.hooks h
                                     where h.id in (select x2.w from x x2) for key share)
  ), new_deliveries as (
    insert into webhooks_private.deliveries as dd (id, webhook_id, event, table_name, state, created_at, body)
      select l.d, l.w, l.e, l.t, l.state, l.c, case when l.state = 'failed' then l.b end from live l order by l.ord
      on conflict (id) do nothing
      returning dd.id
  ), new_attempts as (
    insert into webhooks_private.attempts (delivery_id, attempt, status_code, error, duration_ms, attempted_at, request_id)
      select l.d, l.n, l.s, l.err, l.ms, l.at, l.r from live l order by l.ord
      on conflict do nothing
      returning delivery_id
  ), recorded as (
    select l.*, (l.d in (select nd.id from new_deliveries nd)) as is_new from live l
     where l.d in (select na.delivery_id from new_attempts na)
  ), retries as (
    insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body, request_id, due_at)
      select array[r.w], r.d, r.n + 1, r.e, r.t, r.c, r.b, r.r,
        pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => record_attempts.delays_ms[r.n] / 1000.0)
        from recorded r where r.state = 'pending' order by r.ord
  ), ended as (
    update webhooks_private.deliveries dd
       set state = r.state, updated_at = pg_catalog.now(), body = case when r.state = 'failed' then r.b end
      from recorded r
     where r.state <> 'pending' and not r.is_new and dd.id = r.d and dd.state = 'pending'
  )
  -- (retries and ended run to completion unread, as every data-modifying WITH does.)
  select pg_catalog.array_agg(case
           when x.w not in (select l.w from live l) then 'gone'
           when x.d not in (select r.d from recorded r) then 'duplicate'
           when x.state = 'pending' then 'retry'
           else x.state end order by x.ord)
    into v_out
    from x;
  return coalesce(v_out, '{}');
end
$$;
comment on function webhooks_private.record_attempts(jsonb, integer[]) is E'record_attempt for each attempt of a batch, in one transaction (one statement per table); their statuses in order.';
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
 * has just taken to the others, whose drains this wakes (they then sleep until it is due).
 */
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer);
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text);
create function webhooks_private.requeue_attempt(
  webhook_id uuid, delivery_id uuid, attempt integer, event text, table_name text, created_at timestamptz, body text, delay_ms integer, request_id text default null)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select webhooks_private.wake_drains();
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
  perform webhooks_private.wake_drains();
  insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body, request_id)
    values (array[v_d.webhook_id], v_d.id, v_next, v_d.event, v_d.table_name, v_d.created_at, v_d.body,
      nullif(redeliver.request_id, ''));
  return query select 'ok'::text, v_next;
end
$$;
comment on function webhooks.redeliver(uuid, uuid, text) is E'Send a failed delivery once more (a new, logged attempt). Status: ok | webhook_not_found | paused | not_found | not_failed.';
revoke all on function webhooks.redeliver(uuid, uuid, text) from public;
--! EndIncluded webhooks/deliveries.sql
