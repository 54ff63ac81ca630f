--! Previous: sha1:89d2fc7b04a6a75ae22c17ab810cbb2a09977501
--! Hash: sha1:2b03b7338310844cf69d8f9f45c98358c22d9573
--! Message: one instance registry (live's heartbeats renamed), the token spend written once, graphile-worker's private tables read by one named function

-- Enter migration here

-- The instance tables named once: live's own heartbeat table was live_private.instances,
-- the same name as the registry of instances (plinth_private.instances); it is what it is,
-- live_private.heartbeats. Renamed in place (its rows kept), once.
do $$
begin
  if to_regclass('live_private.instances') is not null and to_regclass('live_private.heartbeats') is null then
    alter table live_private.instances rename to heartbeats;
    alter index live_private.instances_pkey rename to heartbeats_pkey;
  end if;
end
$$;

--! Included live/presence.sql
/*
 * why: broadcast and presence across instances, through PostgreSQL only 
 * (docs/api/live.md). Every instance LISTENs on `<LIVE_CHANNEL>_bc`; broadcast and presence
 * events are NOTIFYs there as `{"channel": …, "msg": <the client message>}`.
 * Membership is a table (live_private.heartbeats: the live engine's own beat, apart from
 * the registry of instances, plinth_private.instances, which core keeps with its longer
 * INSTANCE_DEAD_MS): each instance beats every second; an instance silent for
 * `ttl` seconds is dead, and the next beat of any live instance deletes it with its
 * clients' presence, announcing `presence_leave` for each. The presence endpoint reads
 * the union of the live instances' rows.
 */
create table if not exists live_private.heartbeats (
  id uuid primary key,
  seen_at timestamptz not null default now()
);
comment on table live_private.heartbeats is E'plinth: the live heartbeat of each service instance; its clients\' presence expires with it.';

create table if not exists live_private.presence (
  channel text not null,
  client_id text not null,
  instance_id uuid not null,
  state jsonb not null,
  updated_at timestamptz not null default now(),
  primary key (channel, client_id)
);
create index if not exists presence_instance_idx on live_private.presence (instance_id);
comment on table live_private.presence is E'plinth: presence state of connected clients, per instance (expires with its instance).';

/* why: one beat: this instance is alive; dead instances (silent `ttl` seconds) go, with
   their clients' presence, each announced as presence_leave. Returns true when this
   instance's row was new (first beat, or after it had been declared dead): the service
   then re-announces its clients' presence. */
create or replace function live_private.heartbeat(instance_id uuid, bc_channel text, ttl double precision default 5)
  returns boolean
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_new boolean;
  v_n bigint;
begin
  perform pg_catalog.set_config('synchronous_commit', 'off', true); -- ephemeral state: no need to wait for the disk
  insert into live_private.heartbeats as i (id) values (heartbeat.instance_id)
  on conflict (id) do update set seen_at = now()
  returning (i.xmax = 0) into v_new;
  delete from live_private.heartbeats i
  where i.seen_at < now() - make_interval(secs => heartbeat.ttl) and i.id <> heartbeat.instance_id;
  with gone as (
    delete from live_private.presence p
    where p.instance_id <> heartbeat.instance_id
      and not exists (select 1 from live_private.heartbeats i where i.id = p.instance_id)
    returning p.channel, p.client_id
  )
  select count(pg_catalog.pg_notify(heartbeat.bc_channel, jsonb_build_object('channel', g.channel,
           'msg', jsonb_build_object('type', 'presence_leave', 'channel', g.channel, 'client_id', g.client_id))::text))
    into v_n
  from gone g;
  return v_new;
end
$$;
comment on function live_private.heartbeat(uuid, text, double precision) is E'plinth: instance heartbeat; expires dead instances and announces their clients\' presence_leave.';
revoke all on function live_private.heartbeat(uuid, text, double precision) from public;

/* why: a client's presence message: the first is a join, later ones a state change. */
create or replace function live_private.presence_set(instance_id uuid, bc_channel text, channel text, client_id text, state jsonb)
  returns text
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_new boolean;
  v_type text;
begin
  perform pg_catalog.set_config('synchronous_commit', 'off', true); -- ephemeral state: no need to wait for the disk
  insert into live_private.presence as p (channel, client_id, instance_id, state)
  values (presence_set.channel, presence_set.client_id, presence_set.instance_id, presence_set.state)
  on conflict on constraint presence_pkey do update set state = excluded.state, instance_id = excluded.instance_id, updated_at = now()
  returning (p.xmax = 0) into v_new;
  v_type := case when v_new then 'presence_join' else 'presence_state' end;
  perform pg_catalog.pg_notify(presence_set.bc_channel, jsonb_build_object('channel', presence_set.channel,
    'msg', jsonb_build_object('type', v_type, 'channel', presence_set.channel, 'client_id', presence_set.client_id, 'state', presence_set.state))::text);
  return v_type;
end
$$;
comment on function live_private.presence_set(uuid, text, text, text, jsonb) is E'plinth: stores a client\'s presence state and announces presence_join or presence_state.';
revoke all on function live_private.presence_set(uuid, text, text, text, jsonb) from public;

/* why: a client left: its presence goes, announced as presence_leave (only if it had joined). */
create or replace function live_private.presence_leave(bc_channel text, channel text, client_id text)
  returns boolean
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform pg_catalog.set_config('synchronous_commit', 'off', true);
  delete from live_private.presence p where p.channel = presence_leave.channel and p.client_id = presence_leave.client_id;
  if not found then
    return false;
  end if;
  perform pg_catalog.pg_notify(presence_leave.bc_channel, jsonb_build_object('channel', presence_leave.channel,
    'msg', jsonb_build_object('type', 'presence_leave', 'channel', presence_leave.channel, 'client_id', presence_leave.client_id))::text);
  return true;
end
$$;
comment on function live_private.presence_leave(text, text, text) is E'plinth: removes a client\'s presence and announces presence_leave.';
revoke all on function live_private.presence_leave(text, text, text) from public;

/* why: GET /ws/_presence/{channel}: client_id → last state, over every live instance. */
create or replace function live_private.presence_list(channel text, ttl double precision default 5) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_object_agg(p.client_id, p.state), '{}'::jsonb)
  from live_private.presence p
  join live_private.heartbeats i on i.id = p.instance_id and i.seen_at >= now() - make_interval(secs => presence_list.ttl)
  where p.channel = presence_list.channel
$$;
comment on function live_private.presence_list(text, double precision) is E'plinth: presence of a channel across live instances.';
revoke all on function live_private.presence_list(text, double precision) from public;

/* why: a client broadcast, fanned out by every instance to the channel's clients (sender
   included). `from` is the server's id for the sender. */
create or replace function live_private.broadcast(bc_channel text, channel text, client_id text, payload jsonb) returns void
  language sql security definer
  set search_path = pg_catalog, pg_temp
as $$
  select pg_catalog.set_config('synchronous_commit', 'off', true);
  select pg_catalog.pg_notify(broadcast.bc_channel, jsonb_build_object('channel', broadcast.channel,
    'msg', jsonb_build_object('type', 'broadcast', 'from', broadcast.client_id, 'payload', broadcast.payload))::text)
$$;
comment on function live_private.broadcast(text, text, text, jsonb) is E'plinth: sends a client broadcast to every instance.';
revoke all on function live_private.broadcast(text, text, text, jsonb) from public;

/* why: several broadcasts of one client in one round trip (they queue while the previous
   one is in flight), in order. NOTIFY folds identical payloads of one transaction, so each
   carries its position `n` (the service does not forward it). */
create or replace function live_private.broadcast_many(bc_channel text, channel text, client_id text, payloads jsonb[]) returns void
  language sql security definer
  set search_path = pg_catalog, pg_temp
as $$
  select pg_catalog.set_config('synchronous_commit', 'off', true);
  select pg_catalog.pg_notify(broadcast_many.bc_channel, jsonb_build_object('channel', broadcast_many.channel, 'n', p.n,
    'msg', jsonb_build_object('type', 'broadcast', 'from', broadcast_many.client_id, 'payload', p.payload))::text)
  from unnest(broadcast_many.payloads) with ordinality as p(payload, n)
  order by p.n
$$;
comment on function live_private.broadcast_many(text, text, text, jsonb[]) is E'plinth: sends a client\'s queued broadcasts to every instance, in order.';
revoke all on function live_private.broadcast_many(text, text, text, jsonb[]) from public;

