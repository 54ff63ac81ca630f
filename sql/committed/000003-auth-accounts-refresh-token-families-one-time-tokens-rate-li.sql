--! Previous: sha1:76842e407b736ef7159994caf27d73429a301636
--! Hash: sha1:291b78eb7b04c75437f3062c658c72f86d038083
--! Message: auth: accounts, refresh-token families, one-time tokens, rate limits, admin, OAuth state, purge

--! Included auth/users.sql
/*
 * why: accounts (interface §2.1, contract §5). `auth.users` is the public surface: an
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
 * why: one place that shapes the User object of the wire (interface §2.1, contract §9):
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
$$;
comment on function auth_private.user_json(auth.users) is E'The User object of the wire (interface §2.1): provider only for OAuth users. Inlinable: no SET clause, names qualified.';

revoke all on function auth_private.iso_utc(timestamptz), auth_private.user_json(auth.users) from public;
--! EndIncluded auth/users.sql
--! Included auth/sessions.sql
/*
 * why: sessions are refresh-token families (interface §3.1, contract §3). A family starts at
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
 * access token: the family id, is_anonymous and the User object (role and email are in it).
 * `new_session_id` may be chosen by the service (password sign-in signs the access token while
 * argon2 runs, so it needs the id first); null draws a random one.
 * Status: ok | user_not_found.
 */
