--! Previous: sha1:4fea1aee598dfa20c958139f0e00f67ee1e82422
--! Hash: sha1:a28b763c240595a5abfe678d55caf49049ee9aba
--! Message: realtime: the changes queue's wants joined as a table; the trigger appends and checks the poller in one statement

--! Included live/subscriptions.sql
/*
 * why: registering a live query (docs/api/live.md). `live.subscribe` runs as the caller, so the
 * caller's rights decide whether the query may be read at all; its definer half
 * `live_private.register` checks the shape from the catalog and stores the first snapshot.
 *
 * The query is checked without parsing its text:
 * - it runs through a cursor wrapped as `select to_jsonb(q) from (<query>) q`: a second
 *   statement ("cannot open multi-query plan as cursor"), a data-modifying WITH, DDL or
 *   DML cannot be a subquery in FROM, so anything but one SELECT (or VALUES) is refused;
 * - its tables come from pg_depend of a temporary view over the same text: every relation
 *   it reads must be an ordinary or partitioned table of `public`;
 * - the fast path (one table, a filter over that table's own columns) is recognised from
 *   the same view's stored query tree (pg_rewrite.ev_action) after shadowing the table
 *   with a CTE of the same name: no dependency on the table may remain, the CTE must be
 *   read exactly once, and no aggregate, window, grouping, DISTINCT, LIMIT/OFFSET, set
 *   operation, sublink, locking clause or SRF may appear.
 *
 * Every query runs with search_path `pg_catalog, public, pg_temp`: unqualified names are
 * the application's tables, built-ins cannot be shadowed, temporary objects never win.
 */

/* why: run a query text as one SELECT through a cursor; returns its rows as a jsonb array. */
create or replace function live_private.run(query text) returns jsonb
  language plpgsql
  set search_path = pg_catalog, public, pg_temp
as $$
declare
  v_rows jsonb;
  r record;
begin
  for r in execute format('select coalesce(jsonb_agg(to_jsonb(q)), ''[]''::jsonb) as rows from (%s) q', run.query) loop
    v_rows := r.rows;
  end loop;
  return v_rows;
exception
  when sqlstate '42P11' or sqlstate '42601' or sqlstate '0A000' or sqlstate '42P10' then
    raise exception 'live query must be one SELECT statement' using errcode = '22023', detail = sqlerrm;
end
$$;
comment on function live_private.run(text) is E'plinth: runs a live query (one SELECT, refused otherwise) and returns its rows as a jsonb array.';
revoke all on function live_private.run(text) from public;
grant execute on function live_private.run(text) to service_role;

/* why: the trigger names, in one place. */
create or replace function live_private.trigger_names() returns text[]
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$ select array['_900_live_insert', '_900_live_update', '_900_live_delete', '_900_live_truncate'] $$;
revoke all on function live_private.trigger_names() from public;

/*
 * why: a table some subscription reads carries four statement-level triggers; a table
 * nobody watches carries none, so its writes pay nothing (docs/architecture.md, "NOTIFY has a
 * price"). The trigger function is generated per table with each subscription's query as
 * static SQL, so PL/pgSQL keeps its plans (EXECUTE would parse and plan every statement:
 * about three times the cost on the fast path). It is regenerated whenever the table's
 * subscriptions change. SECURITY DEFINER, owned by the migration role, search_path pinned:
 * the writer (anon, a user) needs no rights on live_private.
 *
 * Fast-path subscriptions evaluate their query over the transition rows: the table's name
 * is shadowed by a CTE over new_rows / old_rows. For an `as: subscriber` one the rows are
 * queued for its groups (rerun.sql). The others (and TRUNCATE) re-run.
 */
create or replace function live_private.trigger_function_name(rel oid) returns text
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$ select 'tg__changed_' || rel::text $$;
revoke all on function live_private.trigger_function_name(oid) from public;

create or replace function live_private.sync_triggers(rel oid) returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_name text;
  v_fn text := live_private.trigger_function_name(sync_triggers.rel);
  v_relname text;
  v_body text := '';
  v_marks text[] := '{}';
  v_rows boolean := false;
  s record;
