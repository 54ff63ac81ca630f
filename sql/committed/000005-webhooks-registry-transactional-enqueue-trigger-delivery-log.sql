--! Previous: sha1:f596efb956f20cd89d92d059ab1dcd55c22884f4
--! Hash: sha1:69388b328d6d12f1f973287217c074104b0addc7
--! Message: webhooks: registry, transactional enqueue trigger, delivery log, purge

-- Enter migration here
--! Included webhooks/hooks.sql
/*
 * why: the webhook registry (interface §2.3, §3.4, §4.6; issue 12). `webhooks` is the
 * public surface (entry functions, views the service role may read); the registry itself,
 * with its secrets, lives in `webhooks_private`, where no API role has USAGE, so a grant
 * mistake on `webhooks` exposes no secret (STYLE, Schemas).
 *
 * - url: http(s) only (checked by the service and again here); loopback allowed
 *   (contract §9: only the service role registers webhooks).
 * - events: a non-empty set of INSERT, UPDATE, DELETE, `*` (default `{*}`: all).
 * - table_name: a table in `public`, or `*` (default): a matcher that installs nothing and
 *   receives every event a table-specific webhook's trigger raises.
 * - secret: '' = unsigned deliveries. Never returned by the service.
 * - active: true on creation (interface §3.4 shows no other state; the column lets a DBA
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
comment on table webhooks_private.hooks is E'plinth: registered webhooks (interface §2.3), secrets included. Read through webhooks.hooks (no secret).';
comment on column webhooks_private.hooks.table_name is E'A table in public, or * (matches every event a table-specific trigger raises; installs nothing).';
comment on column webhooks_private.hooks.secret is E'HMAC-SHA256 key of X-Webhook-Signature; empty = unsigned. Never returned.';

create or replace view webhooks.hooks as
  select h.id, h.url, h.events, h.table_name, h.active, h.created_at from webhooks_private.hooks h;
revoke all on webhooks.hooks from public, anon, authenticated, ":ANONYMOUS_ROLE";
grant select on webhooks.hooks to service_role;
comment on view webhooks.hooks is E'plinth: registered webhooks without their secrets (readable by service_role).';

/*
 * why: one place that shapes the Webhook object of the wire (interface §2.3): every field
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
comment on function webhooks_private.hook_json(webhooks_private.hooks) is E'The Webhook object of the wire (interface §2.3), without the secret.';
revoke all on function webhooks_private.hook_json(webhooks_private.hooks) from public;

/*
 * why: the row trigger a table-specific webhook needs (interface §4.6), installed once per
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
      sync_trigger.table_name, 'plinth: enqueues webhook deliveries (webhooks__deliver jobs) in the same transaction; removed with the table''s last webhook.');
  elsif v_present and not v_wanted then
    execute pg_catalog.format('drop trigger _900_plinth_webhooks on public.%I', sync_trigger.table_name);
  end if;
end
$$;
comment on function webhooks_private.sync_trigger(text) is E'Install or remove a public table''s webhook trigger so that it exists exactly when the table has a webhook.';
revoke all on function webhooks_private.sync_trigger(text) from public;

/*
 * why: POST /rest/v1/webhooks (interface §4.6). The service checks the JSON shape and the
 * URL; this function checks again (constraints) and checks that table_name names a table
 * in public (contract §9: otherwise 400 `invalid request`).
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

/* why: GET /rest/v1/webhooks (interface §4.6): every webhook, oldest first, without secrets. */
create or replace function webhooks.list_hooks()
  returns pg_catalog.jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(webhooks_private.hook_json(h) order by h.created_at, h.id), '[]'::jsonb)
    from webhooks_private.hooks h
$$;
comment on function webhooks.list_hooks() is E'Every webhook as a JSON array (interface §2.3, without secrets), oldest first.';