drop function if exists auth.start_session(uuid, bytea, integer);
drop function if exists auth.start_session(uuid, bytea, integer, uuid);
create function auth.start_session(user_id uuid, refresh_token_hash bytea, ttl_seconds integer, new_session_id uuid default null)
  returns table (status text, session_id uuid, is_anonymous boolean, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
  v_session_id uuid;
begin
  update auth.users u set last_sign_in_at = now()
    where u.id = start_session.user_id
    returning * into v_user;
  if not found then
    return query select 'user_not_found'::text, null::uuid, null::boolean, null::jsonb;
    return;
  end if;
  insert into auth_private.sessions (id, user_id)
    values (coalesce(start_session.new_session_id, gen_random_uuid()), v_user.id)
    returning id into v_session_id;
  insert into auth_private.refresh_tokens (token_hash, session_id, expires_at)
    values (start_session.refresh_token_hash, v_session_id, now() + make_interval(secs => start_session.ttl_seconds));
  return query select 'ok'::text, v_session_id, v_user.is_anonymous, auth_private.user_json(v_user);
end
$$;
comment on function auth.start_session(uuid, bytea, integer, uuid) is E'Start a refresh-token family (id given or random) for a user with its first token (SHA-256 given). Status: ok | user_not_found.';

/*
 * why: refresh (interface §3.1) in ONE call, atomically: the presented token is retired and
 * the next one issued in the same transaction. Two racing rotations of one token: the
 * UPDATE row lock serialises them; the loser re-reads `rotated_at is null` as false after
 * the winner commits and falls through to the classification, which sees a rotated token
 * and reports (and acts on) reuse — a replay is indistinguishable from a lost race.
 * Outcomes are data, not exceptions: a family revoked for reuse must stay revoked.
 * Status: ok | invalid (unknown) | revoked (family ended: logout, reuse) |
 *         reuse_detected (rotated token of a live family; the family is now revoked) |
 *         expired.
 */
drop function if exists auth.rotate_refresh_token(bytea, bytea, integer);
create function auth.rotate_refresh_token(token_hash bytea, next_token_hash bytea, ttl_seconds integer)
  returns table (status text, session_id uuid, is_anonymous boolean, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_session_id uuid;
  v_user_id uuid;
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
    returning t.session_id, s.user_id into v_session_id, v_user_id;
  if found then
    insert into auth_private.refresh_tokens (token_hash, session_id, expires_at)
      values (rotate_refresh_token.next_token_hash, v_session_id, now() + make_interval(secs => rotate_refresh_token.ttl_seconds));
    return query select 'ok'::text, v_session_id, u.is_anonymous, auth_private.user_json(u)
      from auth.users u where u.id = v_user_id;
    return;
  end if;

  select t.session_id, t.rotated_at, t.expires_at, s.revoked_at
    into v_session_id, v_rotated_at, v_expires_at, v_revoked_at
    from auth_private.refresh_tokens t
    join auth_private.sessions s on s.id = t.session_id
    where t.token_hash = rotate_refresh_token.token_hash;
  if not found then
    return query select 'invalid'::text, null::uuid, null::boolean, null::jsonb;
  elsif v_revoked_at is not null then
    return query select 'revoked'::text, v_session_id, null::boolean, null::jsonb;
  elsif v_rotated_at is not null then
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'reuse_detected'
      where s.id = v_session_id and s.revoked_at is null;
    return query select 'reuse_detected'::text, v_session_id, null::boolean, null::jsonb;
  else
    return query select 'expired'::text, v_session_id, null::boolean, null::jsonb;
  end if;
end
$$;
comment on function auth.rotate_refresh_token(bytea, bytea, integer) is E'Retire a refresh token and issue the next of its family in one transaction. Status: ok | invalid | revoked | reuse_detected (family revoked now) | expired.';

/*
 * why: logout (interface §3.1) ends the caller's family only (contract §3). The access
 * token stays valid until it expires: nothing checks the database per request.
 * Status: ok | not_found (unknown or already ended family; the service answers 204 anyway).
 */
drop function if exists auth.end_session(uuid, uuid);
create function auth.end_session(session_id uuid, user_id uuid)
  returns text
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  with ended as (
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'logout'
      where s.id = end_session.session_id and s.user_id = end_session.user_id and s.revoked_at is null
      returning 1
  )
  select case when exists (select 1 from ended) then 'ok' else 'not_found' end
$$;
comment on function auth.end_session(uuid, uuid) is E'Logout: revoke one refresh-token family of a user. Status: ok | not_found.';

revoke all on function auth.start_session(uuid, bytea, integer, uuid), auth.rotate_refresh_token(bytea, bytea, integer),
  auth.end_session(uuid, uuid) from public;
--! EndIncluded auth/sessions.sql
--! Included auth/rate_limits.sql
/*
 * why: per-IP rate limits (interface §8, contract §3) must hold across several instances
 * sharing one database, so the counters live here, not in process memory. The window
 * slides: a row keeps the times of the hits counted in the last `window_seconds` (at most
 * `max_hits` of them), so "at most N in ANY 60-second window" holds exactly, not just per
 * fixed minute. The row lock (SELECT … FOR UPDATE) serialises concurrent hits of one
 * (bucket, ip), so two instances cannot both take the last slot.
 * Buckets: `auth` (signup, token, recover, magiclink summed; 60 s) and `anonymous` (guest
 * sign-ins; 3600 s). Rows idle for a day are removed by auth.purge_expired (purge.sql).
 */
create table if not exists auth_private.rate_limits (
  bucket text not null,
  ip text not null,
  hits timestamptz[] not null default '{}'::timestamptz[],
  updated_at timestamptz not null default now(),
  primary key (bucket, ip)
);
comment on table auth_private.rate_limits is E'plinth: sliding-window hit times per (bucket, client IP); shared by every instance.';

/*
 * why: one call per limited request. A request over the limit is not counted (contract §3).
 * Status: ok (counted) | limited.
 */
drop function if exists auth.take_rate_limit(text, text, integer, integer);
create function auth.take_rate_limit(bucket text, ip text, max_hits integer, window_seconds integer)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_now timestamptz := clock_timestamp();
  v_hits timestamptz[];
begin
  if take_rate_limit.max_hits <= 0 then
    return 'ok';
  end if;
  insert into auth_private.rate_limits (bucket, ip) values (take_rate_limit.bucket, take_rate_limit.ip)
    on conflict do nothing;
  select r.hits into v_hits from auth_private.rate_limits r
    where r.bucket = take_rate_limit.bucket and r.ip = take_rate_limit.ip
    for update;
  v_hits := array(
    select h from unnest(v_hits) h
    where h > v_now - make_interval(secs => take_rate_limit.window_seconds)
    order by h);
  if coalesce(cardinality(v_hits), 0) >= take_rate_limit.max_hits then
    update auth_private.rate_limits r set hits = v_hits
      where r.bucket = take_rate_limit.bucket and r.ip = take_rate_limit.ip;
    return 'limited';
  end if;
  update auth_private.rate_limits r set hits = v_hits || v_now, updated_at = v_now
    where r.bucket = take_rate_limit.bucket and r.ip = take_rate_limit.ip;
  return 'ok';
end
$$;
comment on function auth.take_rate_limit(text, text, integer, integer) is E'Count one hit of (bucket, ip) unless max_hits were already counted in the last window_seconds. Status: ok | limited. max_hits <= 0 disables.';

revoke all on function auth.take_rate_limit(text, text, integer, integer) from public;
--! EndIncluded auth/rate_limits.sql
--! Included auth/one_time_tokens.sql
/*
 * why: emailed one-time tokens (interface §3.2–3.3, contract §4): email verification (24 h,
 * usable until it expires: mail scanners that open links first must not burn it), password
 * recovery and magic link (1 h, once). Only the SHA-256 of a token is stored. A token is
 * bound to the address it was sent to: if the account's email changed since, the token no
 * longer works (it would otherwise confirm or recover through an address that is gone).
 *
 * The email itself is a graphile-worker job added in the same transaction as the token
 * row (design.md, Jobs): nothing is sent for a rolled-back token, nothing lost for a
 * committed one. The job carries the token sealed (AES-256-GCM, sealed by the service
 * before the call), never in clear; the `auth__send_email` task unseals it just before
 * sending.
 *
 * States: issued (used_at null, expires_at future) → used (used_at set) | expired.
 */
create table if not exists auth_private.one_time_tokens (
  token_hash bytea primary key,
  user_id uuid not null references auth.users (id) on delete cascade,
  kind text not null,
  email text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  constraint one_time_tokens_kind_check check (kind in ('verification', 'recovery', 'magic_link')),
  constraint one_time_tokens_hash_check check (octet_length(token_hash) = 32)
);
create index if not exists one_time_tokens_user_id_idx on auth_private.one_time_tokens (user_id);
comment on table auth_private.one_time_tokens is E'plinth: emailed tokens (verification 24 h; recovery and magic_link 1 h, once), by SHA-256; bound to the address they were sent to.';

/*
 * why: the one place a one-time token is stored and its email enqueued, so the lifetimes
 * of contract §4 are written once. Internal: called by the entry functions below.
 */
create or replace function auth_private.issue_one_time_token(user_id uuid, email text, kind text, token_hash bytea, sealed_token text)
  returns void
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at)
    values (issue_one_time_token.token_hash, issue_one_time_token.user_id, issue_one_time_token.kind,
      issue_one_time_token.email,
      now() + case issue_one_time_token.kind when 'verification' then interval '24 hours' else interval '1 hour' end);
  perform graphile_worker.add_job(
    'auth__send_email',
    pg_catalog.json_build_object('kind', issue_one_time_token.kind, 'to', issue_one_time_token.email, 'sealed_token', issue_one_time_token.sealed_token),
    max_attempts => 5);
end
$$;
comment on function auth_private.issue_one_time_token(uuid, text, text, bytea, text) is E'Store a one-time token (SHA-256) with its contract lifetime and enqueue its email (auth__send_email) in the same transaction.';
revoke all on function auth_private.issue_one_time_token(uuid, text, text, bytea, text) from public;

/*
 * why: GET /auth/v1/verify (interface §3.2): awaiting confirmation → confirmed. Valid for
 * 24 hours and repeatable within them (a second click answers the same).
 * Status: ok | invalid (unknown, expired, or the address changed since).
 */
drop function if exists auth.verify_email(bytea);
create function auth.verify_email(token_hash bytea)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid;
begin
  update auth_private.one_time_tokens t set used_at = coalesce(t.used_at, now())
    from auth.users u
    where t.token_hash = verify_email.token_hash and t.kind = 'verification' and t.expires_at > now()
      and u.id = t.user_id and lower(u.email) = lower(t.email)
    returning t.user_id into v_user_id;
  if not found then
    return 'invalid';
  end if;
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return 'ok';
end
$$;
comment on function auth.verify_email(bytea) is E'Confirm an address with its verification token (24 h, repeatable). Status: ok | invalid.';

/*
 * why: POST /auth/v1/recover (interface §3.3). The service answers the same either way
 * (no enumeration); the status is for logs and tests only. Guests have no address.
 * Status: sent | not_found.
 */
drop function if exists auth.request_recovery(text, bytea, text);
create function auth.request_recovery(email text, token_hash bytea, sealed_token text)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(request_recovery.email);
  if not found then
    return 'not_found';
  end if;
  perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'recovery', request_recovery.token_hash, request_recovery.sealed_token);
  return 'sent';
