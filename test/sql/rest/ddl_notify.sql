-- The DDL event trigger: NOTIFY plinth_cache 'rest' after DDL in public, nothing otherwise.
-- Two dblink sessions: one listens, the other runs (and commits) the DDL.
begin;
select plan(12);

select is((select evtenabled from pg_event_trigger where evtname = 'plinth_rest_ddl_command_end'), 'O', 'the ddl_command_end trigger is enabled');
select is((select evtevent from pg_event_trigger where evtname = 'plinth_rest_ddl_command_end'), 'ddl_command_end', 'on ddl_command_end');
select is((select evtevent from pg_event_trigger where evtname = 'plinth_rest_sql_drop'), 'sql_drop', 'and one on sql_drop');
select is((select prosecdef from pg_proc where oid = 'rest_private.tg__ddl_command_end()'::regprocedure), true, 'security definer');
select ok((select proconfig from pg_proc where oid = 'rest_private.tg__ddl_command_end()'::regprocedure) @> array['search_path=pg_catalog, pg_temp'], 'with a pinned search_path');

select dblink_connect('listener', format('host=127.0.0.1 port=%s dbname=%s user=%s', current_setting('port'), current_database(), current_user));
select dblink_connect('writer', format('host=127.0.0.1 port=%s dbname=%s user=%s', current_setting('port'), current_database(), current_user));
select dblink_exec('listener', 'listen plinth_cache');

create function pg_temp.notified() returns bigint language plpgsql as $$
declare n bigint;
begin
  perform pg_sleep(0.2);
  select count(*) into n from dblink_get_notify('listener') where notify_name = 'plinth_cache' and extra = 'rest';
  return n;
end $$;

select dblink_exec('writer', 'create table public.t_ddl (id int)');
select cmp_ok(pg_temp.notified(), '>=', 1::bigint, 'create table in public notifies');
select dblink_exec('writer', 'grant select on public.t_ddl to anon');
select cmp_ok(pg_temp.notified(), '>=', 1::bigint, 'a grant notifies');
select dblink_exec('writer', 'drop table public.t_ddl');
select cmp_ok(pg_temp.notified(), '>=', 1::bigint, 'a drop notifies');
select dblink_exec('writer', 'create schema t_elsewhere');
select pg_temp.notified(); -- (a schema has no schema: it notifies; drained here)
select dblink_exec('writer', 'create table t_elsewhere.x (id int); alter table t_elsewhere.x add column y int; drop table t_elsewhere.x');
select is(pg_temp.notified(), 0::bigint, 'DDL in other schemas is silent');
select dblink_exec('writer', 'create temp table t_tmp (id int)');
select is(pg_temp.notified(), 0::bigint, 'temporary tables are silent');
select dblink_exec('writer', 'begin; create table public.t_rolled (id int); rollback');
select is(pg_temp.notified(), 0::bigint, 'a rolled-back DDL sends nothing');
select dblink_exec('writer', 'create function public.t_f() returns int language sql as ''select 1''');
select cmp_ok(pg_temp.notified(), '>=', 1::bigint, 'create function in public notifies');

select dblink_disconnect('writer');
select dblink_disconnect('listener');
select * from finish();
rollback;
