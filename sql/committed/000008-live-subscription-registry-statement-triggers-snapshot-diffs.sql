--! Previous: sha1:3807d0a26c436ff19f2fc96bfb15ec9445675744
--! Hash: sha1:a1792f9232ea5695cf0d7dd898c330cff984f177
--! Message: live: subscription registry, statement triggers, snapshot diffs, presence and broadcast

-- Enter migration here
--! Included live/registry.sql
/*
 * why: live queries (interface §4.9, §6.2, §8; contract §5 "Live queries"). The registry,
 * the snapshots and the diffing live here; the service only holds sockets and forwards
 * what arrives on NOTIFY.
 *
 * - `live` holds the public surface (subscribe, unsubscribe), EXECUTE for service_role
 *   and the owner only.
 * - `live_private` holds the registry, the trigger function and the helpers the service
 *   calls as the connecting (owner) role. No API role has USAGE on it except service_role,
 *   which may call `live_private.register` (the definer half of `live.subscribe`) and
 *   nothing else: every table there stays ungranted.
 */
create schema if not exists live;
create schema if not exists live_private;
revoke all on schema live from public;
revoke all on schema live_private from public;
grant usage on schema live to service_role;
grant usage on schema live_private to service_role;
comment on schema live is E'plinth: live queries (subscribe, unsubscribe); service_role and the owner only.';
comment on schema live_private is E'plinth: live-query registry, snapshots, triggers, presence (internal).';

/* why: the NOTIFY channel is configuration (LIVE_CHANNEL); the service writes it at start
   so that triggers, which run in any session, know where to send. One row. */
create table if not exists live_private.settings (
  id boolean primary key default true check (id),
  channel text not null default 'lqs'
);
insert into live_private.settings (id) values (true) on conflict do nothing;
comment on table live_private.settings is E'plinth: LIVE_CHANNEL as the service last set it (live_private.configure).';

/* why: one row per subscription: the query text, its tables (found from the catalog),
   the last result (the snapshot, a jsonb array of rows) with its column layout, and the
   last seq used. `fast_table` is set when the query is a filter over one table's own
   columns: its delta is then computed from the statement's transition rows. */
create table if not exists live_private.subscriptions (
  query_id text primary key check (query_id ~ '^[^[:cntrl:]/?#]{1,200}$'),
  query text not null,
  mode text not null check (mode in ('delta', 'notify')),
  audience jsonb check (audience is null or jsonb_typeof(audience) = 'object'),
  registered_by name not null,
  tables oid[] not null,
  fast_table oid,
  layout text[] not null,
  snapshot jsonb not null,
  seq bigint not null default 0,
  registered_at timestamptz not null default now()
);
create index if not exists subscriptions_tables_idx on live_private.subscriptions using gin (tables);
comment on table live_private.subscriptions is E'plinth: live-query registry: query, tables, snapshot, layout, seq (contract §5).';

/*
 * why: set LIVE_CHANNEL (the service calls this at start; every instance has the same value).
 */
create or replace function live_private.configure(channel text) returns void
  language sql security definer
  set search_path = pg_catalog, pg_temp
as $$
  update live_private.settings set channel = configure.channel where channel is distinct from configure.channel;
$$;
comment on function live_private.configure(text) is E'plinth: records LIVE_CHANNEL for the live-query triggers.';
revoke all on function live_private.configure(text) from public;

/*
 * why: the largest NOTIFY payload a delta may use (interface §8): 8000 minus the channel
 * name's length minus 100; 7897 for `lqs`.
 */
create or replace function live_private.payload_limit(channel text) returns int
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$ select 8000 - octet_length(channel) - 100 $$;
revoke all on function live_private.payload_limit(text) from public;

/*
 * why: multiset difference of two jsonb arrays (duplicates count): the rows of `a` not
 * matched one-for-one by rows of `b`.
 */
create or replace function live_private.minus(a jsonb, b jsonb) returns jsonb
  language sql immutable parallel safe
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(x.e), '[]'::jsonb)
  from (
    select ea.e, ea.c - coalesce(eb.c, 0) as n
    from (select e, count(*) as c from jsonb_array_elements(a) e group by e) ea
    left join (select e, count(*) as c from jsonb_array_elements(b) e group by e) eb on eb.e = ea.e
    where ea.c > coalesce(eb.c, 0)
  ) x, generate_series(1, x.n)
$$;
comment on function live_private.minus(jsonb, jsonb) is E'plinth: multiset difference a ∖ b of two jsonb arrays of rows.';
revoke all on function live_private.minus(jsonb, jsonb) from public;

/* why: the column layout of a result as the sorted set of its keys (jsonb keeps no column
   order); null for an empty result, whose layout is unknown. */
