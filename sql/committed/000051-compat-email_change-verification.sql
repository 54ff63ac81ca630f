--! Previous: sha1:aae9e25fca6aefc7b23e250d0056adea0c81319e
--! Hash: sha1:4fea1aee598dfa20c958139f0e00f67ee1e82422
--! Message: compat: email_change verification

-- Enter migration here
--! Included auth/email_change.sql
/*
 * why: SUPABASE_COMPAT=true (docs/api/supabase.md, "Changing the address"): GoTrue's
 * email_change flow. `updateUser({email})` does not change the address at once: the new
 * address waits here (GoTrue's auth.users.email_change, email_change_token_new,
 * email_change_sent_at) until the mail sent to it is used: its link (token_hash) or its
 * 6-digit code. Single confirmation (the new address only, as GoTrue with
 * mailer_secure_email_change_enabled=false). One pending change per user: a new request
 * replaces the former (its link and code stop working). Nothing here runs unless the
 * setting is on; without it an address changes at once (auth.update_user).
 *
 * States: none → pending (requested) → applied (row gone, address changed)
 *                 pending → replaced | expired (1 hour) | burnt (MAX_CODE_ATTEMPTS wrong codes).
 */
create table if not exists auth_private.email_changes (
  user_id uuid primary key references auth.users (id) on delete cascade,
  new_email text not null,
  link_hash bytea not null unique,
  code_hash bytea not null,
  sent_at timestamptz not null default now(),
  expires_at timestamptz not null,
  failed_attempts integer not null default 0,
  constraint email_changes_link_hash_check check (octet_length(link_hash) = 32),
  constraint email_changes_code_hash_check check (octet_length(code_hash) = 32),
  constraint email_changes_lower_check check (new_email = lower(new_email))
);
create index if not exists email_changes_new_email_idx on auth_private.email_changes (new_email);
comment on table auth_private.email_changes is E'plinth (SUPABASE_COMPAT): a user''s pending address change, by the SHA-256 of its link token and of its 6-digit code (1 hour).';

/*
 * why: PUT /auth/v1/user with an email under SUPABASE_COMPAT. The account's row is locked,
 * then: the same address (any case) is no change (`unchanged`); a guest or an account
 * without an address takes the interface's path (`direct`: auth.update_user decides); with
 * a verified factor the change needs aal2 (`insufficient_aal`, as auth.update_user); an
 * address another account holds is `email_taken`; over MAIL_RATE_LIMIT_PER_HOUR for the new
 * address is `limited` (nothing stored). Otherwise the pending change is stored (replacing
 * any former one) and the email_change mail (GoTrue's link to GET /auth/v1/verify and the
 * code) is enqueued to the new address in the same transaction.
 * Status: pending | unchanged | direct | insufficient_aal | email_taken | limited | not_found.
 */
