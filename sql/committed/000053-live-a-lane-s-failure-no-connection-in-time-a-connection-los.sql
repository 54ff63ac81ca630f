--! Previous: sha1:a28b763c240595a5abfe678d55caf49049ee9aba
--! Hash: sha1:dc2551914450e13c1978e39d6b2a6937f3ffe33b
--! Message: live: a lane's failure (no connection in time, a connection lost, a deadlock, the server shutting down) runs the query again at the next poll instead of marking it broken

--! Included live/broken.sql
/*
 * why: a subscription whose query stops working must never block a write (a DBA drops a
 * column a live query selects: before this, every INSERT, UPDATE and DELETE on the table
 * failed in the live-query trigger). Such a subscription is marked broken with the
 * database's reason:
 * - on the DDL: an event trigger plans every working subscription's query (EXPLAIN, the
 *   query is not run) after DDL in `public` or a drop there;
 * - in a writer's trigger: each subscription's block catches its own error;
 * - at a re-run (live_private.rerun_*): the error of the query.
 * A broken subscription is left out of its tables' triggers and re-runs, its clients get
 * one `error` message and are closed (the service, on the `broken` notification), new
 * sockets are refused, and registering it again (with a query that works) repairs it.
 */

/*
 * why: a lane's failure that says nothing about the live query, so the query is run again
 * at the next poll rather than marked broken: not a SQLSTATE (no connection became free
 * within DB_POOL_TIMEOUT_MS, `DB_BUSY`; the driver's or the socket's own codes), or a
 * SQLSTATE of a connection lost (08), a transaction rolled back by a deadlock or a
 * serialization failure (40), the server out of resources (53) or shutting down (57P), a
 * lock not available (55P03). A statement cancelled by its timeout (57014) is the query's:
 * it would fail the same way each time. `error`: `SQLSTATE|message`, as the poller sends it.
 */
create or replace function live_private.transient(error text) returns boolean
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$
  select c !~ '^([0-9][0-9A-Z]|F0|HV|P0|XX)[0-9A-Z]{3}$' or c ~ '^(08|40|53|57P)' or c = '55P03'
  from (select split_part(transient.error, '|', 1) as c) e
$$;
comment on function live_private.transient(text) is E'plinth: whether a live re-run\'s error is the lane\'s (run again) rather than the query\'s (broken).';
revoke all on function live_private.transient(text) from public;

/*
 * why: mark one subscription broken. `resync` false in a writer's trigger, which must not
 * regenerate the trigger of the table it is writing (the block fails and is caught again
 * until the next DDL or registration regenerates it; the mark is kept once).
 */
create or replace function live_private.mark_broken(query_id text, reason text, resync boolean default true)
  returns boolean
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_tables oid[];
  v_channel text;
  v_prev text := coalesce(current_setting('live.internal', true), '');
begin
  update live_private.subscriptions s
     set broken = coalesce(nullif(mark_broken.reason, ''), 'the query failed')
   where s.query_id = mark_broken.query_id and s.broken is null
  returning s.tables into v_tables;
  if not found then
    return false;
  end if;
  if mark_broken.resync then
    perform pg_catalog.set_config('live.internal', 'on', true);
    perform live_private.sync_triggers(t) from unnest(v_tables) t;
    perform pg_catalog.set_config('live.internal', v_prev, true);
  end if;
  select channel into v_channel from live_private.settings;
  perform pg_catalog.pg_notify(v_channel, jsonb_build_object('type', 'broken', 'query_id', mark_broken.query_id)::text);
  if mark_broken.resync then -- the DBA's DDL: tell them; a writer is told nothing
    raise warning 'live query % is broken: %', mark_broken.query_id, mark_broken.reason
      using hint = 'register it again with live.subscribe once its query works';
  end if;
  return true;
end
$$;
comment on function live_private.mark_broken(text, text, boolean) is E'plinth: marks a live query broken (left out of triggers and re-runs; its clients are closed).';
revoke all on function live_private.mark_broken(text, text, boolean) from public;

/* why: plan every working subscription's query; a query that no longer plans (a column or
   table gone, a function dropped) is marked broken with the database's message. */
create or replace function live_private.check_queries() returns int
  language plpgsql security definer
  set search_path = pg_catalog, public, pg_temp
as $$
declare
  s record;
  v_n int := 0;
