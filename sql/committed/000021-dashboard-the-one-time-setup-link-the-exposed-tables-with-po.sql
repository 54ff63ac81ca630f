--! Previous: sha1:4c949a3851b16a585b84276537c725b36853a3af
--! Hash: sha1:7d5aa1ad4eb23bbd94f4ab3ae2c2f6c6e338af9f
--! Message: dashboard: the one-time setup link, the exposed tables with policies and grants, the live registry; auth: a user's sessions listed and ended by an admin, an address confirmed by hand

--! Included dashboard/dashboard.sql
/*
 * why: the dashboard at /_/ has no back door: every view reads plinth's documented HTTP
 * endpoints. These functions serve the endpoints that only the dashboard needed (the setup
 * link that creates the first admin, the description of the exposed tables with their
 * policies and grants, the live registry). They run as the service's owner role; the
 * routes check the service-role credential first.
 */
create schema if not exists dashboard_private;
comment on schema dashboard_private is E'plinth: the dashboard''s state (the one-time setup link).';

/* why: one setup link at a time, valid one hour, used once; kept in clear so that a restart
   can show the same link again while it is unused (it creates an admin only while no
   service_role account exists, so it is worthless once one does). */
create table if not exists dashboard_private.setup_tokens (
  token text primary key,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null default now() + interval '1 hour',
  used_at timestamptz
);
comment on table dashboard_private.setup_tokens is E'plinth: one-time links that create the first dashboard admin.';

/* why: the link that `npm start` prints. Null when an account of role service_role exists
   (there is an admin: nothing to set up); otherwise the unused, unexpired token, or
   `candidate` (random, made by the service) stored as the new one. */
create or replace function dashboard_private.setup_token(candidate text) returns text
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_token text;
begin
  if exists (select 1 from auth.users where role = 'service_role') then
    return null;
  end if;
  select token into v_token from dashboard_private.setup_tokens
    where used_at is null and expires_at > now() order by created_at desc limit 1;
  if v_token is null then
    v_token := candidate;
    insert into dashboard_private.setup_tokens (token) values (v_token);
  end if;
  delete from dashboard_private.setup_tokens where expires_at < now() - interval '1 day';
  return v_token;
end
$$;

/* why: POST /api/dashboard/setup. Uses the token and creates the first admin in one
   transaction: `invalid` for an unknown, used or expired token, `admin_exists` when a
   service_role account exists already (the link is spent), else admin_create_user's status. */
create or replace function dashboard_private.setup_admin(token text, email text, password_hash text)
  returns table (status text, user_json jsonb)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_used int;
begin
  update dashboard_private.setup_tokens t set used_at = now()
    where t.token = setup_admin.token and t.used_at is null and t.expires_at > now();
  get diagnostics v_used = row_count;
  if v_used = 0 then
    return query select 'invalid'::text, null::jsonb;
    return;
  end if;
  perform pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('plinth dashboard setup'));
  if exists (select 1 from auth.users where role = 'service_role') then
    return query select 'admin_exists'::text, null::jsonb;
    return;
  end if;
  return query select * from auth.admin_create_user(setup_admin.email, setup_admin.password_hash, 'service_role', true);
end
$$;

/* why: GET /api/tables: what REST exposes, as a DBA reviews it: every table and view of
   public with its columns, primary key, row-level security, policies and the privileges of
   each API role. */
create or replace function dashboard_private.tables(api_roles text[]) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(jsonb_agg(t order by t->>'name'), '[]'::jsonb)
  from (
    select jsonb_build_object(
      'name', c.relname,
      'kind', case c.relkind when 'r' then 'table' when 'p' then 'table' when 'v' then 'view'
                             when 'm' then 'materialized view' when 'f' then 'foreign table' end,
      'rls', c.relrowsecurity,
      'rls_forced', c.relforcerowsecurity,
      'columns', (
        select coalesce(jsonb_agg(jsonb_build_object(
            'name', a.attname,
            'type', format_type(a.atttypid, a.atttypmod),
            'nullable', not a.attnotnull,
            'default', pg_get_expr(d.adbin, d.adrelid),
            'primary_key', coalesce(a.attnum = any (pk.conkey), false),
            'generated', a.attidentity <> '' or a.attgenerated <> '')
          order by a.attnum), '[]'::jsonb)
        from pg_attribute a
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped),
      'policies', (
        select coalesce(jsonb_agg(jsonb_build_object(
            'name', p.polname,
            'command', case p.polcmd when 'r' then 'select' when 'a' then 'insert' when 'w' then 'update'
                                     when 'd' then 'delete' else 'all' end,
            'permissive', p.polpermissive,
            'roles', (select coalesce(jsonb_agg(case when r = 0 then 'public' else pg_get_userbyid(r)::text end), '[]'::jsonb)
                      from unnest(p.polroles) r),
            'using', pg_get_expr(p.polqual, p.polrelid),
            'with_check', pg_get_expr(p.polwithcheck, p.polrelid))
          order by p.polname), '[]'::jsonb)
        from pg_policy p where p.polrelid = c.oid),
      'grants', (
        select jsonb_object_agg(r.rolname, (
          select coalesce(jsonb_agg(priv order by ord), '[]'::jsonb)
          from unnest(array['select', 'insert', 'update', 'delete']) with ordinality as x(priv, ord)
          where has_table_privilege(r.oid, c.oid, priv)))
        from pg_roles r where r.rolname = any (api_roles))
    ) as t
    from pg_class c
    left join pg_constraint pk on pk.conrelid = c.oid and pk.contype = 'p'
    where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p', 'v', 'm', 'f')
  ) s(t)
