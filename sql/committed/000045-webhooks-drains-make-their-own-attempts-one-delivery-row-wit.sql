--! Previous: sha1:d10ea93a4385379667f40dcb9b02d6065c4fbace
--! Hash: sha1:d0e55424f2c48ddb99d564ab5ea1066d1fd3eec0
--! Message: webhooks: drains make their own attempts, one delivery row with its attempts

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
      sync_trigger.table_name, 'plinth: writes each change to the webhook outbox in the same transaction (taken by the instances'' drains); its arguments name the webhooks of INSERT, UPDATE and DELETE; removed with the table''s last webhook.');
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
 * webhook are dropped by the task (webhooks_private.begin_attempts answers `gone`).
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
 * matters. Delivery attempts read the url and secret from the registry itself (begin_attempts).
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

/* why: the delivery task asks begin_attempts about every attempt; nothing caches the targets any more. */
drop function if exists webhooks_private.delivery_targets();
--! EndIncluded webhooks/hooks.sql
--! Included webhooks/outbox.sql
/*
 * why: webhook deliveries leave the writer's path (docs/api/webhooks.md, Deliveries;
 * docs/decisions/0046-webhook-changes-go-through-an-outbox.md). A watched table's trigger appends one row here per
 * changed row (the matching webhooks as an array, the body built once). Each instance's
 * drain takes due rows in batches (webhooks_private.claim_batches) and makes their attempts
 * itself (docs/decisions/0321-webhook-drains-make-their-own-attempts.md): no job per batch.
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
 * A rolled-back change leaves no outbox row; a committed one is taken exactly once (its
 * delete and its batch in one transaction, rows taken with SKIP LOCKED).
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
comment on table webhooks_private.outbox is E'plinth: webhook attempts waiting for a drain: a change (delivery_id null: one new delivery per webhook in hooks) or a later attempt of one delivery, due at due_at.';
comment on column webhooks_private.outbox.hooks is E'The webhooks the change matched when it was made, in registration order.';

/*
 * why: an instance's drain takes the attempts it makes itself, with no job in between
 * (docs/api/webhooks.md, Deliveries): one transaction deletes up to `lim` due outbox rows
 * (SKIP LOCKED: two drains never take the same row), gives a change a new delivery id per
 * webhook (once: the row is gone after this transaction), drops the attempts that are no
 * longer due (the webhook deleted or paused: `gone`; the delivery already ended or this
 * attempt already recorded: `done`), and writes what is left as batches of up to 100
 * attempts of one webhook (in (due_at, id) order), one row each, owned by the instance. The
 * instance makes a batch's attempts and ends it (finish_batch, deliveries.sql), recording
 * them in the transaction that deletes the batch: so a delivery costs the outbox row, its
 * log row and a share of its batch's row, where a job per batch cost a job row written,
 * locked and deleted with its indexes, and a row per attempt.
 *
 * A batch whose instance is no longer registered (plinth_private.instances: declared dead,
 * or restarted under its name, or stopped without finishing it) is taken over by the next
 * poll: its attempts are made again, marked `repeat`, since the first instance may have sent
 * them before it died without recording them (the log's `repeat_possible`).
 *
 * Returns {"taken": outbox rows taken, "batches": [{"id", "webhook", "url", "secret",
 * "repeat", "items": [{d, w, n, e, t, c, b, r}, …]}, …]}: the url and the secret are read
 * here, at the attempt, never stored with the batch.
 */
create table if not exists webhooks_private.batches (
  id bigint generated always as identity primary key,
  instance_id uuid not null,
  webhook_id uuid not null,
  items jsonb not null,
  taken_at timestamptz not null default now(),
  repeat boolean not null default false
);
revoke all on table webhooks_private.batches from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on table webhooks_private.batches is E'plinth: webhook attempts an instance is making (up to 100 of one webhook); deleted when they are recorded.';

drop function if exists webhooks_private.drain_outbox(integer, uuid);
drop function if exists webhooks_private.drain_outbox(integer);
create or replace function webhooks_private.claim_batches(lim integer, instance_id uuid)
  returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ids bigint[];
  v_rows integer;
  v_orphans jsonb;
  v_new jsonb;
