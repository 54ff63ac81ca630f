--! Previous: sha1:283b8d015a05906add53366a063cc45178ee026f
--! Hash: sha1:3807d0a26c436ff19f2fc96bfb15ec9445675744
--! Message: functions: edge.functions catalog, reload notify, list

-- Enter migration here
--! Included functions/schema.sql
/*
 * why: the edge functions area's two schemas (design.md, Layout; contract §6). `edge` holds
 * the catalog the operator edits (`edge.functions`), readable and writable by the owner and
 * the service role only; `edge_private` holds what only the service's connecting role calls
 * (the catalog read, the reload trigger's function). No API role but service_role may use
 * `edge`; none may use `edge_private`.
 */
create schema if not exists edge;
revoke all on schema edge from public;
grant usage on schema edge to service_role;
comment on schema edge is E'plinth: edge functions catalog (contract §6); service_role and the owner only.';

create schema if not exists edge_private;
revoke all on schema edge_private from public;
comment on schema edge_private is E'plinth: edge functions internals (catalog read, reload trigger); no API role may use it.';
--! EndIncluded functions/schema.sql
--! Included functions/functions.sql
/*
 * why: the function catalog, exactly as contract §6 gives it. A row names a function and the
 * runtime that serves it: `deno` (forwarded to the edge runtime, FUNCTIONS_DIR/<name>/index.ts
 * for the bundled one) or `plv8` (the database function public.<name>(payload jsonb), any
 * language). Only `status = 'active'` rows are callable (interface §3.6 shows no other value;
 * anything else hides the function: 404). `verify_jwt` decides whether a call needs a
 * credential that verifies.
 *
 * Owned by the migrations; the owner and service_role write it (service_role through
 * /rest/v1 is not possible: REST exposes `public` only, so it is `psql`, a migration or
 * /api/sql). Nobody else may read it: the list endpoint is service_role too (§4.7).
 */
create table if not exists edge.functions (
  name text primary key,
  runtime text check (runtime in ('deno', 'plv8')),
  status text default 'active',
  verify_jwt boolean default true
);
comment on table edge.functions is E'plinth: the edge function catalog (contract §6). Changes reload every instance''s cache (trigger _100_notify).';
comment on column edge.functions.runtime is E'deno: forwarded to the edge runtime; plv8: runs public.<name>(payload jsonb) as the caller.';
comment on column edge.functions.status is E'active: callable; any other value: 404 function not found.';
comment on column edge.functions.verify_jwt is E'true: a credential that verifies is required (401 otherwise); false: no check.';

revoke all on table edge.functions from public;
grant select, insert, update, delete on table edge.functions to service_role;

/*
 * why: every instance keeps the catalog in memory and must follow any change to the table
 * without a restart (design.md, "Several instances"): after each statement that changes it,
 * NOTIFY the shared cache channel with payload `functions`. Statement level, so a bulk
 * insert notifies once; a rolled-back change notifies nothing (NOTIFY is sent at commit).
 * SECURITY DEFINER with a pinned search_path like every trigger the service installs.
 */
create or replace function edge_private.tg_functions__notify() returns trigger
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  perform pg_catalog.pg_notify('plinth_cache', 'functions');
  return null;
end
$$;
comment on function edge_private.tg_functions__notify() is E'plinth: notifies plinth_cache/functions after a change to edge.functions (catalog reload on every instance).';
revoke all on function edge_private.tg_functions__notify() from public;

drop trigger if exists _100_notify on edge.functions;
create trigger _100_notify after insert or update or delete or truncate on edge.functions
  for each statement execute function edge_private.tg_functions__notify();
--! EndIncluded functions/functions.sql
--! Included functions/catalog.sql
/*
 * why: the service's catalog cache is this one call's answer (one round trip, swapped in
 * whole): every row of edge.functions, and for `plv8` rows what calling
 * public.<name>(payload jsonb) needs to know: whether that function exists, whether it
 * returns a set, void, a composite or a scalar (to shape the JSON as RPC does, interface
 * §4.4 rule 2), and its volatility. Resolution is by the exact signature (jsonb); a plv8 row
 * without such a function is reported with `fn: null` and answers 404 `function not found`.
 * Privileges are not looked at: the call runs as the caller, and a missing grant is the
 * database's 403 (interface §7.2).
 */
create or replace function edge_private.catalog() returns json
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(json_agg(json_build_object(
           'name', f.name,
           'runtime', f.runtime,
           'status', f.status,
           'verify_jwt', f.verify_jwt,
           'fn', case when p.oid is null then null else json_build_object(
                   'returns_set', p.proretset,
                   'return_kind', case when p.prorettype = 'void'::regtype then 'void'
                                       when t.typtype = 'c' then 'composite'
                                       else 'scalar' end,
                   'volatility', p.provolatile) end
         ) order by f.name), '[]'::json)
    from edge.functions f
    left join pg_proc p
      on f.runtime = 'plv8'
     and p.oid = pg_catalog.to_regprocedure(pg_catalog.format('public.%I(jsonb)', f.name))
     and p.prokind = 'f'
    left join pg_type t on t.oid = p.prorettype
$$;
comment on function edge_private.catalog() is E'plinth: the edge function catalog with plv8 resolution, one JSON document for the service''s cache.';
revoke all on function edge_private.catalog() from public;

/*
 * why: GET /functions/v1/ (interface §4.7, service_role) lists Edge function entries (§2.6):
 * name, runtime, status, verify_jwt, straight from the table (not the cache), as the caller.
 */
create or replace function edge.function_list() returns json
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(json_agg(json_build_object(
           'name', f.name, 'runtime', f.runtime, 'status', f.status, 'verify_jwt', f.verify_jwt
         ) order by f.name), '[]'::json)
    from edge.functions f
$$;
comment on function edge.function_list() is E'plinth: GET /functions/v1/, the Edge function entries (interface §2.6).';
revoke all on function edge.function_list() from public;
grant execute on function edge.function_list() to service_role;
--! EndIncluded functions/catalog.sql
