--! Previous: sha1:70296d7f006a27435f92d66a8ff883400e9deeed
--! Hash: sha1:9c65fe16192faa27853322eabcbce07716b8b55a
--! Message: auth: GoTrue's flows under SUPABASE_COMPAT (otp with a mailed code, verify by code or token hash, logout scopes, GoTrue's user shape)

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

/* why: the User object as GoTrue shapes it (aud, app_metadata, identities, confirmed_at …). */
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
      'phone', '',
      'confirmed_at', auth_private.iso_utc(u.email_confirmed_at),
      'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at),
      'app_metadata', jsonb_build_object(
        'provider', case when u.is_anonymous then 'anonymous' else coalesce(u.provider, u.providers[1], 'email') end,
        'providers', case when u.is_anonymous then '[]'::jsonb
                          else to_jsonb(coalesce(nullif(u.providers, '{}'::text[]), array[coalesce(u.provider, 'email')])) end),
      'user_metadata', u.user_metadata,
      'identities', case when u.is_anonymous then '[]'::jsonb else (
        select coalesce(jsonb_agg(jsonb_build_object(
            'identity_id', u.id, 'id', u.id, 'user_id', u.id, 'provider', p,
            'identity_data', jsonb_build_object('sub', u.id, 'email', u.email, 'email_verified', u.email_confirmed_at is not null),
            'email', u.email,
            'created_at', auth_private.iso_utc(u.created_at), 'updated_at', auth_private.iso_utc(u.updated_at),
            'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at))), '[]'::jsonb)
          from unnest(coalesce(nullif(u.providers, '{}'::text[]), array[coalesce(u.provider, 'email')])) p) end,
      'created_at', auth_private.iso_utc(u.created_at),
      'updated_at', auth_private.iso_utc(u.updated_at),
      'is_anonymous', u.is_anonymous)
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
 * why: POST /auth/v1/otp (email) and POST /auth/v1/recover under SUPABASE_COMPAT. kind is
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
  insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at)
    values (compat_send_link.link_hash, v_user.id, compat_send_link.kind, v_user.email, now() + interval '1 hour'),
           (compat_send_link.code_hash, v_user.id, compat_send_link.kind, v_user.email, now() + interval '1 hour');
  perform graphile_worker.add_job('auth__send_email',
    json_build_object('kind', compat_send_link.kind, 'to', v_user.email, 'sealed_token', compat_send_link.sealed_token,
      'compat', json_build_object('sealed_code', compat_send_link.sealed_code, 'redirect_to', compat_send_link.redirect_to,
        'type', case when compat_send_link.kind = 'recovery' then 'recovery' when v_created then 'signup' else 'magiclink' end)),
    max_attempts => 5);
  if compat_send_link.kind = 'recovery' then
    perform auth_private.audit('recovery_requested', v_user.id, compat_send_link.context, '{}'::jsonb);
  end if;
  return case when v_created then 'created' else 'sent' end;
end
$$;
comment on function auth.compat_send_link(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, jsonb) is E'SUPABASE_COMPAT: issue a link token and a 6-digit code (1 h, once, either spends the other) and enqueue one mail. Status: sent | created | not_found | limited.';

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
 * Status: ok | invalid.
 */
create or replace function auth.compat_verify(kind text, token_hash bytea, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
  v_email text;
  v_issued_at timestamptz;
  v_created_by_it boolean;
begin
  if compat_verify.kind not in ('magic_link', 'recovery', 'verification') then
    return auth_private.session_status('invalid');
  end if;
  -- The user's row first (as the other token functions: no deadlock between two tokens).
  perform 1 from auth.users u join auth_private.one_time_tokens t on t.user_id = u.id
    where t.token_hash = compat_verify.token_hash for update of u;
  update auth_private.one_time_tokens t set used_at = now()
    from auth.users u
    where t.token_hash = compat_verify.token_hash and t.kind = compat_verify.kind
      and t.used_at is null and t.expires_at > now()
      and u.id = t.user_id and lower(u.email) = lower(t.email)
    returning t.user_id, u.email, t.created_at into v_user_id, v_email, v_issued_at;
  if not found then
    return auth_private.session_status('invalid');
  end if;
  select u.created_at = v_issued_at and u.updated_at = v_issued_at
         and not exists (select 1 from auth_private.passwords p where p.user_id = u.id)
    into v_created_by_it
    from auth.users u where u.id = v_user_id;
  if compat_verify.kind = 'verification' then
    perform auth_private.prove_address(v_user_id, v_email, 'verification', false);
  else
    perform auth_private.spend_other_tokens(v_user_id, compat_verify.token_hash);
    perform auth_private.prove_address(v_user_id, v_email, compat_verify.kind, not v_created_by_it);
  end if;
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return auth.start_session(v_user_id, compat_verify.refresh_token_hash, compat_verify.ttl_seconds, null,
    case compat_verify.kind when 'recovery' then 'recovery' when 'magic_link' then 'magiclink' else 'otp' end, compat_verify.context);
end
$$;
comment on function auth.compat_verify(text, bytea, bytea, integer, jsonb) is E'SUPABASE_COMPAT: use a magic-link, recovery or verification token and open a session in one transaction. Status: ok | invalid.';

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

revoke all on function auth_private.gotrue_user_json(auth.users), auth.compat_user(uuid),
  auth.compat_send_link(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, jsonb),
  auth.compat_verify(text, bytea, bytea, integer, jsonb), auth.compat_end_sessions(uuid, uuid, text, jsonb) from public;
--! EndIncluded auth/compat.sql