begin
  -- Batches of an instance gone from the registry (a grace of 2 s for one registering now).
  with orphans as (
    update webhooks_private.batches b set instance_id = claim_batches.instance_id, repeat = true, taken_at = pg_catalog.now()
     where b.id in (select b2.id from webhooks_private.batches b2
                     where b2.instance_id <> claim_batches.instance_id
                       and b2.taken_at < pg_catalog.now() - interval '2 seconds'
                       and not exists (select 1 from plinth_private.instances i where i.id = b2.instance_id)
                     order by b2.id
                     for update skip locked)
    returning b.*
  )
  select pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('id', o.id, 'webhook', o.webhook_id, 'url', h.url, 'secret', h.secret,
           'repeat', true, 'items', o.items) order by o.id)
    into v_orphans
    from orphans o left join webhooks_private.hooks h on h.id = o.webhook_id and h.active;
  -- The later attempts that are due (few: retries, attempts given back, redeliveries), then
  -- the changes, oldest first (outbox_later_due_at_id_idx, then the primary key).
  v_ids := array(select o.id from webhooks_private.outbox o
                  where o.delivery_id is not null and o.due_at <= pg_catalog.now()
                  order by o.due_at, o.id
                  limit greatest(claim_batches.lim, 1)
                  for update skip locked);
  if pg_catalog.cardinality(v_ids) < greatest(claim_batches.lim, 1) then
    v_ids := v_ids || array(select o.id from webhooks_private.outbox o
                             where o.delivery_id is null
                             order by o.id
                             limit greatest(claim_batches.lim, 1) - pg_catalog.cardinality(v_ids)
                             for update skip locked);
  end if;
  with taken as (
    delete from webhooks_private.outbox o where o.id = any (v_ids)
    returning o.*
  ), items as (
    select t.due_at, t.id, x.i, x.w, t.delivery_id, t.attempt,
      pg_catalog.jsonb_build_object('d', coalesce(t.delivery_id, pg_catalog.gen_random_uuid()), 'w', x.w, 'n', t.attempt,
        'e', t.event, 't', t.table_name, 'c', t.created_at, 'b', t.body, 'r', t.request_id) as item
    from taken t cross join lateral pg_catalog.unnest(t.hooks) with ordinality x(w, i)
  ), due as (
    select x.*, (pg_catalog.row_number() over (partition by x.w order by x.due_at, x.id, x.i) - 1) / 100 as chunk
      from items x join webhooks_private.hooks h on h.id = x.w and h.active
     where x.delivery_id is null
        or not exists (select 1 from webhooks_private.deliveries d
                        where d.id = x.delivery_id
                          and (d.state <> 'pending' or pg_catalog.jsonb_array_length(d.attempts) >= x.attempt))
  ), made as (
    insert into webhooks_private.batches (instance_id, webhook_id, items)
      select claim_batches.instance_id, x.w, pg_catalog.jsonb_agg(x.item order by x.due_at, x.id, x.i)
        from due x group by x.w, x.chunk
        order by min(x.due_at), min(x.id)
    returning *
  )
  select (select count(*)::integer from taken),
         (select pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('id', m.id, 'webhook', m.webhook_id, 'url', h.url, 'secret', h.secret,
                   'repeat', false, 'items', m.items) order by m.id)
            from made m join webhooks_private.hooks h on h.id = m.webhook_id)
    into v_rows, v_new;
  -- The instance is awake while it takes rows (see `drains`), no longer after a poll that took none.
  if v_rows > 0 then
    if not exists (select 1 from webhooks_private.drains d where d.instance_id = claim_batches.instance_id
                   and d.awake_until > pg_catalog.clock_timestamp() + interval '500 milliseconds') then
      insert into webhooks_private.drains as d (instance_id, awake_until)
        values (claim_batches.instance_id, pg_catalog.clock_timestamp() + interval '1 second')
      on conflict on constraint drains_pkey do update set awake_until = excluded.awake_until;
    end if;
  else
    delete from webhooks_private.drains d
     where d.instance_id = claim_batches.instance_id or d.awake_until < pg_catalog.clock_timestamp() - interval '1 minute';
  end if;
  return pg_catalog.jsonb_build_object('taken', v_rows,
    'batches', coalesce(v_orphans, '[]'::jsonb) || coalesce(v_new, '[]'::jsonb));
end
$$;
comment on function webhooks_private.claim_batches(integer, uuid) is E'An instance\'s poll: up to lim due outbox rows become its batches of attempts (up to 100 of one webhook), with the batches of unregistered instances taken over. Returns {taken, batches}.';
revoke all on function webhooks_private.claim_batches(integer, uuid) from public;

/*
 * why: jobs of the former webhooks__deliver task left in the queue by an upgrade: their
 * attempts go back to the outbox, due at once, with their delivery ids.
 */