end
$$;
comment on function auth.request_recovery(text, bytea, text) is E'Issue a recovery token (1 h, once) and enqueue its email, if the address is registered. Status: sent | not_found.';

/*
 * why: POST /auth/v1/recover/confirm must answer `invalid or expired token` for a used or
 * expired token whatever the password (interface §3.3 "any"); the service asks this only
 * when the password itself is unacceptable, to pick which 400 to give. Read-only.
 * Status: valid | invalid.
 */
drop function if exists auth.check_recovery_token(bytea);
create function auth.check_recovery_token(token_hash bytea)
  returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select case when exists (
    select 1 from auth_private.one_time_tokens t join auth.users u on u.id = t.user_id
    where t.token_hash = check_recovery_token.token_hash and t.kind = 'recovery'
      and t.used_at is null and t.expires_at > now() and lower(u.email) = lower(t.email)
  ) then 'valid' else 'invalid' end
$$;
comment on function auth.check_recovery_token(bytea) is E'Whether a recovery token is unused and unexpired, without using it. Status: valid | invalid.';

/*
 * why: POST /auth/v1/recover/confirm (interface §3.3): issued → used, password replaced
 * (argon2id hash computed by the service). No tokens are issued. The user's live sessions
 * are revoked: whoever reset the password may be evicting someone who knew the old one.
 * Receiving the token also proves the address, so it counts as confirmed.
 * Status: ok | invalid (unknown, used, expired, or the address changed since).
 */