/* why: an instance that shuts down removes itself and its clients' presence at once. */
create or replace function live_private.instance_stop(instance_id uuid, bc_channel text) returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_n bigint;
begin
  delete from live_private.heartbeats i where i.id = instance_stop.instance_id;
  with gone as (
    delete from live_private.presence p where p.instance_id = instance_stop.instance_id returning p.channel, p.client_id
  )
  select count(pg_catalog.pg_notify(instance_stop.bc_channel, jsonb_build_object('channel', g.channel,
           'msg', jsonb_build_object('type', 'presence_leave', 'channel', g.channel, 'client_id', g.client_id))::text))
    into v_n
  from gone g;
end
$$;
comment on function live_private.instance_stop(uuid, text) is E'plinth: an instance leaves: its clients\' presence goes, announced as presence_leave.';
revoke all on function live_private.instance_stop(uuid, text) from public;

/* why: what an upgrade or presence request needs to know about a channel, in one round
   trip: whether it is registered, whether it is audience-bound, whether the claims pass. */
drop function if exists live_private.access(text, jsonb);
create or replace function live_private.access(query_id text, claims jsonb)
  returns table (registered boolean, bound boolean, allowed boolean, broken boolean, seq bigint, as_subscriber boolean)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select true, s.audience is not null, s.audience is null or coalesce(access.claims @> s.audience, false), s.broken is not null, s.seq, s.as_subscriber
  from live_private.subscriptions s where s.query_id = access.query_id and s.mode <> 'changes'
  union all
  select false, false, true, false, 0, false
  where not exists (select 1 from live_private.subscriptions s where s.query_id = access.query_id and s.mode <> 'changes')
$$;
comment on function live_private.access(text, jsonb) is E'plinth: registration and audience check for /ws/{query_id} and the presence endpoint.';
revoke all on function live_private.access(text, jsonb) from public;

/* why: after a gap in LISTEN, the current seq of each route the instance serves (a
   query_id, or chr(1) || a group's id for `as: subscriber`): a route whose seq moved on
   gets an overflow. */
drop function if exists live_private.seqs(text[]);
create or replace function live_private.route_seqs(routes text[]) returns table (route text, seq bigint)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.query_id, s.seq from live_private.subscriptions s where s.query_id = any(route_seqs.routes)
  union all
  select chr(1) || g.id::text, g.seq from live_private.groups g
  where g.id = any(array(select substr(r, 2)::bigint from unnest(route_seqs.routes) r
                          where left(r, 1) = chr(1) and substr(r, 2) ~ '^[0-9]{1,18}$'))
$$;
comment on function live_private.route_seqs(text[]) is E'plinth: the current seq of each live route (subscription or group), for overflow after a LISTEN gap.';
revoke all on function live_private.route_seqs(text[]) from public;
--! EndIncluded live/presence.sql
--! Included live/rerun.sql
/*
 * why: re-runs off the writer's path, and per-subscriber subscriptions (`as: subscriber`).
 *
 * A statement that changes a table a re-run subscription reads only inserts a mark into
 * `live_private.dirty` (see sync_triggers). Each instance's poller (src/live/poller.ts)
 * calls `claim` every LIVE_RERUN_MAX_MS at most: the marks become dirty flags, and the
 * dirty subscriptions and groups whose lease is free are leased to that instance (one
 * re-run per subscription or group in flight, over all instances; a burst of marks while
 * one runs coalesces into the next). A default-mode subscription is re-run here, as the
 * registrant was checked at registration (`rerun_subscription`); a group runs its query on
 * the request lane of its role with its claims (RLS applies, auth.uid() and auth.jwt()
 * read them), and `publish_groups` diffs each result against the group's snapshot and
 * sends `<group id>|<message>` on LIVE_CHANNEL, which every instance forwards to the
 * group's sockets. A lease that outlives its holder (an instance gone mid-run) expires.
 */

/*
 * why: the claims a query can observe: its text, its tables' policies and the functions
 * both call (one level deep). auth.uid() observes `sub`; auth.jwt(), request.jwt.claims
 * or a function whose source reads them observe all claims (null); auth.role() nothing
 * beyond the role, which is always part of a group's key. Needs pg_temp.live_probe.
 */
create or replace function live_private.observed_claims(query text, tables oid[]) returns text[]
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_texts text[];
  v_all boolean;
  v_sub boolean;
begin
  select array_agg(x) into v_texts from (
    select observed_claims.query as x
    union all
    select coalesce(pg_catalog.pg_get_expr(p.polqual, p.polrelid), '') || ' ' || coalesce(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), '')
    from pg_catalog.pg_policy p where p.polrelid = any(observed_claims.tables)
    union all
    select case
             when pr.oid = 'auth.uid()'::regprocedure then 'auth.uid()'
             when pr.oid = 'auth.role()'::regprocedure then ''
             when pr.oid = 'auth.jwt()'::regprocedure then 'auth.jwt()'
             else pr.prosrc end
    from pg_catalog.pg_proc pr
    where pr.oid in (
      select d.refobjid from pg_catalog.pg_rewrite r
      join pg_catalog.pg_depend d on d.classid = 'pg_catalog.pg_rewrite'::regclass and d.objid = r.oid
      where r.ev_class = 'pg_temp.live_probe'::regclass and d.refclassid = 'pg_catalog.pg_proc'::regclass
      union
      select d.refobjid from pg_catalog.pg_policy p
      join pg_catalog.pg_depend d on d.classid = 'pg_catalog.pg_policy'::regclass and d.objid = p.oid
      where p.polrelid = any(observed_claims.tables) and d.refclassid = 'pg_catalog.pg_proc'::regclass)
  ) t;
  select bool_or(x ~* '(jwt|current_setting|claims)'), bool_or(x ~* 'uid\s*\(') into v_all, v_sub from unnest(v_texts) x;
  if v_all then
    return null;
  end if;
  return case when v_sub then array['sub'] else '{}'::text[] end;
end
$$;
comment on function live_private.observed_claims(text, oid[]) is E'plinth: the claims a live query can observe (null: all of them).';
revoke all on function live_private.observed_claims(text, oid[]) from public;

/* why: a group's claims: the role and what the query observes (all but the time claims
   when it observes everything, so two tokens of one session share a group). */
create or replace function live_private.group_claims(observes text[], role name, claims jsonb) returns jsonb
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$
  select case
    when observes is null then coalesce(claims, '{}'::jsonb) - array['exp', 'iat', 'nbf', 'jti']
    else coalesce((select jsonb_object_agg(k, claims -> k) from unnest(observes) k where claims ? k), '{}'::jsonb)
         || jsonb_build_object('role', role::text)
  end
$$;
revoke all on function live_private.group_claims(text[], name, jsonb) from public;

/* why: the one place a subscription message is built: overflow when the layout changed or
   the delta does not fit `payload_limit` bytes, invalidated in notify mode, else a delta. */
create or replace function live_private.message(query_id text, seq bigint, mode text, ins jsonb, del jsonb, layout_changed boolean, payload_limit int)
  returns text
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_payload text;
begin
  if layout_changed then
    return jsonb_build_object('type', 'overflow', 'query_id', query_id, 'seq', seq, 'fetch', true)::text;
  elsif mode = 'notify' then
    return jsonb_build_object('type', 'invalidated', 'query_id', query_id, 'seq', seq)::text;
  end if;
  v_payload := jsonb_build_object('query_id', query_id, 'seq', seq, 'inserted', ins, 'deleted', del)::text;
  if octet_length(v_payload) > payload_limit then
    v_payload := jsonb_build_object('type', 'overflow', 'query_id', query_id, 'seq', seq, 'fetch', true)::text;
  end if;
  return v_payload;
end
$$;
revoke all on function live_private.message(text, bigint, text, jsonb, jsonb, boolean, int) from public;

/*
 * why: the fast path of an `as: subscriber` subscription (a filter over one table's own
 * columns). The writer's statement queues its transition rows here (only while the
 * subscription has groups); each group filters them under its role and claims (its
 * query over the rows, and the table's policies for that role) on its request lane, off
 * the writer's path. A group's `snap` is the snapshot its result reflects: the changes
 * it has not seen are those not visible in it, whatever order writers committed in, and
 * a change every group has seen goes. `ins` null: a TRUNCATE, which re-runs the groups.
 * Unlogged: after a crash every group is re-run (mark_all_dirty).
 */