create or replace function webhooks_private.requeue_items(items json)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select webhooks_private.wake_drains();
  insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body, request_id)
    select array[(i.v->>'w')::uuid], (i.v->>'d')::uuid, (i.v->>'n')::integer, i.v->>'e', i.v->>'t', (i.v->>'c')::timestamptz, i.v->>'b', i.v->>'r'
      from pg_catalog.json_array_elements(requeue_items.items) i(v)
$$;
comment on function webhooks_private.requeue_items(json) is E'plinth: attempts of a job of the former webhooks__deliver task, back to the outbox.';
revoke all on function webhooks_private.requeue_items(json) from public;

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
 * Volatile: called after claim_batches in the same statement, it sees that poll's delete.
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
--! Included webhooks/deliveries.sql
/*
 * why: the delivery log (docs/api/webhooks.md). One row per delivery (one change for one
 * webhook; its id is the `X-Webhook-Id` of every attempt) with its state and its attempts
 * (status code or error, duration, time), appended to the row. A delivery row appears with its first
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

/*
 * why: a delivery's attempts live in its own row (`attempts`, a JSON array in the log's shape:
 * docs/api/webhooks.md), appended to by each recorded attempt: a delivery costs the log one
 * row and its index entries, not a row per attempt with its own index (and before it the
 * trigger that looked for a repeat). The rows of the former table of attempts move into their
 * deliveries once, and the table goes.
 */