drop function if exists auth.confirm_recovery(bytea, text);
create function auth.confirm_recovery(token_hash bytea, password_hash text)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid;
begin
  update auth_private.one_time_tokens t set used_at = now()
    from auth.users u
    where t.token_hash = confirm_recovery.token_hash and t.kind = 'recovery'
      and t.used_at is null and t.expires_at > now()
      and u.id = t.user_id and lower(u.email) = lower(t.email)
    returning t.user_id into v_user_id;
  if not found then
    return 'invalid';
  end if;
  insert into auth_private.passwords as p (user_id, hash) values (v_user_id, confirm_recovery.password_hash)
    on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
  update auth.users u
    set updated_at = now(),
        email_confirmed_at = coalesce(u.email_confirmed_at, now()),
        providers = case when 'email' = any (u.providers) then u.providers else u.providers || '{email}'::text[] end
    where u.id = v_user_id;
  update auth_private.sessions s set revoked_at = now(), revoked_reason = 'password_recovery'
    where s.user_id = v_user_id and s.revoked_at is null;
  return 'ok';
end
$$;
comment on function auth.confirm_recovery(bytea, text) is E'Use a recovery token: set the password hash, confirm the address, revoke live sessions. Status: ok | invalid.';

/*
 * why: POST /auth/v1/magiclink (contract §4): sent only to a registered address; the
 * service answers the same either way. Status: sent | not_found.
 */
drop function if exists auth.request_magic_link(text, bytea, text);
create function auth.request_magic_link(email text, token_hash bytea, sealed_token text)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(request_magic_link.email);
  if not found then
    return 'not_found';
  end if;
  perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'magic_link', request_magic_link.token_hash, request_magic_link.sealed_token);
  return 'sent';
end
$$;
comment on function auth.request_magic_link(text, bytea, text) is E'Issue a magic-link token (1 h, once) and enqueue its email, if the address is registered. Status: sent | not_found.';

/*
 * why: GET /auth/v1/magiclink/verify: uses the token (once) and starts a session in the
 * same transaction, so a used token always has its session and vice versa. Clicking the
 * link proves the address: it counts as confirmed.
 * Status: ok | invalid (unknown, used, expired, or the address changed since).
 */
drop function if exists auth.verify_magic_link(bytea, bytea, integer);
create function auth.verify_magic_link(token_hash bytea, refresh_token_hash bytea, ttl_seconds integer)
  returns table (status text, session_id uuid, is_anonymous boolean, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
begin
  update auth_private.one_time_tokens t set used_at = now()
    from auth.users u
    where t.token_hash = verify_magic_link.token_hash and t.kind = 'magic_link'
      and t.used_at is null and t.expires_at > now()
      and u.id = t.user_id and lower(u.email) = lower(t.email)
    returning t.user_id into v_user_id;
  if not found then
    return query select 'invalid'::text, null::uuid, null::boolean, null::jsonb;
    return;
  end if;
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return query select * from auth.start_session(v_user_id, verify_magic_link.refresh_token_hash, verify_magic_link.ttl_seconds);
end
$$;
comment on function auth.verify_magic_link(bytea, bytea, integer) is E'Use a magic-link token and start a session in one transaction. Status: ok | invalid.';

revoke all on function auth.verify_email(bytea), auth.request_recovery(text, bytea, text), auth.check_recovery_token(bytea),
  auth.confirm_recovery(bytea, text), auth.request_magic_link(text, bytea, text), auth.verify_magic_link(bytea, bytea, integer)
  from public;
--! EndIncluded auth/one_time_tokens.sql
--! Included auth/accounts.sql
/*
 * why: the account use cases of interface §4.2 — signup, password sign-in, the user's own
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
 * Status: ok (session fields set) | confirmation_sent | email_taken.
 */
drop function if exists auth.sign_up(text, text, jsonb, bytea, text, bytea, integer);
create function auth.sign_up(
  email text,
  password_hash text,
  user_metadata jsonb,
  verification_token_hash bytea,
  sealed_verification_token text,
  refresh_token_hash bytea,
  refresh_ttl_seconds integer)
  returns table (status text, session_id uuid, is_anonymous boolean, user_json jsonb)
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
    return query select 'email_taken'::text, null::uuid, null::boolean, null::jsonb;
    return;
  end if;
  insert into auth_private.passwords (user_id, hash) values (v_user.id, sign_up.password_hash);
  if v_verify then
    perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'verification',
      sign_up.verification_token_hash, sign_up.sealed_verification_token);
    return query select 'confirmation_sent'::text, null::uuid, false, auth_private.user_json(v_user);
    return;
  end if;
  return query select * from auth.start_session(v_user.id, sign_up.refresh_token_hash, sign_up.refresh_ttl_seconds);
