--! Previous: sha1:1fec430057eaf3174de62355a24dc67b64229619
--! Hash: sha1:a6c93a3a1a42a17a0e0d4619ffd6787b4179aeee
--! Message: rest: the catalog reports each column's default (missing=default, the dashboard)

-- Enter migration here
--! Included rest/catalog.sql
/*
 * why: REST, RPC and OpenAPI serve what this returns (docs/api/rest.md):
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
 * caller (src/rest/openapi.ts). `uniques` (column sets of unique indexes without predicate or
 * expression, the primary key included) tell one-to-one and junction relationships apart;
 * `enums` (labels of the enums in `public`) serve the generated types. A column's `default` is
 * its default expression (identity columns: their sequence's nextval), for `Prefer:
 * missing=default` on a bulk insert.
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
  uniques as (
    select i.indrelid, json_agg(k.cols order by k.cols) as sets
      from pg_index i
      cross join lateral (
        select array_agg(a.attname order by a.attname) as cols
          from unnest(i.indkey::int2[]) as u(attnum)
          join pg_attribute a on a.attrelid = i.indrelid and a.attnum = u.attnum
      ) k
     where i.indisunique and i.indpred is null and i.indexprs is null
       and i.indrelid in (select oid from rels)
     group by i.indrelid
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
             'default', case when a.attidentity <> '' then format('nextval(pg_get_serial_sequence(%L, %L))', format('%I.%I', 'public', c.relname), a.attname)
                             when a.attgenerated = '' then pg_get_expr(d.adbin, d.adrelid) end,
             'description', col_description(a.attrelid, a.attnum)
           ) order by a.attnum) as columns
      from pg_attribute a
      join types ty on ty.oid = a.atttypid
      join pg_class c on c.oid = a.attrelid
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
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
               'uniques', coalesce(u.sets, '[]'),
               'description', obj_description(r.oid, 'pg_class')
             ) order by r.relname)
        from rels r
        left join pks pk on pk.conrelid = r.oid
        left join uniques u on u.indrelid = r.oid
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
        left join args a on a.oid = p.oid), '[]'),
    'enums', coalesce((
      select json_agg(json_build_object(
               'name', t.typname,
               'labels', (select json_agg(e.enumlabel order by e.enumsortorder) from pg_enum e where e.enumtypid = t.oid)
             ) order by t.typname)
        from pg_type t
       where t.typnamespace = 'public'::regnamespace and t.typtype = 'e'), '[]')
  )
$$;
comment on function rest_private.catalog() is
  E'plinth: the REST schema cache source: public tables, views (columns, types, keys, foreign keys) and functions, as one JSON document.';
revoke all on function rest_private.catalog() from public;
--! EndIncluded rest/catalog.sql
