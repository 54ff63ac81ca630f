-- The API roles and the claim helpers (contract §5).
begin;
select plan(21);

select has_role('anon');
select has_role('authenticated');
select has_role('service_role');
select has_role('anonymous', 'the guest role of ANONYMOUS_ROLE');
select is((select rolcanlogin from pg_roles where rolname = 'anon'), false, 'anon is NOLOGIN');
select is((select rolcanlogin from pg_roles where rolname = 'anonymous'), false, 'the guest role is NOLOGIN');
select is((select rolbypassrls from pg_roles where rolname = 'service_role'), true, 'service_role bypasses RLS');
select is((select rolbypassrls from pg_roles where rolname = 'authenticated'), false, 'authenticated does not bypass RLS');
select ok(pg_has_role(current_user, 'anon', 'member'), 'the connecting role can become anon');

select is(auth.uid(), null, 'auth.uid() is null outside a request');
select is(auth.jwt(), '{}'::jsonb, 'auth.jwt() is {} outside a request');

select tests.authenticate_as('00000000-0000-0000-0000-00000000000a');
select is(auth.uid(), '00000000-0000-0000-0000-00000000000a'::uuid, 'auth.uid() reads claim sub');
select is(auth.role(), 'authenticated', 'auth.role() reads claim role');
select is(current_user::text, 'authenticated', 'the role is switched');
select is(auth.jwt() ->> 'aud', 'authenticated', 'auth.jwt() has every claim');
select tests.reset_role();

select tests.act_as('anonymous', '{"is_anonymous": true}');
select is(auth.jwt() -> 'is_anonymous', 'true'::jsonb, 'the guest role can call the helpers');
select tests.reset_role();

-- New functions are not executable by PUBLIC (contract §9).
create function public.t_probe() returns int language sql as 'select 1';
select ok(not has_function_privilege('anon', 'public.t_probe()', 'execute'), 'new functions are not executable by anon without a grant');

-- The claim helpers are inlined into policies (no SET clause, not security definer).
select is((select proconfig from pg_proc where oid = 'auth.uid()'::regprocedure), null, 'auth.uid() has no SET clause');
create table public.t_owned (id int, owner uuid);
create function tests.plan_of(q text) returns text language plpgsql as $$
declare v text; r record;
begin
  v := '';
  for r in execute 'explain (verbose, costs off) ' || q loop v := v || r."QUERY PLAN" || ' '; end loop;
  return v;
end $$;
select ok(tests.plan_of('select * from public.t_owned where owner = auth.uid()') !~ 'auth\.uid', 'auth.uid() is inlined into a query');

-- Prepared statement names are hidden from every role but the superusers (migration 000011):
-- SQL on a request lane cannot find a statement to replace.
select ok(not exists (
  select 1 from pg_roles r
   where r.rolname in ('anon', 'authenticated', 'service_role', 'plinth_anon', 'plinth_authenticated', 'plinth_service', 'plinth_guest')
     and has_table_privilege(r.oid, 'pg_catalog.pg_prepared_statements', 'select')
), 'no API or login role reads pg_prepared_statements');
select ok(not exists (
  select 1 from pg_roles r
   where r.rolname in ('anon', 'authenticated', 'service_role', 'plinth_anon', 'plinth_authenticated', 'plinth_service', 'plinth_guest')
     and has_function_privilege(r.oid, 'pg_catalog.pg_prepared_statement()', 'execute')
), 'nor calls pg_prepared_statement()');

select * from finish();
rollback;