begin
  for s in select x.query_id, x.query, x.tables from live_private.subscriptions x where x.broken is null order by x.query_id loop
    begin
      if exists (select 1 from unnest(s.tables) t where not exists (select 1 from pg_catalog.pg_class c where c.oid = t)) then
        raise exception 'a table the query reads was dropped';
      end if;
      execute format('explain (costs off) select * from (%s) q', s.query);
    exception when others then
      if live_private.mark_broken(s.query_id, sqlerrm) then
        v_n := v_n + 1;
      end if;
    end;
  end loop;
  return v_n;
end
$$;
comment on function live_private.check_queries() is E'plinth: plans every working live query and marks those that fail broken.';
revoke all on function live_private.check_queries() from public;

create or replace function live_private.tg__ddl_command_end() returns event_trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  -- Table subscriptions' statements are built from policies and grants: built again (realtime.sql).
  if to_regclass('live_private.realtime_statements') is not null and coalesce(current_setting('live.internal', true), '') <> 'on' then
    delete from live_private.realtime_statements;
  end if;
  if coalesce(current_setting('live.internal', true), '') = 'on'
     or not exists (select 1 from live_private.subscriptions s where s.broken is null) then
    return;
  end if;
  if exists (select 1 from pg_catalog.pg_event_trigger_ddl_commands() c
              where c.schema_name is null or c.schema_name = 'public') then
    perform live_private.check_queries();
  end if;
end
$$;
comment on function live_private.tg__ddl_command_end() is E'plinth: after DDL on public, marks live queries that no longer plan broken.';
revoke all on function live_private.tg__ddl_command_end() from public;

create or replace function live_private.tg__sql_drop() returns event_trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  -- Table subscriptions' statements are built from policies and grants: built again (realtime.sql).
  if to_regclass('live_private.realtime_statements') is not null and coalesce(current_setting('live.internal', true), '') <> 'on' then
    delete from live_private.realtime_statements;
  end if;
  if coalesce(current_setting('live.internal', true), '') = 'on'
     or not exists (select 1 from live_private.subscriptions s where s.broken is null) then
    return;
  end if;
  if exists (select 1 from pg_catalog.pg_event_trigger_dropped_objects() d where d.schema_name = 'public') then
    perform live_private.check_queries();
  end if;
end
$$;
comment on function live_private.tg__sql_drop() is E'plinth: after a drop in public, marks live queries that no longer plan broken.';
revoke all on function live_private.tg__sql_drop() from public;

drop event trigger if exists plinth_live_ddl_command_end;
create event trigger plinth_live_ddl_command_end on ddl_command_end
  execute function live_private.tg__ddl_command_end();
comment on event trigger plinth_live_ddl_command_end is E'plinth: marks live queries broken by DDL.';

drop event trigger if exists plinth_live_sql_drop;
create event trigger plinth_live_sql_drop on sql_drop
  execute function live_private.tg__sql_drop();
comment on event trigger plinth_live_sql_drop is E'plinth: marks live queries broken by a drop.';
--! EndIncluded live/broken.sql
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
create or replace function live_private.claim(instance_id uuid, lease_ms int, busy boolean default false)
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
      select x.id, (x.dirty or x.lease_owner is not null or s.fast_table is null) as rerun
      from live_private.groups x
      join live_private.subscriptions s on s.query_id = x.query_id and s.broken is null and s.mode <> 'changes'
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
  if v_ids is not null or v_subs > 0 or v_groups > 0 or claim.busy then
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
comment on function live_private.claim(uuid, int, boolean) is E'plinth: the poller\'s step: turns writers\' marks into dirty flags and leases dirty live queries and groups to an instance.';
revoke all on function live_private.claim(uuid, int, boolean) from public;