$$;

/* why: GET /api/live: the registered live queries as the database holds them (every
   instance's view is the same), and presence per channel across live instances. */
create or replace function dashboard_private.live_registry() returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object(
    'queries', (
      select coalesce(jsonb_agg(jsonb_build_object(
          'query_id', s.query_id, 'query', s.query, 'mode', s.mode, 'audience', s.audience,
          'registered_by', s.registered_by, 'seq', s.seq, 'registered_at', s.registered_at)
        order by s.query_id), '[]'::jsonb)
      from live_private.subscriptions s),
    'presence', (
      select coalesce(jsonb_agg(jsonb_build_object('channel', p.channel, 'clients', p.n) order by p.channel), '[]'::jsonb)
      from (select channel, count(*) as n from live_private.presence group by channel) p))
$$;

revoke all on function dashboard_private.setup_token(text), dashboard_private.setup_admin(text, text, text),
  dashboard_private.tables(text[]), dashboard_private.live_registry() from public;
--! EndIncluded dashboard/dashboard.sql
--! Included auth/admin_sessions.sql
/*
 * why: the admin view of a user's sessions (refresh-token families), for the dashboard's
 * Users view: list them, end one (every refresh token of the family stops working at once;
 * access tokens already issued run to their expiry, as after a logout), and confirm an
 * address by hand. The service checks the service-role credential; these own the rows.
 */
alter table auth_private.sessions drop constraint if exists sessions_revoked_reason_check;
alter table auth_private.sessions add constraint sessions_revoked_reason_check
  check (revoked_reason is null or revoked_reason in ('logout', 'reuse_detected', 'password_recovery', 'address_proven', 'account_changed', 'admin'));

/* why: GET /auth/v1/admin/users/{id}/sessions, newest first; null when the user does not exist. */
create or replace function auth.admin_list_sessions(user_id uuid) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select case when not exists (select 1 from auth.users u where u.id = admin_list_sessions.user_id) then null else
    coalesce((
      select jsonb_agg(jsonb_build_object(
          'id', s.id,
          'created_at', auth_private.iso_utc(s.created_at),
          'refreshed_at', auth_private.iso_utc((select max(t.created_at) from auth_private.refresh_tokens t where t.session_id = s.id)),
          'expires_at', auth_private.iso_utc((select max(t.expires_at) from auth_private.refresh_tokens t where t.session_id = s.id)),
          'revoked_at', auth_private.iso_utc(s.revoked_at),
          'revoked_reason', s.revoked_reason)
        order by s.created_at desc, s.id)
      from auth_private.sessions s where s.user_id = admin_list_sessions.user_id), '[]'::jsonb)
  end
$$;

/* why: DELETE /auth/v1/admin/users/{id}/sessions/{session_id}. Status: ok | not_found (no such
   live session of that user; one already ended counts as not found). */
create or replace function auth.admin_revoke_session(user_id uuid, session_id uuid) returns text
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  with ended as (
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'admin'
    where s.id = admin_revoke_session.session_id and s.user_id = admin_revoke_session.user_id and s.revoked_at is null
    returning 1
  )
  select case when exists (select 1 from ended) then 'ok' else 'not_found' end
$$;

/* why: PUT /auth/v1/admin/users/{id} with email_confirm: the address counts as confirmed (true)
   or not (false). Returns the User object, or null when the user does not exist. */
create or replace function auth.admin_confirm_email(user_id uuid, confirmed boolean) returns jsonb
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  update auth.users u
    set email_confirmed_at = case when admin_confirm_email.confirmed then coalesce(u.email_confirmed_at, now()) end
    where u.id = admin_confirm_email.user_id
    returning auth_private.user_json(u)
$$;

revoke all on function auth.admin_list_sessions(uuid), auth.admin_revoke_session(uuid, uuid), auth.admin_confirm_email(uuid, boolean) from public;
--! EndIncluded auth/admin_sessions.sql
