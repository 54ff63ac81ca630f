--! Previous: sha1:303a8b15bbdf4f09c039699386ccbed1283cdbaa
--! Hash: sha1:4c949a3851b16a585b84276537c725b36853a3af
--! Message: live: subscriptions as each subscriber with groups, marks and re-runs under a lease, broken subscriptions marked instead of failing writes

--! Included live/registry.sql
/*
 * why: live queries (docs/api/live.md, docs/api/overview.md). The registry,
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
/* why: a subscription whose query stopped working (a column it selects was dropped, a
   function it calls raised) is marked broken with the database's reason: it is left out
   of its tables' triggers, so writers never see its error, and its clients are closed. */
alter table live_private.subscriptions add column if not exists broken text;
create index if not exists subscriptions_tables_idx on live_private.subscriptions using gin (tables);
comment on table live_private.subscriptions is E'plinth: live-query registry: query, tables, snapshot, layout, seq (contract §5).';

/* why: LIVE_MAX_ROWS and LIVE_MAX_GROUPS, as the service last set them (configure). */
alter table live_private.settings add column if not exists max_rows int not null default 10000;
alter table live_private.settings add column if not exists max_groups int not null default 10000;

/*
 * why: set LIVE_CHANNEL, LIVE_MAX_ROWS and LIVE_MAX_GROUPS (the service calls this at
 * start; every instance has the same values).
 */
drop function if exists live_private.configure(text);
create or replace function live_private.configure(channel text, max_rows int default 10000, max_groups int default 10000) returns void
  language sql security definer
  set search_path = pg_catalog, pg_temp
as $$
  update live_private.settings
     set channel = configure.channel, max_rows = configure.max_rows, max_groups = configure.max_groups
   where (channel, max_rows, max_groups) is distinct from (configure.channel, configure.max_rows, configure.max_groups);
$$;
comment on function live_private.configure(text, int, int) is E'plinth: records LIVE_CHANNEL, LIVE_MAX_ROWS and LIVE_MAX_GROUPS for the live-query functions.';
revoke all on function live_private.configure(text, int, int) from public;

/*
 * why: the largest NOTIFY payload a delta may use (docs/api/overview.md): 8000 minus the channel
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

/*
 * why: per-subscriber subscriptions and re-runs off the writer's path.
 * - `as_subscriber`: the query runs as each subscriber's API role with its claims; one
 *   result per group of subscribers whose role and observed claims are equal.
 * - `observes`: the claims the query can observe (through its text, its tables' policies
 *   and the functions both call): '{sub}' when only auth.uid(), '{}' when none, null when
 *   all of them (auth.jwt(), request.jwt.claims) — the time claims excepted.
 * - `dirty`, `lease_owner`, `lease_until`: a default-mode subscription that is re-run
 *   (not on the fast path) is marked dirty by the poller from `live_private.dirty`, and
 *   re-run by the one instance that holds its lease.
 */
alter table live_private.subscriptions add column if not exists as_subscriber boolean not null default false;
alter table live_private.subscriptions add column if not exists observes text[];
alter table live_private.subscriptions add column if not exists dirty boolean not null default false;
alter table live_private.subscriptions add column if not exists lease_owner uuid;
alter table live_private.subscriptions add column if not exists lease_until timestamptz;

/*
 * why: the writers' marks. A statement that changes a table a re-run subscription reads
 * inserts one row here (no lock held to commit: inserts never wait on each other; the
 * mark becomes visible exactly when the change does). The poller turns them into dirty
 * flags. Unlogged: after a crash the service marks everything dirty again.
 */
create unlogged table if not exists live_private.dirty (
  query_id text not null
);
comment on table live_private.dirty is E'plinth: live queries whose tables changed since their last re-run (writers\' marks, read by the poller).';

/*
 * why: one row per group of an `as: subscriber` subscription: the role and claims it runs
 * with (the first member's, restricted to what the query observes), its own snapshot,
 * layout and seq, its dirty flag and lease. `key` is md5(role, observed claims).
 */
create table if not exists live_private.groups (
  id bigint generated always as identity primary key,
  query_id text not null references live_private.subscriptions (query_id) on delete cascade,
  key text not null,
  role name not null,
  claims jsonb not null,
  snapshot jsonb,
  layout text[],
  seq bigint not null default 0,
  dirty boolean not null default false,
  lease_owner uuid,
  lease_until timestamptz,
  created_at timestamptz not null default now(),
  unique (query_id, key)
);
comment on table live_private.groups is E'plinth: groups of subscribers of an as-subscriber live query: role, claims, snapshot, seq, lease.';