/* why: re-run a leased default-mode subscription (as its registrant was checked), diff,
   publish, release the lease. A query that fails (but for live_private.transient) or passes
   LIVE_MAX_ROWS is marked broken. */
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
    -- A deadlock, a lock not available (live_private.transient): run again at the next poll.
    if live_private.transient(sqlstate || '|' || sqlerrm) then
      update live_private.subscriptions x set dirty = true where x.query_id = s.query_id;
    else
      perform live_private.mark_broken(s.query_id, sqlerrm);
    end if;
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
      -- told and closed); the lane's failure (live_private.transient) runs the group again at
      -- the next poll; any other error means the query stopped working.
      if left(publish_groups.errors[i], 6) = '42501|' then
        delete from live_private.groups x where x.id = g.id;
        perform pg_catalog.pg_notify(v_channel, g.id::text || '|' || jsonb_build_object('type', 'error', 'query_id', g.query_id,
          'error', 'permission denied for this live query')::text);
      elsif live_private.transient(publish_groups.errors[i]) then
        update live_private.groups x set dirty = true, lease_owner = null, lease_until = null where x.id = g.id;
      else
        update live_private.groups x set lease_owner = null, lease_until = null where x.id = g.id;
        perform live_private.mark_broken(g.query_id, substr(publish_groups.errors[i], strpos(publish_groups.errors[i], '|') + 1));
      end if;
      continue;
    end if;
    v_snap := coalesce(publish_groups.snaps[i]::pg_snapshot, g.snap);
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
--! Included live/realtime.sql
/*
 * why: table subscriptions chosen by the client (docs/api/realtime.md): a socket asks for
 * the changes of one table of `public`; it joins the group of its role and observed
 * claims of that table's internal subscription `realtime:<table oid>` (mode `changes`),
 * the same groups, poller and notifications as `as: subscriber` live queries. The writer's
 * statement appends its rows' changes in one row (sync_triggers), nothing per group. After
 * commit one poller at a time takes a subscription's new changes (claim_changes, a lease on
 * the subscription and its cursor `changes_snap`), matches them to the groups whose
 * sockets' event and filter may want them (`group_members.wants`, by equality joins), and
 * each group with a match checks them against the table's policies for its role
 * (realtime_sql, on its request lane); the service applies each socket's event and filter
 * to what its group was sent. A group keeps no result: nothing grows with the table. A
 * table nobody has subscribed to for REALTIME_IDLE_MS loses its subscription and triggers
 * (realtime_sweep).
 */
alter table live_private.subscriptions drop constraint if exists subscriptions_mode_check;
alter table live_private.subscriptions add constraint subscriptions_mode_check check (mode in ('delta', 'notify', 'changes'));
/* why: a table subscription's cursor (the snapshot whose changes its groups have been
   given) and since when it has had no group (realtime_sweep). */
alter table live_private.subscriptions add column if not exists changes_snap pg_snapshot;
alter table live_private.subscriptions add column if not exists idle_since timestamptz;
/* why: what an instance's sockets in a group of a table subscription may want: a JSON
   array of `{"e": event, "c": column, "s": [text values], "n": [numbers]}` (one per
   distinct filter; without "c": every change of that event), null for everything. Only a
   filter's `eq`/`in` condition narrows it; the service's own check of each socket's
   filter follows. */
alter table live_private.group_members add column if not exists wants jsonb;

/* why: a table's primary key columns, in key order (empty when it has none). */
create or replace function live_private.realtime_pk(rel oid) returns text[]
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(array_agg(a.attname::text order by k.n), '{}')
  from pg_catalog.pg_index i
  cross join lateral unnest(i.indkey) with ordinality as k(attnum, n)
  join pg_catalog.pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
  where i.indrelid = realtime_pk.rel and i.indisprimary
$$;
revoke all on function live_private.realtime_pk(oid) from public;

/* why: how an UPDATE's new row ("live$n") is paired with its old one ("live$o"): by primary
   key; a table without one sends the new row alone. The aliases cannot be a column's name. */
create or replace function live_private.realtime_pk_join(rel oid) returns text
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select case when cardinality(k) = 0 then 'false'
    else '(' || (select string_agg(format('"live$n".%I', c), ', ') from unnest(k) c) || ') = ('
             || (select string_agg(format('"live$o".%I', c), ', ') from unnest(k) c) || ')' end
  from live_private.realtime_pk(realtime_pk_join.rel) k
$$;
revoke all on function live_private.realtime_pk_join(oid) from public;

/*
 * why: the statement a group's lane runs over the changes it has not seen ($1: the queued
 * changes, jsonb): each row is checked against the table's policies for the group's role
 * with its claims (rls_filter, as the fast path of live queries). An INSERT or UPDATE is
 * kept when its new row is readable (an UPDATE that takes a row out of the group's view is
 * not sent), a DELETE when its old row was; the old row is kept only when readable. The
 * table under LIMIT 0 is planned, never read, so the role's privilege is checked (42501
 * removes the group).
 */