create unlogged table if not exists live_private.changes (
  id bigint generated always as identity,
  query_id text not null,
  xid xid8 not null default pg_catalog.pg_current_xact_id(),
  ins jsonb,
  del jsonb
);
create index if not exists changes_query_id_idx on live_private.changes (query_id);
comment on table live_private.changes is E'plinth: transition rows of writes under fast-path as-subscriber live queries, until every group has applied them.';
alter table live_private.groups add column if not exists snap pg_snapshot;

/*
 * why: the pollers that are awake. A poller whose last claim found work claims again
 * within LIVE_RERUN_MAX_MS, so writers need not wake it: its instance has a row here,
 * written by its claims (at most twice a second while work keeps coming) and deleted by
 * its first claim that finds nothing; `awake_until` bounds the promise of an instance that
 * stopped. Writers only read this page, never the marks: a busy poller leaves the marks'
 * dead rows behind faster than they are vacuumed, and each writer scanned them all.
 */
create unlogged table if not exists live_private.pollers (
  instance_id uuid primary key,
  awake_until timestamptz not null
);
comment on table live_private.pollers is E'plinth: live pollers that will claim again soon (writers send them no wake-up).';

/*
 * why: a writer's wake-up for the pollers: a NOTIFY on `<LIVE_CHANNEL>_wake`, sent only
 * when no poller is awake. A NOTIFY serialises the commits that send one, so it is sent
 * when a poller goes idle, not once per write. The generated triggers make the same check
 * before calling this (a function call per statement saved).
 */
create or replace function live_private.wake() returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from live_private.pollers p where p.awake_until > pg_catalog.clock_timestamp()) then
    perform pg_catalog.pg_notify((select left(s.channel, 58) || '_wake' from live_private.settings s), '');
  end if;
end
$$;
comment on function live_private.wake() is E'plinth: wakes the live pollers (NOTIFY <LIVE_CHANNEL>_wake) when none is awake.';
revoke all on function live_private.wake() from public;

/*
 * why: what `role` may read of a table's rows under row level security, as a boolean
 * expression over the table's columns: its permissive SELECT policies for that role OR'd,
 * its restrictive ones AND'd (what PostgreSQL applies to a scan); 'true' when the table has
 * no RLS or the role bypasses it, 'false' when no permissive policy lets it read.
 */
create or replace function live_private.rls_filter(rel oid, role name) returns text
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  with p as (
    select p.polpermissive as permissive, '(' || pg_catalog.pg_get_expr(p.polqual, p.polrelid) || ')' as qual
    from pg_catalog.pg_policy p
    where p.polrelid = rls_filter.rel and p.polcmd in ('r', '*') and p.polqual is not null
      and (p.polroles = '{0}' or exists (select 1 from unnest(p.polroles) r where pg_catalog.pg_has_role(rls_filter.role, r, 'MEMBER'))))
  select case
    when not c.relrowsecurity or r.rolbypassrls
         or (pg_catalog.pg_has_role(rls_filter.role, c.relowner, 'USAGE') and not c.relforcerowsecurity) then 'true'
    else coalesce('(' || (select string_agg(p.qual, ' or ') from p where p.permissive) || ')', 'false')
         || coalesce(' and ' || (select string_agg(p.qual, ' and ') from p where not p.permissive), '')
  end
  from pg_catalog.pg_class c, pg_catalog.pg_roles r
  where c.oid = rls_filter.rel and r.rolname = rls_filter.role
$$;
comment on function live_private.rls_filter(oid, name) is E'plinth: the row level security filter of a table for a role, as SQL text.';
revoke all on function live_private.rls_filter(oid, name) from public;

/*
 * why: the statement a group's lane runs on the fast path: its query over the queued rows
 * ($1 inserted, $2 deleted, jsonb) as a CTE of the table's name, filtered by the table's
 * policies for the role; the query over the real table under LIMIT 0 is planned, never
 * read, so that the role's privileges are checked as for a re-run.
 */
create or replace function live_private.fast_sql(query_id text, role name) returns text
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select case when s.mode = 'changes' then live_private.realtime_sql(c.oid, fast_sql.role) else format($q$select
  (select coalesce(jsonb_agg(to_jsonb(q)), '[]'::jsonb)::text from (with %1$I as (select * from jsonb_populate_recordset(null::%2$s, $1::text::jsonb) as %1$I where %3$s) select * from (%4$s) q) q) as ins,
  (select coalesce(jsonb_agg(to_jsonb(q)), '[]'::jsonb)::text from (with %1$I as (select * from jsonb_populate_recordset(null::%2$s, $2::text::jsonb) as %1$I where %3$s) select * from (%4$s) q) q) as del
where not exists (select from (%4$s) q limit 0)$q$,
    c.relname, c.oid::regclass, live_private.rls_filter(c.oid, fast_sql.role), s.query) end
  from live_private.subscriptions s join pg_catalog.pg_class c on c.oid = s.fast_table
  where s.query_id = fast_sql.query_id
$$;
comment on function live_private.fast_sql(text, name) is E'plinth: the fast-path statement of an as-subscriber live query for one role.';
revoke all on function live_private.fast_sql(text, name) from public;

/*
 * why: one poll: writers' marks become dirty flags; dirty subscriptions and groups whose
 * lease is free (or expired) are leased to this instance for `lease_ms` and returned
 * (and the instance is recorded awake while it finds work, see `pollers`):
 * `group_id` null for a default-mode subscription (the caller runs rerun_subscription),
 * else the group's role, claims and statement for its request lane: on the fast path
 * (`fast`) the rows it has not seen (`ins`, `del`) and the snapshot they were read in,
 * else its query to re-run.
 */
drop function if exists live_private.claim(uuid, int);
create or replace function live_private.claim(instance_id uuid, lease_ms int)
  returns table (group_id bigint, query_id text, role name, claims text, query text, fast boolean, ins text, del text, snap text)
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ids text[];
  v_until timestamptz := clock_timestamp() + make_interval(secs => claim.lease_ms / 1000.0);
  v_subs bigint;
  v_groups bigint;
