--! Previous: sha1:53628176f5faee416849231bc02aa5929c0a81c7
--! Hash: sha1:63833a2867e4e833ca3fc95af75fe40575db8083
--! Message: webhooks: the outbox, attempts checked and recorded in batches, redelivery

-- Enter migration here
--! Included webhooks/hooks.sql
/*
 * why: the webhook registry (docs/api/webhooks.md). `webhooks` is the
 * public surface (entry functions, views the service role may read); the registry itself,
 * with its secrets, lives in `webhooks_private`, where no API role has USAGE, so a grant
 * mistake on `webhooks` exposes no secret (STYLE, Schemas).
 *
 * - url: http(s) only (checked by the service and again here); loopback allowed
 *   (docs/api/webhooks.md: only the service role registers webhooks).
 * - events: a non-empty set of INSERT, UPDATE, DELETE, `*` (default `{*}`: all).
 * - table_name: a table in `public`, or `*` (default): a matcher that installs nothing and
 *   receives every event a table-specific webhook's trigger raises.
 * - secret: '' = unsigned deliveries. Never returned by the service.
 * - active: true on creation (docs/api/webhooks.md shows no other state; the column lets a DBA
 *   pause a webhook: the trigger skips inactive ones).
 */
create schema if not exists webhooks;
revoke all on schema webhooks from public;
grant usage on schema webhooks to service_role;
comment on schema webhooks is E'plinth: webhooks (registry views, delivery log, entry functions). Secrets live in webhooks_private.';

create schema if not exists webhooks_private;
revoke all on schema webhooks_private from public;
comment on schema webhooks_private is E'plinth: webhook internals and secrets (the registry with its secrets, the delivery log). No API role has USAGE.';

create table if not exists webhooks_private.hooks (
  id uuid primary key default gen_random_uuid(),
  url text not null,
  events text[] not null default '{*}',
  table_name text not null default '*',
  secret text not null default '',
  active boolean not null default true,
  created_at timestamptz not null default now(),
  constraint hooks_url_check check (url ~* '^https?://[^/?#[:space:]]+' and length(url) <= 2048),
  constraint hooks_events_check check (cardinality(events) between 1 and 4
    and events <@ '{INSERT,UPDATE,DELETE,*}'::text[] and array_position(events, null) is null),
  constraint hooks_table_name_check check (length(table_name) between 1 and 63)
);
create index if not exists hooks_table_name_idx on webhooks_private.hooks (table_name);
revoke all on table webhooks_private.hooks from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table webhooks_private.hooks is E'plinth: registered webhooks (docs/api/webhooks.md), secrets included. Read through webhooks.hooks (no secret).';
comment on column webhooks_private.hooks.table_name is E'A table in public, or * (matches every event a table-specific trigger raises; installs nothing).';
comment on column webhooks_private.hooks.secret is E'HMAC-SHA256 key of X-Webhook-Signature; empty = unsigned. Never returned.';

create or replace view webhooks.hooks as
  select h.id, h.url, h.events, h.table_name, h.active, h.created_at from webhooks_private.hooks h;
revoke all on webhooks.hooks from public, anon, authenticated, ":ANONYMOUS_ROLE";
grant select on webhooks.hooks to service_role;
comment on view webhooks.hooks is E'plinth: registered webhooks without their secrets (readable by service_role).';

/*
 * why: one place that shapes the Webhook object of the wire (docs/api/webhooks.md): every field
 * but the secret; created_at ISO 8601 UTC.
 */
create or replace function webhooks_private.hook_json(h webhooks_private.hooks) returns pg_catalog.jsonb
  language sql stable parallel safe