end
$$;
comment on function auth.sign_up(text, text, jsonb, bytea, text, bytea, integer) is E'Create an email/password account; start a session, or (verification token given) enqueue the confirmation email. Status: ok | confirmation_sent | email_taken.';

/*
 * why: password sign-in, step 1: the stored hash for an address, for the service to verify
 * (argon2 stays off the database), then `auth.start_session`. Accounts without a password
 * (OAuth, guests, admin-created without one) are not_found, like unknown addresses: the
 * service then verifies against a dummy hash so both cost the same. Role, email and
 * is_anonymous let the service sign the access token while argon2 runs.
 * Status: ok | not_found.
 */
drop function if exists auth.password_credentials(text);
create function auth.password_credentials(email text)
  returns table (status text, user_id uuid, password_hash text, email_confirmed boolean, role text, user_email text, is_anonymous boolean)
  language plpgsql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  -- plpgsql, not sql: its plan is cached per connection; a SQL function's body is planned
  -- on every call, a measurable share of a sign-in when argon2 leaves little CPU over.
  return query
    select 'ok'::text, u.id, p.hash, u.email_confirmed_at is not null, u.role, u.email, u.is_anonymous
      from auth.users u join auth_private.passwords p on p.user_id = u.id
      where lower(u.email) = lower(password_credentials.email);
  if not found then
    return query select 'not_found'::text, null::uuid, null::text, null::boolean, null::text, null::text, null::boolean;
  end if;
end
$$;
comment on function auth.password_credentials(text) is E'The password hash and confirmation state of an address, for sign-in. Status: ok | not_found.';

/*
 * why: GET /auth/v1/user. The access token outlives a deleted user (interface §3.1).
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
  return query select 'ok'::text, auth_private.user_json(u) from auth.users u where u.id = get_user.user_id;
  if not found then
    return query select 'not_found'::text, null::jsonb;
  end if;
end
$$;
comment on function auth.get_user(uuid) is E'The User object of an id. Status: ok | not_found.';

/*
 * why: PATCH /auth/v1/user (contract §9). Null arguments leave a field alone.
 * - email changes at once (no confirmation flow is specified) and keeps the confirmation
 *   state; an address registered to another account is email_taken.
 * - user_metadata merges top-level keys into the stored object; a key sent as null is
 *   removed (GoTrue's UpdateUserMetaData).
 * Status: ok | not_found | email_taken.
 */
drop function if exists auth.update_user(uuid, text, text, jsonb);
create function auth.update_user(user_id uuid, email text, password_hash text, user_metadata jsonb)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
begin
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
  if update_user.password_hash is not null then
    insert into auth_private.passwords as p (user_id, hash) values (v_user.id, update_user.password_hash)
      on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
  end if;
  return query select 'ok'::text, auth_private.user_json(v_user);
end
$$;
comment on function auth.update_user(uuid, text, text, jsonb) is E'Change a user''s own email, password hash and metadata (merged; null keys removed). Status: ok | not_found | email_taken.';

/*
 * why: POST /auth/v1/anonymous: a real user row for the guest (no email, is_anonymous, the
 * guest role named by ANONYMOUS_ROLE) and its first session, in one transaction.
 * Status: ok.
 */
drop function if exists auth.sign_in_anonymously(text, jsonb, bytea, integer);
create function auth.sign_in_anonymously(role text, user_metadata jsonb, refresh_token_hash bytea, ttl_seconds integer)
  returns table (status text, session_id uuid, is_anonymous boolean, user_json jsonb)
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
  return query select * from auth.start_session(v_user_id, sign_in_anonymously.refresh_token_hash, sign_in_anonymously.ttl_seconds);
end
$$;
comment on function auth.sign_in_anonymously(text, jsonb, bytea, integer) is E'Create a guest user with the given role and start its session. Status: ok.';

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

revoke all on function auth.sign_up(text, text, jsonb, bytea, text, bytea, integer), auth.password_credentials(text),
  auth.get_user(uuid), auth.update_user(uuid, text, text, jsonb), auth.sign_in_anonymously(text, jsonb, bytea, integer),
  auth.rehash_password(uuid, text, text)
  from public;
--! EndIncluded auth/accounts.sql
--! Included auth/admin.sql
/*
 * why: the auth admin endpoints (interface §4.2, service_role). The service checks the
 * credential and validates the body (role one of anon, authenticated, service_role);
 * these functions own the rows.
 */

/*
 * why: GET /auth/v1/admin/users answers only id, email, role, created_at per user
 * (interface §2.1), oldest first; the JSON text goes out as is.
 */
