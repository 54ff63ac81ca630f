--! Previous: sha1:8a15150aab36c74bfd5c00f5dcf9c04e883358d6
--! Hash: sha1:a794a8ccb2919c01f4938ddcfc413006b74a3be9
--! Message: webhooks: a watched table's trigger carries its webhooks; a change's row updates one index

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
 * The drains sleep until woken (src/webhooks/outbox.ts; docs/decisions/0302-the-outbox-drain-sleeps-until-woken.md,
 * 0305): a writer notifies `plinth_webhooks` only when no drain is awake, since a notifying
 * commit holds a cluster-wide lock until its WAL flush (one NOTIFY per write made the
 * writers of a watched table commit one at a time); while rows keep coming, a drain that
 * took some polls again shortly and finds the next ones. A slow safety poll covers a
 * missed wake-up.
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
/*
 * why: a change's row (delivery_id null, attempt 1) is due at once and is drained in id order
 * through the primary key; only the later attempts need their due time indexed. So a
 * writer's insert updates one index, not two (each cost the writer about a fifth of its
 * trigger's price: docs/decisions/0307-a-watched-table-s-trigger-carries-its-webhooks.md).
 */
drop index if exists webhooks_private.outbox_due_at_id_idx;
create index if not exists outbox_later_due_at_id_idx on webhooks_private.outbox (due_at, id) where delivery_id is not null;
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
  v_ids bigint[];
begin
  -- The later attempts that are due (few: retries, attempts given back, redeliveries), then
  -- the changes, oldest first (outbox_later_due_at_id_idx, then the primary key).
  v_ids := array(select o.id from webhooks_private.outbox o
                  where o.delivery_id is not null and o.due_at <= pg_catalog.now()
                  order by o.due_at, o.id
                  limit greatest(drain_outbox.lim, 1)
                  for update skip locked);
  if pg_catalog.cardinality(v_ids) < greatest(drain_outbox.lim, 1) then
    v_ids := v_ids || array(select o.id from webhooks_private.outbox o
                             where o.delivery_id is null
                             order by o.id
                             limit greatest(drain_outbox.lim, 1) - pg_catalog.cardinality(v_ids)
                             for update skip locked);
  end if;
  with taken as (
    delete from webhooks_private.outbox o where o.id = any (v_ids)
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
  select case
    when (select o.id from webhooks_private.outbox o where o.delivery_id is null order by o.id limit 1) is not null then 0
    else (select greatest(0, ceil(extract(epoch from (min(o.due_at) - pg_catalog.clock_timestamp())) * 1000))::integer
            from webhooks_private.outbox o where o.delivery_id is not null)
  end
$$;
comment on function webhooks_private.outbox_next_due_ms() is E'Milliseconds until the earliest outbox row is due (0: now); null when the outbox is empty.';
revoke all on function webhooks_private.outbox_next_due_ms() from public;

/*
 * why: the drains that are awake (docs/decisions/0305-writers-ask-whether-a-drain-is-awake.md).
 * A drain whose last poll took rows polls again within DRAIN_INTERVAL_MS, so writers need
 * not wake it: its instance has a row here, written by its polls (at most twice a second
 * while rows keep coming) and deleted by its first poll that finds nothing; `awake_until`
 * bounds the promise of an instance that stopped. Writers read this one page, never the
 * outbox: just after a drain emptied the outbox every writer in flight found no due row
 * there and notified, and notifying commits run one at a time (measured with pgbench, 8
 * writers beside a drain polling every 20 ms: 4,600–6,900 inserts/s against 10,400 without
 * the NOTIFYs).
 */
create unlogged table if not exists webhooks_private.drains (
  instance_id uuid primary key,
  awake_until timestamptz not null
);
revoke all on table webhooks_private.drains from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table webhooks_private.drains is E'plinth: outbox drains that will poll again soon (writers send them no wake-up).';

/*
 * why: an instance's poll of the outbox: drain_outbox, and the instance recorded awake
 * while it takes rows (see `drains`), or no longer awake after a poll that took none.
 */
create or replace function webhooks_private.drain_outbox(lim integer, instance_id uuid)
  returns integer
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_rows integer := webhooks_private.drain_outbox(drain_outbox.lim);
begin
  if v_rows > 0 then
    if not exists (select 1 from webhooks_private.drains d where d.instance_id = drain_outbox.instance_id
                   and d.awake_until > pg_catalog.clock_timestamp() + interval '500 milliseconds') then
      insert into webhooks_private.drains as d (instance_id, awake_until)
        values (drain_outbox.instance_id, pg_catalog.clock_timestamp() + interval '1 second')
      on conflict on constraint drains_pkey do update set awake_until = excluded.awake_until;
    end if;
  else
    delete from webhooks_private.drains d
     where d.instance_id = drain_outbox.instance_id or d.awake_until < pg_catalog.clock_timestamp() - interval '1 minute';
  end if;
  return v_rows;
end
$$;
comment on function webhooks_private.drain_outbox(integer, uuid) is E'An instance\'s poll: drain_outbox(lim), recording the instance awake (webhooks_private.drains) while it takes rows. Returns the rows taken.';
revoke all on function webhooks_private.drain_outbox(integer, uuid) from public;

/*
 * why: a stopping instance is no longer awake: its row goes at once, so that the attempts
 * it gives back (requeue_attempt) and the next writers wake the other instances' drains
 * rather than wait for their safety poll.
 */
create or replace function webhooks_private.drain_stopped(instance_id uuid)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  delete from webhooks_private.drains d where d.instance_id = drain_stopped.instance_id
$$;
comment on function webhooks_private.drain_stopped(uuid) is E'plinth: a stopping instance\'s drain is no longer awake (webhooks_private.drains).';
revoke all on function webhooks_private.drain_stopped(uuid) from public;

/*
 * why: the writers' wake-up for the sleeping drains: a NOTIFY on `plinth_webhooks`, sent
 * only when no drain is awake (`drains`), so once per burst at most, never once per write.
 * The trigger makes the same check inline; the rare writers of later attempts (an
 * operator's redelivery, an attempt given back) call this.
 */
create or replace function webhooks_private.wake_drains()
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from webhooks_private.drains d where d.awake_until > pg_catalog.clock_timestamp()) then
    perform pg_catalog.pg_notify('plinth_webhooks', '');
  end if;
