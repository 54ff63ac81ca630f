--! Previous: sha1:9e4d131c5cf11e73f866c820d99d65bb61ff792b
--! Hash: sha1:eb243d0fa1bd2dce4204d9ee700d66b496323e72
--! Message: core: the instance registry with heartbeats, and the cleanup of dead instances

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

/* why: what a dead (or restarted) instance leaves: its jobs unlocked, its live row gone.
   Returns how many jobs were unlocked. */
create or replace function plinth_private.release_instance(id uuid, worker_ids text[])
  returns integer
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_jobs integer := 0;
begin
  if cardinality(release_instance.worker_ids) > 0 then
    select count(*)::integer into v_jobs from graphile_worker._private_jobs j where j.locked_by = any(release_instance.worker_ids);
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