/*
 * why: DELETE /rest/v1/webhooks/{id} (interface §3.4): the webhook goes with its delivery
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
 * why: each instance keeps the active webhooks' url and secret in memory, so a delivery
 * attempt costs one statement (its record), not two. Any change to the registry — through
 * the API or a DBA's own SQL (pausing one with active = false) — notifies `plinth_cache`
 * with `webhooks`, and every instance reloads (design.md, Caches reload on NOTIFY).
 * Registry changes are rare, so this NOTIFY costs nothing that matters.
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

/* why: what the delivery task caches: where each active webhook delivers, and its secret. */
create or replace function webhooks_private.delivery_targets()
  returns table (id uuid, url text, secret text)
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select h.id, h.url, h.secret from webhooks_private.hooks h where h.active
$$;
comment on function webhooks_private.delivery_targets() is E'Every active webhook''s url and secret (the delivery task''s cache).';
revoke all on function webhooks_private.delivery_targets() from public;
--! EndIncluded webhooks/hooks.sql
--! Included webhooks/enqueue.sql
/*
 * why: the row trigger function of every watched table (interface §4.6, §6.1; design.md,
 * Jobs and Triggers on application tables). For each active webhook whose table_name is
 * this table or `*` and whose events hold this operation or `*`, it adds one
 * `webhooks__deliver` job in the transaction of the change: a rolled-back change delivers
 * nothing, a committed one is never lost.
 *
 * The job carries the delivery id (the `X-Webhook-Id` of every attempt), the webhook id,
 * the attempt number (1), the event, the table, the change's time and the request body as
 * text, built here once for all matching webhooks: `{"event", "table", "record"?,
 * "old_record"?}` (interface §6.1; record omitted for DELETE, old_record for INSERT) with the
 * row's columns in table order. As text, the body keeps every number exact (a bigint beyond
 * 2^53 would lose digits through a JavaScript parse); the task sends these bytes and signs
 * them. The secret never enters the job: the task reads it when it makes the attempt.
 *
 * NOTIFY has a price (design.md): graphile_worker.add_job notifies `jobs:insert` for every
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
 * nothing; `*` webhooks ride on the triggers of table-specific ones (interface §4.6).
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
      't', TG_TABLE_NAME, 'c', pg_catalog.now(), 'b', v_body);
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
--! Included webhooks/deliveries.sql
/*
 * why: the delivery log (issue 12, item 4). One row per delivery (one change for one
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
comment on table webhooks_private.attempts is E'plinth: every delivery attempt: the HTTP status, or the error (network error, timeout), its duration and time.';

/* why: the log for the service role (issue 12, item 4) without reaching into webhooks_private. */
create or replace view webhooks.delivery_attempts as
  select a.delivery_id, a.attempt, a.status_code, a.error, a.duration_ms, a.attempted_at
    from webhooks_private.attempts a;
create or replace view webhooks.deliveries as
  select d.id, d.webhook_id, d.event, d.table_name, d.state, d.created_at, d.updated_at,
    (select coalesce(jsonb_agg(jsonb_build_object('attempt', a.attempt, 'status', a.status_code, 'error', a.error,
        'duration_ms', a.duration_ms, 'attempted_at', a.attempted_at) order by a.attempt), '[]'::jsonb)
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
 * why: after an attempt, record it and move the delivery on, in one transaction (design.md,
 * Jobs): a 2xx → delivered; otherwise, with attempts left, the next attempt's job is added
 * here (run_at +1 s after the first failure, +4 s after the second: interface §6.1, not the
 * worker's exponential backoff) and the delivery stays pending; after the third → failed.
 * An attempt recorded twice (a job run again) changes nothing. `body` (the bytes sent) is
 * needed only for a retry.
 * Status: delivered | retry | failed | duplicate | gone.
 */
drop function if exists webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text);
create function webhooks_private.record_attempt(
  webhook_id uuid, delivery_id uuid, attempt integer, event text, table_name text, created_at timestamptz,
  status_code integer, error text, duration_ms integer, attempted_at timestamptz, body text)
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
  insert into webhooks_private.attempts (delivery_id, attempt, status_code, error, duration_ms, attempted_at)
    values (record_attempt.delivery_id, record_attempt.attempt, record_attempt.status_code,
      record_attempt.error,
      greatest(record_attempt.duration_ms, 0), record_attempt.attempted_at)
    on conflict do nothing;
  if not found then
    return 'duplicate';
  end if;
  if v_state = 'pending' then
    perform graphile_worker.add_job('webhooks__deliver',
      pg_catalog.json_build_object('d', record_attempt.delivery_id, 'w', record_attempt.webhook_id,
        'n', record_attempt.attempt + 1, 'e', record_attempt.event, 't', record_attempt.table_name,
        'c', record_attempt.created_at, 'b', record_attempt.body),
      run_at => pg_catalog.now() + case record_attempt.attempt when 1 then interval '1 second' else interval '4 seconds' end,
      max_attempts => 25);
  elsif not v_new then
    update webhooks_private.deliveries d set state = v_state, updated_at = pg_catalog.now()
      where d.id = record_attempt.delivery_id and d.state = 'pending';
  end if;
  return case v_state when 'pending' then 'retry' else v_state end;
end
$$;
comment on function webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text) is
  E'Record a delivery attempt and move the delivery on (delivered; retry enqueued at +1 s / +4 s; failed after 3). Status: delivered | retry | failed | duplicate | gone.';