create or replace function live_private.layout_of(rows jsonb) returns text[]
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$
  select case when jsonb_array_length(rows) = 0 then null
    else array(select k from jsonb_object_keys(rows -> 0) k order by k) end
$$;
revoke all on function live_private.layout_of(jsonb) from public;
--! EndIncluded live/registry.sql
--! Included live/subscriptions.sql
/*
 * why: registering a live query (contract §5). `live.subscribe` runs as the caller, so the
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
 * nobody watches carries none, so its writes pay nothing (design.md, "NOTIFY has a
 * price"). The trigger function is generated per table with each subscription's query as
 * static SQL, so PL/pgSQL keeps its plans (EXECUTE would parse and plan every statement:
 * about three times the cost on the fast path). It is regenerated whenever the table's
 * subscriptions change. SECURITY DEFINER, owned by the migration role, search_path pinned:
 * the writer (anon, a user) needs no rights on live_private.
 *
 * Fast-path subscriptions evaluate their query over the transition rows: the table's name
 * is shadowed by a CTE over new_rows / old_rows. The others (and TRUNCATE) re-run.
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
  s record;
begin
  if not exists (select 1 from pg_catalog.pg_class where oid = sync_triggers.rel) then
    execute format('drop function if exists live_private.%I()', v_fn);
    return;
  end if;
  select c.relname into v_relname from pg_catalog.pg_class c where c.oid = sync_triggers.rel;
  for s in
    select x.query_id, x.query, x.fast_table from live_private.subscriptions x
    where x.tables @> array[sync_triggers.rel] order by x.query_id
  loop
    if s.fast_table = sync_triggers.rel then
      v_body := v_body || format($b$
  if tg_op = 'TRUNCATE' then
    perform live_private.refresh(%1$L);
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
  end if;$b$, s.query_id, v_relname, s.query);
    else
      v_body := v_body || format($b$
  perform live_private.refresh(%L);$b$, s.query_id);
    end if;
  end loop;

  if v_body <> '' then
    execute format($f$create or replace function live_private.%I() returns trigger
      language plpgsql security definer
      set search_path = pg_catalog, public, pg_temp
    as %L$f$, v_fn, E'#variable_conflict use_column\ndeclare\n  "live$ins" jsonb;\n  "live$del" jsonb;\nbegin' || v_body || E'\n  return null;\nend');
    execute format('revoke all on function live_private.%I() from public', v_fn);
    execute format('comment on function live_private.%I() is %L', v_fn,
                   format('plinth: live-query trigger of %s (generated by live_private.sync_triggers).', rel::regclass));
    if not exists (select 1 from pg_catalog.pg_trigger t where t.tgrelid = sync_triggers.rel and t.tgname = '_900_live_insert') then
      execute format('create trigger _900_live_insert after insert on %s referencing new table as new_rows
        for each statement execute function live_private.%I()', rel::regclass, v_fn);
      execute format('create trigger _900_live_update after update on %s referencing old table as old_rows new table as new_rows
        for each statement execute function live_private.%I()', rel::regclass, v_fn);
      execute format('create trigger _900_live_delete after delete on %s referencing old table as old_rows
        for each statement execute function live_private.%I()', rel::regclass, v_fn);
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
create or replace function live_private.register(query_id text, query text, mode text, audience jsonb, registered_by name)
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
begin
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

  -- Called directly (not through live.subscribe), the claimed registering role must be one
  -- the session may act as.
  if not pg_catalog.pg_has_role(session_user, register.registered_by, 'MEMBER') then
    raise exception 'live query must be registered by a role the session may act as' using errcode = '42501';
  end if;

  v_rows := live_private.run(v_query);

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
  insert into live_private.subscriptions as s (query_id, query, mode, audience, registered_by, tables, fast_table, layout, snapshot, seq)
  values (register.query_id, v_query, register.mode, register.audience, register.registered_by, v_tables, v_fast, v_layout, v_rows, v_seq)
  on conflict on constraint subscriptions_pkey do update
    set query = excluded.query, mode = excluded.mode, audience = excluded.audience, registered_by = excluded.registered_by,
        tables = excluded.tables, fast_table = excluded.fast_table, layout = excluded.layout, snapshot = excluded.snapshot,
        seq = excluded.seq, registered_at = now();

  perform live_private.sync_triggers(t) from unnest(v_tables || coalesce(v_old.tables, '{}')) t group by t;

  if v_old.query_id is not null then
    select channel into v_channel from live_private.settings;
    if v_old.audience is distinct from register.audience then
      -- Who may listen changed: the sockets close, and clients reconnect through the checks.
      perform pg_catalog.pg_notify(v_channel, jsonb_build_object('type', 'unsubscribed', 'query_id', register.query_id)::text);
    else
      perform pg_catalog.pg_notify(v_channel, jsonb_build_object('type', 'overflow', 'query_id', register.query_id, 'seq', v_seq, 'fetch', true)::text);
    end if;
  end if;
end
$$;
comment on function live_private.register(text, text, text, jsonb, name) is E'plinth: registers or replaces a live query (the definer half of live.subscribe).';
revoke all on function live_private.register(text, text, text, jsonb, name) from public;
grant execute on function live_private.register(text, text, text, jsonb, name) to service_role;

/*
 * why: contract §5. Runs as the caller: the query is read once with the caller's rights
 * (a table it may not read is refused here), then registered.
 */