create or replace function live_private.realtime_sql(rel oid, role name) returns text
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select format($q$select
  (select coalesce(jsonb_agg(jsonb_build_object('t', x.t, 'ts', x.e -> 'ts', 'new', case when x.nv then x.e -> 'new' end,
                                                'old', case when x.ov then x.e -> 'old' end) order by x.i)
                   filter (where (x.t <> 'DELETE' and x.nv) or (x.t = 'DELETE' and x.ov)), '[]'::jsonb)::text
   from (select a.e, a.i, a.e ->> 't' as t,
           jsonb_typeof(a.e -> 'new') = 'object' and exists (select from jsonb_populate_record(null::%2$s, a.e -> 'new') as %1$I where %3$s) as nv,
           jsonb_typeof(a.e -> 'old') = 'object' and exists (select from jsonb_populate_record(null::%2$s, a.e -> 'old') as %1$I where %3$s) as ov
         from jsonb_array_elements($1::text::jsonb) with ordinality as a(e, i)) x) as ins,
  $2::text as del
where not exists (select from %2$s limit 0)$q$,
    c.relname, c.oid::regclass, live_private.rls_filter(c.oid, realtime_sql.role))
  from pg_catalog.pg_class c where c.oid = realtime_sql.rel
$$;
revoke all on function live_private.realtime_sql(oid, name) from public;

/*
 * why: a group's changes as `<group id>|{"query_id", "seq", "changes": [...]}` messages,
 * each within the notification limit; a change too large for one alone is sent as
 * `{"t", "ts", "too_large": true}` (the client is told, as Supabase does, with an error).
 */
create or replace function live_private.realtime_publish(channel text, group_id bigint, query_id text, seq bigint, changes jsonb, payload_limit int)
  returns void
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_head text := format('{"query_id":%s,"seq":%s,"changes":[', to_jsonb(realtime_publish.query_id)::text, realtime_publish.seq);
  v_buf text := '';
  v_text text;
  e jsonb;
begin
  for e in select x from jsonb_array_elements(realtime_publish.changes) x loop
    v_text := e::text;
    if octet_length(v_head) + octet_length(v_text) + 2 > realtime_publish.payload_limit then
      v_text := jsonb_build_object('t', e -> 't', 'ts', e -> 'ts', 'too_large', true)::text;
    end if;
    if v_buf <> '' and octet_length(v_head) + octet_length(v_buf) + octet_length(v_text) + 3 > realtime_publish.payload_limit then
      perform pg_catalog.pg_notify(realtime_publish.channel, realtime_publish.group_id::text || '|' || v_head || v_buf || ']}');
      v_buf := '';
    end if;
    v_buf := case when v_buf = '' then v_text else v_buf || ',' || v_text end;
  end loop;
  if v_buf <> '' then
    perform pg_catalog.pg_notify(realtime_publish.channel, realtime_publish.group_id::text || '|' || v_head || v_buf || ']}');
  end if;
end
$$;
revoke all on function live_private.realtime_publish(text, bigint, text, bigint, jsonb, int) from public;

/*
 * why: a socket's table subscription: the table must be an ordinary or partitioned table
 * of `public` its role may SELECT; the table's internal subscription is registered (or
 * repaired) on first use, its triggers installed, and the socket's instance joins the group
 * of its role and observed claims, which starts at this snapshot (the changes that commit
 * after it reach the group), adding what the socket wants (`want`, see group_members.wants;
 * null: everything). `error` instead: 'not found' or 'permission denied'.
 * LIVE_MAX_GROUPS raises 54000 as for live queries.
 */
drop function if exists live_private.realtime_join(uuid, text, name, jsonb);
create or replace function live_private.realtime_join(instance_id uuid, tbl text, role name, claims jsonb, want jsonb default null)
  returns table (group_id bigint, query_id text, pk text[], cols text[], error text)
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_rel oid;
  v_qid text;
  v_query text;
  v_sub live_private.subscriptions;
  v_observes text[];
  v_layout text[];
  v_had boolean;
  j record;
