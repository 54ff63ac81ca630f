--! Previous: sha1:e4daffdb2a18f2cba88f80c68477dbe335538c01
--! Hash: sha1:76842e407b736ef7159994caf27d73429a301636
--! Message: rest: catalog, planned counts and DDL notifications; the request lanes' authenticator role

--! Included core/authenticator.sql
/*
 * why: the connections of the request lanes (src/core/db.ts) start as this role, which
 * holds no privileges at all. Each request's block switches to the API role with
 * set_config('role', …, true), which reverts here at COMMIT. A statement that ever ran
 * outside its block (a connection lost between BEGIN and the work) fails with 42501
 * instead of running as the owner. PostgREST's "authenticator" pattern.
 */
do $$
begin
  if not exists (select 1 from pg_catalog.pg_roles where rolname = 'plinth_authenticator') then
    create role plinth_authenticator nologin noinherit;
  end if;
  execute format('grant plinth_authenticator to %I', current_user);
end
$$;
comment on role plinth_authenticator is E'plinth: the idle role of request connections; no privileges. See src/core/db.ts.';
--! EndIncluded core/authenticator.sql
--! Included rest/schema.sql
/*
 * why: the REST area's two schemas (design.md, Layout). `rest` holds what a request's own
 * statement calls as the API role (rest.planned_rows for `Prefer: count=planned`), so the
 * API roles get USAGE on it; `rest_private` holds what only the service's connecting role
 * calls (the catalog introspection, the DDL event trigger's function).
 */
create schema if not exists rest;
grant usage on schema rest to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on schema rest is E'plinth: helpers the REST area calls inside a request''s statement, as the API role.';

create schema if not exists rest_private;
revoke all on schema rest_private from public;
comment on schema rest_private is E'plinth: REST internals (schema catalog, DDL notifications); no API role may use it.';
--! EndIncluded rest/schema.sql
--! Included rest/catalog.sql
/*
 * why: REST, RPC and OpenAPI serve what this returns (interface §4.3, §4.4; contract §5):
 * the tables, views and functions of `public`, read once into the service's schema cache
 * and re-read after DDL (rest/ddl_notify.sql) or POST /api/catalog/refresh. One call, one
 * JSON document, so a reload is one round trip and the cache swaps atomically.
 *
 * Types are given twice: `type` for people (format_type, with typmods) and `cast` for the
 * compiler, the schema-qualified, quoted name without typmod (`"pg_catalog"."int8"`,
 * `"public"."mood"`, `"pg_catalog"."_int4"`), which casts text to the column's type without
 * truncating (a cast to varchar(3) would cut; an assignment refuses) and without depending
 * on the search_path. `base` and `category` (of the domain's base type) drive the OpenAPI
 * types; `elem` is the element type of an array.
 *
 * Functions: only plain functions (prokind f) that take no pseudo-typed argument and do not
 * return trigger-like types; members of extensions are left out (they live in `extensions`
 * anyway). Argument defaults: the last `pronargdefaults` input arguments have one.
 * Privileges are not here: they depend on the caller, and OpenAPI asks the database as the
 * caller (src/rest/openapi.ts).
 */
