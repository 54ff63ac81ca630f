-- edge.functions exactly as contract §6, its privileges, its reload NOTIFY, and
-- edge_private.catalog() / edge.function_list() (interface §2.6, §4.7).
begin;
select plan(34);

-- The table, column by column.
select has_table('edge', 'functions', 'edge.functions exists');
select columns_are('edge', 'functions', array['name', 'runtime', 'status', 'verify_jwt'], 'exactly four columns');
select col_type_is('edge', 'functions', 'name', 'text', 'name text');
select col_is_pk('edge', 'functions', 'name', 'name is the primary key');
select col_type_is('edge', 'functions', 'runtime', 'text', 'runtime text');
select col_type_is('edge', 'functions', 'status', 'text', 'status text');
select col_default_is('edge', 'functions', 'status', 'active', 'status defaults to active');
select col_type_is('edge', 'functions', 'verify_jwt', 'boolean', 'verify_jwt boolean');
select col_default_is('edge', 'functions', 'verify_jwt', 'true', 'verify_jwt defaults to true');
insert into edge.functions (name, runtime) values ('t_d', 'deno'), ('t_p', 'plv8');
select is((select status || ' ' || verify_jwt from edge.functions where name = 't_d'), 'active true', 'defaults applied');
select throws_ok($$insert into edge.functions (name, runtime) values ('t_x', 'python')$$, '23514', null, 'runtime is deno or plv8');
select throws_ok($$insert into edge.functions (name, runtime) values ('t_d', 'deno')$$, '23505', null, 'names are unique');

-- Who may read and write it.
select table_privs_are('edge', 'functions', 'service_role', array['SELECT', 'INSERT', 'UPDATE', 'DELETE'], 'service_role reads and writes');
select table_privs_are('edge', 'functions', 'anon', array[]::text[], 'anon: nothing');
select table_privs_are('edge', 'functions', 'authenticated', array[]::text[], 'authenticated: nothing');
select table_privs_are('edge', 'functions', 'anonymous', array[]::text[], 'guests: nothing');
select schema_privs_are('edge', 'anon', array[]::text[], 'anon has no USAGE on edge');
select schema_privs_are('edge_private', 'service_role', array[]::text[], 'nor service_role on edge_private');

select tests.act_as('service_role');
insert into edge.functions (name, runtime, verify_jwt) values ('t_sr', 'deno', false);
select is((select count(*)::int from edge.functions where name = 't_sr'), 1, 'service_role inserts');
update edge.functions set status = 'paused' where name = 't_sr';
delete from edge.functions where name = 't_sr';
select is((select count(*)::int from edge.functions where name = 't_sr'), 0, 'updates and deletes');
select is((edge.function_list() -> 0)::jsonb, '{"name": "t_d", "runtime": "deno", "status": "active", "verify_jwt": true}'::jsonb, 'function_list: Edge function entries by name');
select tests.reset_role();
select tests.act_as('anon');
select throws_ok($$select * from edge.functions$$, '42501', null, 'anon cannot read the catalog');
select throws_ok($$select edge.function_list()$$, '42501', null, 'nor list it');
select tests.reset_role();

-- The catalog read, with plv8 resolution.
create function public.t_p(payload jsonb) returns setof int language sql as 'select 1';
create function public.t_s(payload jsonb) returns jsonb language sql stable as 'select payload';
create function public.t_v(payload jsonb) returns void language sql as 'select';
create function public.t_wrong(x int) returns int language sql as 'select x';
insert into edge.functions (name, runtime) values ('t_s', 'plv8'), ('t_v', 'plv8'), ('t_wrong', 'plv8'), ('t_none', 'plv8');
create temp table cat as select e from json_array_elements(edge_private.catalog()) e;
select is((select e::jsonb -> 'fn' from cat where e ->> 'name' = 't_p'), '{"returns_set": true, "return_kind": "scalar", "volatility": "v"}'::jsonb, 'plv8: a set-returning public.<name>(jsonb)');
select is((select e::jsonb -> 'fn' from cat where e ->> 'name' = 't_s'), '{"returns_set": false, "return_kind": "scalar", "volatility": "s"}'::jsonb, 'a stable scalar one');
select is((select e::jsonb -> 'fn' ->> 'return_kind' from cat where e ->> 'name' = 't_v'), 'void', 'a void one');
select is((select e::jsonb -> 'fn' from cat where e ->> 'name' = 't_wrong'), 'null'::jsonb, 'no (jsonb) signature: fn is null');
select is((select e::jsonb -> 'fn' from cat where e ->> 'name' = 't_none'), 'null'::jsonb, 'no function: fn is null');
select is((select e::jsonb -> 'fn' from cat where e ->> 'name' = 't_d'), 'null'::jsonb, 'deno rows are not resolved');
select is((select e::jsonb - 'fn' from cat where e ->> 'name' = 't_d'), '{"name": "t_d", "runtime": "deno", "status": "active", "verify_jwt": true}'::jsonb, 'the row as stored');

-- The reload NOTIFY: after each committed change, payload `functions`; nothing for a rollback.
select dblink_connect('listener', format('host=127.0.0.1 port=%s dbname=%s user=%s', current_setting('port'), current_database(), current_user));
select dblink_connect('writer', format('host=127.0.0.1 port=%s dbname=%s user=%s', current_setting('port'), current_database(), current_user));
select dblink_exec('listener', 'listen plinth_cache');
create function pg_temp.notified() returns bigint language plpgsql as $$
declare n bigint;
begin
  perform pg_sleep(0.2);
  select count(*) into n from dblink_get_notify('listener') where notify_name = 'plinth_cache' and extra = 'functions';
  return n;
end $$;
select dblink_exec('writer', $$insert into edge.functions (name, runtime) values ('t_n1', 'deno'), ('t_n2', 'deno')$$);
select is(pg_temp.notified(), 1::bigint, 'an insert notifies once per statement');
select dblink_exec('writer', $$update edge.functions set verify_jwt = false where name = 't_n1'$$);
select is(pg_temp.notified(), 1::bigint, 'an update notifies');
select dblink_exec('writer', $$delete from edge.functions where name = 't_n2'$$);
select is(pg_temp.notified(), 1::bigint, 'a delete notifies');
select dblink_exec('writer', $$begin; insert into edge.functions (name, runtime) values ('t_n3', 'deno'); rollback$$);
select is(pg_temp.notified(), 0::bigint, 'a rolled-back change sends nothing');
select dblink_disconnect('writer');
select dblink_disconnect('listener');

select * from finish();
rollback;