begin
  select c.oid into v_rel from pg_catalog.pg_class c
   where c.relnamespace = 'public'::regnamespace and c.relname = realtime_join.tbl and c.relkind in ('r', 'p');
  if v_rel is null then
    return query select null::bigint, null::text, null::text[], null::text[], 'not found';
    return;
  end if;
  if not pg_catalog.has_table_privilege(realtime_join.role, v_rel, 'SELECT') then
    return query select null::bigint, null::text, null::text[], null::text[], 'permission denied';
    return;
  end if;
  v_qid := 'realtime:' || v_rel::text;
  v_query := format('select * from %s', v_rel::regclass);
  -- This instance's joins of one table one at a time (its `wants` are read and written),
  -- and the sweep (which deletes the row under FOR UPDATE) waits for the join, or is waited for.
  perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('plinth realtime member ' || realtime_join.instance_id::text || v_qid, 0));
  select * into v_sub from live_private.subscriptions s where s.query_id = v_qid for key share;
  if not found or v_sub.broken is not null then
    perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('plinth realtime ' || v_qid, 0));
    perform pg_catalog.set_config('live.internal', 'on', true);
    drop view if exists pg_temp.live_probe;
    execute 'create temporary view live_probe as ' || v_query;
    v_observes := live_private.observed_claims(v_query, array[v_rel]);
    drop view if exists pg_temp.live_probe;
    select array_agg(a.attname::text order by a.attname::text) into v_layout
      from pg_catalog.pg_attribute a where a.attrelid = v_rel and a.attnum > 0 and not a.attisdropped;
    insert into live_private.subscriptions as s (query_id, query, mode, audience, registered_by, tables, fast_table, layout, snapshot,
                                                 as_subscriber, observes, changes_snap)
    values (v_qid, v_query, 'changes', null, current_user, array[v_rel], v_rel, v_layout, '[]', true, v_observes, pg_catalog.pg_current_snapshot())
    on conflict on constraint subscriptions_pkey do update
      set query = excluded.query, layout = excluded.layout, observes = excluded.observes, broken = null,
          dirty = false, lease_owner = null, lease_until = null, changes_snap = excluded.changes_snap, idle_since = null;
    perform live_private.sync_triggers(v_rel);
    perform pg_catalog.set_config('live.internal', '', true);
  end if;
  v_had := exists (select from live_private.group_members m
                   where m.instance_id = realtime_join.instance_id
                     and m.group_id = live_private.group_of(v_qid, realtime_join.role, realtime_join.claims));
  select * into j from live_private.join_group(realtime_join.instance_id, v_qid, realtime_join.role, realtime_join.claims) x;
  if j.group_id is null then
    return query select null::bigint, null::text, null::text[], null::text[], 'not found';
    return;
  end if;
  if j.needs_init then
    update live_private.groups g set snapshot = '[]', snap = pg_catalog.pg_current_snapshot()
     where g.id = j.group_id and g.snapshot is null;
  end if;
  update live_private.group_members m set wants = case
      when realtime_join.want is null then null
      when not v_had then jsonb_build_array(realtime_join.want)
      when m.wants is null then null
      when m.wants @> jsonb_build_array(realtime_join.want) then m.wants
      when jsonb_array_length(m.wants) >= 64 then null
      else m.wants || jsonb_build_array(realtime_join.want) end
   where m.group_id = j.group_id and m.instance_id = realtime_join.instance_id;
  update live_private.subscriptions s set idle_since = null where s.query_id = v_qid and s.idle_since is not null;
  return query select j.group_id, v_qid, live_private.realtime_pk(v_rel),
    (select s.layout from live_private.subscriptions s where s.query_id = v_qid), null::text;
end
$$;
comment on function live_private.realtime_join(uuid, text, name, jsonb, jsonb) is E'plinth: puts a socket\'s table subscription in the group of its role and claims (registering the table\'s changes on first use).';
revoke all on function live_private.realtime_join(uuid, text, name, jsonb, jsonb) from public;

/*
 * why: the changes of a table subscription committed after its cursor `from` and visible
 * to this statement, matched to the groups that may want them: each group's wants
 * (group_members.wants, over its members) are joined to the changes by equality on the
 * wanted column's text (a JSON string) or number (float8, as the service compares them),
 * so the work grows with the matches, not with groups × changes. A change the group's own
 * join snapshot saw is left out. One row per group with a match, its changes in commit
 * order, and the snapshot they were read in (the new cursor; also on a row with a null
 * group when nothing matched).
 */