drop function if exists auth.list_users();
create function auth.list_users()
  returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(pg_catalog.json_agg(pg_catalog.json_build_object(
      'id', u.id, 'email', u.email, 'role', u.role, 'created_at', auth_private.iso_utc(u.created_at))
    order by u.created_at, u.id)::text, '[]')
  from auth.users u
$$;
comment on function auth.list_users() is E'All users as a JSON array of {id, email, role, created_at}, oldest first.';

/*
 * why: POST /auth/v1/admin/users. `email_confirm` true marks the address confirmed; no
 * email is sent either way (as in GoTrue's admin API). A password is optional.
 * Status: ok | email_taken.
 */
drop function if exists auth.admin_create_user(text, text, text, boolean);
create function auth.admin_create_user(email text, password_hash text, role text, email_confirm boolean)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user auth.users;
begin
  insert into auth.users (email, role, providers, email_confirmed_at)
    values (lower(admin_create_user.email), admin_create_user.role, '{email}'::text[],
      case when admin_create_user.email_confirm then now() end)
    on conflict ((lower(email))) do nothing
    returning * into v_user;
  if v_user.id is null then
    return query select 'email_taken'::text, null::jsonb;
    return;
  end if;
  if admin_create_user.password_hash is not null then
    insert into auth_private.passwords (user_id, hash) values (v_user.id, admin_create_user.password_hash);
  end if;
  return query select 'ok'::text, auth_private.user_json(v_user);
end
$$;
comment on function auth.admin_create_user(text, text, text, boolean) is E'Create a user with a role, optional password hash and optionally confirmed address. Status: ok | email_taken.';

/*
 * why: DELETE /auth/v1/admin/users/{id}. Sessions, refresh tokens, one-time tokens and the
 * password go with the user (cascade): its refresh tokens become unknown (401 `invalid
 * refresh token`); access tokens stay valid until they expire (interface §3.1).
 * Status: ok | not_found.
 */
drop function if exists auth.delete_user(uuid);
create function auth.delete_user(user_id uuid)
  returns text
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  with deleted as (
    delete from auth.users u where u.id = delete_user.user_id returning 1
  )
  select case when exists (select 1 from deleted) then 'ok' else 'not_found' end
$$;
comment on function auth.delete_user(uuid) is E'Delete a user and everything of it (cascade). Status: ok | not_found.';

revoke all on function auth.list_users(), auth.admin_create_user(text, text, text, boolean), auth.delete_user(uuid) from public;
--! EndIncluded auth/admin.sql
--! Included auth/oauth.sql
/*
 * why: OAuth sign-in (interface §4.2 authorize and callback, OAuth rules 1–4; contract
 * §10). The service speaks to the providers (openid-client, network I/O stays in
 * TypeScript); SQL owns the two pieces of state of the flow:
 *
 * 1. The authorization request, between GET /auth/v1/authorize and the callback: its
 *    `state` (stored only as SHA-256, like every token the client holds), the provider it
 *    was sent to, and the secrets that must come back with it: the PKCE code verifier and
 *    the OpenID nonce. The verifier is a secret (it proves to the token endpoint that the
 *    code is ours), so it lives here in auth_private, where no API role has USAGE, never in
 *    the cookie or the URL; it is wiped when the state is used.
 *    States: issued (used_at null, expires_at future) → used (used_at set) | expired.
 *    The provider is pinned by the state, not by the callback's parameters: the code is
 *    always exchanged with the provider the request was sent to (mix-up defence).
 *
 * 2. The account: a sign-in with a provider-verified email creates the account or links
 *    the provider to the existing account of that address (case-insensitively); see
 *    auth.oauth_sign_in.
 */
create table if not exists auth_private.oauth_states (
  state_hash bytea primary key,
  provider text not null,
  code_verifier text,
  nonce text,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  used_at timestamptz,
  constraint oauth_states_hash_check check (octet_length(state_hash) = 32),
  constraint oauth_states_provider_check check (provider in ('google', 'github', 'apple', 'microsoft', 'oidc')),
  constraint oauth_states_wiped_check check (used_at is null or (code_verifier is null and nonce is null))
);
create index if not exists oauth_states_expires_at_idx on auth_private.oauth_states (expires_at);
comment on table auth_private.oauth_states is E'plinth: pending OAuth authorization requests by SHA-256 of their state: provider, PKCE code verifier (secret) and nonce, 10-minute life, single use (verifier and nonce wiped on use).';
comment on column auth_private.oauth_states.code_verifier is E'PKCE code verifier (RFC 7636): secret, sent only to the provider''s token endpoint; null once used or for providers without PKCE.';

/*
 * why: GET /auth/v1/authorize stores the request it sends the browser off with. The
 * endpoint needs no credential, so rows are cheap to create: each call also deletes the
 * rows that expired more than an hour ago (kept that long so a late callback still reads
 * `expired` or `used` rather than `invalid`), which bounds the table by the request rate
 * of the last 70 minutes without a separate job.
 */