create or replace function rest_private.catalog() returns json
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  with
  types as (
    select t.oid,
           format('%I.%I', tn.nspname, t.typname) as cast_name,
           coalesce(bt.typname, t.typname) as base,
           coalesce(bt.typcategory, t.typcategory) as category,
           coalesce(et.typname, bet.typname) as elem,
           t.typtype
      from pg_type t
      join pg_namespace tn on tn.oid = t.typnamespace
      left join pg_type bt on t.typtype = 'd' and bt.oid = t.typbasetype
      left join pg_type et on et.oid = nullif(t.typelem, 0) and t.typcategory = 'A'
      left join pg_type bet on bet.oid = nullif(bt.typelem, 0) and bt.typcategory = 'A'
  ),
  rels as (
    select c.oid, c.relname, c.relkind
      from pg_class c
     where c.relnamespace = 'public'::regnamespace
       and c.relkind in ('r', 'v', 'm', 'f', 'p')
       and not exists (select 1 from pg_depend d where d.classid = 'pg_class'::regclass and d.objid = c.oid and d.deptype = 'e')
  ),
  pks as (
    select con.conrelid, array_agg(a.attname order by k.ord) as cols
      from pg_constraint con
      cross join lateral unnest(con.conkey) with ordinality as k(attnum, ord)
      join pg_attribute a on a.attrelid = con.conrelid and a.attnum = k.attnum
     where con.contype = 'p' and con.conrelid in (select oid from rels)
     group by con.conrelid
  ),
  cols as (
    select a.attrelid,
           json_agg(json_build_object(
             'name', a.attname,
             'type', format_type(a.atttypid, a.atttypmod),
             'cast', ty.cast_name,
             'base', ty.base,
             'category', ty.category,
             'elem', ty.elem,
             'nullable', not a.attnotnull,
             'has_default', a.atthasdef or a.attidentity <> '' or a.attgenerated <> '',
             'generated', a.attgenerated <> '' or a.attidentity = 'a',
             'description', col_description(a.attrelid, a.attnum)
           ) order by a.attnum) as columns
      from pg_attribute a
      join types ty on ty.oid = a.atttypid
     where a.attrelid in (select oid from rels) and a.attnum > 0 and not a.attisdropped
     group by a.attrelid
  ),
  fks as (
    select con.conname, src.relname as from_table, dst.relname as to_table,
           array_agg(sa.attname order by k.ord) as from_cols,
           array_agg(da.attname order by k.ord) as to_cols
      from pg_constraint con
      join rels src on src.oid = con.conrelid
      join rels dst on dst.oid = con.confrelid
      cross join lateral unnest(con.conkey, con.confkey) with ordinality as k(src_att, dst_att, ord)
      join pg_attribute sa on sa.attrelid = con.conrelid and sa.attnum = k.src_att
      join pg_attribute da on da.attrelid = con.confrelid and da.attnum = k.dst_att
     where con.contype = 'f'
     group by con.oid, con.conname, src.relname, dst.relname
  ),
  procs as (
    select p.*
      from pg_proc p
     where p.pronamespace = 'public'::regnamespace
       and p.prokind = 'f'
       and p.prorettype not in ('trigger'::regtype, 'event_trigger'::regtype, 'internal'::regtype, 'language_handler'::regtype, 'fdw_handler'::regtype, 'index_am_handler'::regtype, 'table_am_handler'::regtype, 'tsm_handler'::regtype)
       and not exists (select 1 from unnest(p.proargtypes::oid[]) as at(oid) join pg_type t on t.oid = at.oid where t.typtype = 'p')
       and not exists (select 1 from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')
  ),
  args as (
    select p.oid,
           json_agg(json_build_object(
             'name', coalesce(p.proargnames[a.ord], ''),
             'mode', coalesce(p.proargmodes[a.ord], 'i'),
             'type', format_type(a.typ, null),
             'cast', ty.cast_name,
             'base', ty.base,
             'category', ty.category,
             'elem', ty.elem
           ) order by a.ord) as args
      from procs p
      cross join lateral unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) with ordinality as a(typ, ord)
      join types ty on ty.oid = a.typ
     group by p.oid
  )
  select json_build_object(
    'relations', coalesce((
      select json_agg(json_build_object(
               'name', r.relname,
               'kind', r.relkind,
               'insertable', r.relkind in ('r', 'p') or (pg_relation_is_updatable(r.oid, true) & 8) = 8,
               'updatable', r.relkind in ('r', 'p') or (pg_relation_is_updatable(r.oid, true) & 4) = 4,
               'deletable', r.relkind in ('r', 'p') or (pg_relation_is_updatable(r.oid, true) & 16) = 16,
               'pk', coalesce(to_json(pk.cols), '[]'),
               'columns', coalesce(c.columns, '[]'),
               'description', obj_description(r.oid, 'pg_class')
             ) order by r.relname)
        from rels r
        left join pks pk on pk.conrelid = r.oid
        left join cols c on c.attrelid = r.oid), '[]'),
    'foreign_keys', coalesce((
      select json_agg(json_build_object(
               'name', f.conname, 'from', f.from_table, 'from_cols', f.from_cols,
               'to', f.to_table, 'to_cols', f.to_cols
             ) order by f.from_table, f.conname)
        from fks f), '[]'),
    'functions', coalesce((
      select json_agg(json_build_object(
               'oid', p.oid::int8,
               'name', p.proname,
               'args', coalesce(a.args, '[]'),
               'defaults', p.pronargdefaults,
               'returns_set', p.proretset,
               'return_type', format_type(p.prorettype, null),
               'return_cast', rt.cast_name,
               'return_kind', case
                 when p.prorettype = 'void'::regtype then 'void'
                 when rt.typtype = 'c' or p.prorettype = 'record'::regtype then 'composite'
                 else 'scalar' end,
               'return_base', rt.base,
               'return_category', rt.category,
               'return_elem', rt.elem,
               'volatility', p.provolatile,
               'security_definer', p.prosecdef,
               'description', obj_description(p.oid, 'pg_proc')
             ) order by p.proname, p.oid)
        from procs p
        join types rt on rt.oid = p.prorettype
        left join args a on a.oid = p.oid), '[]')
  )