/* why: which instance has sockets in which group; a group nobody is in goes. */
create table if not exists live_private.group_members (
  group_id bigint not null references live_private.groups (id) on delete cascade,
  instance_id uuid not null,
  primary key (group_id, instance_id)
);
alter table live_private.group_members add column if not exists joined_at timestamptz not null default now();
create index if not exists group_members_instance_idx on live_private.group_members (instance_id);
comment on table live_private.group_members is E'plinth: instances with sockets in a live-query group.';
--! EndIncluded live/registry.sql
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
    select x.query_id, x.query, x.fast_table, x.as_subscriber from live_private.subscriptions x
    where x.tables @> array[sync_triggers.rel] and x.broken is null order by x.query_id
  loop
    -- Each subscription's block catches its own error: the subscription is marked broken
    -- (and left out the next time this function is generated), the write goes on.
    if s.fast_table = sync_triggers.rel and not s.as_subscriber then
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
  -- Re-run subscriptions: one mark each, re-run by the service's poller off this path.
  if cardinality(v_marks) > 0 then
    v_body := v_body || format($b$
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
    as %L$f$, v_fn, E'#variable_conflict use_column\ndeclare\n  "live$ins" jsonb;\n  "live$del" jsonb;\nbegin' || v_body || E'\n  return null;\nend');
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
  if array_length(v_tables, 1) = 1 and not v_as_subscriber then
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
--! EndIncluded live/subscriptions.sql
--! Included live/diff.sql
/*
 * why: after each statement that changes a watched table, each affected subscription's
 * result is compared with its snapshot (rows as jsonb, as multisets), the snapshot is
 * replaced, seq raised and one NOTIFY sent on LIVE_CHANNEL (docs/api/live.md,
 * docs/api/overview.md). Nothing is sent and no seq used when the result did not change.
 *
 * Concurrency: on the fast path the subscription row is locked (FOR UPDATE) before its
 * snapshot is changed, so concurrent writers apply their deltas one after the other and
 * seq follows commit order; a statement whose transition rows match nothing takes no lock
 * at all. Every other query is re-run off the writer's path (rerun.sql): the writer only
 * leaves a mark, and `refresh` here serves the fast path's layout change alone.
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
 * why: broadcast and presence across instances, through PostgreSQL only 
 * (docs/api/live.md). Every instance LISTENs on `<LIVE_CHANNEL>_bc`; broadcast and presence
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
drop function if exists live_private.access(text, jsonb);
create or replace function live_private.access(query_id text, claims jsonb)
  returns table (registered boolean, bound boolean, allowed boolean, broken boolean, seq bigint, as_subscriber boolean)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select true, s.audience is not null, s.audience is null or coalesce(access.claims @> s.audience, false), s.broken is not null, s.seq, s.as_subscriber
  from live_private.subscriptions s where s.query_id = access.query_id
  union all
  select false, false, true, false, 0, false
  where not exists (select 1 from live_private.subscriptions s where s.query_id = access.query_id)
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
 * why: one poll: writers' marks become dirty flags; dirty subscriptions and groups whose
 * lease is free (or expired) are leased to this instance for `lease_ms` and returned:
 * `group_id` null for a default-mode subscription (the caller runs rerun_subscription),
 * else the group's role, claims and query for its request lane.
 */
create or replace function live_private.claim(instance_id uuid, lease_ms int)
  returns table (group_id bigint, query_id text, role name, claims text, query text)
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_ids text[];
  v_until timestamptz := clock_timestamp() + make_interval(secs => claim.lease_ms / 1000.0);