begin
  -- The marks first, the queued changes after: a change committed before a mark seen here
  -- is seen by the later statements too.
  with d as (delete from live_private.dirty returning dirty.query_id)
  select array_agg(distinct d.query_id) into v_ids from d;
  if v_ids is not null then
    update live_private.subscriptions s set dirty = true
     where s.query_id = any(v_ids) and not s.as_subscriber and s.broken is null and not s.dirty;
    update live_private.groups g set dirty = true
     where g.query_id = any(v_ids) and not g.dirty and g.snapshot is not null
       and exists (select 1 from live_private.subscriptions s where s.query_id = g.query_id and s.fast_table is null);
  end if;
  -- A TRUNCATE re-runs the groups that have not seen it; changes every group has seen go.
  update live_private.groups g set dirty = true
   where not g.dirty and g.snapshot is not null
     and exists (select 1 from live_private.changes c where c.query_id = g.query_id and c.ins is null
                 and not pg_catalog.pg_visible_in_snapshot(c.xid, g.snap));
  delete from live_private.changes c
   where not exists (select 1 from live_private.groups g where g.query_id = c.query_id
                     and not coalesce(pg_catalog.pg_visible_in_snapshot(c.xid, g.snap), false));
  return query
    with c as (
      update live_private.subscriptions s set dirty = false, lease_owner = claim.instance_id, lease_until = v_until
       where s.query_id in (select x.query_id from live_private.subscriptions x
                             where (x.dirty or x.lease_owner is not null) and x.broken is null
                               and (x.lease_owner is null or x.lease_until < clock_timestamp())
                             for update skip locked)
      returning s.query_id)
    select null::bigint, c.query_id, null::name, null::text, null::text, false, null::text, null::text, null::text from c;
  get diagnostics v_subs = row_count;
  -- A group is re-run when dirty (or its lease expired mid-run), else fed the rows it has
  -- not seen; the rows and pg_current_snapshot() come from this one statement's snapshot.
  return query
    with cand as (
      select x.id, (x.dirty or x.lease_owner is not null or s.fast_table is null) and s.mode <> 'changes' as rerun
      from live_private.groups x
      join live_private.subscriptions s on s.query_id = x.query_id and s.broken is null
      where x.snapshot is not null
        and (x.lease_owner is null or x.lease_until < clock_timestamp())
        and (x.dirty or x.lease_owner is not null
             or (s.fast_table is not null and exists (select 1 from live_private.changes ch where ch.query_id = x.query_id
                                                      and not pg_catalog.pg_visible_in_snapshot(ch.xid, x.snap))))
      for update of x skip locked),
    c as (
      update live_private.groups g set dirty = false, lease_owner = claim.instance_id, lease_until = v_until
        from cand where g.id = cand.id
      returning g.id, g.query_id, g.role, g.claims, g.snap, cand.rerun),
    f as (select live_private.fast_sql(r.query_id, r.role) as sql, r.query_id, r.role
          from (select distinct c.query_id, c.role from c where not c.rerun) r)
    select c.id, c.query_id, c.role, c.claims::text, case when c.rerun then s.query else f.sql end, not c.rerun,
           d.ins::text, d.del::text, pg_catalog.pg_current_snapshot()::text
    from c join live_private.subscriptions s on s.query_id = c.query_id
    left join f on not c.rerun and f.query_id = c.query_id and f.role = c.role
    left join lateral (
      select coalesce(jsonb_agg(e.v order by ch.id, e.n) filter (where e.k = 'i'), '[]'::jsonb) as ins,
             coalesce(jsonb_agg(e.v) filter (where e.k = 'd'), '[]'::jsonb) as del
      from live_private.changes ch,
           lateral (select 'i' as k, v.v, v.n from jsonb_array_elements(ch.ins) with ordinality as v(v, n)
                    union all select 'd', v.v, 0 from jsonb_array_elements(ch.del) as v(v)) e
      where ch.query_id = c.query_id and ch.ins is not null and not pg_catalog.pg_visible_in_snapshot(ch.xid, c.snap)) d on not c.rerun;
  get diagnostics v_groups = row_count;
  -- Work found: this poller claims again soon, and writers need not wake it (the row is
  -- written when missing or half spent). None: the next writer wakes it.
  if v_ids is not null or v_subs > 0 or v_groups > 0 then
    if not exists (select 1 from live_private.pollers p where p.instance_id = claim.instance_id
                   and p.awake_until > clock_timestamp() + interval '500 milliseconds') then
      insert into live_private.pollers as p (instance_id, awake_until) values (claim.instance_id, clock_timestamp() + interval '1 second')
      on conflict on constraint pollers_pkey do update set awake_until = excluded.awake_until;
    end if;
  else
    delete from live_private.pollers p where p.instance_id = claim.instance_id or p.awake_until < clock_timestamp() - interval '1 minute';
  end if;
end
$$;
comment on function live_private.claim(uuid, int) is E'plinth: the poller\'s step: turns writers\' marks into dirty flags and leases dirty live queries and groups to an instance.';
revoke all on function live_private.claim(uuid, int) from public;

/* why: re-run a leased default-mode subscription (as its registrant was checked), diff,
   publish, release the lease. A query that fails or passes LIVE_MAX_ROWS is marked broken. */
create or replace function live_private.rerun_subscription(instance_id uuid, query_id text) returns void
  language plpgsql security definer
  set search_path = pg_catalog, public, pg_temp
as $$
declare
  s live_private.subscriptions;
  v_new jsonb;
  v_max int;
  v_ins jsonb;
  v_del jsonb;
begin
  update live_private.subscriptions x set lease_owner = null, lease_until = null
   where x.query_id = rerun_subscription.query_id and x.lease_owner = rerun_subscription.instance_id
  returning * into s;
  if not found or s.broken is not null then
    return;
  end if;
  select st.max_rows into v_max from live_private.settings st;
  begin
    v_new := live_private.run(format('select * from (%s) q limit %s', s.query, v_max + 1));
  exception when others then
    perform live_private.mark_broken(s.query_id, sqlerrm);
    return;
  end;
  if jsonb_array_length(v_new) > v_max then
    perform live_private.mark_broken(s.query_id, format('live query result has more than %s rows (LIVE_MAX_ROWS)', v_max));
    return;
  end if;
  -- The same rows in the same order: nothing changed, and the diff (a sort of both sides)
  -- is spared. Most re-runs under a stream of writes end here.
  if v_new = s.snapshot then
    return;
  end if;
  v_ins := live_private.minus(v_new, s.snapshot);
  v_del := live_private.minus(s.snapshot, v_new);
  if v_ins = '[]'::jsonb and v_del = '[]'::jsonb then
    return;
  end if;
  perform live_private.publish(s.query_id, v_new, v_ins, v_del, live_private.layout_of(v_new));
end
$$;
comment on function live_private.rerun_subscription(uuid, text) is E'plinth: re-runs a leased default-mode live query off the writers\' path and publishes its change.';
revoke all on function live_private.rerun_subscription(uuid, text) from public;

/*
 * why: what the lanes of leased groups returned: a re-run's result (`results`) is diffed
 * against its group's snapshot; a fast-path delta (`ins`, `del`: the group's query over the
 * rows it had not seen) is applied to it. Either is published as `<group id>|<message>`,
 * the group's `snap` becomes the snapshot it was read in (`snaps`), and its lease is
 * released. An error (`SQLSTATE|message`) marks the subscription broken, but for 42501 (the
 * group's role may not read a table); that, or a result past LIVE_MAX_ROWS, removes the
 * group, whose sockets get an `error` message. A delta whose columns differ from the
 * group's (a column added under `select *`) re-runs the group instead.
 */
drop function if exists live_private.publish_groups(uuid, bigint[], jsonb[], text[]);
create or replace function live_private.publish_groups(instance_id uuid, ids bigint[], results jsonb[], errors text[],
                                                       snaps text[] default null, ins jsonb[] default null, del jsonb[] default null)
  returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  g live_private.groups;
  v_mode text;
  v_channel text;
  v_max int;
  v_new jsonb;
  v_ins jsonb;
  v_del jsonb;
  v_layout text[];
  v_snap pg_snapshot;
  i int;
begin
  select st.channel, st.max_rows into v_channel, v_max from live_private.settings st;
  for i in 1 .. coalesce(cardinality(publish_groups.ids), 0) loop
    -- Locked, and released by the one update that records what happened (a row update each).
    select * into g from live_private.groups x
     where x.id = publish_groups.ids[i] and x.lease_owner = publish_groups.instance_id for update;
    continue when not found;
    select s.mode into v_mode from live_private.subscriptions s where s.query_id = g.query_id and s.broken is null;
    if not found then
      update live_private.groups x set lease_owner = null, lease_until = null where x.id = g.id;
      continue;
    end if;
    if publish_groups.errors[i] is not null then
      -- `SQLSTATE|message`. A role that may not read a table loses its group (its sockets are
      -- told and closed); any other error means the query stopped working.
      if left(publish_groups.errors[i], 6) = '42501|' then
        delete from live_private.groups x where x.id = g.id;
        perform pg_catalog.pg_notify(v_channel, g.id::text || '|' || jsonb_build_object('type', 'error', 'query_id', g.query_id,
          'error', 'permission denied for this live query')::text);
      else
        update live_private.groups x set lease_owner = null, lease_until = null where x.id = g.id;
        perform live_private.mark_broken(g.query_id, substr(publish_groups.errors[i], 7));
      end if;
      continue;
    end if;
    v_snap := coalesce(publish_groups.snaps[i]::pg_snapshot, g.snap);
    if v_mode = 'changes' then
      -- A table subscription's group keeps no result: what its role may read of the rows'
      -- changes is sent as it is (realtime.sql), in messages that fit a notification.
      v_ins := coalesce(publish_groups.ins[i], '[]'::jsonb);
      update live_private.groups x set snap = v_snap, lease_owner = null, lease_until = null,
             seq = x.seq + (case when v_ins = '[]'::jsonb then 0 else 1 end)
       where x.id = g.id;
      if v_ins <> '[]'::jsonb then
        perform live_private.realtime_publish(v_channel, g.id, g.query_id, g.seq + 1, v_ins,
          live_private.payload_limit(v_channel) - length(g.id::text) - 1);
      end if;
      continue;
    end if;
    if publish_groups.ins[i] is not null then
      v_ins := live_private.minus(publish_groups.ins[i], coalesce(publish_groups.del[i], '[]'));
      v_del := live_private.minus(coalesce(publish_groups.del[i], '[]'), publish_groups.ins[i]);
      v_layout := coalesce(live_private.layout_of(v_ins), live_private.layout_of(v_del));
      if v_layout is not null and g.layout is not null and v_layout is distinct from g.layout then
        update live_private.groups x set dirty = true, lease_owner = null, lease_until = null where x.id = g.id;
        continue;
      end if;
      v_new := live_private.minus(g.snapshot, v_del) || v_ins;
    else
      v_new := coalesce(publish_groups.results[i], '[]'::jsonb);
    end if;
    if jsonb_array_length(v_new) > v_max then
      delete from live_private.groups x where x.id = g.id;
      perform pg_catalog.pg_notify(v_channel, g.id::text || '|' || jsonb_build_object('type', 'error', 'query_id', g.query_id,
        'error', 'live query result too large')::text);
      continue;
    end if;
    if publish_groups.ins[i] is null and v_new = g.snapshot then
      -- A re-run that returned the same rows in the same order: no diff to compute.
      v_ins := '[]';
      v_del := '[]';
    elsif publish_groups.ins[i] is null then
      v_ins := live_private.minus(v_new, g.snapshot);
      v_del := live_private.minus(g.snapshot, v_new);
      v_layout := live_private.layout_of(v_new);
    end if;
    if v_ins = '[]'::jsonb and v_del = '[]'::jsonb then
      update live_private.groups x set snap = v_snap, lease_owner = null, lease_until = null where x.id = g.id;
      continue;
    end if;
    update live_private.groups x set snapshot = v_new, seq = x.seq + 1, layout = coalesce(v_layout, x.layout), snap = v_snap,
           lease_owner = null, lease_until = null
     where x.id = g.id;
    perform pg_catalog.pg_notify(v_channel, g.id::text || '|' || live_private.message(g.query_id, g.seq + 1, v_mode, v_ins, v_del,
      v_layout is not null and v_layout is distinct from g.layout,
      live_private.payload_limit(v_channel) - length(g.id::text) - 1));
  end loop;
