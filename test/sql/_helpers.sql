/*
 * pgTAP helpers, loaded into the test template only (never a migration).
 * tests.authenticate_as(uuid) acts as a signed-in user for the rest of the transaction;
 * tests.act_as(role, claims) as any API role; tests.reset_role() back to the superuser.
 */
create schema if not exists tests;

create or replace function tests.act_as(role_name text, claims jsonb default '{}') returns void
  language plpgsql
as $$
begin
  perform set_config('request.jwt.claims', (claims || jsonb_build_object('role', role_name))::text, true);
  execute format('set local role %I', role_name);
end
$$;

create or replace function tests.authenticate_as(user_id uuid) returns void
  language sql
as $$
  select tests.act_as('authenticated', jsonb_build_object('sub', user_id, 'aud', 'authenticated'))
$$;

create or replace function tests.reset_role() returns void
  language plpgsql
as $$
begin
  reset role;
  perform set_config('request.jwt.claims', '', true);
end
$$;

grant usage on schema tests to public;
grant execute on all functions in schema tests to public;
