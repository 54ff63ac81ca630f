--! Previous: sha1:bb081d89d66babb935ca49da73a981e7aa9a51a8
--! Hash: sha1:8a15150aab36c74bfd5c00f5dcf9c04e883358d6
--! Message: webhooks: a stopping instance's drain is no longer awake

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