end
$$;
comment on function live_private.publish_groups(uuid, bigint[], jsonb[], text[], text[], jsonb[], jsonb[]) is E'plinth: publishes leased groups\' changes: re-run results diffed with their snapshots, fast-path deltas applied.';
revoke all on function live_private.publish_groups(uuid, bigint[], jsonb[], text[], text[], jsonb[], jsonb[]) from public;

/*
 * why: a socket of an `as: subscriber` subscription joins the group of its role and the
 * claims the query observes (created on first use, at most LIVE_MAX_GROUPS per
 * subscription). A new group has no snapshot yet: `needs_init`, and the service runs its
 * query on the group's lane and calls init_group before the socket is confirmed.
 */
create or replace function live_private.join_group(instance_id uuid, query_id text, role name, claims jsonb)
  returns table (group_id bigint, seq bigint, needs_init boolean, group_claims text, query text)
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  s live_private.subscriptions;
  v_claims jsonb;
  v_key text;
  v_id bigint;
  v_max int;
begin
  select * into s from live_private.subscriptions x where x.query_id = join_group.query_id and x.as_subscriber and x.broken is null;
  if not found then
    return;
  end if;
  v_claims := live_private.group_claims(s.observes, join_group.role, join_group.claims);
  v_key := md5(join_group.role::text || ' ' || v_claims::text);
  select g.id into v_id from live_private.groups g where g.query_id = join_group.query_id and g.key = v_key;
  if v_id is null then
    select st.max_groups into v_max from live_private.settings st;
    -- Counted under a lock of this subscription's joins (an advisory one: no row lock that
    -- the poller's statements could wait on), so concurrent joins cannot pass the cap.
    perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('plinth live join ' || join_group.query_id, 0));
    if (select count(*) from live_private.groups g where g.query_id = join_group.query_id) >= v_max then
      raise exception 'live query has % groups already (LIVE_MAX_GROUPS)', v_max using errcode = '54000';
    end if;
    insert into live_private.groups as g (query_id, key, role, claims, snap)
    values (join_group.query_id, v_key, join_group.role, v_claims, pg_catalog.pg_current_snapshot())
    on conflict on constraint groups_query_id_key_key do nothing
    returning g.id into v_id;
    if v_id is null then
      select g.id into v_id from live_private.groups g where g.query_id = join_group.query_id and g.key = v_key;
    end if;
  end if;
  begin
    insert into live_private.group_members as m (group_id, instance_id) values (v_id, join_group.instance_id)
    on conflict on constraint group_members_pkey do update set joined_at = now();
  exception when foreign_key_violation then
    -- The group went (nobody was in it) between the lookup and now: make it again.
    return query select * from live_private.join_group(join_group.instance_id, join_group.query_id, join_group.role, join_group.claims);
    return;
  end;
  return query select g.id, g.seq, g.snapshot is null, g.claims::text, s.query from live_private.groups g where g.id = v_id;
end
$$;
comment on function live_private.join_group(uuid, text, name, jsonb) is E'plinth: puts a socket of an as-subscriber live query in its group (created on first use).';
revoke all on function live_private.join_group(uuid, text, name, jsonb) from public;

/* why: a new group's first result, as its lane returned it, and the snapshot it was read
   in. On the fast path the changes that snapshot did not see are queued for the group;
   otherwise those that committed between that run and now are caught by the re-run the
   mark asks for. */
drop function if exists live_private.init_group(bigint, jsonb);
create or replace function live_private.init_group(group_id bigint, rows jsonb, snap text default null) returns bigint
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_query_id text;
  v_fast boolean;
  v_seq bigint;
begin
  update live_private.groups g set snapshot = init_group.rows, layout = s.layout,
         snap = coalesce(init_group.snap::pg_snapshot, g.snap)
    from live_private.subscriptions s
   where g.id = init_group.group_id and g.snapshot is null and s.query_id = g.query_id
  returning g.query_id, s.fast_table is not null and init_group.snap is not null into v_query_id, v_fast;
  if v_query_id is not null and not v_fast then
    insert into live_private.dirty (query_id) values (v_query_id);
  end if;
  select g.seq into v_seq from live_private.groups g where g.id = init_group.group_id;
  return v_seq;
end
$$;
revoke all on function live_private.init_group(bigint, jsonb, text) from public;

/* why: each heartbeat: the groups this instance has sockets in; memberships of dead
   instances and groups nobody is in go. A membership younger than 10 s stays: its socket
   may still be on its way (admitted, not yet connected when the list was taken). */
create or replace function live_private.sync_members(instance_id uuid, ids bigint[]) returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from live_private.group_members m
   where (m.instance_id = sync_members.instance_id and m.group_id <> all(sync_members.ids)
          and m.joined_at < now() - interval '10 seconds')
      or not exists (select 1 from live_private.heartbeats i where i.id = m.instance_id);
  insert into live_private.group_members (group_id, instance_id)
  select x, sync_members.instance_id from unnest(sync_members.ids) x
  where exists (select 1 from live_private.groups g where g.id = x)
  on conflict do nothing;
  delete from live_private.groups g
   where not exists (select 1 from live_private.group_members m where m.group_id = g.id);
end
$$;
revoke all on function live_private.sync_members(uuid, bigint[]) from public;

/* why: after the listener's gap (a restart loses the unlogged marks): everything that is
   re-run is re-run once. */
create or replace function live_private.mark_all_dirty() returns void
  language sql security definer
  set search_path = pg_catalog, pg_temp
as $$
  update live_private.subscriptions s set dirty = true
   where not s.dirty and not s.as_subscriber and s.broken is null and s.fast_table is null;
  update live_private.groups g set dirty = true where not g.dirty and g.snapshot is not null;
$$;
revoke all on function live_private.mark_all_dirty() from public;

/* why: an `auth` message on an `as: subscriber` socket: the group its new claims fall in
   (null when none), which must be the socket's. */
create or replace function live_private.group_of(query_id text, role name, claims jsonb) returns bigint
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select g.id from live_private.subscriptions s
  join live_private.groups g on g.query_id = s.query_id
   and g.key = md5(group_of.role::text || ' ' || live_private.group_claims(s.observes, group_of.role, group_of.claims)::text)
  where s.query_id = group_of.query_id