begin
  if not exists (select 1 from pg_catalog.pg_class where oid = sync_triggers.rel) then
    execute format('drop function if exists live_private.%I()', v_fn);
    return;
  end if;
  select c.relname into v_relname from pg_catalog.pg_class c where c.oid = sync_triggers.rel;
  for s in
    select x.query_id, x.query, x.fast_table, x.as_subscriber, x.mode from live_private.subscriptions x
    where x.tables @> array[sync_triggers.rel] and x.broken is null order by x.query_id
  loop
    -- Each subscription's block catches its own error: the subscription is marked broken
    -- (and left out the next time this function is generated), the write goes on.
    if s.fast_table = sync_triggers.rel and s.mode = 'changes' then
      -- A table subscription (realtime.sql): each row's change, as INSERT, UPDATE (the new
      -- row paired with the old by primary key) or DELETE, appended in one row per
      -- statement; nothing per subscriber or group here (the triggers exist only while the
      -- table has subscribers: realtime_sweep), the matching and the RLS checks happen after
      -- commit (claim_changes). One statement, no exception block: building the rows' JSON
      -- cannot fail where the write itself did not; the check for an awake poller (else a
      -- wake-up) is part of it (a second statement cost the writer about 18 µs more).
      v_rows := true;
      v_body := v_body || format($b$
  if tg_op = 'INSERT' then
    with "live$c" as (insert into live_private.changes (query_id, ins, del)
      select %1$L, jsonb_agg(jsonb_build_object('t', 'INSERT', 'ts', pg_catalog.now(), 'new', to_jsonb("live$n"))), null
        from new_rows "live$n" having count(*) > 0 returning 1)
    select exists (select from "live$c") and not exists (select from live_private.pollers p where p.awake_until > pg_catalog.clock_timestamp())
      into "live$wake";
  elsif tg_op = 'DELETE' then
    with "live$c" as (insert into live_private.changes (query_id, ins, del)
      select %1$L, jsonb_agg(jsonb_build_object('t', 'DELETE', 'ts', pg_catalog.now(), 'old', to_jsonb("live$o"))), null
        from old_rows "live$o" having count(*) > 0 returning 1)
    select exists (select from "live$c") and not exists (select from live_private.pollers p where p.awake_until > pg_catalog.clock_timestamp())
      into "live$wake";
  elsif tg_op = 'UPDATE' then
    with "live$c" as (insert into live_private.changes (query_id, ins, del)
      select %1$L, jsonb_agg(jsonb_build_object('t', 'UPDATE', 'ts', pg_catalog.now(), 'new', to_jsonb("live$n"), 'old', to_jsonb("live$o"))), null
        from new_rows "live$n" full join old_rows "live$o" on %2$s having count(*) > 0 returning 1)
    select exists (select from "live$c") and not exists (select from live_private.pollers p where p.awake_until > pg_catalog.clock_timestamp())
      into "live$wake";
  end if;
  if "live$wake" then
    perform live_private.wake();
  end if;$b$, s.query_id, live_private.realtime_pk_join(sync_triggers.rel));
    elsif s.fast_table = sync_triggers.rel and s.as_subscriber then
      -- Per group: the statement's transition rows are queued; each group filters them under
      -- its role and claims off this path (live_private.claim).
      v_rows := true;
      v_body := v_body || format($b$
  begin
  if tg_op = 'TRUNCATE' then
    if not exists (select from live_private.pollers p where p.awake_until > pg_catalog.clock_timestamp()) then
      perform live_private.wake();
    end if;
    insert into live_private.dirty (query_id) values (%1$L);
    insert into live_private.changes (query_id, ins, del) values (%1$L, null, null);
  else
    "live$ins" := '[]';
    "live$del" := '[]';
    if tg_op <> 'DELETE' then
      select coalesce(jsonb_agg(to_jsonb(r)), '[]'::jsonb) into "live$ins" from new_rows r;
    end if;
    if tg_op <> 'INSERT' then
      select coalesce(jsonb_agg(to_jsonb(r)), '[]'::jsonb) into "live$del" from old_rows r;
    end if;
    if "live$ins" <> '[]'::jsonb or "live$del" <> '[]'::jsonb then
      if not exists (select from live_private.pollers p where p.awake_until > pg_catalog.clock_timestamp()) then
        perform live_private.wake();
      end if;
      insert into live_private.dirty (query_id) values (%1$L);
      insert into live_private.changes (query_id, ins, del) values (%1$L, "live$ins", "live$del");
    end if;
  end if;
  exception when others then
    perform live_private.mark_broken(%1$L, sqlerrm, false);
  end;$b$, s.query_id);
    elsif s.fast_table = sync_triggers.rel then
      v_rows := true;
      v_body := v_body || format($b$
  begin
  if tg_op = 'TRUNCATE' then
    insert into live_private.dirty (query_id) values (%1$L);
  else
    "live$ins" := '[]';
    "live$del" := '[]';
    if tg_op <> 'DELETE' then
      select coalesce(jsonb_agg(to_jsonb(q)), '[]'::jsonb) into "live$ins" from (with %2$I as (select * from new_rows) select * from (%3$s) q) q;
    end if;
    if tg_op <> 'INSERT' then
      select coalesce(jsonb_agg(to_jsonb(q)), '[]'::jsonb) into "live$del" from (with %2$I as (select * from old_rows) select * from (%3$s) q) q;
    end if;
    if "live$ins" <> '[]'::jsonb or "live$del" <> '[]'::jsonb then
      perform live_private.apply(%1$L, "live$ins", "live$del");
    end if;
  end if;
  exception when others then
    perform live_private.mark_broken(%1$L, sqlerrm, false);
  end;$b$, s.query_id, v_relname, s.query);
    else
      v_marks := v_marks || s.query_id::text;
    end if;
  end loop;
  -- Re-run subscriptions: one mark each, re-run by the service's poller off this path; a
  -- wake-up only when no poller is awake (live_private.wake), checked here without a call.
  if cardinality(v_marks) > 0 then
    v_body := v_body || format($b$
  if not exists (select from live_private.pollers p where p.awake_until > pg_catalog.clock_timestamp()) then
    perform live_private.wake();
  end if;
  insert into live_private.dirty (query_id) select unnest(%L::text[]);$b$, v_marks);
  end if;

  -- Transition tables cost every statement; only a fast-path subscription needs them.
  if v_body <> '' and exists (select 1 from pg_catalog.pg_trigger t where t.tgrelid = sync_triggers.rel and t.tgname = '_900_live_insert'
                                 and (t.tgnewtable is not null) <> v_rows) then
    foreach v_name in array live_private.trigger_names() loop
      execute format('drop trigger if exists %I on %s', v_name, rel::regclass);
    end loop;
  end if;

  if v_body <> '' then
    execute format($f$create or replace function live_private.%I() returns trigger
      language plpgsql security definer
      set search_path = pg_catalog, public, pg_temp
    as %L$f$, v_fn, E'#variable_conflict use_column\ndeclare\n  "live$ins" jsonb;\n  "live$del" jsonb;\n  "live$wake" boolean;\nbegin' || v_body || E'\n  return null;\nend');
    execute format('revoke all on function live_private.%I() from public', v_fn);
    execute format('comment on function live_private.%I() is %L', v_fn,
                   format('plinth: live-query trigger of %s (generated by live_private.sync_triggers).', rel::regclass));
    if not exists (select 1 from pg_catalog.pg_trigger t where t.tgrelid = sync_triggers.rel and t.tgname = '_900_live_insert') then
      execute format('create trigger _900_live_insert after insert on %s %s
        for each statement execute function live_private.%I()', rel::regclass,
        case when v_rows then 'referencing new table as new_rows' else '' end, v_fn);
      execute format('create trigger _900_live_update after update on %s %s
        for each statement execute function live_private.%I()', rel::regclass,
        case when v_rows then 'referencing old table as old_rows new table as new_rows' else '' end, v_fn);
      execute format('create trigger _900_live_delete after delete on %s %s
        for each statement execute function live_private.%I()', rel::regclass,
        case when v_rows then 'referencing old table as old_rows' else '' end, v_fn);
      execute format('create trigger _900_live_truncate after truncate on %s
        for each statement execute function live_private.%I()', rel::regclass, v_fn);
    end if;
  else
    foreach v_name in array live_private.trigger_names() loop
      execute format('drop trigger if exists %I on %s', v_name, rel::regclass);
    end loop;
    execute format('drop function if exists live_private.%I()', v_fn);
  end if;
end
$$;
comment on function live_private.sync_triggers(oid) is E'plinth: (re)generates the live trigger function of a table and installs its triggers, or removes both when nobody reads the table.';
revoke all on function live_private.sync_triggers(oid) from public;

/*
 * why: the definer half of live.subscribe: checks, first snapshot, triggers. Replacing a
 * subscription keeps its seq and sends an overflow (the result may have changed shape),
 * so connected clients re-fetch; if its audience changed, its sockets are closed instead
 * (clients reconnect through the checks). `registered_by` must be a role the session may
 * act as, and it must be able to read every table of the query.
 */
drop function if exists live_private.register(text, text, text, jsonb, name);
create or replace function live_private.register(query_id text, query text, mode text, audience jsonb, registered_by name, options jsonb default null)
  returns void
  language plpgsql security definer
  set search_path = pg_catalog, public, pg_temp
  set client_min_messages = warning
as $$
declare
  v_query text := regexp_replace(register.query, '[[:space:];]+$', '');
  v_rows jsonb;
  v_tables oid[];
  v_bad text;
  v_layout text[];
  v_fast oid;
  v_tree text;
  v_cte text;
  v_old live_private.subscriptions;
  v_seq bigint := 0;
  v_channel text;
  v_as_subscriber boolean;
  v_observes text[];
  v_max_rows int;
begin
  -- The DDL below (temporary views, triggers) is live's own: the event trigger leaves it be.
  perform pg_catalog.set_config('live.internal', 'on', true);
  if register.query_id is null or register.query_id !~ '^[^[:cntrl:]/?#]{1,200}$' then
    raise exception 'query_id must be 1 to 200 characters without control characters, /, ? or #' using errcode = '22023';
  end if;
  if register.mode is null or register.mode not in ('delta', 'notify') then
    raise exception 'mode must be delta or notify' using errcode = '22023';
  end if;
  if register.audience is not null and jsonb_typeof(register.audience) <> 'object' then
    raise exception 'audience must be a JSON object or null' using errcode = '22023';
  end if;
  if v_query is null or v_query = '' then
    raise exception 'live query must be one SELECT statement' using errcode = '22023';
  end if;
  if register.options is not null
     and (jsonb_typeof(register.options) <> 'object'
          or exists (select 1 from jsonb_object_keys(register.options) k where k <> 'as')
          or (register.options ? 'as' and (jsonb_typeof(register.options -> 'as') <> 'string'
                                            or register.options ->> 'as' not in ('registrant', 'subscriber')))) then
    raise exception 'options must be an object whose "as" is "registrant" or "subscriber"' using errcode = '22023';
  end if;
  v_as_subscriber := coalesce(register.options ->> 'as' = 'subscriber', false);

  -- Called directly (not through live.subscribe), the claimed registering role must be one
  -- the session may act as.
  if not pg_catalog.pg_has_role(session_user, register.registered_by, 'MEMBER') then
    raise exception 'live query must be registered by a role the session may act as' using errcode = '42501';
  end if;

  v_rows := live_private.run(v_query);
  select s.max_rows into v_max_rows from live_private.settings s;
  if not v_as_subscriber and jsonb_array_length(v_rows) > v_max_rows then
    raise exception 'live query result has more than % rows (LIVE_MAX_ROWS)', v_max_rows using errcode = '54000';
  end if;

  -- The tables it reads, from the catalog.
  drop view if exists pg_temp.live_probe;
  drop view if exists pg_temp.live_probe_fast;
  execute format('create temporary view live_probe as select * from (%s) q', v_query);
  -- pg_depend, plus the range-table relids of the stored query tree (pg_depend records no
  -- dependency on pinned system catalogs, which must be refused too).
  select array_agg(distinct x.rel order by x.rel) into v_tables
  from (
    select d.refobjid as rel
    from pg_catalog.pg_rewrite r
    join pg_catalog.pg_depend d on d.classid = 'pg_catalog.pg_rewrite'::regclass and d.objid = r.oid
    where r.ev_class = 'pg_temp.live_probe'::regclass
      and d.refclassid = 'pg_catalog.pg_class'::regclass and d.refobjid <> r.ev_class
    union all
    select m[1]::oid
    from pg_catalog.pg_rewrite r, regexp_matches(r.ev_action::text, ':relid (\d+)', 'g') m
    where r.ev_class = 'pg_temp.live_probe'::regclass and m[1]::oid not in (r.ev_class, 0)
  ) x;
  select string_agg(format('%s', c.oid::regclass), ', ') into v_bad
  from pg_catalog.pg_class c
  where c.oid = any(coalesce(v_tables, '{}'))
    and (c.relkind not in ('r', 'p') or c.relnamespace <> 'public'::regnamespace);
  if v_bad is not null then
    raise exception 'live query must read tables of the public schema only (not %)', v_bad using errcode = '22023';
  end if;
  if v_tables is null then
    raise exception 'live query must read at least one table of the public schema' using errcode = '22023';
  end if;
  select string_agg(format('%s', t::regclass), ', ') into v_bad
  from unnest(v_tables) t
  where not pg_catalog.has_any_column_privilege(register.registered_by, t, 'SELECT');
  if v_bad is not null then
    raise exception 'permission denied for table %', v_bad using errcode = '42501';
  end if;
  select array_agg(distinct a.attname::text order by a.attname::text) into v_layout
  from pg_catalog.pg_attribute a
  where a.attrelid = 'pg_temp.live_probe'::regclass and a.attnum > 0 and not a.attisdropped;

  if v_as_subscriber then
    v_observes := live_private.observed_claims(v_query, v_tables);
    v_rows := '[]'; -- each group keeps its own result
  else
    -- Every subscriber sees what the registrant may read: say so when a table has RLS.
    select string_agg(format('%s', c.oid::regclass), ', ') into v_bad
    from pg_catalog.pg_class c where c.oid = any(v_tables) and c.relrowsecurity;
    if v_bad is not null then
      raise warning 'live query % reads % with row level security, but runs with the rights of %: every subscriber receives those rows', register.query_id, v_bad, register.registered_by
        using hint = 'register it with options {"as": "subscriber"} so that each subscriber receives what it may read';
    end if;
  end if;

  -- The fast path: one table, shadowed by a CTE of its name, read once, row by row.
  if array_length(v_tables, 1) = 1 then
    select format('with %I as (select %s where false) select * from (%s) q', c.relname,
                  string_agg(format('null::%s as %I', pg_catalog.format_type(a.atttypid, a.atttypmod), a.attname), ', ' order by a.attnum),
                  v_query),
           c.relname
      into v_cte, v_bad
    from pg_catalog.pg_class c
    join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where c.oid = v_tables[1]
    group by c.relname;
    begin
      execute 'create temporary view live_probe_fast as ' || v_cte;
      select r.ev_action::text into v_tree from pg_catalog.pg_rewrite r where r.ev_class = 'pg_temp.live_probe_fast'::regclass;
      if not exists (
            select 1 from pg_catalog.pg_rewrite r
            join pg_catalog.pg_depend d on d.classid = 'pg_catalog.pg_rewrite'::regclass and d.objid = r.oid
            where r.ev_class = 'pg_temp.live_probe_fast'::regclass and d.refobjid = v_tables[1])
         and (length(v_tree) - length(replace(v_tree, format(':ctename %s ', v_bad), ''))) / length(format(':ctename %s ', v_bad)) = 2
         and v_tree !~ ':(hasAggs|hasWindowFuncs|hasTargetSRFs|hasSubLinks|hasDistinctOn|hasRecursive|hasModifyingCTE|hasForUpdate) true'
         and v_tree !~ ':(groupClause|groupingSets|distinctClause|rowMarks) \('
         and v_tree !~ ':(limitOffset|limitCount|setOperations|havingQual) \{' then
        v_fast := v_tables[1];
      end if;
    exception when others then
      v_fast := null; -- anything unusual: re-run the query instead
    end;
    drop view if exists pg_temp.live_probe_fast;
  end if;
  drop view if exists pg_temp.live_probe;

  select * into v_old from live_private.subscriptions s where s.query_id = register.query_id for update;
  if found then
    v_seq := v_old.seq + 1;
  end if;
  insert into live_private.subscriptions as s (query_id, query, mode, audience, registered_by, tables, fast_table, layout, snapshot, seq,
                                               as_subscriber, observes)
  values (register.query_id, v_query, register.mode, register.audience, register.registered_by, v_tables, v_fast, v_layout, v_rows, v_seq,
          v_as_subscriber, v_observes)
  on conflict on constraint subscriptions_pkey do update
    set query = excluded.query, mode = excluded.mode, audience = excluded.audience, registered_by = excluded.registered_by,
        tables = excluded.tables, fast_table = excluded.fast_table, layout = excluded.layout, snapshot = excluded.snapshot,
        seq = excluded.seq, registered_at = now(), broken = null, as_subscriber = excluded.as_subscriber,
        observes = excluded.observes, dirty = false, lease_owner = null, lease_until = null;
  -- Groups hold results of the query replaced: they go, and their sockets reconnect.
  delete from live_private.groups g where g.query_id = register.query_id;

  perform live_private.sync_triggers(t) from unnest(v_tables || coalesce(v_old.tables, '{}')) t group by t;

  if v_old.query_id is not null then
    select channel into v_channel from live_private.settings;
    if v_old.audience is distinct from register.audience or v_old.as_subscriber or v_as_subscriber then
      -- Who may listen changed: the sockets close, and clients reconnect through the checks.
      perform pg_catalog.pg_notify(v_channel, jsonb_build_object('type', 'unsubscribed', 'query_id', register.query_id)::text);
    else
      perform pg_catalog.pg_notify(v_channel, jsonb_build_object('type', 'overflow', 'query_id', register.query_id, 'seq', v_seq, 'fetch', true)::text);
    end if;
  end if;
  perform pg_catalog.set_config('live.internal', '', true);
end
$$;
comment on function live_private.register(text, text, text, jsonb, name, jsonb) is E'plinth: registers or replaces a live query (the definer half of live.subscribe).';
revoke all on function live_private.register(text, text, text, jsonb, name, jsonb) from public;
grant execute on function live_private.register(text, text, text, jsonb, name, jsonb) to service_role;

/*
 * why: registering a live query (docs/api/live.md). Runs as the caller: the query is read once with the caller's rights
 * (a table it may not read is refused here), then registered.
 */
drop function if exists live.subscribe(text, text, text, jsonb);
create or replace function live.subscribe(query_id text, query text, mode text default 'delta', audience jsonb default null,
                                          options jsonb default null)
  returns void
  language plpgsql
  set search_path = pg_catalog, public, pg_temp
as $$
begin
  if subscribe.query is null then
    raise exception 'live query must be one SELECT statement' using errcode = '22023';
  end if;
  perform live_private.run(regexp_replace(subscribe.query, '[[:space:];]+$', ''));
  perform live_private.register(subscribe.query_id, subscribe.query, subscribe.mode, subscribe.audience, current_user, subscribe.options);
end
$$;
comment on function live.subscribe(text, text, text, jsonb, jsonb) is
  E'plinth: registers (or replaces) a live query: a SELECT over public tables, mode delta|notify, audience (claims @> audience) or null, options {"as": "registrant"|"subscriber"}.';
revoke all on function live.subscribe(text, text, text, jsonb, jsonb) from public;
grant execute on function live.subscribe(text, text, text, jsonb, jsonb) to service_role;

/* why: unsubscribing (docs/api/live.md). Removes the subscription, its triggers where nobody else reads the
   table, and tells the service (which closes the subscription's sockets). */
create or replace function live.unsubscribe(query_id text) returns boolean
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_tables oid[];
  v_channel text;
begin
  delete from live_private.subscriptions s where s.query_id = unsubscribe.query_id returning s.tables into v_tables;
  if not found then
    return false;
  end if;
  perform pg_catalog.set_config('live.internal', 'on', true);
  perform live_private.sync_triggers(t) from unnest(v_tables) t;
  perform pg_catalog.set_config('live.internal', '', true);
  select channel into v_channel from live_private.settings;
  perform pg_catalog.pg_notify(v_channel, jsonb_build_object('type', 'unsubscribed', 'query_id', unsubscribe.query_id)::text);
  return true;
end
$$;
comment on function live.unsubscribe(text) is E'plinth: removes a live query (true when it existed).';
revoke all on function live.unsubscribe(text) from public;
grant execute on function live.unsubscribe(text) to service_role;

/* why: a change of the generated trigger bodies reaches the tables watched already. */
do $$
begin
  perform pg_catalog.set_config('live.internal', 'on', true);
  perform live_private.sync_triggers(t) from (select distinct unnest(s.tables) as t from live_private.subscriptions s) x;
  perform pg_catalog.set_config('live.internal', '', true);
end
$$;
--! EndIncluded live/subscriptions.sql
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
 * else marks the subscription broken (every socket of it is told). The cursor moves to
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
        perform live_private.mark_broken(realtime_done.query_id, substr(realtime_done.errors[i], 7));
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
-- The tables that have triggers get them generated anew (the table subscriptions' block changed).
select pg_catalog.set_config('live.internal', 'on', true);
select live_private.sync_triggers(r.t) from (select distinct unnest(x.tables) as t from live_private.subscriptions x where x.broken is null) r;
select pg_catalog.set_config('live.internal', '', true);