create or replace function live.subscribe(query_id text, query text, mode text default 'delta', audience jsonb default null)
  returns void
  language plpgsql
  set search_path = pg_catalog, public, pg_temp
as $$
begin
  if subscribe.query is null then
    raise exception 'live query must be one SELECT statement' using errcode = '22023';
  end if;
  perform live_private.run(regexp_replace(subscribe.query, '[[:space:];]+$', ''));
  perform live_private.register(subscribe.query_id, subscribe.query, subscribe.mode, subscribe.audience, current_user);
end
$$;
comment on function live.subscribe(text, text, text, jsonb) is
  E'plinth: registers (or replaces) a live query: a SELECT over public tables, mode delta|notify, audience (claims @> audience) or null.';
revoke all on function live.subscribe(text, text, text, jsonb) from public;
grant execute on function live.subscribe(text, text, text, jsonb) to service_role;

/* why: contract §5. Removes the subscription, its triggers where nobody else reads the
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
  perform live_private.sync_triggers(t) from unnest(v_tables) t;
  select channel into v_channel from live_private.settings;
  perform pg_catalog.pg_notify(v_channel, jsonb_build_object('type', 'unsubscribed', 'query_id', unsubscribe.query_id)::text);
  return true;
end
$$;
comment on function live.unsubscribe(text) is E'plinth: removes a live query (true when it existed).';
revoke all on function live.unsubscribe(text) from public;
grant execute on function live.unsubscribe(text) to service_role;
--! EndIncluded live/subscriptions.sql
--! Included live/diff.sql
/*
 * why: after each statement that changes a watched table, each affected subscription's
 * result is compared with its snapshot (rows as jsonb, as multisets), the snapshot is
 * replaced, seq raised and one NOTIFY sent on LIVE_CHANNEL (contract §5, interface §6.2,
 * §8). Nothing is sent and no seq used when the result did not change.
 *
 * Concurrency: the subscription row is locked (FOR UPDATE) before its result is read, so
 * concurrent writers to a watched table apply their changes one after the other, in
 * commit order, and seq follows commit order. A fast-path statement whose transition
 * rows match nothing takes no lock at all.
 */

/*
 * why: the one place a message is built and sent. `ins`/`del` are the net changes;
 * `new_layout` the result's layout when known. Overflow when the layout changed or the
 * delta does not fit the payload limit; `invalidated` in notify mode.
 */
create or replace function live_private.publish(query_id text, new_snapshot jsonb, ins jsonb, del jsonb, new_layout text[])
  returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_seq bigint;
  v_mode text;
  v_old_layout text[];
  v_channel text;
  v_payload text;
begin
  select s.layout into v_old_layout from live_private.subscriptions s where s.query_id = publish.query_id;
  update live_private.subscriptions s
     set snapshot = publish.new_snapshot, seq = s.seq + 1, layout = coalesce(publish.new_layout, s.layout)
   where s.query_id = publish.query_id
  returning s.seq, s.mode into v_seq, v_mode;
  select channel into v_channel from live_private.settings;
  if publish.new_layout is not null and publish.new_layout is distinct from v_old_layout then
    v_payload := jsonb_build_object('type', 'overflow', 'query_id', publish.query_id, 'seq', v_seq, 'fetch', true)::text;
  elsif v_mode = 'notify' then
    v_payload := jsonb_build_object('type', 'invalidated', 'query_id', publish.query_id, 'seq', v_seq)::text;
  else
    v_payload := jsonb_build_object('query_id', publish.query_id, 'seq', v_seq, 'inserted', publish.ins, 'deleted', publish.del)::text;
    if octet_length(v_payload) > live_private.payload_limit(v_channel) then
      v_payload := jsonb_build_object('type', 'overflow', 'query_id', publish.query_id, 'seq', v_seq, 'fetch', true)::text;
    end if;
  end if;
  perform pg_catalog.pg_notify(v_channel, v_payload);
end
$$;
comment on function live_private.publish(text, jsonb, jsonb, jsonb, text[]) is E'plinth: stores a new snapshot, raises seq and sends delta, invalidated or overflow.';
revoke all on function live_private.publish(text, jsonb, jsonb, jsonb, text[]) from public;

