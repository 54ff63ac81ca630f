-- rest_private.catalog(): what REST, RPC and OpenAPI serve (interface §4.3, §4.4; contract §5).
begin;
select plan(30);

create type public.t_mood as enum ('a', 'b');
create table public.t_parent (id bigint generated always as identity primary key, name varchar(20) not null, tags int[] default '{}', mood public.t_mood);
comment on column public.t_parent.name is 'the name';
create table public.t_child (id int primary key, parent_id bigint references public.t_parent (id), note text generated always as ('x') stored);
create view public.t_view as select id, name from public.t_parent;
create table other_t (id int);
create schema t_other;
create table t_other.hidden (id int);
create function public.t_fn(a int, b text default 'x', out c int) language sql stable security definer as 'select a';
create function public.t_set() returns setof public.t_parent language sql as 'select * from public.t_parent';
create function public.t_void() returns void language sql as 'select';
create function public.t_trigger() returns trigger language plpgsql as 'begin return new; end';
create function public.t_poly(x anyelement) returns int language sql as 'select 1';
create function t_other.t_elsewhere() returns int language sql as 'select 1';

create temp table cat as select rest_private.catalog()::jsonb as c;
create temp table rels as select r from cat, jsonb_array_elements(c -> 'relations') r;
create temp table fns as select f from cat, jsonb_array_elements(c -> 'functions') f;

select ok(exists (select 1 from rels where r ->> 'name' = 't_parent' and r ->> 'kind' = 'r'), 'a table is listed');
select ok(exists (select 1 from rels where r ->> 'name' = 't_view' and r ->> 'kind' = 'v'), 'a view is listed');
select ok(exists (select 1 from rels where r ->> 'name' = 'other_t'), 'every public table, privileges or not');
select ok(not exists (select 1 from rels where r ->> 'name' = 'hidden'), 'other schemas are not');
select is((select r -> 'pk' from rels where r ->> 'name' = 't_parent'), '["id"]'::jsonb, 'primary key columns');
select is((select r -> 'pk' from rels where r ->> 'name' = 't_view'), '[]'::jsonb, 'a view has no key');
select is(
  (select jsonb_agg(c ->> 'name') from rels, jsonb_array_elements(r -> 'columns') c where r ->> 'name' = 't_parent'),
  '["id", "name", "tags", "mood"]'::jsonb, 'columns in attnum order');
select is(
  (select c - 'description' from rels, jsonb_array_elements(r -> 'columns') c where r ->> 'name' = 't_parent' and c ->> 'name' = 'name'),
  '{"name": "name", "type": "character varying(20)", "cast": "pg_catalog.\"varchar\"", "base": "varchar", "category": "S", "elem": null, "nullable": false, "has_default": false, "default": null, "generated": false}'::jsonb,
  'a column: people''s type with typmod, cast name without');
select is((select c ->> 'description' from rels, jsonb_array_elements(r -> 'columns') c where r ->> 'name' = 't_parent' and c ->> 'name' = 'name'), 'the name', 'column comments');
select is(
  (select c ->> 'cast' || ' ' || (c ->> 'category') || ' ' || (c ->> 'elem') from rels, jsonb_array_elements(r -> 'columns') c where r ->> 'name' = 't_parent' and c ->> 'name' = 'tags'),
  'pg_catalog._int4 A int4', 'an array column');
select is((select c ->> 'cast' from rels, jsonb_array_elements(r -> 'columns') c where r ->> 'name' = 't_parent' and c ->> 'name' = 'mood'), 'public.t_mood', 'an enum is schema-qualified');
select is((select (c ->> 'generated')::bool from rels, jsonb_array_elements(r -> 'columns') c where r ->> 'name' = 't_parent' and c ->> 'name' = 'id'), true, 'identity always: not writable');
select is((select (c ->> 'generated')::bool from rels, jsonb_array_elements(r -> 'columns') c where r ->> 'name' = 't_child' and c ->> 'name' = 'note'), true, 'a generated column');
select is((select (r ->> 'insertable')::bool from rels where r ->> 'name' = 't_view'), true, 'a simple view is insertable');

select is(
  (select f from cat, jsonb_array_elements(c -> 'foreign_keys') f where f ->> 'from' = 't_child'),
  '{"name": "t_child_parent_id_fkey", "from": "t_child", "from_cols": ["parent_id"], "to": "t_parent", "to_cols": ["id"]}'::jsonb,
  'a foreign key with its columns');

select is((select f ->> 'volatility' from fns where f ->> 'name' = 't_fn'), 's', 'volatility');
select is((select (f ->> 'security_definer')::bool from fns where f ->> 'name' = 't_fn'), true, 'security definer');
select is((select f ->> 'return_kind' from fns where f ->> 'name' = 't_fn'), 'scalar', 'one OUT parameter: scalar');
select is((select (f ->> 'defaults')::int from fns where f ->> 'name' = 't_fn'), 1, 'argument defaults');
select is(
  (select jsonb_agg(jsonb_build_object('name', a ->> 'name', 'mode', a ->> 'mode', 'cast', a ->> 'cast')) from fns, jsonb_array_elements(f -> 'args') a where f ->> 'name' = 't_fn'),
  '[{"name": "a", "mode": "i", "cast": "pg_catalog.int4"}, {"name": "b", "mode": "i", "cast": "pg_catalog.text"}, {"name": "c", "mode": "o", "cast": "pg_catalog.int4"}]'::jsonb,
  'arguments with names, modes and cast types');
select is((select (f ->> 'returns_set')::bool from fns where f ->> 'name' = 't_set'), true, 'set-returning');
select is((select f ->> 'return_kind' from fns where f ->> 'name' = 't_set'), 'composite', 'a table row type is composite');
select is((select f ->> 'return_kind' from fns where f ->> 'name' = 't_void'), 'void', 'void');
select ok(not exists (select 1 from fns where f ->> 'name' = 't_trigger'), 'trigger functions are left out');
select ok(not exists (select 1 from fns where f ->> 'name' = 't_poly'), 'functions of pseudo-typed arguments are left out');
select ok(not exists (select 1 from fns where f ->> 'name' = 't_elsewhere'), 'functions outside public are left out');
select is((select f ->> 'oid' from fns where f ->> 'name' = 't_void'), (select 'public.t_void()'::regprocedure::oid::text), 'the function oid');

select ok(not has_function_privilege('anon', 'rest_private.catalog()', 'execute'), 'anon may not call the catalog');
select ok(not has_schema_privilege('anon', 'rest_private', 'usage'), 'nor use rest_private');
select function_privs_are('rest_private', 'catalog', array[]::text[], 'service_role', array[]::text[], 'nor service_role');

select * from finish();
rollback;
