--! Previous: sha1:9c65fe16192faa27853322eabcbce07716b8b55a
--! Hash: sha1:89d2fc7b04a6a75ae22c17ab810cbb2a09977501
--! Message: auth: admins manage users (update, ban, app_metadata in every token, invite, generate_link); guests become users when their address is confirmed; OAuth linking for guests

-- Enter migration here
--! Included auth/admin_users.sql
/*
 * why: admins manage users (docs/api/auth.md, "Admin"): GoTrue's GET and PUT
 * /auth/v1/admin/users/{id}, invite and generate_link. The columns they need live on
 * auth.users, nothing secret among them:
 *   app_metadata   what an admin sets (a JSON object); every access token carries it with
 *                  `provider` and `providers` added (auth_private.app_metadata), so RLS
 *                  policies read it through auth.jwt() -> 'app_metadata'. Users cannot
 *                  change it (PATCH /auth/v1/user has no field for it).
 *   banned_until   a ban: while it is in the future no session starts (auth.start_session:
 *                  password, magic link, OAuth, guest) and no refresh token rotates
 *                  (auth.rotate_refresh_token); both raise PT403 `user is banned`.
 *   invited_at     when POST /auth/v1/invite (or generate_link's invite) created the user.
 */
alter table auth.users add column if not exists app_metadata jsonb not null default '{}'::jsonb;
alter table auth.users add column if not exists banned_until timestamptz;
alter table auth.users add column if not exists invited_at timestamptz;
do $$
begin
  if not exists (select 1 from pg_catalog.pg_constraint where conname = 'users_app_metadata_check') then
    alter table auth.users add constraint users_app_metadata_check check (jsonb_typeof(app_metadata) = 'object');
  end if;
end
$$;
comment on column auth.users.app_metadata is E'Free JSON object set by admins (PUT /auth/v1/admin/users/{id}); in every access token with provider and providers.';
comment on column auth.users.banned_until is E'No sign-in and no refresh while this is in the future (PUT /auth/v1/admin/users/{id} ban_duration).';
comment on column auth.users.invited_at is E'When an admin invited the user (POST /auth/v1/invite, generate_link type invite).';

/* why: the session result carries app_metadata for the access token (types.sql). */
do $$
begin
  if not exists (select 1 from pg_catalog.pg_attribute a
                 where a.attrelid = 'auth.session_result'::pg_catalog.regclass and a.attname = 'app_metadata' and not a.attisdropped) then
    alter type auth.session_result add attribute app_metadata jsonb;
  end if;
end
$$;

/*
 * why: the `app_metadata` claim of every access token and of the admin's User object:
 * what an admin set, with `provider` (the OAuth provider, `email`, or `anonymous` for a
 * guest) and `providers` that only plinth sets (an admin's keys of those names give way).
 * Inlinable like auth_private.user_json: no SET clause, names qualified.
 */
create or replace function auth_private.app_metadata(u auth.users) returns pg_catalog.jsonb
  language sql stable parallel safe
as $$
  select u.app_metadata operator(pg_catalog.||) pg_catalog.jsonb_build_object(
    'provider', coalesce(u.provider, case when u.is_anonymous then 'anonymous' when 'email' operator(pg_catalog.=) any (u.providers) then 'email'
                                          else u.providers[1] end, 'email'),
    'providers', pg_catalog.to_jsonb(case when pg_catalog.cardinality(u.providers) operator(pg_catalog.=) 0
                                          then array[case when u.is_anonymous then 'anonymous' else 'email' end] else u.providers end))
$$;
comment on function auth_private.app_metadata(auth.users) is E'The app_metadata claim: what an admin set, with provider and providers. Inlinable.';
revoke all on function auth_private.app_metadata(auth.users) from public;

/* why: what admins see of a user (GET and PUT /auth/v1/admin/users/{id}): the User object and GoTrue's admin fields. */
create or replace function auth_private.admin_user_json(u auth.users) returns pg_catalog.jsonb
  language sql stable parallel safe
as $$
  select auth_private.user_json(u) operator(pg_catalog.||) pg_catalog.jsonb_build_object(
    'app_metadata', auth_private.app_metadata(u),
    'is_anonymous', u.is_anonymous,
    'email_confirmed_at', auth_private.iso_utc(u.email_confirmed_at),
    'invited_at', auth_private.iso_utc(u.invited_at),
    'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at),
    'banned_until', case when u.banned_until operator(pg_catalog.>) pg_catalog.now() then auth_private.iso_utc(u.banned_until) end)
$$;
comment on function auth_private.admin_user_json(auth.users) is E'The User object with app_metadata, is_anonymous, email_confirmed_at, invited_at, last_sign_in_at and banned_until (null unless banned now).';
revoke all on function auth_private.admin_user_json(auth.users) from public;

/*
 * why: GoTrue's ban_duration is a Go duration ("24h", "1h30m", "90s", "1.5h", "-1h") or
 * "none" (lift the ban). Returns the interval ('0' for none and for durations not in the
 * future), null for anything else (the caller answers 400). Go's limit (about 292 years)
 * is kept.
 */
create or replace function auth_private.parse_ban_duration(d text) returns interval
  language plpgsql immutable
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_sign numeric := 1;
  v_rest text := parse_ban_duration.d;
  v_micros numeric := 0;
  m text[];
begin
  if v_rest is null then return null; end if;
  if v_rest = 'none' or v_rest = '0' or v_rest = '+0' or v_rest = '-0' then return interval '0'; end if;
  if left(v_rest, 1) in ('+', '-') then
    v_sign := case when left(v_rest, 1) = '-' then -1 else 1 end;
    v_rest := substr(v_rest, 2);
  end if;
  if v_rest !~ '^(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$' then
    return null;
  end if;
  for m in select regexp_matches(v_rest, '([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)', 'g') loop
    v_micros := v_micros + m[1]::numeric * case m[2] when 'ns' then 0.001 when 'us' then 1 when 'µs' then 1 when 'μs' then 1
      when 'ms' then 1000 when 's' then 1000000 when 'm' then 60000000 else 3600000000 end;
    if v_micros > 9223372036854775 then return null; end if;
  end loop;
  if v_sign < 0 then return interval '0'; end if;
  return make_interval(secs => floor(v_micros) / 1000000);
end
$$;
comment on function auth_private.parse_ban_duration(text) is E'A Go duration or "none" as an interval (0 = no ban); null when malformed or beyond Go''s limit.';
revoke all on function auth_private.parse_ban_duration(text) from public;

/* why: refuse a banned user's sign-in or refresh the same way everywhere (PT403 → 403 `user is banned`). */
create or replace function auth_private.refuse_if_banned(banned_until timestamptz) returns void
  language plpgsql stable
  set search_path = pg_catalog, pg_temp
as $$
begin
  if refuse_if_banned.banned_until > now() then
    raise exception 'user is banned' using errcode = 'PT403';
  end if;
end
$$;
comment on function auth_private.refuse_if_banned(timestamptz) is E'Raise PT403 `user is banned` while banned_until is in the future.';
revoke all on function auth_private.refuse_if_banned(timestamptz) from public;

/*
 * why: GET /auth/v1/admin/users/{id}. Status: ok | not_found.
 */