alter table webhooks_private.deliveries add column if not exists attempts jsonb not null default '[]';
comment on column webhooks_private.deliveries.attempts is E'The attempts, oldest first: {attempt, status, error, duration_ms, request_id, repeat_possible, attempted_at} each (the delivery log\'s shape).';
drop view if exists webhooks.delivery_attempts;
drop view if exists webhooks.deliveries;
do $$
begin
  if pg_catalog.to_regclass('webhooks_private.attempts') is not null then
    update webhooks_private.deliveries d
       set attempts = (select pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
             'attempt', a.attempt, 'status', a.status_code, 'error', a.error, 'duration_ms', a.duration_ms,
             'request_id', a.request_id, 'repeat_possible', a.repeat_possible,
             'attempted_at', pg_catalog.to_char(pg_catalog.timezone('UTC', a.attempted_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
             order by a.attempt)
           from webhooks_private.attempts a where a.delivery_id = d.id)
     where exists (select 1 from webhooks_private.attempts a where a.delivery_id = d.id);
    drop table webhooks_private.attempts;
  end if;
end
$$;
drop function if exists webhooks_private.attempt_repeat_possible();

/* why: the log for the service role without reaching into webhooks_private. */
create view webhooks.delivery_attempts as
  select d.id as delivery_id, a.attempt, a.status as status_code, a.error, a.duration_ms, a.attempted_at, a.request_id, a.repeat_possible
    from webhooks_private.deliveries d
    cross join lateral pg_catalog.jsonb_to_recordset(d.attempts)
      as a(attempt integer, status integer, error text, duration_ms integer, attempted_at timestamptz, request_id text, repeat_possible boolean);
create view webhooks.deliveries as
  select d.id, d.webhook_id, d.event, d.table_name, d.state, d.created_at, d.updated_at, d.attempts
    from webhooks_private.deliveries d;
revoke all on webhooks.deliveries, webhooks.delivery_attempts from public, anon, authenticated, ":ANONYMOUS_ROLE";
grant select on webhooks.deliveries, webhooks.delivery_attempts to service_role;
comment on view webhooks.deliveries is E'plinth: the webhook delivery log (readable by service_role): each delivery with its state and attempts.';
comment on view webhooks.delivery_attempts is E'plinth: every webhook delivery attempt (readable by service_role).';

/*
 * why: after the attempts of a batch (outbox.sql, claim_batches), record them and move each
 * delivery on, in one transaction that also ends the batch (docs/architecture.md, Jobs): a 2xx
 * → delivered; otherwise, with attempts left, the next attempt is appended to the outbox, due
 * `delays_ms[attempt]` after this one ended (WEBHOOK_RETRY_SCHEDULE; by default 1 s then 4 s:
 * docs/api/webhooks.md), and the delivery stays pending; after the schedule's last attempt
 * (or a redelivered one) → failed, keeping the body for a redelivery. The batch row goes in
 * the same transaction, so an attempt is recorded once: a batch another instance took over
 * (this one was declared dead meanwhile) records nothing here (`taken`). An attempt the
 * instance could not finish (it is stopping) is given back: the same attempt goes back to the
 * outbox, unrecorded, due after `give_back_ms`, and the drains are woken for it.
 *
 * `outcomes`: per attempt made, `d` (delivery), `s` status code, `x` error, `ms` duration, `at`
 * time; an attempt of the batch without an outcome is given back. The first attempt creates
 * the delivery row, a later one appends to it (one upsert, a statement per table).
 * Returns the status of each attempt in the batch's order: delivered | retry | failed |
 * given_back, or one `taken` (the batch is not this instance's) or `gone` (the webhook was
 * deleted: its log went with it).
 */
drop function if exists webhooks_private.record_attempt(uuid, uuid, integer, text, text, timestamptz, integer, text, integer, timestamptz, text, text, integer[]);
drop function if exists webhooks_private.record_attempts(jsonb, integer[]);
create or replace function webhooks_private.finish_batch(batch_id bigint, instance_id uuid, outcomes jsonb, delays_ms integer[], give_back_ms integer default 0)
  returns text[]
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_b webhooks_private.batches;
  v_out text[];
begin
  delete from webhooks_private.batches b
   where b.id = finish_batch.batch_id and b.instance_id = finish_batch.instance_id
  returning b.* into v_b;
  if not found then
    return array['taken'];
  end if;
  -- The webhook must outlive this transaction (a concurrent delete waits for it).
  perform 1 from webhooks_private.hooks h where h.id = v_b.webhook_id for key share;
  if not found then
    return array['gone'];
  end if;
  with x as (
    select i.ord, (i.v->>'d')::uuid as d, (i.v->>'n')::integer as n, i.v->>'e' as e, i.v->>'t' as t,
      (i.v->>'c')::timestamptz as c, i.v->>'b' as b, i.v->>'r' as r, o.v as o,
      case when o.v is null then 'given_back'
           when (o.v->>'s')::integer between 200 and 299 then 'delivered'
           when (i.v->>'n')::integer > coalesce(pg_catalog.cardinality(finish_batch.delays_ms), 0) then 'failed'
           else 'pending' end as state
    from pg_catalog.jsonb_array_elements(v_b.items) with ordinality i(v, ord)
    left join (select y.v->>'d' as d, y.v from pg_catalog.jsonb_array_elements(finish_batch.outcomes) y(v)) o on o.d = i.v->>'d'
  ), logged as (
    insert into webhooks_private.deliveries as dd (id, webhook_id, event, table_name, state, created_at, body, attempts)
      select x.d, v_b.webhook_id, x.e, x.t, x.state, x.c, case when x.state = 'failed' then x.b end,
        pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
          'attempt', x.n, 'status', (x.o->>'s')::integer, 'error', x.o->>'x',
          'duration_ms', greatest((x.o->>'ms')::integer, 0), 'request_id', x.r, 'repeat_possible', v_b.repeat,
          'attempted_at', pg_catalog.to_char(pg_catalog.timezone('UTC', (x.o->>'at')::timestamptz), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
        from x where x.state <> 'given_back' order by x.ord
      on conflict (id) do update
        set attempts = dd.attempts || excluded.attempts, state = excluded.state, updated_at = pg_catalog.now(), body = excluded.body
        where dd.state = 'pending' and pg_catalog.jsonb_array_length(dd.attempts) < (excluded.attempts -> 0 ->> 'attempt')::integer
  ), later as (
    insert into webhooks_private.outbox (hooks, delivery_id, attempt, event, table_name, created_at, body, request_id, due_at)
      select array[v_b.webhook_id], x.d, case when x.state = 'pending' then x.n + 1 else x.n end, x.e, x.t, x.c, x.b, x.r,
        pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => case when x.state = 'pending'
          then finish_batch.delays_ms[x.n] else greatest(finish_batch.give_back_ms, 0) end / 1000.0)
        from x where x.state in ('pending', 'given_back') order by x.ord
  )
  select pg_catalog.array_agg(case x.state when 'pending' then 'retry' else x.state end order by x.ord) into v_out from x;
  if 'given_back' = any (v_out) then
    perform webhooks_private.wake_drains();
  end if;
  return coalesce(v_out, '{}');
end
$$;
comment on function webhooks_private.finish_batch(bigint, uuid, jsonb, integer[], integer) is
  E'End a batch of attempts: record each (delivered; next attempt queued after delays_ms[attempt]; failed after the last) or give it back. Statuses in the batch\'s order, or {taken} / {gone}.';
revoke all on function webhooks_private.finish_batch(bigint, uuid, jsonb, integer[], integer) from public;

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
          'attempts', d.attempts)
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

