--! Previous: sha1:94200791fdce35de8c0a9d443f5b1afd0812ca28
--! Hash: sha1:c9edc09345747fac762d0c51d4e72119f10d468f
--! Message: core: one login role per API role for the request lanes; per-role statement timeouts

-- Enter migration here
--! Included core/login_roles.sql
/*
 * why: the request lanes (src/core/db.ts) log in as one of these roles, one per API role.
 * PostgreSQL checks SET ROLE and set_config('role', …) against the SESSION user, so a
 * session that logged in as the owner (or as one role that is a member of every API role)
 * lets any SQL running as anon become the owner or service_role. Each login role here is
 * LOGIN, NOSUPERUSER, NOINHERIT, owns nothing and is a member of its one API role only,
 * and its session role is that API role (`alter role … set role`): SQL that runs as anon
 * can become anon or plinth_anon (which holds no privilege of its own), nothing else.
 *
 * Passwords are not set here: the migrations step (src/core/migrate.ts) sets one derived
 * from JWT_SECRET, unless DB_REQUEST_PASSWORD says a DBA manages them (README). Memberships
 * in any other role are revoked, so a stray grant cannot widen a lane. The owner is made a
 * member of each login role (the other way round), so it may cancel their statements.
 *
 * Statement timeouts for request work live on the API roles, as PostgREST reads them
 * (`alter role anon set statement_timeout = '5s'`); these defaults (Supabase's: 3 s anon,
 * 8 s for the others) are written only where the role has none, so a DBA's value stays.
 */
do $$
declare
  pair record;
  other record;
begin
  for pair in
    select * from (values ('plinth_anon', 'anon', '3s'),
                          ('plinth_authenticated', 'authenticated', '8s'),
                          ('plinth_service', 'service_role', '8s'),
                          ('plinth_guest', ':ANONYMOUS_ROLE', '8s')) as v(login, api, timeout)
  loop
    if not exists (select 1 from pg_catalog.pg_roles where rolname = pair.login) then
      execute format('create role %I login nosuperuser noinherit nocreatedb nocreaterole nobypassrls', pair.login);
    else
      execute format('alter role %I login nosuperuser noinherit nocreatedb nocreaterole nobypassrls', pair.login);
    end if;
    for other in
      select r.rolname from pg_catalog.pg_auth_members m
        join pg_catalog.pg_roles r on r.oid = m.roleid
        join pg_catalog.pg_roles l on l.oid = m.member
      where l.rolname = pair.login and r.rolname <> pair.api
    loop
      execute format('revoke %I from %I', other.rolname, pair.login);
    end loop;
    execute format('grant %I to %I', pair.api, pair.login);
    execute format('alter role %I set role = %L', pair.login, pair.api);
    -- The owner may signal the lanes' backends (pg_cancel_backend: Db.cancelAll at a
    -- shutdown deadline). This is membership of the owner IN the login role, not the reverse.
    if current_user <> pair.login then
      execute format('grant %I to %I', pair.login, current_user);
    end if;
    if not exists (
      select 1 from pg_catalog.pg_db_role_setting s
      where s.setrole = (select oid from pg_catalog.pg_roles where rolname = pair.api)
        and s.setdatabase = 0
        and exists (select 1 from pg_catalog.unnest(s.setconfig) c where c like 'statement\_timeout=%')
    ) then
      execute format('alter role %I set statement_timeout = %L', pair.api, pair.timeout);
    end if;
  end loop;
end
$$;

comment on role plinth_anon is E'plinth: login role of the anon request lanes; member of anon only. See src/core/db.ts.';
comment on role plinth_authenticated is E'plinth: login role of the authenticated request lanes; member of authenticated only.';
comment on role plinth_service is E'plinth: login role of the service_role request lanes; member of service_role only.';
comment on role plinth_guest is E'plinth: login role of the guest (ANONYMOUS_ROLE) request lanes; member of that role only.';
--! EndIncluded core/login_roles.sql