as $$
  select pg_catalog.jsonb_build_object(
    'id', h.id,
    'url', h.url,
    'events', pg_catalog.to_jsonb(h.events),
    'table_name', h.table_name,
    'active', h.active,
    'created_at', pg_catalog.to_char(pg_catalog.timezone('UTC', h.created_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
$$;
comment on function webhooks_private.hook_json(webhooks_private.hooks) is E'The Webhook object of the wire (docs/api/webhooks.md), without the secret.';
revoke all on function webhooks_private.hook_json(webhooks_private.hooks) from public;

/*
 * why: the row trigger a table-specific webhook needs (docs/api/webhooks.md), installed once per
 * table and shared by every webhook of that table, named `_900_plinth_webhooks` so a DBA
 * recognises it (and it fires after the table's own AFTER triggers). Create and delete
 * serialise per table with a transaction-level advisory lock, so a concurrent create and
 * delete of the last webhook cannot leave a table without its trigger or with a stale one.
 */
create or replace function webhooks_private.sync_trigger(table_name text)
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_rel regclass := pg_catalog.to_regclass(pg_catalog.quote_ident('public') || '.' || pg_catalog.quote_ident(sync_trigger.table_name));
  v_wanted boolean;
  v_present boolean;
begin
  if v_rel is null then
    return;
  end if;
  v_wanted := exists (select 1 from webhooks_private.hooks h where h.table_name = sync_trigger.table_name);
  v_present := exists (select 1 from pg_catalog.pg_trigger t where t.tgrelid = v_rel and t.tgname = '_900_plinth_webhooks');
  if v_wanted and not v_present then
    execute pg_catalog.format(
      'create trigger _900_plinth_webhooks after insert or update or delete on public.%I for each row execute function webhooks_private.tg__enqueue()',
      sync_trigger.table_name);
    execute pg_catalog.format(
      'comment on trigger _900_plinth_webhooks on public.%I is %L',
      sync_trigger.table_name, 'plinth: writes each change to the webhook outbox in the same transaction (drained into webhooks__deliver jobs); removed with the table''s last webhook.');
  elsif v_present and not v_wanted then
    execute pg_catalog.format('drop trigger _900_plinth_webhooks on public.%I', sync_trigger.table_name);
  end if;
end
$$;
comment on function webhooks_private.sync_trigger(text) is E'Install or remove a public table''s webhook trigger so that it exists exactly when the table has a webhook.';
revoke all on function webhooks_private.sync_trigger(text) from public;

/*
 * why: POST /rest/v1/webhooks (docs/api/webhooks.md). The service checks the JSON shape and the
 * URL; this function checks again (constraints) and checks that table_name names a table
 * in public (docs/api/webhooks.md: otherwise 400 `invalid request`).
 * Status: ok | table_not_found | invalid_url | invalid_events.
 */
drop function if exists webhooks.create_hook(text, text[], text, text);
create function webhooks.create_hook(url text, events text[], table_name text, secret text)
  returns table (status text, hook pg_catalog.jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_events text[] := coalesce(create_hook.events, '{*}');
  v_table text := coalesce(create_hook.table_name, '*');
  v_hook webhooks_private.hooks;
begin
  if create_hook.url is null or create_hook.url !~* '^https?://[^/?#[:space:]]+' or length(create_hook.url) > 2048 then
    return query select 'invalid_url'::text, null::jsonb;
    return;
  end if;
  if cardinality(v_events) = 0 or not v_events <@ '{INSERT,UPDATE,DELETE,*}'::text[] or array_position(v_events, null) is not null then
    return query select 'invalid_events'::text, null::jsonb;
    return;
  end if;
  -- One entry per value, in the order of INSERT, UPDATE, DELETE, *.
  select array_agg(e order by array_position('{INSERT,UPDATE,DELETE,*}'::text[], e)) into v_events
    from (select distinct unnest(v_events) e) d;
  if v_table <> '*' then
    if not exists (select 1 from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
                   where n.nspname = 'public' and c.relname = v_table and c.relkind in ('r', 'p')) then
      return query select 'table_not_found'::text, null::jsonb;
      return;
    end if;
    perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('plinth_webhooks'), pg_catalog.hashtext(v_table));
  end if;
  insert into webhooks_private.hooks (url, events, table_name, secret)
    values (create_hook.url, v_events, v_table, coalesce(create_hook.secret, ''))
    returning * into v_hook;
  if v_table <> '*' then
    perform webhooks_private.sync_trigger(v_table);
  end if;
  return query select 'ok'::text, webhooks_private.hook_json(v_hook);
end
$$;
comment on function webhooks.create_hook(text, text[], text, text) is E'Register a webhook; for a specific table install its row trigger. Status: ok | table_not_found | invalid_url | invalid_events.';

/* why: GET /rest/v1/webhooks (docs/api/webhooks.md): every webhook, oldest first, without secrets. */
create or replace function webhooks.list_hooks()
  returns pg_catalog.jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(webhooks_private.hook_json(h) order by h.created_at, h.id), '[]'::jsonb)
    from webhooks_private.hooks h
$$;
comment on function webhooks.list_hooks() is E'Every webhook as a JSON array (docs/api/webhooks.md), without secrets, oldest first.';

/*
 * why: DELETE /rest/v1/webhooks/{id} (docs/api/webhooks.md): the webhook goes with its delivery
 * log; the table's trigger goes with its last webhook. Pending deliveries of a deleted
 * webhook are dropped by the task (webhooks_private.begin_attempt answers `gone`).
 * Status: ok | not_found.
 */
create or replace function webhooks.delete_hook(id uuid)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_table text;
begin
  select h.table_name into v_table from webhooks_private.hooks h where h.id = delete_hook.id;
  if not found then
    return 'not_found';
  end if;
  if v_table <> '*' then
    perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('plinth_webhooks'), pg_catalog.hashtext(v_table));
  end if;
  delete from webhooks_private.hooks h where h.id = delete_hook.id;
  if not found then
    return 'not_found';
  end if;
  if v_table <> '*' then
    perform webhooks_private.sync_trigger(v_table);
  end if;
  return 'ok';
end
$$;
comment on function webhooks.delete_hook(uuid) is E'Delete a webhook (and its log); remove the table''s trigger with its last webhook. Status: ok | not_found.';

revoke all on function webhooks.create_hook(text, text[], text, text), webhooks.list_hooks(), webhooks.delete_hook(uuid) from public;

/*
 * why: any change to the registry — through the API or a DBA's own SQL (pausing one with
 * active = false) — notifies `plinth_cache` with `webhooks`, and every instance looks again
 * whether it must poll the outbox (src/webhooks/outbox.ts; docs/architecture.md, Caches
 * reload on NOTIFY). Registry changes are rare, so this NOTIFY costs nothing that matters.
 * Delivery attempts read the url and secret from the registry itself (begin_attempt).
 */
create or replace function webhooks_private.tg__hooks_changed() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform pg_catalog.pg_notify('plinth_cache', 'webhooks');
  return null;
end
$$;
comment on function webhooks_private.tg__hooks_changed() is E'plinth: tells every instance to reload its webhook targets.';
revoke all on function webhooks_private.tg__hooks_changed() from public;

drop trigger if exists _900_notify_cache on webhooks_private.hooks;
create trigger _900_notify_cache after insert or update or delete or truncate on webhooks_private.hooks
  for each statement execute function webhooks_private.tg__hooks_changed();

/* why: the delivery task asks begin_attempt for every attempt; nothing caches the targets any more. */
drop function if exists webhooks_private.delivery_targets();
--! EndIncluded webhooks/hooks.sql
--! Included webhooks/outbox.sql
/*
 * why: webhook deliveries leave the writer's path (docs/api/webhooks.md, Deliveries;
 * docs/decisions/0046-webhook-changes-go-through-an-outbox.md). A watched table's trigger appends one row here per
 * changed row (the matching webhooks as an array, the body built once) and notifies
 * nothing: a notifying commit holds a cluster-wide lock until its WAL flush, which made the
 * writers of a watched table commit one at a time. Each instance drains the outbox in
 * batches (webhooks_private.drain_outbox, polled while any webhook is active): one
 * transaction deletes up to `lim` due rows and hands one job per (row, webhook) to
 * graphile-worker through its public `add_jobs`, whose single NOTIFY wakes the workers.
 *
 * The outbox also carries the later attempts of a delivery (a retry after a failure, an
 * attempt given back by a stopping instance, an operator's redelivery), due at `due_at`:
 * the drain's poll makes them on time, so the job worker itself can poll calmly.
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
 * Nothing is notified (outbox.sql says why): the writer pays one indexed lookup of the
 * registry and one insert into a table with two indexes. SECURITY DEFINER with a pinned
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