end
$$;
comment on function webhooks_private.wake_drains() is E'plinth: wakes the outbox drains (NOTIFY plinth_webhooks) when none is awake.';
revoke all on function webhooks_private.wake_drains() from public;
--! EndIncluded webhooks/outbox.sql
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
 * recognises it (and it fires after the table's own AFTER triggers).
 *
 * Its three arguments name the active webhooks each operation matches (INSERT, UPDATE,
 * DELETE: the table's own and the `*` ones, in registration order, as uuid[] literals), so
 * the writer's trigger looks nothing up (docs/decisions/0307-a-watched-table-s-trigger-carries-its-webhooks.md:
 * the registry lookup was a third of the writer's price). Every change to the registry
 * rewrites the arguments of the triggers it concerns (tg__hooks_changed → sync_triggers);
 * the DDL waits for the table's writers in flight, and a writer after it sees the new
 * webhooks, so a change is matched against the registry as its transaction left it.
 */
create or replace function webhooks_private.trigger_args(table_name text)
  returns text[]
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select array[
      coalesce(pg_catalog.array_agg(h.id order by h.created_at, h.id) filter (where 'INSERT' = any (h.events) or '*' = any (h.events)), '{}')::text,
      coalesce(pg_catalog.array_agg(h.id order by h.created_at, h.id) filter (where 'UPDATE' = any (h.events) or '*' = any (h.events)), '{}')::text,
      coalesce(pg_catalog.array_agg(h.id order by h.created_at, h.id) filter (where 'DELETE' = any (h.events) or '*' = any (h.events)), '{}')::text]
    from webhooks_private.hooks h
   where h.active and (h.table_name = trigger_args.table_name or h.table_name = '*')
$$;
comment on function webhooks_private.trigger_args(text) is E'The arguments of a table''s webhook trigger: the active webhooks matching INSERT, UPDATE and DELETE (uuid[] literals).';
revoke all on function webhooks_private.trigger_args(text) from public;

/*
 * why: a public table's webhook trigger exists exactly when the table has a webhook of its
 * own, with the arguments of the registry as it is now (trigger_args): created, rewritten
 * (only when its arguments changed) or dropped.
 */
create or replace function webhooks_private.sync_trigger(table_name text)
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_rel regclass := pg_catalog.to_regclass(pg_catalog.quote_ident('public') || '.' || pg_catalog.quote_ident(sync_trigger.table_name));
  v_wanted boolean;
  v_args text[];
  v_present bytea;
begin
  if v_rel is null then
    return;
  end if;
  v_wanted := exists (select 1 from webhooks_private.hooks h where h.table_name = sync_trigger.table_name);
  select t.tgargs into v_present from pg_catalog.pg_trigger t where t.tgrelid = v_rel and t.tgname = '_900_plinth_webhooks';
  if v_wanted then
    v_args := webhooks_private.trigger_args(sync_trigger.table_name);
    -- pg_trigger.tgargs: each argument followed by a NUL byte.
    if v_present is not null and v_present = pg_catalog.convert_to(v_args[1], 'UTF8') || '\x00'::bytea
        || pg_catalog.convert_to(v_args[2], 'UTF8') || '\x00'::bytea || pg_catalog.convert_to(v_args[3], 'UTF8') || '\x00'::bytea then
      return;
    end if;
    if v_present is not null then
      execute pg_catalog.format('drop trigger _900_plinth_webhooks on public.%I', sync_trigger.table_name);
    end if;
    execute pg_catalog.format(
      'create trigger _900_plinth_webhooks after insert or update or delete on public.%I for each row execute function webhooks_private.tg__enqueue(%L, %L, %L)',
      sync_trigger.table_name, v_args[1], v_args[2], v_args[3]);
    execute pg_catalog.format(
      'comment on trigger _900_plinth_webhooks on public.%I is %L',
      sync_trigger.table_name, 'plinth: writes each change to the webhook outbox in the same transaction (drained into webhooks__deliver jobs); its arguments name the webhooks of INSERT, UPDATE and DELETE; removed with the table''s last webhook.');
  elsif v_present is not null then
    execute pg_catalog.format('drop trigger _900_plinth_webhooks on public.%I', sync_trigger.table_name);
  end if;
end
$$;
comment on function webhooks_private.sync_trigger(text) is E'Install, rewrite or remove a public table''s webhook trigger so that it exists exactly when the table has a webhook, with the registry''s webhooks as arguments.';
revoke all on function webhooks_private.sync_trigger(text) from public;

/*
 * why: after any change to the registry, every table whose trigger it may concern: the
 * tables with a webhook of their own and those with a trigger (a `*` webhook is in the
 * arguments of them all). One at a time, under one advisory lock, so that of two concurrent
 * registry changes the second sees the first committed (no table left without its trigger
 * or with stale arguments), in table name order.
 */
create or replace function webhooks_private.sync_triggers()
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_table text;
begin
  perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('plinth_webhooks'), 0);
  for v_table in
    select h.table_name from webhooks_private.hooks h where h.table_name <> '*'
    union
    select c.relname::text from pg_catalog.pg_trigger t
      join pg_catalog.pg_class c on c.oid = t.tgrelid
      join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where t.tgname = '_900_plinth_webhooks' and n.nspname = 'public'
    order by 1
  loop
    perform webhooks_private.sync_trigger(v_table);
  end loop;
end
$$;
comment on function webhooks_private.sync_triggers() is E'Bring every public table''s webhook trigger in line with the registry (after a change to it).';
revoke all on function webhooks_private.sync_triggers() from public;

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
  end if;
  -- The registry's statement trigger installs the table's trigger (tg__hooks_changed).
  insert into webhooks_private.hooks (url, events, table_name, secret)
    values (create_hook.url, v_events, v_table, coalesce(create_hook.secret, ''))
    returning * into v_hook;
  return query select 'ok'::text, webhooks_private.hook_json(v_hook);
end
$$;
comment on function webhooks.create_hook(text, text[], text, text) is E'Register a webhook (the registry''s trigger installs or rewrites the table triggers). Status: ok | table_not_found | invalid_url | invalid_events.';

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
  -- The registry's statement trigger rewrites or removes the triggers (tg__hooks_changed).
  delete from webhooks_private.hooks h where h.id = delete_hook.id;
  if not found then
    return 'not_found';
  end if;
  return 'ok';
end
$$;
comment on function webhooks.delete_hook(uuid) is E'Delete a webhook (and its log); remove the table''s trigger with its last webhook. Status: ok | not_found.';

revoke all on function webhooks.create_hook(text, text[], text, text), webhooks.list_hooks(), webhooks.delete_hook(uuid) from public;

/*
 * why: any change to the registry — through the API or a DBA's own SQL (pausing one with
 * active = false) — brings the watched tables' triggers in line with it (sync_triggers: their
 * arguments name the webhooks) and notifies `plinth_cache` with `webhooks`, and every instance
 * looks again whether it must poll the outbox (src/webhooks/outbox.ts; docs/architecture.md,
 * Caches reload on NOTIFY). Registry changes are rare, so this NOTIFY costs nothing that
 * matters. Delivery attempts read the url and secret from the registry itself (begin_attempt).
 */
create or replace function webhooks_private.tg__hooks_changed() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform webhooks_private.sync_triggers();
  perform pg_catalog.pg_notify('plinth_cache', 'webhooks');
  return null;
end
$$;
comment on function webhooks_private.tg__hooks_changed() is E'plinth: brings the watched tables'' triggers in line with the registry and tells every instance to look again.';
revoke all on function webhooks_private.tg__hooks_changed() from public;

drop trigger if exists _900_notify_cache on webhooks_private.hooks;
create trigger _900_notify_cache after insert or update or delete or truncate on webhooks_private.hooks
  for each statement execute function webhooks_private.tg__hooks_changed();

/* why: the delivery task asks begin_attempt for every attempt; nothing caches the targets any more. */
drop function if exists webhooks_private.delivery_targets();
--! EndIncluded webhooks/hooks.sql
--! Included webhooks/enqueue.sql
/*
 * why: the row trigger function of every watched table (docs/api/webhooks.md; docs/architecture.md,
 * Jobs and Triggers on application tables). Its arguments name the active webhooks that
 * INSERT, UPDATE and DELETE match on this table (its own and the `*` ones, in registration
 * order: hooks.sql, trigger_args, kept in line by the registry's trigger), so the writer
 * looks nothing up (docs/decisions/0307-a-watched-table-s-trigger-carries-its-webhooks.md). When
 * the operation matches some, it appends one row to webhooks_private.outbox (outbox.sql)
 * naming them all, in the transaction of the change: a rolled-back change delivers nothing, a
 * committed one is never lost. The instances drain the outbox into webhooks__deliver jobs,
 * one per webhook (webhooks_private.drain_outbox).
 *
 * The row carries the event, the table, the change's time, the id of the request that made
 * it and the request body as text, built here once for all matching webhooks: `{"event",
 * "table", "record"?, "old_record"?}` (docs/api/webhooks.md; record omitted for DELETE,
 * old_record for INSERT) with the row's columns in table order. As text, the body keeps every
 * number exact (a bigint beyond 2^53 would lose digits through a JavaScript parse); the task
 * sends these bytes and signs them. The secret never enters the outbox or a job: the task
 * reads it when it makes the attempt.
 *
 * The drains are woken only when none is awake (outbox.sql, `drains`, says why): the writer
 * pays a read of one page (the awake drains) and one insert into a table with one index.
 * A trigger without arguments (made by hand, or before they existed) looks its webhooks up
 * in the registry. SECURITY DEFINER with a pinned search_path (STYLE): the writer needs no
 * right on webhooks_private. A table without a webhook has no trigger and pays nothing; `*`
 * webhooks ride on the triggers of table-specific ones (docs/api/webhooks.md).
 */
create or replace function webhooks_private.tg__enqueue() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_hooks uuid[];
begin
  if TG_NARGS = 3 then
    v_hooks := (case TG_OP when 'INSERT' then TG_ARGV[0] when 'UPDATE' then TG_ARGV[1] else TG_ARGV[2] end)::uuid[];
    if pg_catalog.cardinality(v_hooks) = 0 then
      return null;
    end if;
  else
    select pg_catalog.array_agg(h.id order by h.created_at, h.id) into v_hooks
      from webhooks_private.hooks h
     where h.active
       and (h.table_name = TG_TABLE_NAME or h.table_name = '*')
       and (TG_OP = any (h.events) or '*' = any (h.events));
    if v_hooks is null then
      return null;
    end if;
  end if;
  -- webhooks_private.wake_drains, inlined (one function call less per write).
  if not exists (select 1 from webhooks_private.drains d where d.awake_until > pg_catalog.clock_timestamp()) then
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
comment on function webhooks_private.tg__enqueue() is E'plinth: trigger of watched tables (arguments: the webhooks of INSERT, UPDATE, DELETE); appends the change to webhooks_private.outbox for the webhooks it matches (drained into webhooks__deliver jobs).';
revoke all on function webhooks_private.tg__enqueue() from public;
--! EndIncluded webhooks/enqueue.sql
-- The watched tables' triggers get their arguments (the webhooks of each operation).
select webhooks_private.sync_triggers();