drop function if exists auth.admin_get_user(uuid);
create function auth.admin_get_user(user_id uuid)
  returns table (status text, user_json jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  return query select 'ok'::text, auth_private.admin_user_json(u) || auth_private.factors_json(u.id)
    from auth.users u where u.id = admin_get_user.user_id;
  if not found then
    return query select 'not_found'::text, null::jsonb;
  end if;
end
$$;
comment on function auth.admin_get_user(uuid) is E'A user as admins see it. Status: ok | not_found.';

/*
 * why: PUT /auth/v1/admin/users/{id}, GoTrue's adminUserUpdate. Null arguments leave a
 * field alone.
 * - email changes at once (lower-cased); one registered to another account is email_taken.
 *   A new address is not proven (its proven mark goes, as with PATCH /auth/v1/user).
 * - email_confirm true confirms the address, false makes it unconfirmed again (plinth's
 *   PUT did so before it knew the other fields; GoTrue ignores false); a guest
 *   given an email with email_confirm true stops being a guest: is_anonymous false and,
 *   unless a role is given, the `authenticated` role.
 * - password_hash replaces the password (providers gain `email`).
 * - user_metadata and app_metadata merge top-level keys; a key sent as null is removed.
 * - ban: null leaves the ban alone; '0' lifts it; otherwise banned_until = now() + ban.
 *   A banned user's live access tokens last until they expire; no refresh succeeds.
 * Audited as admin_user_updated with the names of the changed fields.
 * Status: ok | not_found | email_taken.
 */
drop function if exists auth.admin_update_user(uuid, text, text, jsonb, jsonb, text, boolean, interval, jsonb);
create function auth.admin_update_user(user_id uuid, email text, password_hash text, user_metadata jsonb, app_metadata jsonb,
    role text, email_confirm boolean, ban interval, context jsonb default null)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_old auth.users;
  v_user auth.users;
  v_upgrade boolean;
  v_fields text[] := '{}';
begin
  select * into v_old from auth.users u where u.id = admin_update_user.user_id for update;
  if v_old.id is null then
    return query select 'not_found'::text, null::jsonb;
    return;
  end if;
  v_upgrade := v_old.is_anonymous and admin_update_user.email is not null and admin_update_user.email_confirm is true;
  begin
    update auth.users u
      set email = coalesce(lower(admin_update_user.email), u.email),
          email_confirmed_at = case admin_update_user.email_confirm when true then coalesce(u.email_confirmed_at, now()) when false then null
            else u.email_confirmed_at end,
          role = coalesce(admin_update_user.role, case when v_upgrade then 'authenticated' else u.role end),
          is_anonymous = u.is_anonymous and not v_upgrade,
          user_metadata = case when admin_update_user.user_metadata is null then u.user_metadata
            else (u.user_metadata || admin_update_user.user_metadata)
              - coalesce((select array_agg(k.key) from jsonb_each(admin_update_user.user_metadata) k where k.value = 'null'::jsonb), '{}'::text[])
            end,
          app_metadata = case when admin_update_user.app_metadata is null then u.app_metadata
            else (u.app_metadata || admin_update_user.app_metadata)
              - coalesce((select array_agg(k.key) from jsonb_each(admin_update_user.app_metadata) k where k.value = 'null'::jsonb), '{}'::text[])
            end,
          providers = case when (admin_update_user.password_hash is null and not v_upgrade) or 'email' = any (u.providers) then u.providers
            else u.providers || '{email}'::text[] end,
          banned_until = case when admin_update_user.ban is null then u.banned_until
            when admin_update_user.ban <= interval '0' then null else now() + admin_update_user.ban end,
          updated_at = now()
      where u.id = admin_update_user.user_id
      returning * into v_user;
  exception when unique_violation then
    return query select 'email_taken'::text, null::jsonb;
    return;
  end;
  if lower(v_user.email) is distinct from lower(v_old.email) then
    delete from auth_private.proven_emails p where p.user_id = v_user.id;
    v_fields := v_fields || '{email}'::text[];
  end if;
  if admin_update_user.password_hash is not null then
    insert into auth_private.passwords as p (user_id, hash) values (v_user.id, admin_update_user.password_hash)
      on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
    v_fields := v_fields || '{password}'::text[];
  end if;
  if v_user.role is distinct from v_old.role then v_fields := v_fields || '{role}'::text[]; end if;
  if v_user.email_confirmed_at is distinct from v_old.email_confirmed_at then v_fields := v_fields || '{email_confirm}'::text[]; end if;
  if v_user.user_metadata is distinct from v_old.user_metadata then v_fields := v_fields || '{user_metadata}'::text[]; end if;
  if v_user.app_metadata is distinct from v_old.app_metadata then v_fields := v_fields || '{app_metadata}'::text[]; end if;
  if admin_update_user.ban is not null then v_fields := v_fields || '{ban_duration}'::text[]; end if;
  if v_upgrade then v_fields := v_fields || '{is_anonymous}'::text[]; end if;
  perform auth_private.audit('admin_user_updated', v_user.id, admin_update_user.context, jsonb_build_object('fields', to_jsonb(v_fields)));
  return query select 'ok'::text, auth_private.admin_user_json(v_user);
end
$$;
comment on function auth.admin_update_user(uuid, text, text, jsonb, jsonb, text, boolean, interval, jsonb) is E'An admin''s change of a user: email, password hash, metadata (merged), role, confirmation, ban; audited. Status: ok | not_found | email_taken.';

revoke all on function auth.admin_get_user(uuid), auth.admin_update_user(uuid, text, text, jsonb, jsonb, text, boolean, interval, jsonb) from public;

/*
 * why: an invitation is an admin's word that the address is the invitee's: the account it
 * creates holds nothing anyone else planted, so its address counts as proven (`invite`)
 * and the invitee's first use of the link keeps the user_metadata the admin gave.
 */
alter table auth_private.proven_emails drop constraint if exists proven_emails_proof_check;
alter table auth_private.proven_emails add constraint proven_emails_proof_check
  check (proof in ('verification', 'magic_link', 'recovery', 'oauth', 'legacy', 'invite'));

/*
 * why: the links an admin hands out (invite, generate_link) are the emailed one-time tokens
 * (one_time_tokens.sql) without, or with another, email: stored here with their lifetime.
 * An invitation's link is a magic link (it signs the invitee in and proves the address)
 * living 24 hours, as GoTrue's invite.
 */
create or replace function auth_private.store_admin_token(user_id uuid, email text, kind text, token_hash bytea, ttl interval)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at)
    values (store_admin_token.token_hash, store_admin_token.user_id, store_admin_token.kind, store_admin_token.email,
      now() + store_admin_token.ttl)
$$;
comment on function auth_private.store_admin_token(uuid, text, text, bytea, interval) is E'Store a one-time token an admin hands out (invite, generate_link) with its lifetime; no email.';
revoke all on function auth_private.store_admin_token(uuid, text, text, bytea, interval) from public;

/*
 * why: the user an invitation is for: created (no password, providers {email}, the admin's
 * user_metadata, invited_at, address proven by `invite`) or, when the address is registered
 * but never confirmed, that user again (its metadata merged). A confirmed address is
 * email_taken (GoTrue: 422). Internal to admin_invite_user and admin_generate_link.
 */
create or replace function auth_private.invitee(email text, user_metadata jsonb, context jsonb)
  returns auth.users
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(invitee.email) for update;
  if v_user.id is not null then
    if v_user.email_confirmed_at is not null then
      return null;
    end if;
    update auth.users u set invited_at = now(), updated_at = now(),
        user_metadata = u.user_metadata || coalesce(invitee.user_metadata, '{}'::jsonb)
      where u.id = v_user.id returning * into v_user;
  else
    insert into auth.users (email, providers, user_metadata, invited_at)
      values (lower(invitee.email), '{email}'::text[], coalesce(invitee.user_metadata, '{}'::jsonb), now())
      returning * into v_user;
    insert into auth_private.proven_emails (user_id, email, proof) values (v_user.id, v_user.email, 'invite');
  end if;
  perform auth_private.audit('user_invited', v_user.id, invitee.context, '{}'::jsonb);
  return v_user;
end
$$;
comment on function auth_private.invitee(text, jsonb, jsonb) is E'Create (or, unconfirmed, reuse) the user of an invitation; null when the address is confirmed already.';
revoke all on function auth_private.invitee(text, jsonb, jsonb) from public;

/*
 * why: POST /auth/v1/invite: the invitee's user and an `invite` email whose link
 * (a magic link of 24 hours) signs them in and confirms the address.
 * Status: ok | email_taken.
 */
drop function if exists auth.admin_invite_user(text, jsonb, bytea, text, jsonb);
create function auth.admin_invite_user(email text, user_metadata jsonb, token_hash bytea, sealed_token text, context jsonb default null)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users := auth_private.invitee(admin_invite_user.email, admin_invite_user.user_metadata, admin_invite_user.context);
begin
  if v_user.id is null then
    return query select 'email_taken'::text, null::jsonb;
    return;
  end if;
  perform auth_private.store_admin_token(v_user.id, v_user.email, 'magic_link', admin_invite_user.token_hash, interval '24 hours');
  perform graphile_worker.add_job('auth__send_email',
    pg_catalog.json_build_object('kind', 'invite', 'to', v_user.email, 'sealed_token', admin_invite_user.sealed_token),
    max_attempts => 5);
  return query select 'ok'::text, auth_private.admin_user_json(v_user);
end
$$;
comment on function auth.admin_invite_user(text, jsonb, bytea, text, jsonb) is E'Invite: create the user (or reuse an unconfirmed one) and enqueue the invite email with a 24-hour sign-in link. Status: ok | email_taken.';

/*
 * why: POST /auth/v1/admin/generate_link (GoTrue's adminGenerateLink): the link an email
 * would carry, for the admin to deliver; nothing is sent. Types:
 *   signup     creates the user (password and metadata optional) unless its address is
 *              registered unconfirmed (metadata merged); a verification token (24 h).
 *   invite     as POST /auth/v1/invite, without the email.
 *   magiclink  a magic-link token (1 h, once); an unknown address becomes a signup (GoTrue).
 *   recovery   a recovery token (1 h, once); an unknown address is not_found.
 * A confirmed address asked for signup or invite is email_taken.
 * Returns the admin's User object and the verification type the link is of.
 * Status: ok | email_taken | not_found.
 */