drop function if exists live_private.realtime_pending(text, pg_snapshot);
create or replace function live_private.realtime_pending(query_id text, from_snap pg_snapshot)
  returns table (group_id bigint, ins jsonb, snap text)
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  -- PL/pgSQL keeps this statement's plan (a SQL function would plan it at every call).
  return query
  with pend as (
    select ch.id as cid, e.n, ch.xid, e.v, e.v ->> 't' as t,
           case when e.v ->> 't' = 'DELETE' then e.v -> 'old' else e.v -> 'new' end as r
    from live_private.changes ch cross join lateral jsonb_array_elements(ch.ins) with ordinality as e(v, n)
    where ch.query_id = realtime_pending.query_id and ch.ins is not null
      and not coalesce(pg_catalog.pg_visible_in_snapshot(ch.xid, realtime_pending.from_snap), false)),
  mem as (
    select g.id, m.wants from live_private.groups g join live_private.group_members m on m.group_id = g.id
    where g.query_id = realtime_pending.query_id and g.snapshot is not null),
  wall as (select distinct mem.id from mem where mem.wants is null),
  wx as (select distinct mem.id, x ->> 'e' as e, x ->> 'c' as c, x -> 's' as s, x -> 'n' as nums
         from mem cross join lateral jsonb_array_elements(mem.wants) x where mem.wants is not null),
  ws as materialized (select wx.id, wx.e, wx.c, v as val from wx cross join lateral jsonb_array_elements_text(coalesce(wx.s, '[]')) v where wx.c is not null),
  wn as materialized (select wx.id, wx.e, wx.c, v::float8 as val from wx cross join lateral jsonb_array_elements_text(coalesce(wx.nums, '[]')) v where wx.c is not null),
  cols as (select distinct wx.c from wx where wx.c is not null),
  pk as (select p.*, cols.c, jsonb_typeof(p.r -> cols.c) as ty, p.r ->> cols.c as ks,
                case when jsonb_typeof(p.r -> cols.c) = 'number' then (p.r -> cols.c)::float8 end as kn
         from pend p cross join cols),
  hit as (
    select w.id, p.cid, p.n, p.xid, p.v from pend p cross join wall w
    union all
    select w.id, p.cid, p.n, p.xid, p.v from pend p join wx w on w.c is null and (w.e = '*' or w.e = p.t)
    union all
    select w.id, k.cid, k.n, k.xid, k.v from pk k join ws w on w.c = k.c and w.val = k.ks and (w.e = '*' or w.e = k.t) where k.ty = 'string'
    union all
    select w.id, k.cid, k.n, k.xid, k.v from pk k join wn w on w.c = k.c and w.val = k.kn and (w.e = '*' or w.e = k.t) where k.ty = 'number'
    union all
    select w.id, k.cid, k.n, k.xid, k.v from pk k join wx w on w.c = k.c and (w.e = '*' or w.e = k.t) where k.ty in ('boolean', 'object', 'array')),
  per as (
    select h.id, jsonb_agg(h.v order by h.cid, h.n) as ins
    from (select distinct on (hit.id, hit.cid, hit.n) hit.* from hit) h
    join live_private.groups g on g.id = h.id
    where not coalesce(pg_catalog.pg_visible_in_snapshot(h.xid, g.snap), false)
    group by h.id)
  select per.id, per.ins, pg_catalog.pg_current_snapshot()::text from per
  union all
  select null, null, pg_catalog.pg_current_snapshot()::text;
end
$$;
revoke all on function live_private.realtime_pending(text, pg_snapshot) from public;

/*
 * why: building a group's statement (realtime_sql: the table's policies for a role, from the
 * catalog) costs milliseconds; the poller needs it at every step. It is kept per table
 * subscription and role for 10 s at most, and forgotten at any DDL (a policy, a grant, a
 * column: tg__ddl_command_end), so a change of rights applies at the next step, a change
 * of role membership within 10 s. Unlogged: it is only a cache.
 */
create unlogged table if not exists live_private.realtime_statements (
  query_id text not null,
  role name not null,
  q text not null,
  made_at timestamptz not null default now(),
  primary key (query_id, role)
);
comment on table live_private.realtime_statements is E'plinth: the table subscriptions\' lane statements per role (a cache, cleared at DDL).';

