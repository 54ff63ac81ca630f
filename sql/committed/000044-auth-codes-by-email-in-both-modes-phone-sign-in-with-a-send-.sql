--! Previous: sha1:bcd1b387f9d7631fea4941168ae959aea1325315
--! Hash: sha1:d10ea93a4385379667f40dcb9b02d6065c4fbace
--! Message: auth: codes by email in both modes, phone sign-in with a send-SMS hook

-- Enter migration here
--! Included auth/otp.sql
/*
 * why: one-time codes (docs/api/auth.md, "Codes by email and phone sign-in"): a 6-digit
 * code beside every magic-link mail, and phone sign-in by a code sent through the
 * send-SMS hook. The codes are rows of auth_private.one_time_tokens (one_time_tokens.sql),
 * stored by SHA-256 over the address and the code (the service hashes them: a code's hash
 * names one address), marked `is_code`. A mail's link and code are one grant: using either
 * spends the other (spend_other_tokens); a phone code spends the number's other codes.
 *
 * States of a code: issued (used_at null, expires_at future) → used (used_at set: signed
 * in, or spent by its twin, or burnt by MAX_CODE_ATTEMPTS wrong tries) | expired.
 * Lifetimes: an emailed code lives as long as its link (1 hour); a phone code 10 minutes.
 * Wrong tries: every wrong code presented for an address counts against the address's
 * live codes; the 5th wrong one burns them (a new code must be asked for).
 */

-- The phone of an account: E.164 ("+" and 8 to 15 digits), unique, proven once a code sent to it was used.
alter table auth.users add column if not exists phone text;
alter table auth.users add column if not exists phone_confirmed_at timestamptz;
alter table auth.users drop constraint if exists users_phone_check;
alter table auth.users add constraint users_phone_check check (phone is null or phone ~ '^\+[1-9][0-9]{7,14}$');
create unique index if not exists users_phone_key on auth.users (phone) where phone is not null;
comment on column auth.users.phone is 'E.164 phone number (+ and 8 to 15 digits), unique; null when the account has none.';
comment on column auth.users.phone_confirmed_at is 'When a code sent to the phone number was first used; null: not proven.';
alter table auth.users drop constraint if exists users_identity_check;
alter table auth.users add constraint users_identity_check
  check (email is not null or phone is not null or is_anonymous or provider is not null);

-- Codes among the one-time tokens: a phone row is bound to its number, an email row to its address.
alter table auth_private.one_time_tokens alter column email drop not null;
alter table auth_private.one_time_tokens add column if not exists phone text;
alter table auth_private.one_time_tokens add column if not exists is_code boolean not null default false;
alter table auth_private.one_time_tokens add column if not exists failed_attempts integer not null default 0;
alter table auth_private.one_time_tokens drop constraint if exists one_time_tokens_kind_check;
alter table auth_private.one_time_tokens add constraint one_time_tokens_kind_check
  check (kind in ('verification', 'recovery', 'magic_link', 'sms'));
alter table auth_private.one_time_tokens drop constraint if exists one_time_tokens_address_check;
alter table auth_private.one_time_tokens add constraint one_time_tokens_address_check
  check (case when kind = 'sms' then phone is not null else email is not null end);

/*
 * why: POST /auth/v1/otp with `phone`. With create_user, an unknown number gets an account
 * (no email, no password, the number unproven, `data` as user_metadata, provider phone), as
 * GoTrue's signInWithOtp does. The number's earlier unused codes are spent (only the latest
 * SMS works) and one auth__send_sms job is added in the same transaction, with the code
 * sealed. An unknown number without create_user gets a job without a recipient: the same
 * work either way. `sms_limit` codes per number in any hour (auth_private.rate_limits,
 * bucket `sms`), counted for every number, known or not; 0 disables.
 * Status: sent | created | not_found | limited.
 */
