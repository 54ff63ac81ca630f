--! Previous: sha1:291b78eb7b04c75437f3062c658c72f86d038083
--! Hash: sha1:f596efb956f20cd89d92d059ab1dcd55c22884f4
--! Message: core: claim helpers inlinable into RLS policies (no SET clause, names qualified)

-- Enter migration here
--! Included core/claims.sql
/*
 * why: RLS policies read the caller through these helpers (contract §5). The service sets
 * `request.jwt.claims` (JSON) and the role for every REST, RPC, batch, storage and plv8
 * call.
 *
 * They are `language sql stable` WITHOUT a `set search_path` clause, so the planner inlines
 * them into policies (a SET clause forbids inlining: `owner = auth.uid()` then costs a
 * function call per row, measured 4x slower on a 150k-row scan). They are not security
 * definer, and every function, operator and type is qualified with pg_catalog (coalesce
 * and nullif are syntax, not functions), so no caller's search_path can redirect them.
 */
create schema if not exists auth;
grant usage on schema auth to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
comment on schema auth is E'plinth: accounts and the claim helpers. Secrets live in auth_private.';

create or replace function auth.jwt() returns pg_catalog.jsonb
  language sql stable
as $$
  select coalesce(nullif(pg_catalog.current_setting('request.jwt.claims', true), ''), '{}')::pg_catalog.jsonb
$$;
comment on function auth.jwt() is E'All claims of the calling request as jsonb ({} outside a request). Inlinable.';

create or replace function auth.uid() returns pg_catalog.uuid
  language sql stable
as $$
  select nullif(
    coalesce(nullif(pg_catalog.current_setting('request.jwt.claims', true), ''), '{}')::pg_catalog.jsonb
      operator(pg_catalog.->>) 'sub',
    '')::pg_catalog.uuid
$$;
comment on function auth.uid() is E'The calling user''s id (claim sub), or null. Inlinable.';

create or replace function auth.role() returns pg_catalog.text
  language sql stable
as $$
  select coalesce(nullif(pg_catalog.current_setting('request.jwt.claims', true), ''), '{}')::pg_catalog.jsonb
    operator(pg_catalog.->>) 'role'
$$;
comment on function auth.role() is E'The calling request''s role claim (anon, authenticated, service_role or the guest role). Inlinable.';

revoke all on function auth.jwt(), auth.uid(), auth.role() from public;
grant execute on function auth.jwt(), auth.uid(), auth.role() to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded core/claims.sql
