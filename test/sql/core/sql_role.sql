-- plinth_sql, the login role of POST /api/sql: not a superuser, no server-file or program
-- role, a member of service_role only, CREATE on public, and no way to the owner.
begin;
select plan(9);

select is((select rolsuper from pg_roles where rolname = 'plinth_sql'), false, 'not a superuser');
select is((select rolcanlogin from pg_roles where rolname = 'plinth_sql'), true, 'it logs in');
select is((select rolcreaterole or rolcreatedb or rolreplication from pg_roles where rolname = 'plinth_sql'), false, 'no CREATEROLE, CREATEDB or REPLICATION');
select is(pg_has_role('plinth_sql', 'pg_execute_server_program', 'member'), false, 'not pg_execute_server_program');
select is(pg_has_role('plinth_sql', 'pg_read_server_files', 'member') or pg_has_role('plinth_sql', 'pg_write_server_files', 'member'), false,
  'not pg_read_server_files nor pg_write_server_files');
select is(pg_has_role('plinth_sql', current_user, 'member'), false, 'no way to the owner');
select is((select array_agg(r.rolname::text) from pg_auth_members m join pg_roles r on r.oid = m.roleid where m.member = 'plinth_sql'::regrole),
  array['service_role'], 'a member of service_role only');
select is(has_schema_privilege('plinth_sql', 'public', 'create'), true, 'CREATE on public');
set local role plinth_sql;
create table public.t_sql_role (id int);
reset role;
select is(has_table_privilege('service_role', 'public.t_sql_role', 'select'), true, 'what it creates is the service role''s by default');

select * from finish();
rollback;
