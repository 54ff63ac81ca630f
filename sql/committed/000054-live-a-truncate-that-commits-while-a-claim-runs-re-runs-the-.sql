--! Previous: sha1:dc2551914450e13c1978e39d6b2a6937f3ffe33b
--! Hash: sha1:b1363e6bf10e266b4ecaade3fecdb574635d7a5a
--! Message: live: a TRUNCATE that commits while a claim runs re-runs the groups that have not seen it (it was judged in an earlier statement of the claim than the snapshot the group's new snap came from, and could be taken as seen without a re-run)

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
  -- Changes every group has seen go.
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
  -- A group is re-run when dirty (or its lease expired mid-run, or a TRUNCATE it has not
  -- seen is queued), else fed the rows it has not seen. The TRUNCATE, the rows and
  -- pg_current_snapshot() are all read in this one statement's snapshot, so a TRUNCATE
  -- that commits while the claim runs is either re-run for here or not yet in the group's
  -- new `snap` (judged by an earlier statement, it could be seen without a re-run).
  return query
    with cand as (
      select x.id, (x.dirty or x.lease_owner is not null or s.fast_table is null
                    or exists (select 1 from live_private.changes ch where ch.query_id = x.query_id and ch.ins is null
                               and not pg_catalog.pg_visible_in_snapshot(ch.xid, x.snap))) as rerun
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
