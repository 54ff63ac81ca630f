--! Previous: sha1:c9edc09345747fac762d0c51d4e72119f10d468f
--! Hash: sha1:513cfa4cda95b89129457b618799b61b5a37feb3
--! Message: core: API roles cannot read prepared statement names (pg_prepared_statements revoked from PUBLIC); rest.planned_rows drops a leftover without reading it

-- Enter migration here
--! Included core/prepared_statements.sql
/*
 * why: a request lane's connection keeps its prepared statements for the next requests of
 * other users of the same API role: the claims statement and the driver's work statements.
 * SQL that runs as an API role (a DBA's function with dynamic SQL, a plpgsql body, plv8)
 * can DEALLOCATE and PREPARE by name on that connection. Knowing a name, it could replace
 * the claims statement (the next requests on the lane would run with claims it chose) or a
 * work statement (it would run, with the next callers' claims, what it chose). The names
 * are random (the driver's, and the claims statement's per process), so the one way to
 * learn them is pg_prepared_statements: no role but the superusers reads it any more.
 *
 * A DEALLOCATE ALL only makes the next statement on the lane prepare again (the lane and
 * the driver both do): it cannot put anything in their place.
 *
 * REVOKE on a catalog view needs its owner (a superuser); run by anyone else it revokes
 * nothing, and this says so (README, "Login roles, for a DBA").
 */
do $$
begin
  revoke select on pg_catalog.pg_prepared_statements from public;
  revoke execute on function pg_catalog.pg_prepared_statement() from public;
  if exists (
    select 1
      from pg_catalog.pg_class c,
           pg_catalog.aclexplode(coalesce(c.relacl, pg_catalog.acldefault('r', c.relowner))) a
     where c.oid = 'pg_catalog.pg_prepared_statements'::pg_catalog.regclass and a.grantee = 0
  ) then
    raise warning 'plinth: pg_prepared_statements is still readable by every role (revoking it needs a superuser): as one, run  revoke select on pg_catalog.pg_prepared_statements from public; revoke execute on function pg_catalog.pg_prepared_statement() from public;';
  end if;
end
$$;
--! EndIncluded core/prepared_statements.sql
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
  -- A leftover of a dead call (cancelled between PREPARE and DEALLOCATE) is dropped first;
  -- none is the usual case (pg_prepared_statements is closed to the API roles: core/prepared_statements.sql).
  begin
    deallocate _plinth_planned_rows;
  exception when invalid_sql_statement_name then
    null;
  end;
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