create or replace function live_private.realtime_statement(query_id text, role name) returns text
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_q text;
begin
  select x.q into v_q from live_private.realtime_statements x
   where x.query_id = realtime_statement.query_id and x.role = realtime_statement.role and x.made_at > now() - interval '10 seconds';
  if v_q is null then
    v_q := live_private.fast_sql(realtime_statement.query_id, realtime_statement.role);
    if v_q is not null then
      insert into live_private.realtime_statements as x (query_id, role, q) values (realtime_statement.query_id, realtime_statement.role, v_q)
      on conflict on constraint realtime_statements_pkey do update set q = excluded.q, made_at = excluded.made_at;
    end if;
  end if;
  return v_q;
end
$$;
revoke all on function live_private.realtime_statement(text, name) from public;

/*
 * why: the poller's step for table subscriptions. Each one with changes after its cursor
 * and a free (or expired) lease: its matches (realtime_pending); with none the cursor moves
 * on here, else the subscription is leased to this instance and one row per matched group
 * is returned with the statement its lane runs (realtime_sql for its role) and the new
 * cursor, which realtime_done records once the lanes have answered.
 */
create or replace function live_private.claim_changes(instance_id uuid, lease_ms int)
  returns table (query_id text, snap text, group_id bigint, role name, claims text, query text, ins text)
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  s record;
  v_ids bigint[];
  v_ins jsonb[];
  v_snap text;
begin
  for s in
    select x.query_id, x.changes_snap from live_private.subscriptions x
     where x.mode = 'changes' and x.broken is null and (x.lease_owner is null or x.lease_until < clock_timestamp())
       and exists (select from live_private.changes ch where ch.query_id = x.query_id
                   and not coalesce(pg_catalog.pg_visible_in_snapshot(ch.xid, x.changes_snap), false))
     for update of x skip locked
  loop
    select array_agg(p.group_id) filter (where p.group_id is not null), array_agg(p.ins) filter (where p.group_id is not null), max(p.snap)
      into v_ids, v_ins, v_snap
      from live_private.realtime_pending(s.query_id, s.changes_snap) p;
    if v_ids is null then
      update live_private.subscriptions x set changes_snap = v_snap::pg_snapshot where x.query_id = s.query_id;
      delete from live_private.changes ch where ch.query_id = s.query_id and pg_catalog.pg_visible_in_snapshot(ch.xid, v_snap::pg_snapshot);
      continue;
    end if;
    update live_private.subscriptions x set lease_owner = claim_changes.instance_id,
           lease_until = clock_timestamp() + make_interval(secs => claim_changes.lease_ms / 1000.0)
     where x.query_id = s.query_id;
    -- The lane's statement once per role (most groups share one), not per group.
    return query
      with gr as (select g.id, g.role, g.claims, v.ins from unnest(v_ids, v_ins) as v(id, ins) join live_private.groups g on g.id = v.id),
      st as (select r.role, live_private.realtime_statement(s.query_id, r.role) as q from (select distinct gr.role from gr) r)
      select s.query_id, v_snap, gr.id, gr.role, gr.claims::text, st.q, gr.ins::text
      from gr join st on st.role = gr.role;
  end loop;
end
$$;
comment on function live_private.claim_changes(uuid, int) is E'plinth: leases table subscriptions with new changes and returns them matched to the groups that may want them.';
revoke all on function live_private.claim_changes(uuid, int) from public;

/*
 * why: what the lanes of a leased table subscription's groups returned: each group's
 * changes its role may read are published (realtime_publish, the group's seq moved on); an
 * error (`SQLSTATE|message`) removes the group for 42501 (its sockets are told and closed),
 * leaves everything for the next poll when it is the lane's (live_private.transient), else
 * marks the subscription broken (every socket of it is told). The cursor moves to
 * `snap`, the changes every group has been given go, and the lease is released.
 */
create or replace function live_private.realtime_done(instance_id uuid, query_id text, snap text, ids bigint[], ins jsonb[], errors text[])
  returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_channel text;
  v_seq bigint;
  i int;