drop function if exists auth.admin_generate_link(text, text, text, jsonb, bytea, jsonb);
create function auth.admin_generate_link(type text, email text, password_hash text, user_metadata jsonb, token_hash bytea, context jsonb default null)
  returns table (status text, user_json jsonb, verification_type text)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_type text := admin_generate_link.type;
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(admin_generate_link.email) for update;
  if v_user.id is null and v_type = 'magiclink' then
    v_type := 'signup';
  end if;
  if v_type = 'invite' then
    v_user := auth_private.invitee(admin_generate_link.email, admin_generate_link.user_metadata, admin_generate_link.context);
    if v_user.id is null then
      return query select 'email_taken'::text, null::jsonb, null::text;
      return;
    end if;
    perform auth_private.store_admin_token(v_user.id, v_user.email, 'magic_link', admin_generate_link.token_hash, interval '24 hours');
  elsif v_type = 'signup' then
    if v_user.id is not null and v_user.email_confirmed_at is not null then
      return query select 'email_taken'::text, null::jsonb, null::text;
      return;
    elsif v_user.id is not null then
      update auth.users u set user_metadata = u.user_metadata || coalesce(admin_generate_link.user_metadata, '{}'::jsonb), updated_at = now()
        where u.id = v_user.id returning * into v_user;
    else
      insert into auth.users (email, providers, user_metadata)
        values (lower(admin_generate_link.email), '{email}'::text[], coalesce(admin_generate_link.user_metadata, '{}'::jsonb))
        returning * into v_user;
      perform auth_private.audit('sign_up', v_user.id, admin_generate_link.context, '{"admin": true}'::jsonb);
    end if;
    if admin_generate_link.password_hash is not null then
      insert into auth_private.passwords as p (user_id, hash) values (v_user.id, admin_generate_link.password_hash)
        on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
    end if;
    perform auth_private.store_admin_token(v_user.id, v_user.email, 'verification', admin_generate_link.token_hash, interval '24 hours');
  elsif v_type in ('magiclink', 'recovery') then
    if v_user.id is null then
      return query select 'not_found'::text, null::jsonb, null::text;
      return;
    end if;
    perform auth_private.store_admin_token(v_user.id, v_user.email, case when v_type = 'magiclink' then 'magic_link' else 'recovery' end,
      admin_generate_link.token_hash, interval '1 hour');
  else
    raise exception 'admin_generate_link: unknown type %', v_type using errcode = '22023';
  end if;
  return query select 'ok'::text, auth_private.admin_user_json(v_user), v_type;
end
$$;
comment on function auth.admin_generate_link(text, text, text, jsonb, bytea, jsonb) is E'The link of a signup, invite, magic link or recovery email, for the admin to deliver (no email). Status: ok | email_taken | not_found.';

revoke all on function auth.admin_invite_user(text, jsonb, bytea, text, jsonb), auth.admin_generate_link(text, text, text, jsonb, bytea, jsonb) from public;

comment on column auth.audit_log_entries.action is E'sign_up, sign_in, sign_in_failed, refresh_reuse_detected, sign_out, password_changed, email_changed, recovery_requested, recovery_completed, mfa_enrolled, mfa_verified, mfa_verify_failed, mfa_unenrolled, admin_user_created, admin_user_updated, admin_user_deleted, admin_factor_deleted, user_invited, guest_upgraded, oauth_linked.';
--! EndIncluded auth/admin_users.sql
--! Included auth/types.sql
/*
 * why: every function that issues a session (sign-up, password sign-in, refresh, guest,
 * magic link, OAuth, MFA verify) returns this one shape, so the service reads them all
 * with one type and one check. The fields other than status are null unless status is `ok`:
 *   session_id    the refresh-token family, the access token's `session_id`
 *   is_anonymous  the `is_anonymous` claim
 *   user_json     the User object of the wire (auth_private.user_json)
 *   aal           the session's assurance level: aal1, or aal2 after a second factor
 *   amr           the session's methods: [{method, timestamp}], oldest first
 *   app_metadata  the `app_metadata` claim (auth_private.app_metadata; added by admin_users.sql)
 */
do $$
begin
  if not exists (select 1 from pg_catalog.pg_type t join pg_catalog.pg_namespace n on n.oid = t.typnamespace
                 where n.nspname = 'auth' and t.typname = 'session_result') then
    create type auth.session_result as (
      status text,
      session_id uuid,
      is_anonymous boolean,
      user_json jsonb,
      aal text,
      amr jsonb
    );
  end if;
end
$$;
comment on type auth.session_result is E'What every session-issuing function returns: status, and when ok the family id, is_anonymous, the User object, aal and amr.';

/* why: the not-ok results: a status and nothing else. */
create or replace function auth_private.session_status(status text) returns auth.session_result
  language sql immutable
as $$
  select row(session_status.status, null, null, null, null, null, null)::auth.session_result
$$;
comment on function auth_private.session_status(text) is E'A session_result carrying only a status (the not-ok outcomes).';
revoke all on function auth_private.session_status(text) from public;

/*
 * why: the session columns MFA needs. A family starts at aal1 with the method that opened
 * it; verifying a second factor raises it to aal2 and appends the method; a refresh keeps
 * both.
 */
alter table auth_private.sessions add column if not exists aal text not null default 'aal1';
alter table auth_private.sessions add column if not exists amr jsonb not null default '[]'::jsonb;
do $$
begin
  if not exists (select 1 from pg_catalog.pg_constraint where conname = 'sessions_aal_check') then
    alter table auth_private.sessions add constraint sessions_aal_check check (aal in ('aal1', 'aal2'));
  end if;
end
$$;
comment on column auth_private.sessions.aal is E'Assurance level of the family: aal1, or aal2 once a second factor was verified in it.';
comment on column auth_private.sessions.amr is E'Methods that authenticated the family: [{method, timestamp}] (timestamp in seconds since the epoch).';
--! EndIncluded auth/types.sql
--! Included auth/sessions.sql
/*
 * why: sessions are refresh-token families (docs/api/auth.md). A family starts at
 * sign-in (password, magic link, OAuth, guest); its id is the access token's `session_id`
 * and survives rotation. Each refresh token is one row, stored only as the SHA-256 of the
 * opaque token the client holds (design.md, Secrets at rest).
 *
 * State of a refresh token, derived from its row and its family:
 *   valid           rotated_at is null, family not revoked, expires_at in the future
 *   rotated         rotated_at set: replaying it is reuse, which revokes the family
 *   expired         expires_at passed (kept as is: every later attempt says expired too)
 *   family revoked  sessions.revoked_at set (logout, reuse): every token of it is invalid
 * Deleting a user deletes its families and tokens (cascade): they become unknown.
 */
create table if not exists auth_private.sessions (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  created_at timestamptz not null default now(),
  revoked_at timestamptz,
  revoked_reason text,
  constraint sessions_revoked_check check ((revoked_at is null) = (revoked_reason is null)),
  constraint sessions_revoked_reason_check check (revoked_reason is null or revoked_reason in ('logout', 'reuse_detected', 'password_recovery'))
);
create index if not exists sessions_user_id_idx on auth_private.sessions (user_id);
comment on table auth_private.sessions is E'plinth: refresh-token families; id = the access token''s session_id. revoked_at ends every token of the family.';