$$;
revoke all on function live_private.group_of(text, name, jsonb) from public;
--! EndIncluded live/rerun.sql
--! Included core/instances.sql
/*
 * why: instances of plinth on one database know each other, so that one killed (kill -9, a
 * lost machine) leaves nothing locked for long. Each instance registers at start and beats
 * on its listener connection; its row names the graphile-worker pools it runs (their ids are
 * what jobs are locked by). One whose beat is older than INSTANCE_DEAD_MS is declared dead by
 * the next beat of any survivor: its locked jobs are unlocked at once (graphile-worker's
 * force_unlock_workers: they run again, from the next attempt, on a live worker), its live
 * heartbeat goes (live_private.heartbeats: the next live beat then removes its clients'
 * presence and announces presence_leave), and its row goes. An instance that starts under the name (host:port) of a
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

/* why: the jobs the given graphile-worker pools hold locked, with their payload. The one
   read of graphile-worker's private tables (its public view graphile_worker.jobs has no
   payload), named and tested (test/sql/core/instances.sql), so a graphile-worker upgrade
   that changes them breaks here and in that test, not in the middle of a release. */
create or replace function plinth_private.worker_locked_jobs(worker_ids text[])
  returns table (task text, payload json)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  return query
    select t.identifier, j.payload
      from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
     where j.locked_by = any(worker_locked_jobs.worker_ids);
end
$$;
revoke all on function plinth_private.worker_locked_jobs(text[]) from public;

/* why: what a dead (or restarted) instance leaves: its jobs unlocked (recorded in
   released_jobs first), its live heartbeat gone. Returns how many jobs were unlocked. */
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
      select l.task, l.payload from plinth_private.worker_locked_jobs(release_instance.worker_ids) l;
    get diagnostics v_jobs = row_count;
    perform graphile_worker.force_unlock_workers(release_instance.worker_ids);
  end if;
  delete from live_private.heartbeats h where h.id = release_instance.id;
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
--! Included auth/one_time_tokens.sql
/*
 * why: emailed one-time tokens (docs/api/auth.md): email verification (24 h,
 * usable until it expires: mail scanners that open links first must not burn it), password
 * recovery and magic link (1 h, once). Only the SHA-256 of a token is stored. A token is
 * bound to the address it was sent to: if the account's email changed since, the token no
 * longer works (it would otherwise confirm or recover through an address that is gone).
 *
 * The email itself is a graphile-worker job added in the same transaction as the token
 * row (design.md, Jobs): nothing is sent for a rolled-back token, nothing lost for a
 * committed one. The job carries the token sealed (AES-256-GCM, sealed by the service
 * before the call), never in clear; the `auth__send_email` task unseals it just before
 * sending.
 *
 * States: issued (used_at null, expires_at future) → used (used_at set) | expired.
 */
create table if not exists auth_private.one_time_tokens (
  token_hash bytea primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  kind text not null,
  email text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  constraint one_time_tokens_kind_check check (kind in ('verification', 'recovery', 'magic_link')),
  constraint one_time_tokens_hash_check check (octet_length(token_hash) = 32)
);
create index if not exists one_time_tokens_user_id_idx on auth_private.one_time_tokens (user_id);
comment on table auth_private.one_time_tokens is E'plinth: emailed tokens (verification 24 h; recovery and magic_link 1 h, once), by SHA-256; bound to the address they were sent to.';

/*
 * why: the one place a one-time token is stored and its email enqueued, so the lifetimes
 * of docs/api/auth.md are written once. Internal: called by the entry functions below.
 */
create or replace function auth_private.issue_one_time_token(user_id uuid, email text, kind text, token_hash bytea, sealed_token text)
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at)
    values (issue_one_time_token.token_hash, issue_one_time_token.user_id, issue_one_time_token.kind,
      issue_one_time_token.email,
      now() + case issue_one_time_token.kind when 'verification' then interval '24 hours' else interval '1 hour' end);
  perform graphile_worker.add_job(
    'auth__send_email',
    pg_catalog.json_build_object('kind', issue_one_time_token.kind, 'to', issue_one_time_token.email, 'sealed_token', issue_one_time_token.sealed_token),
    max_attempts => 5);
end
$$;
comment on function auth_private.issue_one_time_token(uuid, text, text, bytea, text) is E'Store a one-time token (SHA-256) with its contract lifetime and enqueue its email (auth__send_email) in the same transaction.';
revoke all on function auth_private.issue_one_time_token(uuid, text, text, bytea, text) from public;

/*
 * why: the one place a one-time token is spent, so every entry function locks and checks
 * it alike: the user's row first (two of their tokens used at once, each spending the
 * other, or a token used during an OAuth sign-in or PATCH take their turns instead of
 * deadlocking), then the token of this kind, unexpired, unused (or, `repeatable`, used
 * before too: verification), still bound to the account's current address, marked used.
 * No row: invalid (unknown, used, expired, or the address changed since). Internal.
 */
create or replace function auth_private.spend_one_time_token(token_hash bytea, kind text, repeatable boolean default false)
  returns table (user_id uuid, email text, issued_at timestamptz)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  perform 1 from auth.users u join auth_private.one_time_tokens t on t.user_id = u.id
    where t.token_hash = spend_one_time_token.token_hash for update of u;
  return query
    with spent as (
      update auth_private.one_time_tokens t set used_at = coalesce(t.used_at, now())
        from auth.users u
       where t.token_hash = spend_one_time_token.token_hash and t.kind = spend_one_time_token.kind
         and (spend_one_time_token.repeatable or t.used_at is null) and t.expires_at > now()
         and u.id = t.user_id and lower(u.email) = lower(t.email)
      returning t.user_id, u.email, t.created_at
    )
    select * from spent;
end
$$;
comment on function auth_private.spend_one_time_token(bytea, text, boolean) is E'Spend a one-time token of a kind (the user\'s row locked first): its user, address and issue time, or no row when it is invalid.';
revoke all on function auth_private.spend_one_time_token(bytea, text, boolean) from public;

/*
 * why: GET /auth/v1/verify (docs/api/auth.md): awaiting confirmation → confirmed. Valid for
 * 24 hours and repeatable within them (a second click answers the same).
 * Using the token proves the address (auth_private.prove_address). Only sign-up issues
 * verification tokens, and the link confirms that sign-up, password and user_metadata
 * included: they stay, or REQUIRE_EMAIL_VERIFICATION would remove the password a new user
 * just chose. What changed after the token was issued (a password or metadata set through
 * a session that the confirmation did not wait for) is not vouched for: then everything
 * planted goes, as with a magic link. Sessions from before the proof are ended either way.
 * Status: ok | invalid (unknown, expired, or the address changed since).
 */
drop function if exists auth.verify_email(bytea);
create function auth.verify_email(token_hash bytea)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid;
  v_email text;
  v_issued_at timestamptz;
  v_changed boolean;
begin
  select s.user_id, s.email, s.issued_at into v_user_id, v_email, v_issued_at
    from auth_private.spend_one_time_token(verify_email.token_hash, 'verification', true) s;
  if not found then
    return 'invalid';
  end if;
  select u.updated_at > v_issued_at
         or exists (select 1 from auth_private.passwords p where p.user_id = u.id and p.updated_at > v_issued_at)
    into v_changed
    from auth.users u where u.id = v_user_id;
  if auth_private.prove_address(v_user_id, v_email, 'verification', v_changed) and not v_changed then
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'address_proven'
      where s.user_id = v_user_id and s.revoked_at is null;
  end if;
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return 'ok';
end
$$;
comment on function auth.verify_email(bytea) is E'Confirm and prove an address with its verification token (24 h, repeatable). Status: ok | invalid.';

/*
 * why: POST /auth/v1/recover (docs/api/auth.md). The service answers the same either way
 * (no enumeration); the status is for logs and tests only. Guests have no address.
 * The same work either way: the mail limit per address counts every request, and an
 * unknown or limited address gets a job without a recipient instead of the email.
 * Status: sent | not_found | limited (MAIL_RATE_LIMIT_PER_HOUR used up; nothing sent).
 */