/* why: a stopping instance gives its attempts back through finish_batch now. */
drop function if exists webhooks_private.requeue_attempt(uuid, uuid, integer, text, text, timestamptz, text, integer, text);

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
  v_next := pg_catalog.jsonb_array_length(v_d.attempts) + 1;
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
--! Included webhooks/begin.sql
/*
 * why: an attempt no longer asks SQL in a statement of its own before it is made: the drain's
 * poll reads where each goes and drops those no longer due (outbox.sql, claim_batches).
 */
drop function if exists webhooks_private.begin_attempts(jsonb);
drop function if exists webhooks_private.begin_attempt(uuid, uuid, integer);
--! EndIncluded webhooks/begin.sql
--! Included webhooks/repeats.sql
/*
 * why: a webhook receiver may see an attempt twice only where the first try's outcome was
 * never recorded: the instance making it died (kill -9) between sending and recording, and a
 * survivor took its batch over (outbox.sql, claim_batches), which makes the attempt again.
 * The attempt recorded then says so (`repeat_possible` in the delivery's `attempts`, from the
 * batch's `repeat`: deliveries.sql, finish_batch). The trigger that read released jobs for it
 * is gone with the table of attempts.
 */
drop function if exists webhooks_private.attempt_repeat_possible() cascade;
--! EndIncluded webhooks/repeats.sql
--! Included webhooks/enqueue.sql
/*
 * why: the row trigger function of every watched table (docs/api/webhooks.md; docs/architecture.md,
 * Jobs and Triggers on application tables). Its arguments name the active webhooks that
 * INSERT, UPDATE and DELETE match on this table (its own and the `*` ones, in registration
 * order: hooks.sql, trigger_args, kept in line by the registry's trigger), so the writer
 * looks nothing up (docs/decisions/0307-a-watched-table-s-trigger-carries-its-webhooks.md). When
 * the operation matches some, it appends one row to webhooks_private.outbox (outbox.sql)
 * naming them all, in the transaction of the change: a rolled-back change delivers nothing, a
 * committed one is never lost. The instances' drains take the outbox's rows and make the
 * attempts (webhooks_private.claim_batches).
 *
 * The row carries the event, the table, the change's time, the id of the request that made
 * it and the request body as text, built here once for all matching webhooks: `{"event",
 * "table", "record"?, "old_record"?}` (docs/api/webhooks.md; record omitted for DELETE,
 * old_record for INSERT) with the row's columns in table order. As text, the body keeps every
 * number exact (a bigint beyond 2^53 would lose digits through a JavaScript parse); the task
 * sends these bytes and signs them. The secret never enters the outbox or a batch: the drain
 * reads it when it makes the attempt.
 *
 * The drains are woken only when none is awake (outbox.sql, `drains`, says why): the writer
 * pays a read of one page (the awake drains) and one insert into a table with one index.
 * A trigger without arguments (made by hand, or before they existed) asks the registry for
 * the arguments it would have (trigger_args). SECURITY DEFINER with a pinned search_path
 * (STYLE): the writer needs no right on webhooks_private. A table without a webhook has no
 * trigger and pays nothing; `*` webhooks ride on the triggers of table-specific ones
 * (docs/api/webhooks.md).
 */
create or replace function webhooks_private.tg__enqueue() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_args text[];
  v_hooks uuid[];
begin
  if TG_NARGS = 3 then
    v_hooks := (case TG_OP when 'INSERT' then TG_ARGV[0] when 'UPDATE' then TG_ARGV[1] else TG_ARGV[2] end)::uuid[];
  else
    -- The arguments the registry would give this trigger (one matching rule: hooks.sql).
    v_args := webhooks_private.trigger_args(TG_TABLE_NAME);
    v_hooks := (case TG_OP when 'INSERT' then v_args[1] when 'UPDATE' then v_args[2] else v_args[3] end)::uuid[];
  end if;
  if pg_catalog.cardinality(v_hooks) = 0 then
    return null;
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
comment on function webhooks_private.tg__enqueue() is E'plinth: trigger of watched tables (arguments: the webhooks of INSERT, UPDATE, DELETE); appends the change to webhooks_private.outbox for the webhooks it matches (taken by the instances\' drains).';
revoke all on function webhooks_private.tg__enqueue() from public;
--! EndIncluded webhooks/enqueue.sql