begin
  -- A lane's failure (live_private.transient) for any group: nothing is published and the
  -- cursor stays; the lease is released and the next poll claims the same changes again.
  if exists (select from unnest(realtime_done.errors) e where live_private.transient(e)) then
    update live_private.subscriptions x set lease_owner = null, lease_until = null
     where x.query_id = realtime_done.query_id and x.lease_owner = realtime_done.instance_id;
    return;
  end if;
  update live_private.subscriptions x set changes_snap = realtime_done.snap::pg_snapshot, lease_owner = null, lease_until = null
   where x.query_id = realtime_done.query_id and x.lease_owner = realtime_done.instance_id;
  if not found then
    return;
  end if;
  select st.channel into v_channel from live_private.settings st;
  for i in 1 .. coalesce(cardinality(realtime_done.ids), 0) loop
    if realtime_done.errors[i] is not null then
      if left(realtime_done.errors[i], 6) = '42501|' then
        delete from live_private.groups g where g.id = realtime_done.ids[i];
        perform pg_catalog.pg_notify(v_channel, realtime_done.ids[i]::text || '|' || jsonb_build_object('type', 'error', 'query_id', realtime_done.query_id,
          'error', 'permission denied for this live query')::text);
      else
        perform live_private.mark_broken(realtime_done.query_id, substr(realtime_done.errors[i], strpos(realtime_done.errors[i], '|') + 1));
        return;
      end if;
    elsif coalesce(realtime_done.ins[i], '[]'::jsonb) <> '[]'::jsonb then
      update live_private.groups g set seq = g.seq + 1 where g.id = realtime_done.ids[i] returning g.seq into v_seq;
      if found then
        perform live_private.realtime_publish(v_channel, realtime_done.ids[i], realtime_done.query_id, v_seq, realtime_done.ins[i],
          live_private.payload_limit(v_channel) - length(realtime_done.ids[i]::text) - 1);
      end if;
    end if;
  end loop;
  delete from live_private.changes ch
   where ch.query_id = realtime_done.query_id and pg_catalog.pg_visible_in_snapshot(ch.xid, realtime_done.snap::pg_snapshot);
end
$$;
comment on function live_private.realtime_done(uuid, text, text, bigint[], jsonb[], text[]) is E'plinth: publishes what a leased table subscription\'s groups may read and moves its cursor on.';
revoke all on function live_private.realtime_done(uuid, text, text, bigint[], jsonb[], text[]) from public;

/*
 * why: a table nobody subscribes to any more costs its writers nothing: a table
 * subscription without a group (its sockets gone, or their instance dead: sync_members
 * removes a dead instance's memberships) for `grace_ms` goes, with its triggers. Run by
 * every instance's heartbeat; a join in flight holds the row (FOR KEY SHARE) and is skipped,
 * a writer holding the table is waited for 100 ms at most (the next beat tries again).
 * Returns how many went.
 */
create or replace function live_private.realtime_sweep(grace_ms int) returns int
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  s record;
  v_n int := 0;
begin
  update live_private.subscriptions x set idle_since = case when x.idle_since is null then now() end
   where x.mode = 'changes'
     and (x.idle_since is null) = not exists (select from live_private.groups g where g.query_id = x.query_id);
  for s in
    select x.query_id, x.tables from live_private.subscriptions x
     where x.mode = 'changes' and x.idle_since < now() - make_interval(secs => realtime_sweep.grace_ms / 1000.0)
       and not exists (select from live_private.groups g where g.query_id = x.query_id)
     for update of x skip locked
  loop
    begin
      perform pg_catalog.set_config('lock_timeout', '100ms', true);
      perform pg_catalog.set_config('live.internal', 'on', true);
      delete from live_private.subscriptions x where x.query_id = s.query_id;
      delete from live_private.changes ch where ch.query_id = s.query_id;
      perform live_private.sync_triggers(t) from unnest(s.tables) t;
      perform pg_catalog.set_config('live.internal', '', true);
      v_n := v_n + 1;
    exception when lock_not_available then
      null; -- a writer holds the table: the next beat
    end;
  end loop;
  perform pg_catalog.set_config('lock_timeout', '0', true);
  return v_n;
end
$$;
comment on function live_private.realtime_sweep(int) is E'plinth: removes table subscriptions (and their triggers) nobody has joined for grace_ms.';
revoke all on function live_private.realtime_sweep(int) from public;
--! EndIncluded live/realtime.sql