/* why: the general path: lock, re-run the query, diff against the snapshot. */
create or replace function live_private.refresh(query_id text) returns void
  language plpgsql security definer
  set search_path = pg_catalog, public, pg_temp
as $$
declare
  s live_private.subscriptions;
  v_new jsonb;
  v_ins jsonb;
  v_del jsonb;
begin
  select * into s from live_private.subscriptions x where x.query_id = refresh.query_id for update;
  if not found then
    return;
  end if;
  v_new := live_private.run(s.query);
  v_ins := live_private.minus(v_new, s.snapshot);
  v_del := live_private.minus(s.snapshot, v_new);
  if v_ins = '[]'::jsonb and v_del = '[]'::jsonb then
    return;
  end if;
  perform live_private.publish(s.query_id, v_new, v_ins, v_del, live_private.layout_of(v_new));
end
$$;
comment on function live_private.refresh(text) is E'plinth: re-runs a live query, diffs it with its snapshot, publishes a change.';
revoke all on function live_private.refresh(text) from public;

/* why: the fast path: the statement's matching transition rows are the delta. Pairs that
   cancel (an update that left the selected columns alone) are silent. */
create or replace function live_private.apply(query_id text, ins jsonb, del jsonb) returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  s live_private.subscriptions;
  v_ins jsonb := live_private.minus(apply.ins, apply.del);
  v_del jsonb := live_private.minus(apply.del, apply.ins);
  v_layout text[];
begin
  if v_ins = '[]'::jsonb and v_del = '[]'::jsonb then
    return;
  end if;
  select * into s from live_private.subscriptions x where x.query_id = apply.query_id for update;
  if not found then
    return;
  end if;
  v_layout := coalesce(live_private.layout_of(v_ins), live_private.layout_of(v_del));
  if v_layout is distinct from s.layout then
    -- The table's shape changed under a `select *`: the stored rows are stale, re-run.
    perform live_private.refresh(s.query_id);
    return;
  end if;
  perform live_private.publish(s.query_id, live_private.minus(s.snapshot, v_del) || v_ins, v_ins, v_del, v_layout);
end
$$;
comment on function live_private.apply(text, jsonb, jsonb) is E'plinth: applies a fast-path delta (from transition rows) to a snapshot and publishes it.';
revoke all on function live_private.apply(text, jsonb, jsonb) from public;
--! EndIncluded live/diff.sql
--! Included live/presence.sql
/*
 * why: broadcast and presence across instances, through PostgreSQL only (contract §5,
 * interface §6.2). Every instance LISTENs on `<LIVE_CHANNEL>_bc`; broadcast and presence
 * events are NOTIFYs there as `{"channel": …, "msg": <the client message>}`.
 * Membership is a table: each instance beats every second; an instance silent for
 * `ttl` seconds is dead, and the next beat of any live instance deletes it with its
 * clients' presence, announcing `presence_leave` for each. The presence endpoint reads
 * the union of the live instances' rows.
 */
create table if not exists live_private.instances (
  id uuid primary key,
  seen_at timestamptz not null default now()
);
comment on table live_private.instances is E'plinth: service instances and their last heartbeat.';

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
  insert into live_private.instances as i (id) values (heartbeat.instance_id)
  on conflict (id) do update set seen_at = now()
  returning (i.xmax = 0) into v_new;
  delete from live_private.instances i
  where i.seen_at < now() - make_interval(secs => heartbeat.ttl) and i.id <> heartbeat.instance_id;
  with gone as (
    delete from live_private.presence p
    where p.instance_id <> heartbeat.instance_id
      and not exists (select 1 from live_private.instances i where i.id = p.instance_id)
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
  join live_private.instances i on i.id = p.instance_id and i.seen_at >= now() - make_interval(secs => presence_list.ttl)
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
  delete from live_private.instances i where i.id = instance_stop.instance_id;
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
create or replace function live_private.access(query_id text, claims jsonb) returns table (registered boolean, bound boolean, allowed boolean)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select true, s.audience is not null, s.audience is null or coalesce(access.claims @> s.audience, false)
  from live_private.subscriptions s where s.query_id = access.query_id
  union all
  select false, false, true
  where not exists (select 1 from live_private.subscriptions s where s.query_id = access.query_id)
$$;
comment on function live_private.access(text, jsonb) is E'plinth: registration and audience check for /ws/{query_id} and the presence endpoint.';
revoke all on function live_private.access(text, jsonb) from public;

/* why: after a gap in LISTEN, every subscriber is sent an overflow with the current seq. */
create or replace function live_private.seqs(query_ids text[]) returns table (query_id text, seq bigint)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.query_id, s.seq from live_private.subscriptions s where s.query_id = any(seqs.query_ids)
$$;
revoke all on function live_private.seqs(text[]) from public;
--! EndIncluded live/presence.sql
