--! Previous: sha1:d0e55424f2c48ddb99d564ab5ea1066d1fd3eec0
--! Hash: sha1:df5543392132a82d3effda2d84677365392674b8
--! Message: compat: PKCE flow states, the admin API in GoTrue's shapes

-- Enter migration here
--! Included auth/compat.sql
/*
 * why: SUPABASE_COMPAT=true (docs/api/supabase.md): the state behind the GoTrue-shaped
 * routes. The one-time token machinery is the one of one_time_tokens.sql: a mail of
 * POST /auth/v1/otp or /recover carries two secrets bound to the address, a link token and
 * a 6-digit code, stored as two rows of the same kind (by SHA-256; the code's hash is
 * taken over the address and the code, so it names one address). Using either spends the
 * other (spend_other_tokens). Nothing here runs unless the setting is on.
 */

/* why: the User object as GoTrue shapes it (aud, app_metadata with what an admin set, identities, confirmed_at, invited_at and banned_until when set …). */
create or replace function auth_private.gotrue_user_json(u auth.users) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select jsonb_build_object(
      'id', u.id,
      'aud', 'authenticated',
      'role', u.role,
      'email', coalesce(u.email, ''),
      'email_confirmed_at', auth_private.iso_utc(u.email_confirmed_at),
      'phone', coalesce(substr(u.phone, 2), ''),
      'phone_confirmed_at', auth_private.iso_utc(u.phone_confirmed_at),
      'confirmed_at', auth_private.iso_utc(coalesce(u.email_confirmed_at, u.phone_confirmed_at)),
      'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at),
      'app_metadata', u.app_metadata || jsonb_build_object(
        'provider', case when u.is_anonymous then 'anonymous' else coalesce(u.provider, u.providers[1], 'email') end,
        'providers', case when u.is_anonymous then '[]'::jsonb
                          else to_jsonb(coalesce(nullif(u.providers, '{}'::text[]), array[coalesce(u.provider, 'email')])) end),
      'user_metadata', u.user_metadata,
      'identities', case when u.is_anonymous then '[]'::jsonb else (
        select coalesce(jsonb_agg(jsonb_build_object(
            'identity_id', u.id, 'id', u.id, 'user_id', u.id, 'provider', p,
            'identity_data', case when p = 'phone'
              then jsonb_build_object('sub', u.id, 'phone', substr(u.phone, 2), 'phone_verified', u.phone_confirmed_at is not null)
              else jsonb_build_object('sub', u.id, 'email', u.email, 'email_verified', u.email_confirmed_at is not null) end,
            'email', u.email,
            'created_at', auth_private.iso_utc(u.created_at), 'updated_at', auth_private.iso_utc(u.updated_at),
            'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at))), '[]'::jsonb)
          from unnest(coalesce(nullif(u.providers, '{}'::text[]), array[coalesce(u.provider, 'email')])) p) end,
      'created_at', auth_private.iso_utc(u.created_at),
      'updated_at', auth_private.iso_utc(u.updated_at),
      'is_anonymous', u.is_anonymous)
    -- GoTrue omits these when empty (omitempty).
    || jsonb_strip_nulls(jsonb_build_object('invited_at', auth_private.iso_utc(u.invited_at),
         'banned_until', case when u.banned_until > now() then auth_private.iso_utc(u.banned_until) end))
    || auth_private.factors_json(u.id)
$$;
comment on function auth_private.gotrue_user_json(auth.users) is E'SUPABASE_COMPAT: the User object with GoTrue''s fields.';

/* why: the GoTrue User object of an id, for replies under SUPABASE_COMPAT; null when the user is gone. */
create or replace function auth.compat_user(user_id uuid) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select auth_private.gotrue_user_json(u) from auth.users u where u.id = compat_user.user_id
$$;
comment on function auth.compat_user(uuid) is E'SUPABASE_COMPAT: the GoTrue User object of an id, or null.';

/*
 * why: a link and a code in one mail, for both modes: POST /auth/v1/otp (email) and
 * POST /auth/v1/recover under SUPABASE_COMPAT, and the interface's POST /auth/v1/magiclink
 * (and /otp with an email) with `redirect_to` null: then the job carries no `compat` and the
 * mail is the interface's, its code beside the link (`sealed_code`). kind is
 * magic_link or recovery. With create_user, an unknown address gets an account (no
 * password, unconfirmed, `data` as user_metadata), as GoTrue's signInWithOtp does; without,
 * an unknown address is not_found (the route says so for otp, and answers the same for
 * recovery). The link token and the code are issued together, the mail enqueued once;
 * the address's earlier unused tokens of the kind are spent (only the latest mail works).
 * Status: sent | created | not_found | limited.
 */
create or replace function auth.compat_send_link(kind text, email text, create_user boolean, user_metadata jsonb,
    link_hash bytea, sealed_token text, code_hash bytea, sealed_code text, redirect_to text, mail_limit integer, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed boolean := auth_private.mail_allowed(compat_send_link.email, compat_send_link.mail_limit);
  v_user auth.users;
  v_created boolean := false;
begin
  if compat_send_link.kind not in ('magic_link', 'recovery') then
    raise exception 'unknown kind %', compat_send_link.kind using errcode = 'PT400';
  end if;
  select * into v_user from auth.users u where lower(u.email) = lower(compat_send_link.email) for update;
  if v_user.id is null and compat_send_link.create_user and compat_send_link.kind = 'magic_link' and v_allowed then
    insert into auth.users (email, user_metadata, providers)
      values (lower(compat_send_link.email), coalesce(compat_send_link.user_metadata, '{}'::jsonb), '{email}')
      returning * into v_user;
    v_created := true;
    perform auth_private.audit('sign_up', v_user.id, compat_send_link.context, '{"method": "otp"}'::jsonb);
  end if;
  if v_user.id is null or not v_allowed then
    perform auth_private.enqueue_no_mail(compat_send_link.kind);
    return case when v_user.id is null then 'not_found' else 'limited' end;
  end if;
  update auth_private.one_time_tokens t set used_at = now()
    where t.user_id = v_user.id and t.kind = compat_send_link.kind and t.used_at is null;
  -- A code's hash names its address: an old row with the same hash is this address's own, spent.
  delete from auth_private.one_time_tokens t where t.token_hash = compat_send_link.code_hash;
  insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, is_code, expires_at)
    values (compat_send_link.link_hash, v_user.id, compat_send_link.kind, v_user.email, false, now() + interval '1 hour'),
           (compat_send_link.code_hash, v_user.id, compat_send_link.kind, v_user.email, true, now() + interval '1 hour');
  perform graphile_worker.add_job('auth__send_email',
    json_build_object('kind', compat_send_link.kind, 'to', v_user.email, 'sealed_token', compat_send_link.sealed_token,
      'sealed_code', compat_send_link.sealed_code,
      'compat', case when compat_send_link.redirect_to is not null then
        json_build_object('sealed_code', compat_send_link.sealed_code, 'redirect_to', compat_send_link.redirect_to,
          'type', case when compat_send_link.kind = 'recovery' then 'recovery' when v_created then 'signup' else 'magiclink' end) end),
    max_attempts => 5);
  if compat_send_link.kind = 'recovery' then
    perform auth_private.audit('recovery_requested', v_user.id, compat_send_link.context, '{}'::jsonb);
  end if;
  return case when v_created then 'created' else 'sent' end;
end
$$;
comment on function auth.compat_send_link(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, jsonb) is E'Issue a link token and a 6-digit code (1 h, once, either spends the other) and enqueue one mail (GoTrue''s with a redirect_to, the interface''s without). Status: sent | created | not_found | limited.';

/*
 * why: POST/GET /auth/v1/verify under SUPABASE_COMPAT: use a token of `kind` and open a
 * session in one transaction, as GoTrue answers a verification.
 * - magic_link: as auth.verify_magic_link (the address proven, the other tokens spent),
 *   except for an account this very mail created (POST /otp with create_user) and nothing
 *   changed since: its user_metadata is the `data` of that request and stays (GoTrue's
 *   signInWithOtp keeps it); anything else proven for the first time loses what may have
 *   been planted (prove_address with purge).
 * - recovery: the address proven, the other tokens spent, no password changed: the
 *   session opened here sets it (PUT /auth/v1/user).
 * - verification: the sign-up confirmed (its data kept, as auth.verify_email), spent.
 * `method` (the amr entry) is otp when a code was used (auth.verify_code); by default the kind's.
 * Status: ok | invalid.
 */
create or replace function auth_private.compat_use_token(kind text, token_hash bytea) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
  v_email text;
  v_issued_at timestamptz;
  v_created_by_it boolean;
begin
  if compat_use_token.kind not in ('magic_link', 'recovery', 'verification') then
    return null;
  end if;
  select s.user_id, s.email, s.issued_at into v_user_id, v_email, v_issued_at
    from auth_private.spend_one_time_token(compat_use_token.token_hash, compat_use_token.kind) s;
  if not found then
    return null;
  end if;
  select u.created_at = v_issued_at and u.updated_at = v_issued_at
         and not exists (select 1 from auth_private.passwords p where p.user_id = u.id)
    into v_created_by_it
    from auth.users u where u.id = v_user_id;
  if compat_use_token.kind = 'verification' then
    perform auth_private.prove_address(v_user_id, v_email, 'verification', false);
  else
    perform auth_private.spend_other_tokens(v_user_id, compat_use_token.token_hash);
    perform auth_private.prove_address(v_user_id, v_email, compat_use_token.kind, not v_created_by_it);
  end if;
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return v_user_id;
end
$$;
comment on function auth_private.compat_use_token(text, bytea) is E'SUPABASE_COMPAT: use a magic-link, recovery or verification token (the rules of auth.compat_verify): its user, or null when it is invalid. Internal.';

drop function if exists auth.compat_verify(text, bytea, bytea, integer, jsonb);
create or replace function auth.compat_verify(kind text, token_hash bytea, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null,
    method text default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid := auth_private.compat_use_token(compat_verify.kind, compat_verify.token_hash);
begin
  if v_user_id is null then
    return auth_private.session_status('invalid');
  end if;
  return auth.start_session(v_user_id, compat_verify.refresh_token_hash, compat_verify.ttl_seconds, null,
    coalesce(compat_verify.method, case compat_verify.kind when 'recovery' then 'recovery' when 'magic_link' then 'magiclink' else 'otp' end),
    compat_verify.context);
end
$$;
comment on function auth.compat_verify(text, bytea, bytea, integer, jsonb, text) is E'SUPABASE_COMPAT: use a magic-link, recovery or verification token and open a session in one transaction. Status: ok | invalid.';

/*
 * why: POST /auth/v1/logout?scope= under SUPABASE_COMPAT: local ends the caller's family,
 * others every other family of the user, global all of them.
 * Status: ok.
 */
create or replace function auth.compat_end_sessions(user_id uuid, session_id uuid, scope text, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  update auth_private.sessions s set revoked_at = now(), revoked_reason = 'logout'
    where s.user_id = compat_end_sessions.user_id and s.revoked_at is null
      and case compat_end_sessions.scope
            when 'local' then s.id = compat_end_sessions.session_id
            when 'others' then s.id is distinct from compat_end_sessions.session_id
            else true end;
  perform auth_private.audit('sign_out', compat_end_sessions.user_id, compat_end_sessions.context,
    jsonb_build_object('scope', compat_end_sessions.scope));
  return 'ok';
end
$$;
comment on function auth.compat_end_sessions(uuid, uuid, text, jsonb) is E'SUPABASE_COMPAT: end the caller''s, the other, or all sessions of a user. Status: ok.';

revoke all on function auth_private.gotrue_user_json(auth.users), auth.compat_user(uuid), auth_private.compat_use_token(text, bytea),
  auth.compat_send_link(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, jsonb),
  auth.compat_verify(text, bytea, bytea, integer, jsonb, text), auth.compat_end_sessions(uuid, uuid, text, jsonb) from public;
--! EndIncluded auth/compat.sql
--! Included auth/compat_pkce.sql
/*
 * why: SUPABASE_COMPAT=true (docs/api/supabase.md, "PKCE"): supabase-js's `flowType: 'pkce'`.
 * A mail of POST /auth/v1/otp or /recover that came with a `code_challenge` has a flow
 * state, bound to the mail's link token (GoTrue's `flow_state`). Opening the link uses
 * the token as the implicit flow does, but instead of a session it issues an auth code
 * (`?code=…` on the redirect), stored by SHA-256; POST /auth/v1/token?grant_type=pkce
 * with that code and the code verifier whose challenge was stored opens the session.
 * A flow state is used once (right verifier or not), and its code lives 5 minutes
 * (GoTrue's FlowStateExpiryDuration); an unopened one goes with its link (1 hour).
 * Nothing here runs unless the setting is on.
 */
create table if not exists auth_private.flow_states (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  link_hash bytea unique,
  auth_code_hash bytea unique,
  code_challenge text not null,
  code_challenge_method text not null,
  authentication_method text not null,
  created_at timestamptz not null default now(),
  auth_code_issued_at timestamptz,
  constraint flow_states_challenge_check check (code_challenge ~ '^[A-Za-z0-9._~-]{43,128}$'),
  constraint flow_states_challenge_method_check check (code_challenge_method in ('s256', 'plain')),
  constraint flow_states_authentication_method_check check (authentication_method in ('magiclink', 'recovery'))
);
create index if not exists flow_states_created_at_idx on auth_private.flow_states (created_at);
comment on table auth_private.flow_states is E'SUPABASE_COMPAT: PKCE flow states (GoTrue''s flow_state): the code challenge of a mailed link, then its auth code (SHA-256), used once.';

/* why: RFC 7636 §4.6: does the verifier answer the challenge (S256: base64url(sha256(verifier)) without padding)? */
create or replace function auth_private.pkce_matches(challenge text, method text, verifier text) returns boolean
  language sql immutable
  set search_path = pg_catalog, pg_temp
as $$
  select case pkce_matches.method
    when 'plain' then pkce_matches.verifier = pkce_matches.challenge
    when 's256' then rtrim(translate(encode(sha256(convert_to(pkce_matches.verifier, 'UTF8')), 'base64'), '+/', '-_'), '=') = pkce_matches.challenge
    else false end
$$;
comment on function auth_private.pkce_matches(text, text, text) is E'SUPABASE_COMPAT: whether a PKCE code verifier answers a challenge (s256 or plain).';

/*
 * why: POST /auth/v1/otp and /recover with a code_challenge: auth.compat_send_link, and,
 * when a mail went out, the flow state bound to its link token, in the same transaction.
 * Status: as auth.compat_send_link.
 */
create or replace function auth.compat_send_link_pkce(kind text, email text, create_user boolean, user_metadata jsonb,
    link_hash bytea, sealed_token text, code_hash bytea, sealed_code text, redirect_to text, mail_limit integer,
    code_challenge text, code_challenge_method text, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_status text;
begin
  if lower(compat_send_link_pkce.code_challenge_method) not in ('s256', 'plain')
     or compat_send_link_pkce.code_challenge !~ '^[A-Za-z0-9._~-]{43,128}$' then
    raise exception 'invalid code challenge' using errcode = 'PT400';
  end if;
  -- Housekeeping: flow states whose link and code are both past use.
  delete from auth_private.flow_states f where f.created_at < now() - interval '1 hour 5 minutes';
  v_status := auth.compat_send_link(compat_send_link_pkce.kind, compat_send_link_pkce.email, compat_send_link_pkce.create_user,
    compat_send_link_pkce.user_metadata, compat_send_link_pkce.link_hash, compat_send_link_pkce.sealed_token,
    compat_send_link_pkce.code_hash, compat_send_link_pkce.sealed_code, compat_send_link_pkce.redirect_to,
    compat_send_link_pkce.mail_limit, compat_send_link_pkce.context);
  if v_status in ('sent', 'created') then
    insert into auth_private.flow_states (user_id, link_hash, code_challenge, code_challenge_method, authentication_method)
      select t.user_id, t.token_hash, compat_send_link_pkce.code_challenge, lower(compat_send_link_pkce.code_challenge_method),
             case compat_send_link_pkce.kind when 'recovery' then 'recovery' else 'magiclink' end
        from auth_private.one_time_tokens t where t.token_hash = compat_send_link_pkce.link_hash;
  end if;
  return v_status;
end
$$;
comment on function auth.compat_send_link_pkce(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, text, text, jsonb) is E'SUPABASE_COMPAT: auth.compat_send_link with a PKCE flow state bound to the link. Status: sent | created | not_found | limited.';

/*
 * why: GET /auth/v1/verify under SUPABASE_COMPAT, before the implicit flow: a link with a
 * flow state is used (the rules of auth.compat_verify) and issues the auth code instead
 * of a session. Status: implicit (no flow state: the caller opens a session as before)
 * | ok (the code is issued) | invalid.
 */
create or replace function auth.compat_verify_pkce(kind text, token_hash bytea, auth_code_hash bytea)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_flow auth_private.flow_states;
begin
  select * into v_flow from auth_private.flow_states f where f.link_hash = compat_verify_pkce.token_hash for update;
  if not found then
    return 'implicit';
  end if;
  if auth_private.compat_use_token(compat_verify_pkce.kind, compat_verify_pkce.token_hash) is distinct from v_flow.user_id then
    return 'invalid';
  end if;
  update auth_private.flow_states f
     set link_hash = null, auth_code_hash = compat_verify_pkce.auth_code_hash, auth_code_issued_at = now()
   where f.id = v_flow.id;
  return 'ok';
end
$$;
comment on function auth.compat_verify_pkce(text, bytea, bytea) is E'SUPABASE_COMPAT: use a mailed link of a PKCE flow and issue its auth code (SHA-256 given). Status: implicit | ok | invalid.';

/*
 * why: POST /auth/v1/token?grant_type=pkce under SUPABASE_COMPAT: the flow state of the
 * auth code is spent whatever follows (a code is tried once); its code lives 5 minutes;
 * the verifier must answer the challenge; then a session opens with the flow's method.
 * Status: ok | not_found | expired | bad_verifier | user_not_found.
 */
create or replace function auth.compat_exchange_pkce(auth_code_hash bytea, code_verifier text, refresh_token_hash bytea,
    ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_flow auth_private.flow_states;
begin
  delete from auth_private.flow_states f where f.auth_code_hash = compat_exchange_pkce.auth_code_hash
    returning * into v_flow;
  if not found then
    return auth_private.session_status('not_found');
  end if;
  if v_flow.auth_code_issued_at < now() - interval '5 minutes' then
    return auth_private.session_status('expired');
  end if;
  if not auth_private.pkce_matches(v_flow.code_challenge, v_flow.code_challenge_method, compat_exchange_pkce.code_verifier) then
    return auth_private.session_status('bad_verifier');
  end if;
  return auth.start_session(v_flow.user_id, compat_exchange_pkce.refresh_token_hash, compat_exchange_pkce.ttl_seconds, null,
    v_flow.authentication_method, compat_exchange_pkce.context);
end
$$;
comment on function auth.compat_exchange_pkce(bytea, text, bytea, integer, jsonb) is E'SUPABASE_COMPAT: exchange a PKCE auth code and its verifier for a session (the flow spent either way). Status: ok | not_found | expired | bad_verifier | user_not_found.';

revoke all on table auth_private.flow_states from public;
revoke all on function auth_private.pkce_matches(text, text, text),
  auth.compat_send_link_pkce(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, text, text, jsonb),
  auth.compat_verify_pkce(text, bytea, bytea), auth.compat_exchange_pkce(bytea, text, bytea, integer, jsonb) from public;
--! EndIncluded auth/compat_pkce.sql
--! Included auth/compat_admin.sql
/*
 * why: SUPABASE_COMPAT=true (docs/api/supabase.md, "Admin API"): supabase-js's
 * `auth.admin` reads GoTrue's shapes. The rules stay those of the admin functions
 * (admin.sql, admin_users.sql); these only page the list and take GoTrue's fields.
 */

/*
 * why: GET /auth/v1/admin/users?page=&per_page= as GoTrue answers it: newest first, a page
 * of GoTrue User objects and the total (for X-Total-Count and Link).
 */
create or replace function auth.compat_list_users(page integer, per_page integer)
  returns table (total bigint, users jsonb)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select (select count(*) from auth.users),
         coalesce((select jsonb_agg(auth_private.gotrue_user_json(p) order by p.created_at desc, p.id desc)
                     from (select * from auth.users u order by u.created_at desc, u.id desc
                            limit greatest(compat_list_users.per_page, 1)
                            offset (greatest(compat_list_users.page, 1) - 1)::bigint * greatest(compat_list_users.per_page, 1)) p),
                  '[]'::jsonb)
$$;
comment on function auth.compat_list_users(integer, integer) is E'SUPABASE_COMPAT: a page of users (newest first) as GoTrue User objects, and the total.';

/*
 * why: POST /auth/v1/admin/users under SUPABASE_COMPAT (supabase-js createUser): as
 * auth.admin_create_user, with GoTrue's user_metadata and app_metadata set in the same
 * transaction (app_metadata's provider and providers stay the server's).
 * Status: ok | email_taken.
 */
create or replace function auth.compat_admin_create_user(email text, password_hash text, role text, email_confirm boolean,
    user_metadata jsonb, app_metadata jsonb, context jsonb default null)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_status text;
  v_json jsonb;
begin
  select c.status, c.user_json into v_status, v_json
    from auth.admin_create_user(compat_admin_create_user.email, compat_admin_create_user.password_hash, compat_admin_create_user.role,
      compat_admin_create_user.email_confirm, compat_admin_create_user.context) c;
  if v_status <> 'ok' then
    return query select v_status, null::jsonb;
    return;
  end if;
  update auth.users u
     set user_metadata = coalesce(compat_admin_create_user.user_metadata, u.user_metadata),
         app_metadata = coalesce(compat_admin_create_user.app_metadata - 'provider' - 'providers', u.app_metadata)
   where u.id = (v_json ->> 'id')::uuid;
  return query select 'ok'::text, auth.compat_user((v_json ->> 'id')::uuid);
end
$$;
comment on function auth.compat_admin_create_user(text, text, text, boolean, jsonb, jsonb, jsonb) is E'SUPABASE_COMPAT: auth.admin_create_user with user_metadata and app_metadata; the GoTrue User. Status: ok | email_taken.';

revoke all on function auth.compat_list_users(integer, integer),
  auth.compat_admin_create_user(text, text, text, boolean, jsonb, jsonb, jsonb) from public;
--! EndIncluded auth/compat_admin.sql