drop function if exists auth.request_recovery(text, bytea, text);
drop function if exists auth.request_recovery(text, bytea, text, integer);
drop function if exists auth.request_recovery(text, bytea, text, integer, jsonb);
create function auth.request_recovery(email text, token_hash bytea, sealed_token text, mail_limit integer, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed boolean := auth_private.mail_allowed(request_recovery.email, request_recovery.mail_limit);
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(request_recovery.email);
  if v_user.id is null or not v_allowed then
    perform auth_private.enqueue_no_mail('recovery');
    return case when v_user.id is null then 'not_found' else 'limited' end;
  end if;
  perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'recovery', request_recovery.token_hash, request_recovery.sealed_token);
  perform auth_private.audit('recovery_requested', v_user.id, request_recovery.context, '{}'::jsonb);
  return 'sent';
end
$$;
comment on function auth.request_recovery(text, bytea, text, integer, jsonb) is E'Issue a recovery token (1 h, once) and enqueue its email, if the address is registered and under its mail limit; otherwise enqueue a job that sends nothing. Status: sent | not_found | limited.';

/*
 * why: POST /auth/v1/recover/confirm must answer `invalid or expired token` for a used or
 * expired token whatever the password (docs/api/auth.md); the service asks this only
 * when the password itself is unacceptable, to pick which 400 to give. Read-only.
 * Status: valid | invalid.
 */
drop function if exists auth.check_recovery_token(bytea);
create function auth.check_recovery_token(token_hash bytea)
  returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select case when exists (
    select 1 from auth_private.one_time_tokens t join auth.users u on u.id = t.user_id
    where t.token_hash = check_recovery_token.token_hash and t.kind = 'recovery'
      and t.used_at is null and t.expires_at > now() and lower(u.email) = lower(t.email)
  ) then 'valid' else 'invalid' end
$$;
comment on function auth.check_recovery_token(bytea) is E'Whether a recovery token is unused and unexpired, without using it. Status: valid | invalid.';

/*
 * why: POST /auth/v1/recover/confirm (docs/api/auth.md): issued → used, password replaced
 * (argon2id hash computed by the service). No tokens are issued. The user's live sessions
 * are revoked: whoever reset the password may be evicting someone who knew the old one.
 * Receiving the token also proves the address: it counts as confirmed, and on its first
 * proof the user_metadata someone else may have planted goes too (prove_address). The
 * user's other unused recovery and magic-link tokens are spent with this one.
 * Status: ok | invalid (unknown, used, expired, or the address changed since).
 */
drop function if exists auth.confirm_recovery(bytea, text);
drop function if exists auth.confirm_recovery(bytea, text, jsonb);
create function auth.confirm_recovery(token_hash bytea, password_hash text, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid;
  v_email text;
begin
  select s.user_id, s.email into v_user_id, v_email
    from auth_private.spend_one_time_token(confirm_recovery.token_hash, 'recovery') s;
  if not found then
    return 'invalid';
  end if;
  perform auth_private.spend_other_tokens(v_user_id, confirm_recovery.token_hash);
  perform auth_private.prove_address(v_user_id, v_email, 'recovery', true);
  insert into auth_private.passwords as p (user_id, hash) values (v_user_id, confirm_recovery.password_hash)
    on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
  update auth.users u
    set updated_at = now(),
        email_confirmed_at = coalesce(u.email_confirmed_at, now()),
        providers = case when 'email' = any (u.providers) then u.providers else u.providers || '{email}'::text[] end
    where u.id = v_user_id;
  update auth_private.sessions s set revoked_at = now(), revoked_reason = 'password_recovery'
    where s.user_id = v_user_id and s.revoked_at is null;
  perform auth_private.audit('recovery_completed', v_user_id, confirm_recovery.context, '{}'::jsonb);
  return 'ok';
end
$$;
comment on function auth.confirm_recovery(bytea, text, jsonb) is E'Use a recovery token: prove the address, set the password hash, revoke live sessions, spend the other tokens. Status: ok | invalid.';

/*
 * why: POST /auth/v1/magiclink (docs/api/auth.md): sent only to a registered address; the
 * service answers the same either way, and the work is the same (see request_recovery).
 * Status: sent | not_found | limited.
 */
drop function if exists auth.request_magic_link(text, bytea, text);
drop function if exists auth.request_magic_link(text, bytea, text, integer);
create function auth.request_magic_link(email text, token_hash bytea, sealed_token text, mail_limit integer)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed boolean := auth_private.mail_allowed(request_magic_link.email, request_magic_link.mail_limit);
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(request_magic_link.email);
  if v_user.id is null or not v_allowed then
    perform auth_private.enqueue_no_mail('magic_link');
    return case when v_user.id is null then 'not_found' else 'limited' end;
  end if;
  perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'magic_link', request_magic_link.token_hash, request_magic_link.sealed_token);
  return 'sent';
end
$$;
comment on function auth.request_magic_link(text, bytea, text, integer) is E'Issue a magic-link token (1 h, once) and enqueue its email, if the address is registered and under its mail limit; otherwise enqueue a job that sends nothing. Status: sent | not_found | limited.';

/*
 * why: GET /auth/v1/magiclink/verify: uses the token (once) and starts a session in the
 * same transaction, so a used token always has its session and vice versa. Clicking the
 * link proves the address: it counts as confirmed, and on its first proof the password,
 * user_metadata and sessions someone else may have planted go (prove_address) before the
 * new session starts. The user's other unused recovery and magic-link tokens are spent.
 * Status: ok | invalid (unknown, used, expired, or the address changed since).
 */