revoke all on function webhooks_private.begin_attempt(uuid, uuid, integer),
  webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text) from public;

/*
 * why: GET /rest/v1/webhooks/{id}/deliveries (issue 12, item 4): the newest `lim`
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
 * and the next instance makes it (issue 12, item 5). `delay_ms` lets a stopping instance
 * leave a job it has just taken to the others.
 */
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer);
create function webhooks_private.requeue_attempt(
  webhook_id uuid, delivery_id uuid, attempt integer, event text, table_name text, created_at timestamptz, body text, delay_ms integer)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job('webhooks__deliver',
    pg_catalog.json_build_object('d', requeue_attempt.delivery_id, 'w', requeue_attempt.webhook_id,
      'n', requeue_attempt.attempt, 'e', requeue_attempt.event, 't', requeue_attempt.table_name,
      'c', requeue_attempt.created_at, 'b', requeue_attempt.body),
    run_at => pg_catalog.now() + pg_catalog.make_interval(secs => requeue_attempt.delay_ms / 1000.0),
    max_attempts => 25)
$$;
comment on function webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer) is
  E'Enqueue an attempt again, unrecorded (the instance making it is stopping).';
revoke all on function webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer) from public;
--! EndIncluded webhooks/deliveries.sql
--! Included webhooks/purge.sql
/*
 * why: the delivery log keeps 7 days (issue 12, item 4). Run hourly by the
 * `webhooks__purge` job beside `auth__purge`, on the same schedule and in the same way: one
 * pending job for all instances (job_key), re-enqueued by itself, its time kept across
 * restarts (preserve_run_at). Returns how many deliveries went (their attempts go with them).
 */
drop function if exists webhooks.purge_log();
create function webhooks.purge_log()
  returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_deliveries bigint;
begin
  delete from webhooks_private.deliveries d where d.created_at < now() - interval '7 days';
  get diagnostics v_deliveries = row_count;
  return pg_catalog.jsonb_build_object('deliveries', v_deliveries);
end
$$;
comment on function webhooks.purge_log() is E'Delete webhook deliveries (with their attempts) older than 7 days. Returns the count.';

drop function if exists webhooks.schedule_purge(integer);
create function webhooks.schedule_purge(delay_seconds integer)
  returns void
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job('webhooks__purge', '{}'::json,
    run_at => now() + make_interval(secs => schedule_purge.delay_seconds),
    job_key => 'webhooks__purge', job_key_mode => 'preserve_run_at', max_attempts => 3)
$$;
comment on function webhooks.schedule_purge(integer) is E'Enqueue the webhooks__purge job (one for all instances) unless one is pending.';

revoke all on function webhooks.purge_log(), webhooks.schedule_purge(integer) from public;
--! EndIncluded webhooks/purge.sql