drop function if exists auth.create_oauth_state(bytea, text, text, text, integer);
create function auth.create_oauth_state(state_hash bytea, provider text, code_verifier text, nonce text, ttl_seconds integer)
  returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from auth_private.oauth_states s where s.expires_at < now() - interval '1 hour';
  insert into auth_private.oauth_states (state_hash, provider, code_verifier, nonce, expires_at)
    values (create_oauth_state.state_hash, create_oauth_state.provider, create_oauth_state.code_verifier,
      create_oauth_state.nonce, now() + make_interval(secs => create_oauth_state.ttl_seconds));
end
$$;
comment on function auth.create_oauth_state(bytea, text, text, text, integer) is E'Store a pending OAuth authorization request (state by SHA-256, provider, PKCE verifier, nonce, lifetime); purges rows expired over an hour ago.';

/*
 * why: the callback consumes the state in ONE call: checked and marked used atomically
 * (the row lock serialises two callbacks racing with the same state; the second reads the
 * first one's used_at and gets `used`), and the verifier and nonce are handed out exactly
 * once and wiped. A used state stays used even when the rest of the callback fails (the
 * code exchange is not repeatable either), which is why this is its own statement and
 * outcomes are data.
 * Status: ok (provider, code_verifier, nonce set) | invalid (unknown) | expired | used.
 */
drop function if exists auth.consume_oauth_state(bytea);
create function auth.consume_oauth_state(state_hash bytea)
  returns table (status text, provider text, code_verifier text, nonce text)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_state auth_private.oauth_states;
begin
  select * into v_state from auth_private.oauth_states s
    where s.state_hash = consume_oauth_state.state_hash
    for update;
  if not found then
    return query select 'invalid'::text, null::text, null::text, null::text;
  elsif v_state.used_at is not null then
    return query select 'used'::text, v_state.provider, null::text, null::text;
  elsif v_state.expires_at <= now() then
    return query select 'expired'::text, v_state.provider, null::text, null::text;
  else
    update auth_private.oauth_states s set used_at = now(), code_verifier = null, nonce = null
      where s.state_hash = consume_oauth_state.state_hash;
    return query select 'ok'::text, v_state.provider, v_state.code_verifier, v_state.nonce;
  end if;
end
$$;
comment on function auth.consume_oauth_state(bytea) is E'Use an OAuth state once: returns its provider, PKCE verifier and nonce and wipes them. Status: ok | invalid | expired | used.';

/*
 * why: the callback's account step (interface §4.2 OAuth rule 3, issue 7 rule 3), then the
 * session, in one transaction.
 *
 * - Only a provider-verified email is stored or matched: `email_verified` is the service's
 *   reading of the provider's own statement (google/oidc `email_verified`, github's primary
 *   verified address, apple's id_token, microsoft's `xms_edov` or consumer tenant). An
 *   unverified (or absent) email neither links to an existing account (that would let
 *   anyone who can type an address at some provider take the account over) nor creates
 *   one: status `unverified_email`, nothing changes.
 * - Existing account of that address (lower(email), as everywhere): the provider is linked:
 *   `provider` becomes this provider, `providers` gains it once, `email_confirmed_at` is
 *   set if it was null (the provider just proved the address). If the account was NOT
 *   confirmed, nobody had proven owning the address, so whoever signed it up may not be
 *   its owner (pre-account-takeover): its password is removed and its user_metadata reset,
 *   and the address owner now holds the account alone (GoTrue does the same).
 * - No account: one is created with the address, provider, providers {provider},
 *   user_metadata {} (OAuth rule 3) and email_confirmed_at now().
 * - Two first sign-ins of one address racing: the insert's `on conflict do nothing` lets
 *   one win; the loser loops and links to the winner's row.
 * Status: ok (session fields set, via auth.start_session) | unverified_email.
 */