$$;
comment on function rest_private.catalog() is
  E'plinth: the REST schema cache source: public tables, views (columns, types, keys, foreign keys) and functions, as one JSON document.';
revoke all on function rest_private.catalog() from public;
--! EndIncluded rest/catalog.sql
--! Included rest/planned_rows.sql
/*
 * why: `Prefer: count=planned` (interface §4.3) wants the planner's estimate of the rows a
 * request matches, for the caller's role (RLS changes the plan) and its actual values,
 * inside the request's one statement. EXPLAIN takes no parameters, so the count query is
 * PREPAREd with text parameters and EXPLAINed as EXECUTE with the values quoted by
 * quote_nullable. The text comes from the REST compiler only (catalog identifiers and $n);
 * PREPARE accepts nothing but SELECT/INSERT/UPDATE/DELETE/VALUES, and as SECURITY INVOKER
 * the function can do nothing the caller could not. PREPARE is not transactional: the
 * statement is deallocated on every path, and a leftover one of a dead call is dropped first.
 */
create or replace function rest.planned_rows(query text, args text[]) returns bigint
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_plan json;
  v_types text;
  v_values text;
begin
  if exists (select 1 from pg_catalog.pg_prepared_statements where name = '_plinth_planned_rows') then
    deallocate _plinth_planned_rows;
  end if;
  select coalesce('(' || string_agg('text', ',') || ')', ''),
         coalesce('(' || string_agg(pg_catalog.quote_nullable(a.v), ',' order by a.o) || ')', '')
    into v_types, v_values
    from unnest(planned_rows.args) with ordinality as a(v, o);
  execute 'prepare _plinth_planned_rows' || v_types || ' as ' || planned_rows.query;
  begin
    execute 'explain (format json) execute _plinth_planned_rows' || v_values into v_plan;
  exception when others then
    deallocate _plinth_planned_rows;
    raise;
  end;
  deallocate _plinth_planned_rows;
  return greatest(0, round((v_plan -> 0 -> 'Plan' ->> 'Plan Rows')::numeric))::bigint;
end
$$;
comment on function rest.planned_rows(text, text[]) is
  E'plinth: the planner''s row estimate for a REST count query (text parameters $1…$n = args), as the calling role.';
revoke all on function rest.planned_rows(text, text[]) from public;
grant execute on function rest.planned_rows(text, text[]) to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded rest/planned_rows.sql
--! Included rest/ddl_notify.sql
/*
 * why: the REST schema cache must follow DDL without a restart (issue 4; design.md,
 * "Caches reload on NOTIFY"). After any DDL that touches `public` (or has no schema:
 * GRANT, REVOKE, default privileges) and after any drop in `public`, notify
 * `plinth_cache` with payload `rest`; every instance's one LISTEN connection reloads.
 * Temporary objects and other schemas stay silent: NOTIFY takes a cluster-wide lock at
 * commit, so auth, storage or worker DDL should not pay for REST. A rolled-back DDL sends
 * nothing (notifications are delivered at commit).
 * Event triggers need a superuser at migration time; the function is SECURITY DEFINER with
 * a pinned search_path, executable only through the event trigger.
 */
create or replace function rest_private.tg__ddl_command_end() returns event_trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if exists (select 1 from pg_catalog.pg_event_trigger_ddl_commands() c
              where c.schema_name is null or c.schema_name = 'public') then
    perform pg_catalog.pg_notify('plinth_cache', 'rest');
  end if;
end
$$;
comment on function rest_private.tg__ddl_command_end() is E'plinth: notifies plinth_cache/rest after DDL on public (REST schema cache reload).';
revoke all on function rest_private.tg__ddl_command_end() from public;

create or replace function rest_private.tg__sql_drop() returns event_trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if exists (select 1 from pg_catalog.pg_event_trigger_dropped_objects() d
              where d.schema_name = 'public') then
    perform pg_catalog.pg_notify('plinth_cache', 'rest');
  end if;
end
$$;
comment on function rest_private.tg__sql_drop() is E'plinth: notifies plinth_cache/rest after a drop in public (REST schema cache reload).';
revoke all on function rest_private.tg__sql_drop() from public;

drop event trigger if exists plinth_rest_ddl_command_end;
create event trigger plinth_rest_ddl_command_end on ddl_command_end
  execute function rest_private.tg__ddl_command_end();
comment on event trigger plinth_rest_ddl_command_end is E'plinth: REST schema cache reload after DDL.';

drop event trigger if exists plinth_rest_sql_drop;
create event trigger plinth_rest_sql_drop on sql_drop
  execute function rest_private.tg__sql_drop();
comment on event trigger plinth_rest_sql_drop is E'plinth: REST schema cache reload after drops.';
--! EndIncluded rest/ddl_notify.sql