create table if not exists auth_private.refresh_tokens (
  token_hash bytea primary key,
  session_id uuid not null references auth_private.sessions (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  rotated_at timestamptz,
  constraint refresh_tokens_hash_check check (octet_length(token_hash) = 32)
);
create index if not exists refresh_tokens_session_id_idx on auth_private.refresh_tokens (session_id);
comment on table auth_private.refresh_tokens is E'plinth: one row per refresh token of a family, keyed by the SHA-256 of the token. rotated_at set = retired (a replay revokes the family).';

/*
 * why: the one way a session starts (password, magic link, OAuth, guest, signup). It opens
 * a family with its first refresh token and returns what the service needs to sign the
 * access token (auth.session_result): the family id, is_anonymous, the User object (role
 * and email are in it), aal1 and the method in amr. `new_session_id` may be chosen by the
 * service (password sign-in signs the access token while argon2 runs, so it needs the id
 * first); null draws a random one. `method` is the amr method (password, magiclink, oauth,
 * anonymous); the sign-in is audited with it and the request `context`. A banned user
 * (auth.users.banned_until in the future) raises PT403 `user is banned`.
 * Status: ok | user_not_found.
 */
drop function if exists auth.start_session(uuid, bytea, integer);
drop function if exists auth.start_session(uuid, bytea, integer, uuid);
drop function if exists auth.start_session(uuid, bytea, integer, uuid, text, jsonb);
create function auth.start_session(user_id uuid, refresh_token_hash bytea, ttl_seconds integer, new_session_id uuid default null,
    method text default 'password', context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
  v_session auth_private.sessions;
begin
  update auth.users u set last_sign_in_at = now()
    where u.id = start_session.user_id
    returning * into v_user;
  if not found then
    return auth_private.session_status('user_not_found');
  end if;
  perform auth_private.refuse_if_banned(v_user.banned_until);
  insert into auth_private.sessions (id, user_id, amr)
    values (coalesce(start_session.new_session_id, gen_random_uuid()), v_user.id,
      jsonb_build_array(jsonb_build_object('method', start_session.method, 'timestamp', floor(extract(epoch from now()))::bigint)))
    returning * into v_session;
  insert into auth_private.refresh_tokens (token_hash, session_id, expires_at)
    values (start_session.refresh_token_hash, v_session.id, now() + make_interval(secs => start_session.ttl_seconds));
  perform auth_private.audit('sign_in', v_user.id, start_session.context,
    jsonb_build_object('method', start_session.method, 'session_id', v_session.id));
  return row('ok', v_session.id, v_user.is_anonymous, auth_private.user_json(v_user), v_session.aal, v_session.amr,
    auth_private.app_metadata(v_user))::auth.session_result;
end
$$;
comment on function auth.start_session(uuid, bytea, integer, uuid, text, jsonb) is E'Start a refresh-token family (id given or random) for a user with its first token (SHA-256 given), at aal1 with the method in amr; audited. Status: ok | user_not_found.';

/*
 * why: refresh (docs/api/auth.md) in ONE call, atomically: the presented token is retired and
 * the next one issued in the same transaction. Two racing rotations of one token: the
 * UPDATE row lock serialises them; the loser re-reads `rotated_at is null` as false after
 * the winner commits and falls through to the classification, which sees a rotated token
 * and reports (and acts on) reuse — a replay is indistinguishable from a lost race.
 * Outcomes are data, not exceptions: a family revoked for reuse must stay revoked.
 * The family's aal and amr come back unchanged: a refresh keeps the assurance level.
 * A banned user's rotation raises PT403 `user is banned` (the token stays as it was).
 * Status: ok | invalid (unknown) | revoked (family ended: logout, reuse) |
 *         reuse_detected (rotated token of a live family; the family is now revoked; audited) |
 *         expired.
 */
drop function if exists auth.rotate_refresh_token(bytea, bytea, integer);
drop function if exists auth.rotate_refresh_token(bytea, bytea, integer, jsonb);
create function auth.rotate_refresh_token(token_hash bytea, next_token_hash bytea, ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_session_id uuid;
  v_user_id uuid;
  v_aal text;
  v_amr jsonb;
  v_rotated_at timestamptz;
  v_expires_at timestamptz;
  v_revoked_at timestamptz;
begin
  update auth_private.refresh_tokens t set rotated_at = now()
    from auth_private.sessions s
    where t.token_hash = rotate_refresh_token.token_hash
      and t.rotated_at is null
      and t.expires_at > now()
      and s.id = t.session_id
      and s.revoked_at is null
    returning t.session_id, s.user_id, s.aal, s.amr into v_session_id, v_user_id, v_aal, v_amr;
  if found then
    insert into auth_private.refresh_tokens (token_hash, session_id, expires_at)
      values (rotate_refresh_token.next_token_hash, v_session_id, now() + make_interval(secs => rotate_refresh_token.ttl_seconds));
    perform auth_private.refuse_if_banned(u.banned_until) from auth.users u where u.id = v_user_id;
    return (select row('ok', v_session_id, u.is_anonymous, auth_private.user_json(u), v_aal, v_amr, auth_private.app_metadata(u))::auth.session_result
      from auth.users u where u.id = v_user_id);
  end if;

  select t.session_id, t.rotated_at, t.expires_at, s.revoked_at, s.user_id
    into v_session_id, v_rotated_at, v_expires_at, v_revoked_at, v_user_id
    from auth_private.refresh_tokens t
    join auth_private.sessions s on s.id = t.session_id
    where t.token_hash = rotate_refresh_token.token_hash;
  if not found then
    return auth_private.session_status('invalid');
  elsif v_revoked_at is not null then
    return row('revoked', v_session_id, null, null, null, null, null)::auth.session_result;
  elsif v_rotated_at is not null then
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'reuse_detected'
      where s.id = v_session_id and s.revoked_at is null;
    perform auth_private.audit('refresh_reuse_detected', v_user_id, rotate_refresh_token.context,
      jsonb_build_object('session_id', v_session_id));
    return row('reuse_detected', v_session_id, null, null, null, null, null)::auth.session_result;
  else
    return row('expired', v_session_id, null, null, null, null, null)::auth.session_result;
  end if;
end
$$;
comment on function auth.rotate_refresh_token(bytea, bytea, integer, jsonb) is E'Retire a refresh token and issue the next of its family in one transaction; aal and amr are kept. Status: ok | invalid | revoked | reuse_detected (family revoked now; audited) | expired.';

/*
 * why: logout (docs/api/auth.md) ends the caller's family only (docs/api/auth.md). The access
 * token stays valid until it expires: nothing checks the database per request.
 * Status: ok (audited) | not_found (unknown or already ended family; the service answers 204 anyway).
 */
drop function if exists auth.end_session(uuid, uuid);
drop function if exists auth.end_session(uuid, uuid, jsonb);
create function auth.end_session(session_id uuid, user_id uuid, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  update auth_private.sessions s set revoked_at = now(), revoked_reason = 'logout'
    where s.id = end_session.session_id and s.user_id = end_session.user_id and s.revoked_at is null;
  if not found then
    return 'not_found';
  end if;
  perform auth_private.audit('sign_out', end_session.user_id, end_session.context,
    jsonb_build_object('session_id', end_session.session_id));
  return 'ok';
end
$$;
comment on function auth.end_session(uuid, uuid, jsonb) is E'Logout: revoke one refresh-token family of a user; audited. Status: ok | not_found.';

revoke all on function auth.start_session(uuid, bytea, integer, uuid, text, jsonb), auth.rotate_refresh_token(bytea, bytea, integer, jsonb),
  auth.end_session(uuid, uuid, jsonb) from public;
--! EndIncluded auth/sessions.sql
--! Included auth/accounts.sql
/*
 * why: the account use cases of docs/api/auth.md — signup, password sign-in, the user's own
 * record (GET/PATCH /auth/v1/user) and guests. The service validates input, hashes
 * passwords (argon2id, off the database) and signs tokens; these functions own the rows.
 * Emails are stored lower-cased (GoTrue does the same) and compared with lower().
 */

/*
 * why: POST /auth/v1/signup. Without verification (REQUIRE_EMAIL_VERIFICATION=false) the
 * address counts as confirmed at once (GoTrue's autoconfirm: switching verification on
 * later must not lock out existing users) and a session starts in the same transaction.
 * With verification (`verification_token_hash` given) the account awaits confirmation, a
 * verification token is stored and its email enqueued; no session.
 * Confirmed is not proven: a sign-up proves nothing about who owns the address (see
 * auth_private.prove_address); only a used emailed token or a provider-verified OAuth
 * sign-in does.
 * Status: ok (session fields set) | confirmation_sent | email_taken.
 */
drop function if exists auth.sign_up(text, text, jsonb, bytea, text, bytea, integer);
drop function if exists auth.sign_up(text, text, jsonb, bytea, text, bytea, integer, jsonb);
create function auth.sign_up(
  email text,
  password_hash text,
  user_metadata jsonb,
  verification_token_hash bytea,
  sealed_verification_token text,
  refresh_token_hash bytea,
  refresh_ttl_seconds integer,
  context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
  v_verify boolean := sign_up.verification_token_hash is not null;
begin
  insert into auth.users (email, user_metadata, providers, email_confirmed_at)
    values (lower(sign_up.email), coalesce(sign_up.user_metadata, '{}'::jsonb), '{email}'::text[],
      case when v_verify then null else now() end)
    on conflict ((lower(email))) do nothing
    returning * into v_user;
  if not found then
    return auth_private.session_status('email_taken');
  end if;
  insert into auth_private.passwords (user_id, hash) values (v_user.id, sign_up.password_hash);
  perform auth_private.audit('sign_up', v_user.id, sign_up.context, '{}'::jsonb);
  if v_verify then
    perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'verification',
      sign_up.verification_token_hash, sign_up.sealed_verification_token);
    return row('confirmation_sent', null, false, auth_private.user_json(v_user), null, null, null)::auth.session_result;
  end if;
  return auth.start_session(v_user.id, sign_up.refresh_token_hash, sign_up.refresh_ttl_seconds, null, 'password', sign_up.context);
end
$$;
comment on function auth.sign_up(text, text, jsonb, bytea, text, bytea, integer, jsonb) is E'Create an email/password account; start a session, or (verification token given) enqueue the confirmation email. Audited. Status: ok | confirmation_sent | email_taken.';

/*
 * why: password sign-in, step 1: the stored hash for an address, for the service to verify
 * (argon2 stays off the database), then `auth.start_session`. Accounts without a password
 * (OAuth, guests, admin-created without one) are not_found, like unknown addresses: the
 * service then verifies against a dummy hash so both cost the same. Role, email and
 * is_anonymous and app_metadata let the service sign the access token while argon2 runs.
 * Status: ok | not_found.
 */
drop function if exists auth.password_credentials(text);
create function auth.password_credentials(email text)
  returns table (status text, user_id uuid, password_hash text, email_confirmed boolean, role text, user_email text, is_anonymous boolean,
    app_metadata jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  -- plpgsql, not sql: its plan is cached per connection; a SQL function's body is planned
  -- on every call, a measurable share of a sign-in when argon2 leaves little CPU over.
  return query
    select 'ok'::text, u.id, p.hash, u.email_confirmed_at is not null, u.role, u.email, u.is_anonymous, auth_private.app_metadata(u)
      from auth.users u join auth_private.passwords p on p.user_id = u.id
      where lower(u.email) = lower(password_credentials.email);
  if not found then
    return query select 'not_found'::text, null::uuid, null::text, null::boolean, null::text, null::text, null::boolean, null::jsonb;
  end if;
end
$$;
comment on function auth.password_credentials(text) is E'The password hash and confirmation state of an address, for sign-in. Status: ok | not_found.';

/*
 * why: GET /auth/v1/user. The access token outlives a deleted user (docs/api/auth.md). The
 * user's MFA factors are listed as `factors` when there are any (GoTrue leaves it out
 * otherwise).
 * Status: ok | not_found.
 */
drop function if exists auth.get_user(uuid);
create function auth.get_user(user_id uuid)
  returns table (status text, user_json jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  return query select 'ok'::text, auth_private.user_json(u) || auth_private.factors_json(u.id)
    from auth.users u where u.id = get_user.user_id;
  if not found then
    return query select 'not_found'::text, null::jsonb;
  end if;
end
$$;
comment on function auth.get_user(uuid) is E'The User object of an id. Status: ok | not_found.';

/*
 * why: PATCH /auth/v1/user (docs/api/auth.md). Null arguments leave a field alone.
 * - email changes at once (no confirmation flow is specified) and keeps the confirmation
 *   state; an address registered to another account is email_taken. The new address is
 *   not proven: its proven mark is removed (see auth_private.prove_address), so whoever
 *   really owns it may later prove it and take the account over from the mover.
 * - user_metadata merges top-level keys into the stored object; a key sent as null is
 *   removed (GoTrue's UpdateUserMetaData).
 * - A change of the email or the password ends every other session of the user (all
 *   refresh-token families but `session_id`, the caller's; `account_changed`), and the
 *   address the account had before the change is told (an `account_changed` email, in
 *   the same transaction; no link). An address given in another case is no change.
 * - A user with a verified second factor changes the email or the password only from an
 *   aal2 session (`aal`, the caller's token's claim), as GoTrue: someone holding only the
 *   password must not lock the owner out. Metadata alone needs no aal2.
 * - A guest that gives an email keeps its id and rows and becomes a user once the address
 *   is confirmed (auth_private.guest_confirmed, a trigger): with a verification token
 *   (REQUIRE_EMAIL_VERIFICATION) a confirmation email goes to the address (a 24-hour
 *   link, as at sign-up); without one the address counts as confirmed at once, as sign-up
 *   does then. The token is ignored for anyone but a guest changing its address.
 * Status: ok | not_found | email_taken | insufficient_aal.
 */
drop function if exists auth.update_user(uuid, text, text, jsonb);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid, jsonb);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid, jsonb, text);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid, jsonb, text, bytea, text);
create function auth.update_user(user_id uuid, email text, password_hash text, user_metadata jsonb, session_id uuid, context jsonb default null,
    aal text default null, verification_token_hash bytea default null, sealed_verification_token text default null)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_old_email text;
  v_guest boolean;
  v_user auth.users;
  v_email_changed boolean;
  v_password_changed boolean := update_user.password_hash is not null;
begin
  select u.email, u.is_anonymous into v_old_email, v_guest from auth.users u where u.id = update_user.user_id for update;
  if (update_user.password_hash is not null or (update_user.email is not null and lower(update_user.email) is distinct from lower(v_old_email)))
     and update_user.aal is distinct from 'aal2'
     and exists (select 1 from auth_private.mfa_factors f where f.user_id = update_user.user_id and f.status = 'verified') then
    return query select 'insufficient_aal'::text, null::jsonb;
    return;
  end if;
  begin
    update auth.users u
      set email = coalesce(lower(update_user.email), u.email),
          user_metadata = case when update_user.user_metadata is null then u.user_metadata
            else (u.user_metadata || update_user.user_metadata)
              - coalesce((select array_agg(k.key) from jsonb_each(update_user.user_metadata) k where k.value = 'null'::jsonb), '{}'::text[])
            end,
          providers = case when update_user.password_hash is null or 'email' = any (u.providers) then u.providers
            else u.providers || '{email}'::text[] end,
          updated_at = now()
      where u.id = update_user.user_id
      returning * into v_user;
  exception when unique_violation then
    return query select 'email_taken'::text, null::jsonb;
    return;
  end;
  if v_user.id is null then
    return query select 'not_found'::text, null::jsonb;
    return;
  end if;
  v_email_changed := lower(v_user.email) is distinct from lower(v_old_email);
  if v_email_changed then
    delete from auth_private.proven_emails p where p.user_id = v_user.id;
  end if;
  if v_password_changed then
    insert into auth_private.passwords as p (user_id, hash) values (v_user.id, update_user.password_hash)
      on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
  end if;
  if v_guest and v_email_changed then
    if update_user.verification_token_hash is not null then
      perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'verification',
        update_user.verification_token_hash, update_user.sealed_verification_token);
    else
      update auth.users u set email_confirmed_at = coalesce(u.email_confirmed_at, now()) where u.id = v_user.id
        returning * into v_user;
    end if;
  end if;
  if v_email_changed then
    perform auth_private.audit('email_changed', v_user.id, update_user.context, '{}'::jsonb);
  end if;
  if v_password_changed then
    perform auth_private.audit('password_changed', v_user.id, update_user.context, '{}'::jsonb);
  end if;
  if v_email_changed or v_password_changed then
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'account_changed'
      where s.user_id = v_user.id and s.revoked_at is null and s.id is distinct from update_user.session_id;
    if v_old_email is not null then
      perform graphile_worker.add_job('auth__send_email',
        pg_catalog.json_build_object('kind', 'account_changed', 'to', v_old_email,
          'email_changed', v_email_changed, 'password_changed', v_password_changed,
          'new_email', case when v_email_changed then v_user.email end),
        max_attempts => 5);
    end if;
  end if;
  return query select 'ok'::text, auth_private.user_json(v_user);
end
$$;
comment on function auth.update_user(uuid, text, text, jsonb, uuid, jsonb, text, bytea, text) is E'Change a user''s own email, password hash and metadata (merged; null keys removed); an email or password change ends the other sessions, tells the former address and is audited; with a verified factor it needs aal2; a guest giving an email is confirmed (or sent the confirmation) and so becomes a user. Status: ok | not_found | email_taken | insufficient_aal.';

/*
 * why: POST /auth/v1/anonymous: a real user row for the guest (no email, is_anonymous, the
 * guest role named by ANONYMOUS_ROLE) and its first session, in one transaction.
 * Status: ok.
 */
drop function if exists auth.sign_in_anonymously(text, jsonb, bytea, integer);
drop function if exists auth.sign_in_anonymously(text, jsonb, bytea, integer, jsonb);
create function auth.sign_in_anonymously(role text, user_metadata jsonb, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
begin
  insert into auth.users (email, role, user_metadata, is_anonymous)
    values (null, sign_in_anonymously.role, coalesce(sign_in_anonymously.user_metadata, '{}'::jsonb), true)
    returning id into v_user_id;
  perform auth_private.audit('sign_up', v_user_id, sign_in_anonymously.context, '{"anonymous": true}'::jsonb);
  return auth.start_session(v_user_id, sign_in_anonymously.refresh_token_hash, sign_in_anonymously.ttl_seconds, null, 'anonymous',
    sign_in_anonymously.context);
end
$$;
comment on function auth.sign_in_anonymously(text, jsonb, bytea, integer, jsonb) is E'Create a guest user with the given role and start its session. Status: ok.';

/*
 * why: argon2 parameters change over time (OWASP); after a successful sign-in with an
 * outdated hash the service stores a new one. Status: ok | not_found.
 */
drop function if exists auth.rehash_password(uuid, text, text);
create function auth.rehash_password(user_id uuid, old_hash text, new_hash text)
  returns text
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  with changed as (
    update auth_private.passwords p set hash = rehash_password.new_hash, updated_at = now()
      where p.user_id = rehash_password.user_id and p.hash = rehash_password.old_hash
      returning 1
  )
  select case when exists (select 1 from changed) then 'ok' else 'not_found' end
$$;
comment on function auth.rehash_password(uuid, text, text) is E'Replace a password hash by a rehash of the same password, unless it changed meanwhile. Status: ok | not_found.';

revoke all on function auth.sign_up(text, text, jsonb, bytea, text, bytea, integer, jsonb), auth.password_credentials(text),
  auth.get_user(uuid), auth.update_user(uuid, text, text, jsonb, uuid, jsonb, text, bytea, text), auth.sign_in_anonymously(text, jsonb, bytea, integer, jsonb),
  auth.rehash_password(uuid, text, text)
  from public;
--! EndIncluded auth/accounts.sql
--! Included auth/mfa.sql
/*
 * why: TOTP multi-factor authentication (RFC 6238: HMAC-SHA-1, 6 digits, 30-second steps,
 * one step of drift either way), with GoTrue's shapes. The whole state machine is here:
 *
 *   factor     unverified --(first verified code)--> verified --(unenrol)--> gone
 *   challenge  open --(verified code)--> used | expired (MFA challenges live 5 minutes)
 *   session    aal1 --(verified code)--> aal2 (amr gains totp); a refresh keeps it
 *
 * - The TOTP secret (20 random bytes) is stored encrypted: AES-256-CBC with a random IV
 *   (iv ‖ ciphertext), under a 32-byte key the service derives from JWT_SECRET or
 *   MFA_ENCRYPTION_KEY and passes with each call. The clear secret leaves the database
 *   once, base32, in the enrolment answer.
 * - Each code is used once: a factor remembers the last step it accepted, and only a later
 *   step is accepted next (a code seen over a shoulder, or replayed, is refused).
 * - Verification attempts are limited per factor: after `max_failures` wrong codes in
 *   `window_seconds` every attempt answers `limited` until the window slides (the counter
 *   is auth_private.rate_limits, bucket mfa_verify, keyed by the factor id).
 * - Verifying raises the caller's session to aal2 and issues a new refresh token of the
 *   same family; the family's older tokens are retired, so the aal1 refresh token cannot
 *   be traded for an aal2 session (a replay is reuse and ends the family).
 */
create extension if not exists pgcrypto with schema extensions;

create table if not exists auth_private.mfa_factors (
  id uuid primary key default gen_random_uuid(),
  user_id uuid not null references auth.users (id) on delete cascade,
  friendly_name text,
  factor_type text not null default 'totp',
  status text not null default 'unverified',
  secret bytea not null,
  last_used_step bigint,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint mfa_factors_type_check check (factor_type = 'totp'),
  constraint mfa_factors_status_check check (status in ('unverified', 'verified')),
  constraint mfa_factors_name_check check (friendly_name is null or length(friendly_name) between 1 and 100)
);
create index if not exists mfa_factors_user_id_idx on auth_private.mfa_factors (user_id);
create unique index if not exists mfa_factors_user_name_key on auth_private.mfa_factors (user_id, friendly_name) where friendly_name is not null;
comment on table auth_private.mfa_factors is E'plinth: TOTP factors; secret = iv || AES-256-CBC(secret); last_used_step makes every code usable once.';

create table if not exists auth_private.mfa_challenges (
  id uuid primary key default gen_random_uuid(),
  factor_id uuid not null references auth_private.mfa_factors (id) on delete cascade,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  verified_at timestamptz
);
create index if not exists mfa_challenges_factor_id_idx on auth_private.mfa_challenges (factor_id);
create index if not exists mfa_challenges_expires_at_idx on auth_private.mfa_challenges (expires_at);
comment on table auth_private.mfa_challenges is E'plinth: MFA challenges (5 minutes, used once by a verified code).';

/* why: the secret at rest and back (see above). */
create or replace function auth_private.mfa_seal(secret bytea, key bytea) returns bytea
  language plpgsql volatile strict
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_iv bytea := extensions.gen_random_bytes(16);
begin
  if octet_length(mfa_seal.key) <> 32 then
    raise exception 'mfa_seal: the key must be 32 bytes' using errcode = '22023';
  end if;
  return v_iv || extensions.encrypt_iv(mfa_seal.secret, mfa_seal.key, v_iv, 'aes-cbc/pad:pkcs');
end
$$;
create or replace function auth_private.mfa_unseal(sealed bytea, key bytea) returns bytea
  language sql immutable strict
  set search_path = pg_catalog, pg_temp
as $$
  select extensions.decrypt_iv(substr(mfa_unseal.sealed, 17), mfa_unseal.key, substr(mfa_unseal.sealed, 1, 16), 'aes-cbc/pad:pkcs')
$$;
comment on function auth_private.mfa_seal(bytea, bytea) is E'AES-256-CBC with a random IV: iv || ciphertext.';
comment on function auth_private.mfa_unseal(bytea, bytea) is E'Inverse of mfa_seal.';

/* why: RFC 4648 base32 without padding: the secret as authenticator apps take it. */
create or replace function auth_private.base32(data bytea) returns text
  language plpgsql immutable strict
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_bits text := '';
  v_out text := '';
begin
  for i in 0 .. octet_length(base32.data) - 1 loop
    v_bits := v_bits || get_byte(base32.data, i)::bit(8)::text;
  end loop;
  v_bits := rpad(v_bits, ((length(v_bits) + 4) / 5) * 5, '0');
  for i in 0 .. length(v_bits) / 5 - 1 loop
    v_out := v_out || substr('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', substr(v_bits, i * 5 + 1, 5)::bit(5)::integer + 1, 1);
  end loop;
  return v_out;
end
$$;
comment on function auth_private.base32(bytea) is E'RFC 4648 base32, no padding.';

/* why: RFC 6238 / RFC 4226: the 6-digit code of a secret at a 30-second step. */
create or replace function auth_private.totp(secret bytea, step bigint) returns text
  language plpgsql immutable strict
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_h bytea := extensions.hmac(int8send(totp.step), totp.secret, 'sha1');
  v_o integer := get_byte(v_h, 19) & 15;
  v_n bigint;
begin
  v_n := ((get_byte(v_h, v_o) & 127)::bigint << 24) | (get_byte(v_h, v_o + 1)::bigint << 16)
       | (get_byte(v_h, v_o + 2)::bigint << 8) | get_byte(v_h, v_o + 3)::bigint;
  return lpad((v_n % 1000000)::text, 6, '0');
end
$$;
comment on function auth_private.totp(bytea, bigint) is E'The RFC 6238 code (SHA-1, 6 digits) of a secret at a step (seconds since the epoch / 30).';

/* why: the Factor objects of a user, as GoTrue shapes them; {} when there are none. */
create or replace function auth_private.factors_json(user_id uuid) returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select case when count(*) = 0 then '{}'::jsonb else jsonb_build_object('factors', jsonb_agg(jsonb_build_object(
      'id', f.id, 'friendly_name', f.friendly_name, 'factor_type', f.factor_type, 'status', f.status,
      'created_at', auth_private.iso_utc(f.created_at), 'updated_at', auth_private.iso_utc(f.updated_at))
    order by f.created_at, f.id)) end
  from auth_private.mfa_factors f where f.user_id = factors_json.user_id
$$;
comment on function auth_private.factors_json(uuid) is E'{"factors": [...]} of a user, or {} when the user has none.';

revoke all on function auth_private.mfa_seal(bytea, bytea), auth_private.mfa_unseal(bytea, bytea), auth_private.base32(bytea),
  auth_private.totp(bytea, bigint), auth_private.factors_json(uuid) from public;

/*
 * why: POST /auth/v1/factors. A new factor is unverified until its first code is verified.
 * A user who already has a verified factor must be at aal2 to add another (someone holding
 * only the password must not add their own authenticator). At most 10 factors a user;
 * friendly names are unique per user.
 * Status: ok (factor_id, secret in base32, user_email) | user_not_found | aal2_required |
 *         name_taken | too_many_factors.
 */
drop function if exists auth.mfa_enroll(uuid, text, bytea, text, jsonb);
create function auth.mfa_enroll(user_id uuid, friendly_name text, key bytea, aal text, context jsonb default null)
  returns table (status text, factor_id uuid, secret text, user_email text)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
  v_secret bytea := extensions.gen_random_bytes(20);
  v_id uuid;
begin
  select * into v_user from auth.users u where u.id = mfa_enroll.user_id for update;
  if v_user.id is null then
    return query select 'user_not_found'::text, null::uuid, null::text, null::text;
    return;
  end if;
  if mfa_enroll.aal is distinct from 'aal2' and exists (
      select 1 from auth_private.mfa_factors f where f.user_id = v_user.id and f.status = 'verified') then
    return query select 'aal2_required'::text, null::uuid, null::text, null::text;
    return;
  end if;
  if (select count(*) from auth_private.mfa_factors f where f.user_id = v_user.id) >= 10 then
    return query select 'too_many_factors'::text, null::uuid, null::text, null::text;
    return;
  end if;
  if exists (select 1 from auth_private.mfa_factors f where f.user_id = v_user.id and f.friendly_name = mfa_enroll.friendly_name) then
    return query select 'name_taken'::text, null::uuid, null::text, null::text;
    return;
  end if;
  insert into auth_private.mfa_factors (user_id, friendly_name, secret)
    values (v_user.id, mfa_enroll.friendly_name, auth_private.mfa_seal(v_secret, mfa_enroll.key))
    returning id into v_id;
  perform auth_private.audit('mfa_enrolled', v_user.id, mfa_enroll.context, jsonb_build_object('factor_id', v_id, 'factor_type', 'totp'));
  return query select 'ok'::text, v_id, auth_private.base32(v_secret), coalesce(v_user.email, v_user.id::text);
end
$$;
comment on function auth.mfa_enroll(uuid, text, bytea, text, jsonb) is E'Enrol an unverified TOTP factor (secret encrypted under key); aal2 needed when a verified factor exists. Status: ok | user_not_found | aal2_required | name_taken | too_many_factors.';

/*
 * why: POST /auth/v1/factors/{id}/challenge: a challenge of the caller's factor, valid
 * `ttl_seconds`. Status: ok | factor_not_found.
 */
drop function if exists auth.mfa_challenge(uuid, uuid, integer);
create function auth.mfa_challenge(user_id uuid, factor_id uuid, ttl_seconds integer)
  returns table (status text, challenge_id uuid, expires_at timestamptz)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  if not exists (select 1 from auth_private.mfa_factors f where f.id = mfa_challenge.factor_id and f.user_id = mfa_challenge.user_id) then
    return query select 'factor_not_found'::text, null::uuid, null::timestamptz;
    return;
  end if;
  return query
    insert into auth_private.mfa_challenges (factor_id, expires_at)
      values (mfa_challenge.factor_id, now() + make_interval(secs => mfa_challenge.ttl_seconds))
      returning 'ok'::text, id, expires_at;
end
$$;
comment on function auth.mfa_challenge(uuid, uuid, integer) is E'Open a challenge of a user''s factor. Status: ok | factor_not_found.';

/*
 * why: POST /auth/v1/factors/{id}/verify. Checks in this order: the factor is the user's;
 * the factor is not over its failure limit; the challenge is the factor's, unused and not
 * expired; the caller's session is live; the code matches the step now, or one step before
 * or after, and that step is later than the last one accepted. A wrong code counts a
 * failure and is audited (mfa_verify_failed). On success: the challenge is used, the
 * factor verified at that step, the session raised to aal2 with totp in amr, the family's
 * older refresh tokens retired and a new one issued, all audited (mfa_verified).
 * Status: ok (session fields) | factor_not_found | limited | challenge_not_found |
 *         challenge_expired | session_not_found | invalid_code.
 */
drop function if exists auth.mfa_verify(uuid, uuid, uuid, uuid, text, bytea, bytea, integer, integer, integer, jsonb);
create function auth.mfa_verify(user_id uuid, session_id uuid, factor_id uuid, challenge_id uuid, code text, key bytea,
    refresh_token_hash bytea, ttl_seconds integer, max_failures integer, window_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_factor auth_private.mfa_factors;
  v_challenge auth_private.mfa_challenges;
  v_session auth_private.sessions;
  v_secret bytea;
  v_now_step bigint := floor(extract(epoch from now()) / 30)::bigint;
  v_step bigint;
  v_failures integer;
  v_user auth.users;
begin
  select * into v_factor from auth_private.mfa_factors f
    where f.id = mfa_verify.factor_id and f.user_id = mfa_verify.user_id for update;
  if v_factor.id is null then
    return auth_private.session_status('factor_not_found');
  end if;
  select coalesce(cardinality(array(select h from unnest(r.hits) h
      where h > clock_timestamp() - make_interval(secs => mfa_verify.window_seconds))), 0)
    into v_failures
    from auth_private.rate_limits r where r.bucket = 'mfa_verify' and r.ip = v_factor.id::text;
  if coalesce(v_failures, 0) >= mfa_verify.max_failures then
    return auth_private.session_status('limited');
  end if;
  select * into v_challenge from auth_private.mfa_challenges c
    where c.id = mfa_verify.challenge_id and c.factor_id = v_factor.id and c.verified_at is null for update;
  if v_challenge.id is null then
    return auth_private.session_status('challenge_not_found');
  end if;
  if v_challenge.expires_at <= now() then
    return auth_private.session_status('challenge_expired');
  end if;
  select * into v_session from auth_private.sessions s
    where s.id = mfa_verify.session_id and s.user_id = mfa_verify.user_id and s.revoked_at is null for update;
  if v_session.id is null then
    return auth_private.session_status('session_not_found');
  end if;

  v_secret := auth_private.mfa_unseal(v_factor.secret, mfa_verify.key);
  select s into v_step from generate_series(v_now_step - 1, v_now_step + 1) s
    where s > coalesce(v_factor.last_used_step, -1)
      and mfa_verify.code ~ '^[0-9]{6}$'
      and auth_private.totp(v_secret, s) = mfa_verify.code
    order by s limit 1;
  if v_step is null then
    perform auth.take_rate_limit('mfa_verify', v_factor.id::text, mfa_verify.max_failures, mfa_verify.window_seconds);
    perform auth_private.audit('mfa_verify_failed', mfa_verify.user_id, mfa_verify.context, jsonb_build_object('factor_id', v_factor.id));
    return auth_private.session_status('invalid_code');
  end if;

  update auth_private.mfa_challenges c set verified_at = now() where c.id = v_challenge.id;
  update auth_private.mfa_factors f set status = 'verified', last_used_step = v_step, updated_at = now() where f.id = v_factor.id;
  update auth_private.sessions s
    set aal = 'aal2',
        amr = s.amr || jsonb_build_array(jsonb_build_object('method', 'totp', 'timestamp', floor(extract(epoch from now()))::bigint))
    where s.id = v_session.id
    returning * into v_session;
  update auth_private.refresh_tokens t set rotated_at = now() where t.session_id = v_session.id and t.rotated_at is null;
  insert into auth_private.refresh_tokens (token_hash, session_id, expires_at)
    values (mfa_verify.refresh_token_hash, v_session.id, now() + make_interval(secs => mfa_verify.ttl_seconds));
  perform auth_private.audit('mfa_verified', mfa_verify.user_id, mfa_verify.context,
    jsonb_build_object('factor_id', v_factor.id, 'first', v_factor.status = 'unverified', 'session_id', v_session.id));
  select * into v_user from auth.users u where u.id = mfa_verify.user_id;
  return row('ok', v_session.id, v_user.is_anonymous, auth_private.user_json(v_user) || auth_private.factors_json(v_user.id),
    v_session.aal, v_session.amr, auth_private.app_metadata(v_user))::auth.session_result;
end
$$;
comment on function auth.mfa_verify(uuid, uuid, uuid, uuid, text, bytea, bytea, integer, integer, integer, jsonb) is E'Verify a TOTP code against a challenge: the session becomes aal2 with a new refresh token. Status: ok | factor_not_found | limited | challenge_not_found | challenge_expired | session_not_found | invalid_code.';

/*
 * why: DELETE /auth/v1/factors/{id}: a verified factor can only be removed from an aal2
 * session (else whoever stole the password removes the second factor).
 * Status: ok | not_found | aal2_required.
 */
drop function if exists auth.mfa_unenroll(uuid, uuid, text, jsonb);
create function auth.mfa_unenroll(user_id uuid, factor_id uuid, aal text, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_status text;
begin
  select f.status into v_status from auth_private.mfa_factors f
    where f.id = mfa_unenroll.factor_id and f.user_id = mfa_unenroll.user_id for update;
  if v_status is null then
    return 'not_found';
  end if;
  if v_status = 'verified' and mfa_unenroll.aal is distinct from 'aal2' then
    return 'aal2_required';
  end if;
  delete from auth_private.mfa_factors f where f.id = mfa_unenroll.factor_id;
  perform auth_private.audit('mfa_unenrolled', mfa_unenroll.user_id, mfa_unenroll.context, jsonb_build_object('factor_id', mfa_unenroll.factor_id));
  return 'ok';
end
$$;
comment on function auth.mfa_unenroll(uuid, uuid, text, jsonb) is E'Remove a user''s factor (aal2 needed for a verified one). Status: ok | not_found | aal2_required.';

/* why: the admin API: a user's factors, and removing one. Status: ok | not_found. */
drop function if exists auth.admin_list_factors(uuid);
create function auth.admin_list_factors(user_id uuid)
  returns table (status text, factors jsonb)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select case when exists (select 1 from auth.users u where u.id = admin_list_factors.user_id) then 'ok' else 'not_found' end,
    coalesce(auth_private.factors_json(admin_list_factors.user_id) -> 'factors', '[]'::jsonb)
$$;
comment on function auth.admin_list_factors(uuid) is E'A user''s factors as a JSON array. Status: ok | not_found (no such user).';

drop function if exists auth.admin_delete_factor(uuid, uuid, jsonb);
create function auth.admin_delete_factor(user_id uuid, factor_id uuid, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from auth_private.mfa_factors f where f.id = admin_delete_factor.factor_id and f.user_id = admin_delete_factor.user_id;
  if not found then
    return 'not_found';
  end if;
  perform auth_private.audit('admin_factor_deleted', admin_delete_factor.user_id, admin_delete_factor.context,
    jsonb_build_object('factor_id', admin_delete_factor.factor_id));
  return 'ok';
end
$$;
comment on function auth.admin_delete_factor(uuid, uuid, jsonb) is E'Admin: remove a factor of a user; audited. Status: ok | not_found.';

revoke all on function auth.mfa_enroll(uuid, text, bytea, text, jsonb), auth.mfa_challenge(uuid, uuid, integer),
  auth.mfa_verify(uuid, uuid, uuid, uuid, text, bytea, bytea, integer, integer, integer, jsonb),
  auth.mfa_unenroll(uuid, uuid, text, jsonb), auth.admin_list_factors(uuid), auth.admin_delete_factor(uuid, uuid, jsonb) from public;

/*
 * why: RLS policies that require a second factor: `using (auth.aal() = 'aal2')`. Written
 * like the other claim helpers (core/claims.sql): inlinable, names qualified.
 */
create or replace function auth.aal() returns pg_catalog.text
  language sql stable
as $$
  select coalesce(nullif(pg_catalog.current_setting('request.jwt.claims', true), ''), '{}')::pg_catalog.jsonb
    operator(pg_catalog.->>) 'aal'
$$;
comment on function auth.aal() is E'The calling request''s assurance level (claim aal: aal1 or aal2), or null. Inlinable.';
revoke all on function auth.aal() from public;
grant execute on function auth.aal() to anon, authenticated, service_role, ":ANONYMOUS_ROLE";
--! EndIncluded auth/mfa.sql
--! Included auth/guests.sql
/*
 * why: guests become users (docs/api/auth.md, "Guests"). A guest keeps its id, and so every
 * row an application keyed on it; what changes is that once it has a confirmed email it is
 * no guest any more: is_anonymous false and, unless the same update set another role, the
 * `authenticated` role (tokens from then on carry both). One trigger, so that every way an
 * address gets confirmed does it: PATCH/PUT /auth/v1/user without REQUIRE_EMAIL_VERIFICATION,
 * the confirmation link, a magic link, a recovery, an OAuth identity linked to the guest, an
 * admin's email_confirm. Audited as `guest_upgraded`.
 */
create or replace function auth_private.guest_confirmed() returns trigger
  language plpgsql
  set search_path = pg_catalog, pg_temp
as $$
begin
  new.is_anonymous := false;
  if new.role = old.role then
    new.role := 'authenticated';
  end if;
  if not ('email' = any (new.providers)) and new.provider is null then
    new.providers := new.providers || '{email}'::text[];
  end if;
  perform auth_private.audit('guest_upgraded', new.id, null, '{}'::jsonb);
  return new;
end
$$;
comment on function auth_private.guest_confirmed() is E'Trigger: a guest whose email is confirmed becomes a user (is_anonymous false, role authenticated unless set in the same update).';
revoke all on function auth_private.guest_confirmed() from public;

drop trigger if exists users_guest_confirmed on auth.users;
create trigger users_guest_confirmed before update of email_confirmed_at, email on auth.users
  for each row
  when (old.is_anonymous and new.is_anonymous and new.email is not null and new.email_confirmed_at is not null)
  execute function auth_private.guest_confirmed();
--! EndIncluded auth/guests.sql
--! Included auth/oauth_link.sql
/*
 * why: a guest links an OAuth identity (GoTrue's GET /auth/v1/user/identities/authorize):
 * the authorization request remembers which guest asked (oauth_states.link_user_id), and
 * the callback gives that guest the provider-verified address instead of signing in to
 * (or creating) the account of that address. The guest keeps its id and rows and, its
 * address being confirmed, becomes a user (the guests.sql trigger).
 */
alter table auth_private.oauth_states add column if not exists link_user_id uuid references auth.users (id) on delete cascade;
comment on column auth_private.oauth_states.link_user_id is E'The guest an identity-linking request is for; null for a sign-in.';

/*
 * why: GET /auth/v1/user/identities/authorize stores its request like authorize does, with
 * the guest it is for. Only a guest links (an account with an address has its identity).
 * Status: ok | not_a_guest (a user with an address, or one gone).
 */
drop function if exists auth.create_oauth_link_state(bytea, text, text, text, integer, uuid);
create function auth.create_oauth_link_state(state_hash bytea, provider text, code_verifier text, nonce text, ttl_seconds integer, user_id uuid)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if not exists (select 1 from auth.users u where u.id = create_oauth_link_state.user_id and u.is_anonymous) then
    return 'not_a_guest';
  end if;
  perform auth.create_oauth_state(create_oauth_link_state.state_hash, create_oauth_link_state.provider,
    create_oauth_link_state.code_verifier, create_oauth_link_state.nonce, create_oauth_link_state.ttl_seconds);
  update auth_private.oauth_states s set link_user_id = create_oauth_link_state.user_id
    where s.state_hash = create_oauth_link_state.state_hash;
  return 'ok';
end
$$;
comment on function auth.create_oauth_link_state(bytea, text, text, text, integer, uuid) is E'Store an identity-linking OAuth request for a guest. Status: ok | not_a_guest.';

/* why: the callback asks, after consuming the state, whether it was a linking request and for whom. */
drop function if exists auth.oauth_state_link_user(bytea);
create function auth.oauth_state_link_user(state_hash bytea)
  returns uuid
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.link_user_id from auth_private.oauth_states s where s.state_hash = oauth_state_link_user.state_hash
$$;
comment on function auth.oauth_state_link_user(bytea) is E'The guest an OAuth state links an identity to; null for a sign-in.';

/*
 * why: the linking callback's account step and session, in one transaction. Only a
 * provider-verified email links (as oauth_sign_in). The guest gets the address (proven:
 * the provider vouched), the provider, and a confirmation, which makes it a user; an
 * address that is another account's is email_taken (that account signs in with the
 * provider itself); a guest that meanwhile has an address or is gone is not_a_guest.
 * Status: ok (session fields set) | unverified_email | email_taken | not_a_guest.
 */
drop function if exists auth.oauth_link_guest(uuid, text, text, boolean, bytea, integer, jsonb);
create function auth.oauth_link_guest(user_id uuid, provider text, email text, email_verified boolean, refresh_token_hash bytea,
    refresh_ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_email text := pg_catalog.lower(oauth_link_guest.email);
begin
  if v_email is null or oauth_link_guest.email_verified is distinct from true then
    return auth_private.session_status('unverified_email');
  end if;
  perform 1 from auth.users u where u.id = oauth_link_guest.user_id and u.is_anonymous and u.email is null for update;
  if not found then
    return auth_private.session_status('not_a_guest');
  end if;
  begin
    update auth.users u set email = v_email, provider = oauth_link_guest.provider,
        providers = pg_catalog.array_append(u.providers, oauth_link_guest.provider),
        email_confirmed_at = now(), updated_at = now()
      where u.id = oauth_link_guest.user_id;
  exception when unique_violation then
    return auth_private.session_status('email_taken');
  end;
  perform auth_private.prove_address(oauth_link_guest.user_id, v_email, 'oauth', false);
  perform auth_private.audit('oauth_linked', oauth_link_guest.user_id, oauth_link_guest.context,
    jsonb_build_object('provider', oauth_link_guest.provider, 'guest', true));
  return auth.start_session(oauth_link_guest.user_id, oauth_link_guest.refresh_token_hash, oauth_link_guest.refresh_ttl_seconds, null, 'oauth',
    oauth_link_guest.context);
end
$$;
comment on function auth.oauth_link_guest(uuid, text, text, boolean, bytea, integer, jsonb) is E'Give a guest a provider-verified address and the provider (so it becomes a user) and start a session. Status: ok | unverified_email | email_taken | not_a_guest.';

revoke all on function auth.create_oauth_link_state(bytea, text, text, text, integer, uuid), auth.oauth_state_link_user(bytea),
  auth.oauth_link_guest(uuid, text, text, boolean, bytea, integer, jsonb) from public;
--! EndIncluded auth/oauth_link.sql