drop function if exists auth.oauth_sign_in(text, text, boolean, bytea, integer);
create function auth.oauth_sign_in(
  provider text,
  email text,
  email_verified boolean,
  refresh_token_hash bytea,
  refresh_ttl_seconds integer)
  returns table (status text, session_id uuid, is_anonymous boolean, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_email text := pg_catalog.lower(oauth_sign_in.email);
  v_user_id uuid;
  v_confirmed boolean;
begin
  if oauth_sign_in.provider is null or oauth_sign_in.provider not in ('google', 'github', 'apple', 'microsoft', 'oidc') then
    raise exception 'oauth_sign_in: unknown provider %', oauth_sign_in.provider using errcode = '22023';
  end if;
  if v_email is null or oauth_sign_in.email_verified is distinct from true then
    return query select 'unverified_email'::text, null::uuid, null::boolean, null::jsonb;
    return;
  end if;

  loop
    select u.id, u.email_confirmed_at is not null into v_user_id, v_confirmed
      from auth.users u
      where pg_catalog.lower(u.email) = v_email
      for update;
    if found then
      update auth.users u set
          provider = oauth_sign_in.provider,
          providers = case when oauth_sign_in.provider = any (u.providers) then u.providers
                           else pg_catalog.array_append(u.providers, oauth_sign_in.provider) end,
          email_confirmed_at = coalesce(u.email_confirmed_at, now()),
          user_metadata = case when v_confirmed then u.user_metadata else '{}'::jsonb end,
          updated_at = case
            when u.provider is distinct from oauth_sign_in.provider or not v_confirmed
              or not (oauth_sign_in.provider = any (u.providers)) then now()
            else u.updated_at end
        where u.id = v_user_id;
      if not v_confirmed then
        delete from auth_private.passwords p where p.user_id = v_user_id;
      end if;
      exit;
    end if;

    insert into auth.users (email, provider, providers, user_metadata, email_confirmed_at)
      values (v_email, oauth_sign_in.provider, array[oauth_sign_in.provider], '{}'::jsonb, now())
      on conflict ((lower(email))) do nothing
      returning id into v_user_id;
    exit when found;
  end loop;

  return query select * from auth.start_session(v_user_id, oauth_sign_in.refresh_token_hash, oauth_sign_in.refresh_ttl_seconds);
end
$$;
comment on function auth.oauth_sign_in(text, text, boolean, bytea, integer) is E'OAuth callback: create the account of a provider-verified email or link the provider to the existing one (providers accumulate), then start a session. Status: ok | unverified_email.';

revoke all on function auth.create_oauth_state(bytea, text, text, text, integer), auth.consume_oauth_state(bytea),
  auth.oauth_sign_in(text, text, boolean, bytea, integer) from public;
--! EndIncluded auth/oauth.sql
--! Included auth/purge.sql
/*
 * why: housekeeping. Rows that can no longer change an answer go: refresh tokens a week
 * past their expiry (until then a replay still answers `refresh token expired`, afterwards
 * `invalid refresh token`: both 401), families without tokens, one-time tokens a week past
 * expiry, rate-limit rows idle for a day (no window is longer than an hour). Run hourly by
 * the `auth__purge` job, which re-enqueues itself (one pending job for all instances,
 * job_key `auth__purge`). Returns how many rows of each kind went.
 */
create index if not exists refresh_tokens_expires_at_idx on auth_private.refresh_tokens (expires_at);
create index if not exists one_time_tokens_expires_at_idx on auth_private.one_time_tokens (expires_at);

drop function if exists auth.purge_expired();
create function auth.purge_expired()
  returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_refresh_tokens bigint;
  v_sessions bigint;
  v_one_time_tokens bigint;
  v_rate_limits bigint;
begin
  delete from auth_private.refresh_tokens t where t.expires_at < now() - interval '7 days';
  get diagnostics v_refresh_tokens = row_count;
  delete from auth_private.sessions s
    where s.created_at < now() - interval '1 day'
      and not exists (select 1 from auth_private.refresh_tokens t where t.session_id = s.id);
  get diagnostics v_sessions = row_count;
  delete from auth_private.one_time_tokens t where t.expires_at < now() - interval '7 days';
  get diagnostics v_one_time_tokens = row_count;
  delete from auth_private.rate_limits r where r.updated_at < now() - interval '1 day';
  get diagnostics v_rate_limits = row_count;
  return pg_catalog.jsonb_build_object('refresh_tokens', v_refresh_tokens, 'sessions', v_sessions,
    'one_time_tokens', v_one_time_tokens, 'rate_limits', v_rate_limits);
end
$$;
comment on function auth.purge_expired() is E'Delete auth rows that can no longer change an answer (tokens a week past expiry, empty families, idle rate-limit rows). Returns the counts.';

/*
 * why: the hourly schedule of auth.purge_expired. `preserve_run_at` keeps the pending
 * job's time when an instance starts, so restarts do not postpone it forever; the job key
 * makes it one job for all instances.
 */
drop function if exists auth.schedule_purge(integer);
create function auth.schedule_purge(delay_seconds integer)
  returns void
  language sql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job('auth__purge', '{}'::json,
    run_at => now() + make_interval(secs => schedule_purge.delay_seconds),
    job_key => 'auth__purge', job_key_mode => 'preserve_run_at', max_attempts => 3)
$$;
comment on function auth.schedule_purge(integer) is E'Enqueue the auth__purge job (one for all instances) unless one is pending.';

revoke all on function auth.purge_expired(), auth.schedule_purge(integer) from public;
--! EndIncluded auth/purge.sql