create or replace function auth.send_phone_code(phone text, create_user boolean, user_metadata jsonb, code_hash bytea, sealed_code text,
    sms_limit integer, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
  v_created boolean := false;
begin
  if send_phone_code.phone !~ '^\+[1-9][0-9]{7,14}$' then
    raise exception 'invalid phone number' using errcode = 'PT400';
  end if;
  if auth.take_rate_limit('sms', send_phone_code.phone, send_phone_code.sms_limit, 3600) = 'limited' then
    return 'limited';
  end if;
  select * into v_user from auth.users u where u.phone = send_phone_code.phone for update;
  if v_user.id is null and send_phone_code.create_user then
    insert into auth.users (phone, user_metadata, providers)
      values (send_phone_code.phone, coalesce(send_phone_code.user_metadata, '{}'::jsonb), '{phone}')
      on conflict (phone) where phone is not null do nothing
      returning * into v_user;
    if v_user.id is null then -- created meanwhile by a concurrent request: use that account
      select * into v_user from auth.users u where u.phone = send_phone_code.phone for update;
    else
      v_created := true;
      perform auth_private.audit('sign_up', v_user.id, send_phone_code.context, '{"method": "otp", "provider": "phone"}'::jsonb);
    end if;
  end if;
  if v_user.id is null then
    perform graphile_worker.add_job('auth__send_sms', json_build_object('to', null), max_attempts => 3);
    return 'not_found';
  end if;
  update auth_private.one_time_tokens t set used_at = now()
    where t.user_id = v_user.id and t.kind = 'sms' and t.used_at is null;
  delete from auth_private.one_time_tokens t where t.token_hash = send_phone_code.code_hash;
  insert into auth_private.one_time_tokens (token_hash, user_id, kind, phone, is_code, expires_at)
    values (send_phone_code.code_hash, v_user.id, 'sms', v_user.phone, true, now() + interval '10 minutes');
  perform graphile_worker.add_job('auth__send_sms',
    json_build_object('to', v_user.phone, 'user_id', v_user.id, 'sealed_code', send_phone_code.sealed_code), max_attempts => 3);
  return case when v_created then 'created' else 'sent' end;
end
$$;
comment on function auth.send_phone_code(text, boolean, jsonb, bytea, text, integer, jsonb) is E'Issue a phone code (10 min, once) and enqueue its SMS (auth__send_sms); an unknown number without create_user gets a job that sends nothing. Status: sent | created | not_found | limited.';

/*
 * why: the phone half of auth.verify_code: the code (already checked to be the number's
 * live one) spent with the number's other codes, the number proven, and a session with
 * amr otp. On the number's first proof, user_metadata that was not set by the very
 * request that issued this code is dropped: whoever typed the number first may not own it.
 */
create or replace function auth_private.use_phone_code(user_id uuid, token_hash bytea, refresh_token_hash bytea, ttl_seconds integer,
    context jsonb)
  returns auth.session_result
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_issued_at timestamptz;
begin
  update auth_private.one_time_tokens t set used_at = now()
    where t.token_hash = use_phone_code.token_hash and t.used_at is null
    returning t.created_at into v_issued_at;
  if not found then
    return auth_private.session_status('invalid');
  end if;
  update auth_private.one_time_tokens t set used_at = now()
    where t.user_id = use_phone_code.user_id and t.kind = 'sms' and t.used_at is null;
  update auth.users u
     set phone_confirmed_at = now(),
         user_metadata = case when u.created_at = v_issued_at then u.user_metadata else '{}'::jsonb end,
         providers = case when 'phone' = any (u.providers) then u.providers else u.providers || '{phone}'::text[] end,
         updated_at = now()
   where u.id = use_phone_code.user_id and u.phone_confirmed_at is null;
  return auth.start_session(use_phone_code.user_id, use_phone_code.refresh_token_hash, use_phone_code.ttl_seconds, null, 'otp',
    use_phone_code.context);
end
$$;
comment on function auth_private.use_phone_code(uuid, bytea, bytea, integer, jsonb) is E'Spend a phone code and the number''s other codes, prove the number, start a session (amr otp). Status: ok | invalid.';

/*
 * why: POST /auth/v1/verify with a code (both modes): `email` or `phone` with the code's
 * hash, and the token kinds the verification type allows (email: magic_link; signup and
 * invite: magic_link, verification; recovery: recovery; sms: sms). The account's row is
 * locked, its live codes of those kinds looked at:
 * - the presented hash is one of them: used as its link would be (auth.compat_verify, amr
 *   otp: the link is spent with it) or, for sms, auth_private.use_phone_code;
 * - it is none of them: a wrong try counted on every live code of those kinds; at
 *   `max_attempts` wrong tries they are burnt (used). An unknown address counts nothing.
 * The service also limits tries per address and hour (take_rate_limit, bucket otp_code).
 * Status: ok | invalid.
 */
create or replace function auth.verify_code(kinds text[], email text, phone text, code_hash bytea, refresh_token_hash bytea,
    ttl_seconds integer, max_attempts integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
  v_kind text;
begin
  if verify_code.phone is not null then
    select u.id into v_user_id from auth.users u where u.phone = verify_code.phone for update;
  else
    select u.id into v_user_id from auth.users u where lower(u.email) = lower(verify_code.email) for update;
  end if;
  if v_user_id is null then
    return auth_private.session_status('invalid');
  end if;
  select t.kind into v_kind from auth_private.one_time_tokens t join auth.users u on u.id = t.user_id
    where t.token_hash = verify_code.code_hash and t.user_id = v_user_id and t.kind = any (verify_code.kinds) and t.is_code
      and t.used_at is null and t.expires_at > now()
      and case when t.kind = 'sms' then t.phone = u.phone else lower(t.email) = lower(u.email) end;
  if v_kind is null then
    update auth_private.one_time_tokens t
       set failed_attempts = t.failed_attempts + 1,
           used_at = case when t.failed_attempts + 1 >= verify_code.max_attempts then now() end
     where t.user_id = v_user_id and t.kind = any (verify_code.kinds) and t.is_code and t.used_at is null and t.expires_at > now();
    return auth_private.session_status('invalid');
  end if;
  if v_kind = 'sms' then
    return auth_private.use_phone_code(v_user_id, verify_code.code_hash, verify_code.refresh_token_hash, verify_code.ttl_seconds,
      verify_code.context);
  end if;
  return auth.compat_verify(v_kind, verify_code.code_hash, verify_code.refresh_token_hash, verify_code.ttl_seconds,
    verify_code.context, 'otp');
end
$$;
comment on function auth.verify_code(text[], text, text, bytea, bytea, integer, integer, jsonb) is E'Use an emailed or phone code of an address and start a session; a wrong code counts against the address''s live codes, burnt at max_attempts. Status: ok | invalid.';

/* why: the send-SMS hook's `user`: the GoTrue User object of an id (compat.sql), in both modes; null when the user is gone. */
create or replace function auth.sms_hook_user(user_id uuid) returns jsonb
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select auth_private.gotrue_user_json(u) from auth.users u where u.id = sms_hook_user.user_id
$$;
comment on function auth.sms_hook_user(uuid) is E'The User object the send-SMS hook is given (GoTrue''s shape); null when the user is gone.';

/*
 * why: AUTH_HOOK_SEND_SMS=pg-functions://<db>/<schema>/<function>: the application's
 * `(event jsonb) returns jsonb`, called with GoTrue's {user, sms: {otp}}. It answers {} (or
 * anything without `error`); GoTrue's {error: {http_code, message}}, or raising, is a
 * failed send (the auth__send_sms job is retried). The hook runs with the rights of the
 * service's database role. Status: ok | failed | invalid (no such function), message.
 */
create or replace function auth.run_send_sms_hook(hook text, event jsonb)
  returns table (status text, message text)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_proc regproc;
  v_result jsonb;
  v_message text;
begin
  begin
    v_proc := pg_catalog.to_regproc(run_send_sms_hook.hook);
  exception when others then
    v_proc := null;
  end;
  if v_proc is null then
    return query select 'invalid'::text, 'send-SMS hook function not found'::text;
    return;
  end if;
  begin
    execute pg_catalog.format('select %s($1)::jsonb', v_proc::text) into v_result using run_send_sms_hook.event;
  exception when others then
    get stacked diagnostics v_message = message_text;
    return query select 'failed'::text, v_message;
    return;
  end;
  if pg_catalog.jsonb_typeof(v_result -> 'error') = 'object' then
    return query select 'failed'::text, coalesce(v_result #>> '{error,message}', 'the send-SMS hook answered an error');
    return;
  end if;
  return query select 'ok'::text, null::text;
end
$$;
comment on function auth.run_send_sms_hook(text, jsonb) is E'Run the send-SMS hook SQL function on {user, sms: {otp}}. Status: ok | failed | invalid.';

revoke all on function auth.send_phone_code(text, boolean, jsonb, bytea, text, integer, jsonb),
  auth_private.use_phone_code(uuid, bytea, bytea, integer, jsonb),
  auth.verify_code(text[], text, text, bytea, bytea, integer, integer, jsonb), auth.sms_hook_user(uuid),
  auth.run_send_sms_hook(text, jsonb) from public;
--! EndIncluded auth/otp.sql
--! Included auth/users.sql
/*
 * why: accounts (docs/api/auth.md). `auth.users` is the public surface: an
 * application table may reference `auth.users(id)`, and a DBA may grant columns of it to
 * API roles for RLS policies. Nothing secret lives here: password hashes, refresh-token and
 * one-time-token hashes and rate-limit counters live in `auth_private`, where API roles
 * have no USAGE, so a grant mistake on `auth.users` exposes no secret (STYLE, Schemas).
 *
 * - email is unique case-insensitively (unique index on lower(email)); the service stores
 *   it lower-cased, as GoTrue does. Guests (is_anonymous) have no email.
 * - role is the database role a session of this user gets: anon, authenticated,
 *   service_role or the guest role. The check only pins the syntax of a role name; the
 *   service decides which names it sets (ANONYMOUS_ROLE may be renamed by configuration).
 * - provider: the OAuth provider of an OAuth user (null for email and guest users);
 *   providers: every provider the account has signed in with (`email` for password users).
 * - email_confirmed_at: null while awaiting confirmation (REQUIRE_EMAIL_VERIFICATION).
 */
create schema if not exists auth_private;
revoke all on schema auth_private from public;
comment on schema auth_private is E'plinth: auth internals and secrets (token hashes, password hashes, rate-limit counters). No API role has USAGE.';

create table if not exists auth.users (
  id uuid primary key default gen_random_uuid(),
  email text,
  role text not null default 'authenticated',
  user_metadata jsonb not null default '{}'::jsonb,
  provider text,
  providers text[] not null default '{}'::text[],
  email_confirmed_at timestamptz,
  is_anonymous boolean not null default false,
  last_sign_in_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint users_role_check check (role ~ '^[a-z_][a-z0-9_]{0,62}$'),
  constraint users_user_metadata_check check (jsonb_typeof(user_metadata) = 'object'),
  constraint users_provider_check check (provider is null or provider in ('google', 'github', 'apple', 'microsoft', 'oidc')),
  constraint users_email_check check (email is null or (length(email) between 3 and 320 and position('@' in email) > 1)),
  constraint users_identity_check check (email is not null or is_anonymous or provider is not null)
);
create unique index if not exists users_email_key on auth.users (lower(email));

revoke all on table auth.users from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";

comment on table auth.users is E'plinth: one row per account (email/password, OAuth or guest). Application tables may reference auth.users(id). Secrets are in auth_private.';
comment on column auth.users.email is E'Lower-cased address, unique case-insensitively; null for guests.';
comment on column auth.users.role is E'Database role of this user''s sessions: anon, authenticated, service_role or the guest role.';
comment on column auth.users.user_metadata is E'Free JSON object: data at signup, merged by PATCH /auth/v1/user.';
comment on column auth.users.provider is E'OAuth provider (google, github, apple, microsoft, oidc); null for email and guest users.';
comment on column auth.users.providers is E'Every provider the account has signed in with (email for password users).';
comment on column auth.users.email_confirmed_at is E'When the address was confirmed; null while awaiting confirmation.';
comment on column auth.users.is_anonymous is E'Guest account (POST /auth/v1/anonymous); its tokens carry is_anonymous = true.';

/*
 * why: argon2id hashes, kept apart from auth.users (see above). Hashing happens in the
 * service (CPU-heavy, off the database); SQL only stores and returns the encoded hash.
 */
create table if not exists auth_private.passwords (
  user_id uuid primary key references auth.users (id) on delete cascade,
  hash text not null,
  updated_at timestamptz not null default now()
);
comment on table auth_private.passwords is E'plinth: argon2id password hashes (PHC string), one per user that has a password.';

/*
 * why: one place that shapes the User object of the wire (docs/api/auth.md):
 * id, email, role, user_metadata, created_at, updated_at always; provider only for OAuth
 * users. Timestamps are ISO 8601 UTC whatever the session's TimeZone.
 * These two helpers run on every sign-in and refresh, so they are written to be inlined
 * into their callers: no `set search_path` (a SET clause forbids inlining), and instead
 * every function, operator and type name is qualified with pg_catalog, so no search_path
 * can redirect them. They are not security definer and no API role may execute them.
 */
create or replace function auth_private.iso_utc(ts timestamptz) returns text
  language sql stable strict parallel safe
as $$
  select pg_catalog.to_char(pg_catalog.timezone('UTC', iso_utc.ts), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
comment on function auth_private.iso_utc(timestamptz) is E'A timestamp as ISO 8601 UTC text (2024-05-01T12:00:00.000000Z). Inlinable: no SET clause, names qualified.';

create or replace function auth_private.user_json(u auth.users) returns pg_catalog.jsonb
  language sql stable parallel safe
as $$
  select pg_catalog.jsonb_build_object(
      'id', u.id,
      'email', u.email,
      'role', u.role,
      'user_metadata', u.user_metadata,
      'created_at', auth_private.iso_utc(u.created_at),
      'updated_at', auth_private.iso_utc(u.updated_at))
    operator(pg_catalog.||) case when u.provider is null then '{}'::pg_catalog.jsonb
      else pg_catalog.jsonb_build_object('provider', u.provider) end
    operator(pg_catalog.||) case when u.phone is null then '{}'::pg_catalog.jsonb
      else pg_catalog.jsonb_build_object('phone', u.phone) end
$$;
comment on function auth_private.user_json(auth.users) is E'The User object of the wire (docs/api/auth.md): provider only for OAuth users, phone only for users with one. Inlinable: no SET clause, names qualified.';

revoke all on function auth_private.iso_utc(timestamptz), auth_private.user_json(auth.users) from public;
--! EndIncluded auth/users.sql
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
    'phone', u.phone,
    'phone_confirmed_at', auth_private.iso_utc(u.phone_confirmed_at),
    'invited_at', auth_private.iso_utc(u.invited_at),
    'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at),
    'banned_until', case when u.banned_until operator(pg_catalog.>) pg_catalog.now() then auth_private.iso_utc(u.banned_until) end)
$$;
comment on function auth_private.admin_user_json(auth.users) is E'The User object with app_metadata, is_anonymous, email_confirmed_at, phone, phone_confirmed_at, invited_at, last_sign_in_at and banned_until (null unless banned now).';
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
--! Included auth/hook.sql
/*
 * why: the custom access-token hook (AUTH_HOOK_CUSTOM_ACCESS_TOKEN=schema.function): an
 * application's SQL function `(event jsonb) returns jsonb`, called with GoTrue's event
 * shape {user_id, claims, authentication_method} whenever a token is issued, returns
 * {claims: {...}} to sign. This function runs it and holds the rules:
 * - the claims that make the token what it is cannot change: sub, role (a user has one
 *   role), aud, exp, iat, aal, amr, session_id, email, phone and is_anonymous (RLS policies and
 *   the service read them as facts about the account and its sign-in). A change of one of
 *   them is undone and named in `refused` (the service logs it); every other claim the hook
 *   returns is signed.
 * - a hook that raises refuses the token: status `raised` with its message (the service
 *   answers 403 with it). GoTrue's `{error: {http_code, message}}` answer does the same
 *   with its own 4xx status.
 * - a missing function or an answer without a `claims` object: status `invalid`.
 * The time limit (2 s) is the service's: it cancels the statement, which ends here as an
 * error no handler below catches (query_canceled is not among `others`).
 * The hook runs with the rights of the service's database role.
 * Status: ok | raised | refused | invalid.
 */
drop function if exists auth.run_access_token_hook(text, jsonb);
create function auth.run_access_token_hook(hook text, event jsonb)
  returns table (status text, claims jsonb, refused text[], message text, http_code integer)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_proc regproc;
  v_result jsonb;
  v_claims jsonb;
  v_original jsonb := run_access_token_hook.event -> 'claims';
  v_refused text[] := '{}';
  v_key text;
  v_message text;
  v_code integer;
begin
  begin
    v_proc := pg_catalog.to_regproc(run_access_token_hook.hook);
  exception when others then
    v_proc := null;
  end;
  if v_proc is null then
    return query select 'invalid'::text, null::jsonb, null::text[], 'access token hook not found'::text, null::integer;
    return;
  end if;
  begin
    execute pg_catalog.format('select %s($1)::jsonb', v_proc::text) into v_result using run_access_token_hook.event;
  exception when others then
    get stacked diagnostics v_message = message_text;
    return query select 'raised'::text, null::jsonb, null::text[], v_message, null::integer;
    return;
  end;
  if pg_catalog.jsonb_typeof(v_result -> 'error') = 'object' then
    v_code := case when (v_result #>> '{error,http_code}') ~ '^4[0-9][0-9]$' then (v_result #>> '{error,http_code}')::integer else 403 end;
    return query select 'refused'::text, null::jsonb, null::text[], v_result #>> '{error,message}', v_code;
    return;
  end if;
  v_claims := v_result -> 'claims';
  if v_claims is null or pg_catalog.jsonb_typeof(v_claims) <> 'object' then
    return query select 'invalid'::text, null::jsonb, null::text[], 'access token hook returned no claims object'::text, null::integer;
    return;
  end if;
  foreach v_key in array array['sub', 'role', 'aud', 'exp', 'iat', 'aal', 'amr', 'session_id', 'email', 'phone', 'is_anonymous'] loop
    if (v_claims -> v_key) is distinct from (v_original -> v_key) then
      v_refused := v_refused || v_key;
      v_claims := case when v_original ? v_key then v_claims || pg_catalog.jsonb_build_object(v_key, v_original -> v_key)
                       else v_claims - v_key end;
    end if;
  end loop;
  return query select 'ok'::text, v_claims, v_refused, null::text, null::integer;
end
$$;
comment on function auth.run_access_token_hook(text, jsonb) is E'Run the custom access-token hook on an event; sub, role, aud, exp, iat, aal, amr, session_id, email, phone and is_anonymous cannot change (refused lists the tries). Status: ok | raised | refused | invalid.';
revoke all on function auth.run_access_token_hook(text, jsonb) from public;
--! EndIncluded auth/hook.sql
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
      'phone', coalesce(substr(u.phone, 2), ''),
      'phone_confirmed_at', auth_private.iso_utc(u.phone_confirmed_at),
      'confirmed_at', auth_private.iso_utc(coalesce(u.email_confirmed_at, u.phone_confirmed_at)),
      'last_sign_in_at', auth_private.iso_utc(u.last_sign_in_at),
      'app_metadata', jsonb_build_object(
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
drop function if exists auth.compat_verify(text, bytea, bytea, integer, jsonb);
create or replace function auth.compat_verify(kind text, token_hash bytea, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null,
    method text default null)
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
  select s.user_id, s.email, s.issued_at into v_user_id, v_email, v_issued_at
    from auth_private.spend_one_time_token(compat_verify.token_hash, compat_verify.kind) s;
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

revoke all on function auth_private.gotrue_user_json(auth.users), auth.compat_user(uuid),
  auth.compat_send_link(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, jsonb),
  auth.compat_verify(text, bytea, bytea, integer, jsonb, text), auth.compat_end_sessions(uuid, uuid, text, jsonb) from public;
--! EndIncluded auth/compat.sql