drop function if exists auth.verify_magic_link(bytea, bytea, integer);
drop function if exists auth.verify_magic_link(bytea, bytea, integer, jsonb);
create function auth.verify_magic_link(token_hash bytea, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
  v_email text;
begin
  select s.user_id, s.email into v_user_id, v_email
    from auth_private.spend_one_time_token(verify_magic_link.token_hash, 'magic_link') s;
  if not found then
    return auth_private.session_status('invalid');
  end if;
  perform auth_private.spend_other_tokens(v_user_id, verify_magic_link.token_hash);
  perform auth_private.prove_address(v_user_id, v_email, 'magic_link', true);
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return auth.start_session(v_user_id, verify_magic_link.refresh_token_hash, verify_magic_link.ttl_seconds, null, 'magiclink',
    verify_magic_link.context);
end
$$;
comment on function auth.verify_magic_link(bytea, bytea, integer, jsonb) is E'Use a magic-link token (proving the address, spending the other tokens) and start a session in one transaction. Status: ok | invalid.';

revoke all on function auth.verify_email(bytea), auth.request_recovery(text, bytea, text, integer, jsonb), auth.check_recovery_token(bytea),
  auth.confirm_recovery(bytea, text, jsonb), auth.request_magic_link(text, bytea, text, integer), auth.verify_magic_link(bytea, bytea, integer, jsonb)
  from public;
--! EndIncluded auth/one_time_tokens.sql
--! Included auth/compat.sql
/*
 * why: SUPABASE_COMPAT=true (docs/api/supabase.md): the state behind the GoTrue-shaped
 * routes. The one-time token machinery is the one of one_time_tokens.sql: a mail of
 * POST /auth/v1/otp or /recover carries two secrets bound to the address, a link token and
 * a 6-digit code, stored as two rows of the same kind (by SHA-256; the code's hash is
 * taken over the address and the code, so it names one address). Using either spends the
 * other (spend_other_tokens). Nothing here runs unless the setting is on.
 */

/* why: the User object as GoTrue shapes it (aud, app_metadata, identities, confirmed_at …). */
create or replace function auth_private.gotrue_user_json(u auth.users) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object(
      'id', u.id,
      'aud', 'authenticated',
      'role', u.role,
      'email', coalesce(u.email, ''),
      'email_confirmed_at', auth_private.iso_utc(u.email_confirmed_at),
      'phone', '',
      'confirmed_at', auth_private.iso_utc(u.email_confirmed_at),
      'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at),
      'app_metadata', jsonb_build_object(
        'provider', case when u.is_anonymous then 'anonymous' else coalesce(u.provider, u.providers[1], 'email') end,
        'providers', case when u.is_anonymous then '[]'::jsonb
                          else to_jsonb(coalesce(nullif(u.providers, '{}'::text[]), array[coalesce(u.provider, 'email')])) end),
      'user_metadata', u.user_metadata,
      'identities', case when u.is_anonymous then '[]'::jsonb else (
        select coalesce(jsonb_agg(jsonb_build_object(
            'identity_id', u.id, 'id', u.id, 'user_id', u.id, 'provider', p,
            'identity_data', jsonb_build_object('sub', u.id, 'email', u.email, 'email_verified', u.email_confirmed_at is not null),
            'email', u.email,
            'created_at', auth_private.iso_utc(u.created_at), 'updated_at', auth_private.iso_utc(u.updated_at),
            'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at))), '[]'::jsonb)
          from unnest(coalesce(nullif(u.providers, '{}'::text[]), array[coalesce(u.provider, 'email')])) p) end,
      'created_at', auth_private.iso_utc(u.created_at),
      'updated_at', auth_private.iso_utc(u.updated_at),
      'is_anonymous', u.is_anonymous)
    || auth_private.factors_json(u.id)
$$;
comment on function auth_private.gotrue_user_json(auth.users) is E'SUPABASE_COMPAT: the User object with GoTrue''s fields.';

/* why: the GoTrue User object of an id, for replies under SUPABASE_COMPAT; null when the user is gone. */
create or replace function auth.compat_user(user_id uuid) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select auth_private.gotrue_user_json(u) from auth.users u where u.id = compat_user.user_id
$$;
comment on function auth.compat_user(uuid) is E'SUPABASE_COMPAT: the GoTrue User object of an id, or null.';

/*
 * why: POST /auth/v1/otp (email) and POST /auth/v1/recover under SUPABASE_COMPAT. kind is
 * magic_link or recovery. With create_user, an unknown address gets an account (no
 * password, unconfirmed, `data` as user_metadata), as GoTrue's signInWithOtp does; without,
 * an unknown address is not_found (the route says so for otp, and answers the same for
 * recovery). The link token and the code are issued together, the mail enqueued once;
 * the address's earlier unused tokens of the kind are spent (only the latest mail works).
 * Status: sent | created | not_found | limited.
 */
create or replace function auth.compat_send_link(kind text, email text, create_user boolean, user_metadata jsonb,
    link_hash bytea, sealed_token text, code_hash bytea, sealed_code text, redirect_to text, mail_limit integer, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed boolean := auth_private.mail_allowed(compat_send_link.email, compat_send_link.mail_limit);
  v_user auth.users;
  v_created boolean := false;
begin
  if compat_send_link.kind not in ('magic_link', 'recovery') then
    raise exception 'unknown kind %', compat_send_link.kind using errcode = 'PT400';
  end if;
  select * into v_user from auth.users u where lower(u.email) = lower(compat_send_link.email) for update;
  if v_user.id is null and compat_send_link.create_user and compat_send_link.kind = 'magic_link' and v_allowed then
    insert into auth.users (email, user_metadata, providers)
      values (lower(compat_send_link.email), coalesce(compat_send_link.user_metadata, '{}'::jsonb), '{email}')
      returning * into v_user;
    v_created := true;
    perform auth_private.audit('sign_up', v_user.id, compat_send_link.context, '{"method": "otp"}'::jsonb);
  end if;
  if v_user.id is null or not v_allowed then
    perform auth_private.enqueue_no_mail(compat_send_link.kind);
    return case when v_user.id is null then 'not_found' else 'limited' end;
  end if;
  update auth_private.one_time_tokens t set used_at = now()
    where t.user_id = v_user.id and t.kind = compat_send_link.kind and t.used_at is null;
  -- A code's hash names its address: an old row with the same hash is this address's own, spent.
  delete from auth_private.one_time_tokens t where t.token_hash = compat_send_link.code_hash;
  insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at)
    values (compat_send_link.link_hash, v_user.id, compat_send_link.kind, v_user.email, now() + interval '1 hour'),
           (compat_send_link.code_hash, v_user.id, compat_send_link.kind, v_user.email, now() + interval '1 hour');
  perform graphile_worker.add_job('auth__send_email',
    json_build_object('kind', compat_send_link.kind, 'to', v_user.email, 'sealed_token', compat_send_link.sealed_token,
      'compat', json_build_object('sealed_code', compat_send_link.sealed_code, 'redirect_to', compat_send_link.redirect_to,
        'type', case when compat_send_link.kind = 'recovery' then 'recovery' when v_created then 'signup' else 'magiclink' end)),
    max_attempts => 5);
  if compat_send_link.kind = 'recovery' then
    perform auth_private.audit('recovery_requested', v_user.id, compat_send_link.context, '{}'::jsonb);
  end if;
  return case when v_created then 'created' else 'sent' end;
end
$$;
comment on function auth.compat_send_link(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, jsonb) is E'SUPABASE_COMPAT: issue a link token and a 6-digit code (1 h, once, either spends the other) and enqueue one mail. Status: sent | created | not_found | limited.';

/*
 * why: POST/GET /auth/v1/verify under SUPABASE_COMPAT: use a token of `kind` and open a
 * session in one transaction, as GoTrue answers a verification.
 * - magic_link: as auth.verify_magic_link (the address proven, the other tokens spent),
 *   except for an account this very mail created (POST /otp with create_user) and nothing
 *   changed since: its user_metadata is the `data` of that request and stays (GoTrue's
 *   signInWithOtp keeps it); anything else proven for the first time loses what may have
 *   been planted (prove_address with purge).
 * - recovery: the address proven, the other tokens spent, no password changed: the
 *   session opened here sets it (PUT /auth/v1/user).
 * - verification: the sign-up confirmed (its data kept, as auth.verify_email), spent.
 * Status: ok | invalid.
 */
create or replace function auth.compat_verify(kind text, token_hash bytea, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
  v_email text;
  v_issued_at timestamptz;
  v_created_by_it boolean;
begin
  if compat_verify.kind not in ('magic_link', 'recovery', 'verification') then
    return auth_private.session_status('invalid');
  end if;
  select s.user_id, s.email, s.issued_at into v_user_id, v_email, v_issued_at
    from auth_private.spend_one_time_token(compat_verify.token_hash, compat_verify.kind) s;
  if not found then
    return auth_private.session_status('invalid');
  end if;
  select u.created_at = v_issued_at and u.updated_at = v_issued_at
         and not exists (select 1 from auth_private.passwords p where p.user_id = u.id)
    into v_created_by_it
    from auth.users u where u.id = v_user_id;
  if compat_verify.kind = 'verification' then
    perform auth_private.prove_address(v_user_id, v_email, 'verification', false);
  else
    perform auth_private.spend_other_tokens(v_user_id, compat_verify.token_hash);
    perform auth_private.prove_address(v_user_id, v_email, compat_verify.kind, not v_created_by_it);
  end if;
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return auth.start_session(v_user_id, compat_verify.refresh_token_hash, compat_verify.ttl_seconds, null,
    case compat_verify.kind when 'recovery' then 'recovery' when 'magic_link' then 'magiclink' else 'otp' end, compat_verify.context);
end
$$;
comment on function auth.compat_verify(text, bytea, bytea, integer, jsonb) is E'SUPABASE_COMPAT: use a magic-link, recovery or verification token and open a session in one transaction. Status: ok | invalid.';

/*
 * why: POST /auth/v1/logout?scope= under SUPABASE_COMPAT: local ends the caller's family,
 * others every other family of the user, global all of them.
 * Status: ok.
 */
create or replace function auth.compat_end_sessions(user_id uuid, session_id uuid, scope text, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  update auth_private.sessions s set revoked_at = now(), revoked_reason = 'logout'
    where s.user_id = compat_end_sessions.user_id and s.revoked_at is null
      and case compat_end_sessions.scope
            when 'local' then s.id = compat_end_sessions.session_id
            when 'others' then s.id is distinct from compat_end_sessions.session_id
            else true end;
  perform auth_private.audit('sign_out', compat_end_sessions.user_id, compat_end_sessions.context,
    jsonb_build_object('scope', compat_end_sessions.scope));
  return 'ok';
end
$$;
comment on function auth.compat_end_sessions(uuid, uuid, text, jsonb) is E'SUPABASE_COMPAT: end the caller''s, the other, or all sessions of a user. Status: ok.';

revoke all on function auth_private.gotrue_user_json(auth.users), auth.compat_user(uuid),
  auth.compat_send_link(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, jsonb),
  auth.compat_verify(text, bytea, bytea, integer, jsonb), auth.compat_end_sessions(uuid, uuid, text, jsonb) from public;
--! EndIncluded auth/compat.sql