begin
  with d as (delete from live_private.dirty returning dirty.query_id)
  select array_agg(distinct d.query_id) into v_ids from d;
  if v_ids is not null then
    update live_private.subscriptions s set dirty = true
     where s.query_id = any(v_ids) and not s.as_subscriber and s.broken is null and not s.dirty;
    update live_private.groups g set dirty = true
     where g.query_id = any(v_ids) and not g.dirty and g.snapshot is not null;
  end if;
  return query
    with c as (
      update live_private.subscriptions s set dirty = false, lease_owner = claim.instance_id, lease_until = v_until
       where s.query_id in (select x.query_id from live_private.subscriptions x
                             where (x.dirty or x.lease_owner is not null) and x.broken is null
                               and (x.lease_owner is null or x.lease_until < clock_timestamp())
                             for update skip locked)
      returning s.query_id)
    select null::bigint, c.query_id, null::name, null::text, null::text from c;
  return query
    with c as (
      update live_private.groups g set dirty = false, lease_owner = claim.instance_id, lease_until = v_until
       where g.id in (select x.id from live_private.groups x
                       join live_private.subscriptions s on s.query_id = x.query_id and s.broken is null
                       where (x.dirty or x.lease_owner is not null) and x.snapshot is not null
                         and (x.lease_owner is null or x.lease_until < clock_timestamp())
                       for update of x skip locked)
      returning g.id, g.query_id, g.role, g.claims)
    select c.id, c.query_id, c.role, c.claims::text, s.query
    from c join live_private.subscriptions s on s.query_id = c.query_id;
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
 * why: the results of leased groups, as their lanes returned them (or the error of one):
 * each is diffed against its group's snapshot and published as `<group id>|<message>`,
 * and its lease released. An error (`SQLSTATE|message`) marks the subscription broken,
 * but for 42501 (the group's role may not read a table); that, or a result past
 * LIVE_MAX_ROWS, removes the group, whose sockets get an `error` message.
 */
create or replace function live_private.publish_groups(instance_id uuid, ids bigint[], results jsonb[], errors text[])
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
  i int;
begin
  select st.channel, st.max_rows into v_channel, v_max from live_private.settings st;
  for i in 1 .. coalesce(cardinality(publish_groups.ids), 0) loop
    update live_private.groups x set lease_owner = null, lease_until = null
     where x.id = publish_groups.ids[i] and x.lease_owner = publish_groups.instance_id
    returning * into g;
    continue when not found;
    select s.mode into v_mode from live_private.subscriptions s where s.query_id = g.query_id and s.broken is null;
    continue when not found;
    if publish_groups.errors[i] is not null then
      -- `SQLSTATE|message`. A role that may not read a table loses its group (its sockets are
      -- told and closed); any other error means the query stopped working.
      if left(publish_groups.errors[i], 6) = '42501|' then
        delete from live_private.groups x where x.id = g.id;
        perform pg_catalog.pg_notify(v_channel, g.id::text || '|' || jsonb_build_object('type', 'error', 'query_id', g.query_id,
          'error', 'permission denied for this live query')::text);
      else
        perform live_private.mark_broken(g.query_id, substr(publish_groups.errors[i], 7));
      end if;
      continue;
    end if;
    v_new := coalesce(publish_groups.results[i], '[]'::jsonb);
    if jsonb_array_length(v_new) > v_max then
      delete from live_private.groups x where x.id = g.id;
      perform pg_catalog.pg_notify(v_channel, g.id::text || '|' || jsonb_build_object('type', 'error', 'query_id', g.query_id,
        'error', 'live query result too large')::text);
      continue;
    end if;
    v_ins := live_private.minus(v_new, g.snapshot);
    v_del := live_private.minus(g.snapshot, v_new);
    continue when v_ins = '[]'::jsonb and v_del = '[]'::jsonb;
    v_layout := live_private.layout_of(v_new);
    update live_private.groups x set snapshot = v_new, seq = x.seq + 1, layout = coalesce(v_layout, x.layout)
     where x.id = g.id;
    perform pg_catalog.pg_notify(v_channel, g.id::text || '|' || live_private.message(g.query_id, g.seq + 1, v_mode, v_ins, v_del,
      v_layout is not null and v_layout is distinct from g.layout,
      live_private.payload_limit(v_channel) - length(g.id::text) - 1));
  end loop;
end
$$;
comment on function live_private.publish_groups(uuid, bigint[], jsonb[], text[]) is E'plinth: diffs leased groups\' new results with their snapshots and publishes their changes.';
revoke all on function live_private.publish_groups(uuid, bigint[], jsonb[], text[]) from public;

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
    insert into live_private.groups as g (query_id, key, role, claims)
    values (join_group.query_id, v_key, join_group.role, v_claims)
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

/* why: a new group's first result, as its lane returned it. Changes that committed between
   that run and now are caught by the re-run the mark asks for. */
create or replace function live_private.init_group(group_id bigint, rows jsonb) returns bigint
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_query_id text;
  v_seq bigint;
begin
  update live_private.groups g set snapshot = init_group.rows, layout = s.layout
    from live_private.subscriptions s
   where g.id = init_group.group_id and g.snapshot is null and s.query_id = g.query_id
  returning g.query_id into v_query_id;
  if v_query_id is not null then
    insert into live_private.dirty (query_id) values (v_query_id);
  end if;
  select g.seq into v_seq from live_private.groups g where g.id = init_group.group_id;
  return v_seq;
end
$$;
revoke all on function live_private.init_group(bigint, jsonb) from public;

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
      or not exists (select 1 from live_private.instances i where i.id = m.instance_id);
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