create or replace function auth.compat_request_email_change(user_id uuid, email text, aal text, link_hash bytea, sealed_token text,
    code_hash bytea, sealed_code text, redirect_to text, mail_limit integer, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
  v_new text := lower(compat_request_email_change.email);
begin
  select * into v_user from auth.users u where u.id = compat_request_email_change.user_id for update;
  if v_user.id is null then
    return 'not_found';
  end if;
  if v_user.is_anonymous or v_user.email is null then
    return 'direct';
  end if;
  if lower(v_user.email) = v_new then
    return 'unchanged';
  end if;
  if compat_request_email_change.aal is distinct from 'aal2'
     and exists (select 1 from auth_private.mfa_factors f where f.user_id = v_user.id and f.status = 'verified') then
    return 'insufficient_aal';
  end if;
  if exists (select 1 from auth.users u where lower(u.email) = v_new) then
    return 'email_taken';
  end if;
  if not auth_private.mail_allowed(v_new, compat_request_email_change.mail_limit) then
    return 'limited';
  end if;
  delete from auth_private.email_changes c where c.user_id = v_user.id;
  insert into auth_private.email_changes (user_id, new_email, link_hash, code_hash, expires_at)
    values (v_user.id, v_new, compat_request_email_change.link_hash, compat_request_email_change.code_hash, now() + interval '1 hour');
  perform graphile_worker.add_job('auth__send_email',
    json_build_object('kind', 'email_change', 'to', v_new, 'sealed_token', compat_request_email_change.sealed_token,
      'sealed_code', compat_request_email_change.sealed_code,
      'compat', json_build_object('sealed_code', compat_request_email_change.sealed_code,
        'redirect_to', compat_request_email_change.redirect_to, 'type', 'email_change', 'email', v_user.email),
      'accept_language', compat_request_email_change.context ->> 'accept_language'),
    max_attempts => 5);
  perform auth_private.audit('email_change_requested', v_user.id, compat_request_email_change.context, '{}'::jsonb);
  return 'pending';
end
$$;
comment on function auth.compat_request_email_change(uuid, text, text, bytea, text, bytea, text, text, integer, jsonb) is E'SUPABASE_COMPAT: store a pending address change and enqueue its mail (link and code) to the new address. Status: pending | unchanged | direct | insufficient_aal | email_taken | limited | not_found.';

/*
 * why: POST/GET /auth/v1/verify with type email_change under SUPABASE_COMPAT: use the
 * pending change's link (`token_hash`, email null) or its code (`email` the new address,
 * token_hash the code's hash) and apply it, in one transaction: the address changes and
 * counts as proven and confirmed (email_confirmed_at), the account's other one-time tokens
 * are spent (they name the former address), its other sessions end (an address change
 * does, as in auth.update_user), the former address is told (account_changed) and a
 * session opens. A wrong code counts against the pending change (burnt at max_attempts).
 * An address another account took meanwhile: `email_taken`, nothing changed (the pending
 * change stays, and works once that address is free).
 * Status: ok | invalid | email_taken.
 */
create or replace function auth.compat_verify_email_change(token_hash bytea, email text, refresh_token_hash bytea, ttl_seconds integer,
    max_attempts integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_change auth_private.email_changes;
  v_user_id uuid;
  v_old text;
begin
  if compat_verify_email_change.email is null then
    select c.user_id into v_user_id from auth_private.email_changes c where c.link_hash = compat_verify_email_change.token_hash;
  else
    select c.user_id into v_user_id from auth_private.email_changes c
      where c.new_email = lower(compat_verify_email_change.email) and c.code_hash = compat_verify_email_change.token_hash;
  end if;
  if v_user_id is null then
    if compat_verify_email_change.email is not null then
      update auth_private.email_changes c
         set failed_attempts = c.failed_attempts + 1,
             expires_at = case when c.failed_attempts + 1 >= compat_verify_email_change.max_attempts then now() else c.expires_at end
       where c.new_email = lower(compat_verify_email_change.email) and c.expires_at > now();
    end if;
    return auth_private.session_status('invalid');
  end if;
  -- The user's row first (as spend_one_time_token), then the pending change, checked again.
  select u.email into v_old from auth.users u where u.id = v_user_id for update;
  select * into v_change from auth_private.email_changes c where c.user_id = v_user_id for update;
  if v_change.user_id is null or v_change.expires_at <= now()
     or (case when compat_verify_email_change.email is null then v_change.link_hash else v_change.code_hash end)
        is distinct from compat_verify_email_change.token_hash then
    return auth_private.session_status('invalid');
  end if;
  begin
    update auth.users u set email = v_change.new_email, email_confirmed_at = now(), updated_at = now() where u.id = v_user_id;
  exception when unique_violation then
    return auth_private.session_status('email_taken');
  end;
  delete from auth_private.email_changes c where c.user_id = v_user_id;
  delete from auth_private.proven_emails p where p.user_id = v_user_id;
  perform auth_private.prove_address(v_user_id, v_change.new_email, 'verification', false);
  update auth_private.one_time_tokens t set used_at = now() where t.user_id = v_user_id and t.used_at is null;
  update auth_private.sessions s set revoked_at = now(), revoked_reason = 'account_changed'
    where s.user_id = v_user_id and s.revoked_at is null;
  perform auth_private.audit('email_changed', v_user_id, compat_verify_email_change.context, '{}'::jsonb);
  perform graphile_worker.add_job('auth__send_email',
    pg_catalog.json_build_object('kind', 'account_changed', 'to', v_old, 'email_changed', true, 'password_changed', false,
      'new_email', v_change.new_email, 'accept_language', compat_verify_email_change.context ->> 'accept_language'),
    max_attempts => 5);
  return auth.start_session(v_user_id, compat_verify_email_change.refresh_token_hash, compat_verify_email_change.ttl_seconds, null,
    'otp', compat_verify_email_change.context);
end
$$;
comment on function auth.compat_verify_email_change(bytea, text, bytea, integer, integer, jsonb) is E'SUPABASE_COMPAT: use a pending address change''s link or code, apply it (proven, confirmed, other tokens spent, other sessions ended, former address told) and open a session. Status: ok | invalid | email_taken.';

/* why: the User object's new_email and email_change_sent_at (GoTrue's, omitted when nothing is pending). */
create or replace function auth_private.pending_email_change_json(user_id uuid) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce((select jsonb_build_object('new_email', c.new_email, 'email_change_sent_at', auth_private.iso_utc(c.sent_at))
    from auth_private.email_changes c where c.user_id = pending_email_change_json.user_id and c.expires_at > now()), '{}'::jsonb)
$$;
comment on function auth_private.pending_email_change_json(uuid) is E'SUPABASE_COMPAT: {new_email, email_change_sent_at} of a pending address change, or {}.';

revoke all on function auth.compat_request_email_change(uuid, text, text, bytea, text, bytea, text, text, integer, jsonb),
  auth.compat_verify_email_change(bytea, text, bytea, integer, integer, jsonb), auth_private.pending_email_change_json(uuid) from public;
--! EndIncluded auth/email_change.sql
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
    || auth_private.pending_email_change_json(u.id)
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
          'type', case when compat_send_link.kind = 'recovery' then 'recovery' when v_created then 'signup' else 'magiclink' end) end,
      'accept_language', compat_send_link.context ->> 'accept_language'),
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
