--! Previous: sha1:3ca9e5626fdfe5569b71de6bb0c65394786626e6
--! Hash: sha1:1fec430057eaf3174de62355a24dc67b64229619
--! Message: auth: one session result type; TOTP factors with challenges, codes used once and aal/amr; the custom access-token hook; the audit log with its retention

-- Enter migration here
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
  select row(session_status.status, null, null, null, null, null)::auth.session_result
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
--! Included auth/audit.sql
/*
 * why: a record of who did what to accounts, for the operator: sign-ups, sign-ins (with the
 * method), failed sign-ins, refresh-token reuse, sign-outs, password and email changes,
 * recovery, MFA enrolment, verification and removal, admin actions and OAuth links. Each
 * entry has the time, the user, the client IP, the user agent and the request id. Never a
 * token, a code or a password: the detail holds ids and names only.
 *
 * The table lives in `auth` so a DBA finds it beside auth.users; only service_role may read
 * it (GET /auth/v1/admin/audit). Entries keep no foreign key: they outlive a deleted user.
 * The request id is the setting `request.id` when the service sets one for the statement,
 * else the one the service passes in the context. Entries older than
 * AUTH_AUDIT_RETENTION_DAYS are deleted by the hourly auth__purge job.
 */
create table if not exists auth.audit_log_entries (
  id bigint generated always as identity primary key,
  created_at timestamptz not null default now(),
  action text not null,
  user_id uuid,
  ip text,
  user_agent text,
  request_id text,
  detail jsonb not null default '{}'::jsonb,
  constraint audit_log_entries_detail_check check (jsonb_typeof(detail) = 'object')
);
create index if not exists audit_log_entries_created_at_idx on auth.audit_log_entries (created_at);
create index if not exists audit_log_entries_user_id_idx on auth.audit_log_entries (user_id, created_at);
revoke all on table auth.audit_log_entries from public, anon, authenticated, service_role, ":ANONYMOUS_ROLE";
grant select on table auth.audit_log_entries to service_role;
comment on table auth.audit_log_entries is E'plinth: the account audit log (who did what, when, from where). No tokens, codes or passwords. Readable by service_role.';
comment on column auth.audit_log_entries.action is E'sign_up, sign_in, sign_in_failed, refresh_reuse_detected, sign_out, password_changed, email_changed, recovery_requested, recovery_completed, mfa_enrolled, mfa_verified, mfa_verify_failed, mfa_unenrolled, admin_user_created, admin_user_deleted, admin_factor_deleted, oauth_linked.';
comment on column auth.audit_log_entries.detail is E'Action-specific ids and names (method, factor_id, provider …); never a secret.';

/*
 * why: the one writer. `context` is what the service knows of the request:
 * {ip, user_agent, request_id}; null outside a request (a DBA calling a function).
 */
create or replace function auth_private.audit(action text, user_id uuid, context jsonb, detail jsonb default '{}'::jsonb)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  insert into auth.audit_log_entries (action, user_id, ip, user_agent, request_id, detail)
  values (audit.action, audit.user_id,
    left(audit.context ->> 'ip', 100),
    left(audit.context ->> 'user_agent', 512),
    left(coalesce(nullif(current_setting('request.id', true), ''), audit.context ->> 'request_id'), 200),
    coalesce(audit.detail, '{}'::jsonb))
$$;
comment on function auth_private.audit(text, uuid, jsonb, jsonb) is E'Append an audit entry; context {ip, user_agent, request_id}; request.id, when set, is the request id.';
revoke all on function auth_private.audit(text, uuid, jsonb, jsonb) from public;

/*
 * why: a failed password sign-in is judged by the service (argon2 runs there), so it
 * reports it here. The address tried is kept only when it names an account.
 */
drop function if exists auth.record_failed_sign_in(text, jsonb);
create function auth.record_failed_sign_in(email text, context jsonb)
  returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid;
begin
  select u.id into v_user_id from auth.users u where lower(u.email) = lower(record_failed_sign_in.email);
  perform auth_private.audit('sign_in_failed', v_user_id, record_failed_sign_in.context,
    jsonb_build_object('method', 'password'));
end
$$;
comment on function auth.record_failed_sign_in(text, jsonb) is E'Audit a failed password sign-in (the user when the address names one).';

/*
 * why: GET /auth/v1/admin/audit: newest first, filtered by user, action and time, paged by
 * page/per_page. The JSON text goes out as is.
 */
drop function if exists auth.list_audit_log(uuid, text, timestamptz, timestamptz, integer, integer);
create function auth.list_audit_log(user_id uuid, action text, since timestamptz, until timestamptz, page integer, per_page integer)
  returns text
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select coalesce(json_agg(json_build_object(
      'id', e.id, 'created_at', auth_private.iso_utc(e.created_at), 'action', e.action, 'user_id', e.user_id,
      'ip', e.ip, 'user_agent', e.user_agent, 'request_id', e.request_id, 'detail', e.detail)
    order by e.id desc)::text, '[]')
  from (
    select * from auth.audit_log_entries a
    where (list_audit_log.user_id is null or a.user_id = list_audit_log.user_id)
      and (list_audit_log.action is null or a.action = list_audit_log.action)
      and (list_audit_log.since is null or a.created_at >= list_audit_log.since)
      and (list_audit_log.until is null or a.created_at < list_audit_log.until)
    order by a.id desc
    limit list_audit_log.per_page offset (list_audit_log.page - 1) * list_audit_log.per_page
  ) e
$$;
comment on function auth.list_audit_log(uuid, text, timestamptz, timestamptz, integer, integer) is E'Audit entries as a JSON array, newest first, filtered (null = any) and paged (page from 1).';

/*
 * why: retention (AUTH_AUDIT_RETENTION_DAYS, 0 keeps everything) and the MFA challenges
 * nobody can use any more; run by the hourly auth__purge job beside auth.purge_expired.
 */
drop function if exists auth.purge_audit_log(integer);
create function auth.purge_audit_log(retention_days integer)
  returns jsonb
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_entries bigint := 0;
  v_challenges bigint;
begin
  if purge_audit_log.retention_days > 0 then
    delete from auth.audit_log_entries e where e.created_at < now() - make_interval(days => purge_audit_log.retention_days);
    get diagnostics v_entries = row_count;
  end if;
  delete from auth_private.mfa_challenges c where c.expires_at < now() - interval '1 day';
  get diagnostics v_challenges = row_count;
  return jsonb_build_object('audit_log_entries', v_entries, 'mfa_challenges', v_challenges);
end
$$;
comment on function auth.purge_audit_log(integer) is E'Delete audit entries older than retention_days (0 keeps all) and MFA challenges a day past expiry. Returns the counts.';

revoke all on function auth.record_failed_sign_in(text, jsonb),
  auth.list_audit_log(uuid, text, timestamptz, timestamptz, integer, integer), auth.purge_audit_log(integer) from public;
--! EndIncluded auth/audit.sql
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
 * access token (auth.session_result): the family id, is_anonymous, the User object (role
 * and email are in it), aal1 and the method in amr. `new_session_id` may be chosen by the
 * service (password sign-in signs the access token while argon2 runs, so it needs the id
 * first); null draws a random one. `method` is the amr method (password, magiclink, oauth,
 * anonymous); the sign-in is audited with it and the request `context`.
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
  insert into auth_private.sessions (id, user_id, amr)
    values (coalesce(start_session.new_session_id, gen_random_uuid()), v_user.id,
      jsonb_build_array(jsonb_build_object('method', start_session.method, 'timestamp', floor(extract(epoch from now()))::bigint)))
    returning * into v_session;
  insert into auth_private.refresh_tokens (token_hash, session_id, expires_at)
    values (start_session.refresh_token_hash, v_session.id, now() + make_interval(secs => start_session.ttl_seconds));
  perform auth_private.audit('sign_in', v_user.id, start_session.context,
    jsonb_build_object('method', start_session.method, 'session_id', v_session.id));
  return row('ok', v_session.id, v_user.is_anonymous, auth_private.user_json(v_user), v_session.aal, v_session.amr)::auth.session_result;
end
$$;
comment on function auth.start_session(uuid, bytea, integer, uuid, text, jsonb) is E'Start a refresh-token family (id given or random) for a user with its first token (SHA-256 given), at aal1 with the method in amr; audited. Status: ok | user_not_found.';

/*
 * why: refresh (interface §3.1) in ONE call, atomically: the presented token is retired and
 * the next one issued in the same transaction. Two racing rotations of one token: the
 * UPDATE row lock serialises them; the loser re-reads `rotated_at is null` as false after
 * the winner commits and falls through to the classification, which sees a rotated token
 * and reports (and acts on) reuse — a replay is indistinguishable from a lost race.
 * Outcomes are data, not exceptions: a family revoked for reuse must stay revoked.
 * The family's aal and amr come back unchanged: a refresh keeps the assurance level.
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
    return (select row('ok', v_session_id, u.is_anonymous, auth_private.user_json(u), v_aal, v_amr)::auth.session_result
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
    return row('revoked', v_session_id, null, null, null, null)::auth.session_result;
  elsif v_rotated_at is not null then
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'reuse_detected'
      where s.id = v_session_id and s.revoked_at is null;
    perform auth_private.audit('refresh_reuse_detected', v_user_id, rotate_refresh_token.context,
      jsonb_build_object('session_id', v_session_id));
    return row('reuse_detected', v_session_id, null, null, null, null)::auth.session_result;
  else
    return row('expired', v_session_id, null, null, null, null)::auth.session_result;
  end if;
end
$$;
comment on function auth.rotate_refresh_token(bytea, bytea, integer, jsonb) is E'Retire a refresh token and issue the next of its family in one transaction; aal and amr are kept. Status: ok | invalid | revoked | reuse_detected (family revoked now; audited) | expired.';

/*
 * why: logout (interface §3.1) ends the caller's family only (contract §3). The access
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
    return row('confirmation_sent', null, false, auth_private.user_json(v_user), null, null)::auth.session_result;
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
 * why: GET /auth/v1/user. The access token outlives a deleted user (interface §3.1). The
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
 * why: PATCH /auth/v1/user (contract §9). Null arguments leave a field alone.
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
 * Status: ok | not_found | email_taken.
 */
drop function if exists auth.update_user(uuid, text, text, jsonb);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid);
drop function if exists auth.update_user(uuid, text, text, jsonb, uuid, jsonb);
create function auth.update_user(user_id uuid, email text, password_hash text, user_metadata jsonb, session_id uuid, context jsonb default null)
  returns table (status text, user_json jsonb)
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_old_email text;
  v_user auth.users;
  v_email_changed boolean;
  v_password_changed boolean := update_user.password_hash is not null;
begin
  select u.email into v_old_email from auth.users u where u.id = update_user.user_id for update;
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
comment on function auth.update_user(uuid, text, text, jsonb, uuid, jsonb) is E'Change a user''s own email, password hash and metadata (merged; null keys removed); an email or password change ends the other sessions, tells the former address and is audited. Status: ok | not_found | email_taken.';

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
  auth.get_user(uuid), auth.update_user(uuid, text, text, jsonb, uuid, jsonb), auth.sign_in_anonymously(text, jsonb, bytea, integer, jsonb),
  auth.rehash_password(uuid, text, text)
  from public;
--! EndIncluded auth/accounts.sql
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
 * Using the token proves the address (auth_private.prove_address). Only sign-up issues
 * verification tokens, and the link confirms that sign-up, password and user_metadata
 * included: they stay, or REQUIRE_EMAIL_VERIFICATION would remove the password a new user
 * just chose. What changed after the token was issued (a password or metadata set through
 * a session that the confirmation did not wait for) is not vouched for: then everything
 * planted goes, as with a magic link. Sessions from before the proof are ended either way.
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
  v_email text;
  v_issued_at timestamptz;
  v_changed boolean;
begin
  -- The user's row first: two of their tokens used at once (each spending the other) or a
  -- token used during an OAuth sign-in or PATCH take their turns instead of deadlocking.
  perform 1 from auth.users u join auth_private.one_time_tokens t on t.user_id = u.id
    where t.token_hash = verify_email.token_hash for update of u;
  update auth_private.one_time_tokens t set used_at = coalesce(t.used_at, now())
    from auth.users u
    where t.token_hash = verify_email.token_hash and t.kind = 'verification' and t.expires_at > now()
      and u.id = t.user_id and lower(u.email) = lower(t.email)
    returning t.user_id, u.email, t.created_at into v_user_id, v_email, v_issued_at;
  if not found then
    return 'invalid';
  end if;
  select u.updated_at > v_issued_at
         or exists (select 1 from auth_private.passwords p where p.user_id = u.id and p.updated_at > v_issued_at)
    into v_changed
    from auth.users u where u.id = v_user_id;
  if auth_private.prove_address(v_user_id, v_email, 'verification', v_changed) and not v_changed then
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'address_proven'
      where s.user_id = v_user_id and s.revoked_at is null;
  end if;
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return 'ok';
end
$$;
comment on function auth.verify_email(bytea) is E'Confirm and prove an address with its verification token (24 h, repeatable). Status: ok | invalid.';

/*
 * why: POST /auth/v1/recover (interface §3.3). The service answers the same either way
 * (no enumeration); the status is for logs and tests only. Guests have no address.
 * The same work either way: the mail limit per address counts every request, and an
 * unknown or limited address gets a job without a recipient instead of the email.
 * Status: sent | not_found | limited (MAIL_RATE_LIMIT_PER_HOUR used up; nothing sent).
 */
drop function if exists auth.request_recovery(text, bytea, text);
drop function if exists auth.request_recovery(text, bytea, text, integer);
drop function if exists auth.request_recovery(text, bytea, text, integer, jsonb);
create function auth.request_recovery(email text, token_hash bytea, sealed_token text, mail_limit integer, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed boolean := auth_private.mail_allowed(request_recovery.email, request_recovery.mail_limit);
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(request_recovery.email);
  if v_user.id is null or not v_allowed then
    perform auth_private.enqueue_no_mail('recovery');
    return case when v_user.id is null then 'not_found' else 'limited' end;
  end if;
  perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'recovery', request_recovery.token_hash, request_recovery.sealed_token);
  perform auth_private.audit('recovery_requested', v_user.id, request_recovery.context, '{}'::jsonb);
  return 'sent';
end
$$;
comment on function auth.request_recovery(text, bytea, text, integer, jsonb) is E'Issue a recovery token (1 h, once) and enqueue its email, if the address is registered and under its mail limit; otherwise enqueue a job that sends nothing. Status: sent | not_found | limited.';

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
 * Receiving the token also proves the address: it counts as confirmed, and on its first
 * proof the user_metadata someone else may have planted goes too (prove_address). The
 * user's other unused recovery and magic-link tokens are spent with this one.
 * Status: ok | invalid (unknown, used, expired, or the address changed since).
 */
drop function if exists auth.confirm_recovery(bytea, text);
drop function if exists auth.confirm_recovery(bytea, text, jsonb);
create function auth.confirm_recovery(token_hash bytea, password_hash text, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_user_id uuid;
  v_email text;
begin
  -- The user's row first: two of their tokens used at once (each spending the other) or a
  -- token used during an OAuth sign-in or PATCH take their turns instead of deadlocking.
  perform 1 from auth.users u join auth_private.one_time_tokens t on t.user_id = u.id
    where t.token_hash = confirm_recovery.token_hash for update of u;
  update auth_private.one_time_tokens t set used_at = now()
    from auth.users u
    where t.token_hash = confirm_recovery.token_hash and t.kind = 'recovery'
      and t.used_at is null and t.expires_at > now()
      and u.id = t.user_id and lower(u.email) = lower(t.email)
    returning t.user_id, u.email into v_user_id, v_email;
  if not found then
    return 'invalid';
  end if;
  perform auth_private.spend_other_tokens(v_user_id, confirm_recovery.token_hash);
  perform auth_private.prove_address(v_user_id, v_email, 'recovery', true);
  insert into auth_private.passwords as p (user_id, hash) values (v_user_id, confirm_recovery.password_hash)
    on conflict (user_id) do update set hash = excluded.hash, updated_at = now();
  update auth.users u
    set updated_at = now(),
        email_confirmed_at = coalesce(u.email_confirmed_at, now()),
        providers = case when 'email' = any (u.providers) then u.providers else u.providers || '{email}'::text[] end
    where u.id = v_user_id;
  update auth_private.sessions s set revoked_at = now(), revoked_reason = 'password_recovery'
    where s.user_id = v_user_id and s.revoked_at is null;
  perform auth_private.audit('recovery_completed', v_user_id, confirm_recovery.context, '{}'::jsonb);
  return 'ok';
end
$$;
comment on function auth.confirm_recovery(bytea, text, jsonb) is E'Use a recovery token: prove the address, set the password hash, revoke live sessions, spend the other tokens. Status: ok | invalid.';

/*
 * why: POST /auth/v1/magiclink (contract §4): sent only to a registered address; the
 * service answers the same either way, and the work is the same (see request_recovery).
 * Status: sent | not_found | limited.
 */
drop function if exists auth.request_magic_link(text, bytea, text);
drop function if exists auth.request_magic_link(text, bytea, text, integer);
create function auth.request_magic_link(email text, token_hash bytea, sealed_token text, mail_limit integer)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_allowed boolean := auth_private.mail_allowed(request_magic_link.email, request_magic_link.mail_limit);
  v_user auth.users;
begin
  select * into v_user from auth.users u where lower(u.email) = lower(request_magic_link.email);
  if v_user.id is null or not v_allowed then
    perform auth_private.enqueue_no_mail('magic_link');
    return case when v_user.id is null then 'not_found' else 'limited' end;
  end if;
  perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'magic_link', request_magic_link.token_hash, request_magic_link.sealed_token);
  return 'sent';
end
$$;
comment on function auth.request_magic_link(text, bytea, text, integer) is E'Issue a magic-link token (1 h, once) and enqueue its email, if the address is registered and under its mail limit; otherwise enqueue a job that sends nothing. Status: sent | not_found | limited.';

/*
 * why: GET /auth/v1/magiclink/verify: uses the token (once) and starts a session in the
 * same transaction, so a used token always has its session and vice versa. Clicking the
 * link proves the address: it counts as confirmed, and on its first proof the password,
 * user_metadata and sessions someone else may have planted go (prove_address) before the
 * new session starts. The user's other unused recovery and magic-link tokens are spent.
 * Status: ok | invalid (unknown, used, expired, or the address changed since).
 */
drop function if exists auth.verify_magic_link(bytea, bytea, integer);
drop function if exists auth.verify_magic_link(bytea, bytea, integer, jsonb);
create function auth.verify_magic_link(token_hash bytea, refresh_token_hash bytea, ttl_seconds integer, context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_user_id uuid;
  v_email text;
begin
  -- The user's row first: two of their tokens used at once (each spending the other) or a
  -- token used during an OAuth sign-in or PATCH take their turns instead of deadlocking.
  perform 1 from auth.users u join auth_private.one_time_tokens t on t.user_id = u.id
    where t.token_hash = verify_magic_link.token_hash for update of u;
  update auth_private.one_time_tokens t set used_at = now()
    from auth.users u
    where t.token_hash = verify_magic_link.token_hash and t.kind = 'magic_link'
      and t.used_at is null and t.expires_at > now()
      and u.id = t.user_id and lower(u.email) = lower(t.email)
    returning t.user_id, u.email into v_user_id, v_email;
  if not found then
    return auth_private.session_status('invalid');
  end if;
  perform auth_private.spend_other_tokens(v_user_id, verify_magic_link.token_hash);
  perform auth_private.prove_address(v_user_id, v_email, 'magic_link', true);
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return auth.start_session(v_user_id, verify_magic_link.refresh_token_hash, verify_magic_link.ttl_seconds, null, 'magiclink',
    verify_magic_link.context);
end
$$;
comment on function auth.verify_magic_link(bytea, bytea, integer, jsonb) is E'Use a magic-link token (proving the address, spending the other tokens) and start a session in one transaction. Status: ok | invalid.';

revoke all on function auth.verify_email(bytea), auth.request_recovery(text, bytea, text, integer, jsonb), auth.check_recovery_token(bytea),
  auth.confirm_recovery(bytea, text, jsonb), auth.request_magic_link(text, bytea, text, integer), auth.verify_magic_link(bytea, bytea, integer, jsonb)
  from public;
--! EndIncluded auth/one_time_tokens.sql
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
 *   set if it was null, and the address is proven (the provider just vouched for it). If
 *   it was NOT proven before — confirmed at sign-up without proof (the default), moved
 *   there by a PATCH, or awaiting confirmation — whoever put the account on that address
 *   may not be its owner (pre-account-takeover): its password, user_metadata and sessions
 *   are removed (auth_private.prove_address), and the address owner now holds the account
 *   alone (GoTrue does the same for unconfirmed accounts).
 * - No account: one is created with the address, provider, providers {provider},
 *   user_metadata {} (OAuth rule 3), email_confirmed_at now() and the address proven.
 * - Two first sign-ins of one address racing: the insert's `on conflict do nothing` lets
 *   one win; the loser loops and links to the winner's row.
 * Status: ok (session fields set, via auth.start_session) | unverified_email.
 */
drop function if exists auth.oauth_sign_in(text, text, boolean, bytea, integer);
drop function if exists auth.oauth_sign_in(text, text, boolean, bytea, integer, jsonb);
create function auth.oauth_sign_in(
  provider text,
  email text,
  email_verified boolean,
  refresh_token_hash bytea,
  refresh_ttl_seconds integer,
  context jsonb default null)
  returns auth.session_result
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_email text := pg_catalog.lower(oauth_sign_in.email);
  v_user_id uuid;
  v_newly_proven boolean;
begin
  if oauth_sign_in.provider is null or oauth_sign_in.provider not in ('google', 'github', 'apple', 'microsoft', 'oidc') then
    raise exception 'oauth_sign_in: unknown provider %', oauth_sign_in.provider using errcode = '22023';
  end if;
  if v_email is null or oauth_sign_in.email_verified is distinct from true then
    return auth_private.session_status('unverified_email');
  end if;

  loop
    select u.id into v_user_id
      from auth.users u
      where pg_catalog.lower(u.email) = v_email
      for update;
    if found then
      if not exists (select 1 from auth.users u where u.id = v_user_id and oauth_sign_in.provider = any (u.providers)) then
        perform auth_private.audit('oauth_linked', v_user_id, oauth_sign_in.context,
          jsonb_build_object('provider', oauth_sign_in.provider));
      end if;
      v_newly_proven := auth_private.prove_address(v_user_id, v_email, 'oauth', true);
      update auth.users u set
          provider = oauth_sign_in.provider,
          providers = case when oauth_sign_in.provider = any (u.providers) then u.providers
                           else pg_catalog.array_append(u.providers, oauth_sign_in.provider) end,
          email_confirmed_at = coalesce(u.email_confirmed_at, now()),
          updated_at = case
            when u.provider is distinct from oauth_sign_in.provider or v_newly_proven or u.email_confirmed_at is null
              or not (oauth_sign_in.provider = any (u.providers)) then now()
            else u.updated_at end
        where u.id = v_user_id;
      exit;
    end if;

    insert into auth.users (email, provider, providers, user_metadata, email_confirmed_at)
      values (v_email, oauth_sign_in.provider, array[oauth_sign_in.provider], '{}'::jsonb, now())
      on conflict ((lower(email))) do nothing
      returning id into v_user_id;
    if found then
      perform auth_private.prove_address(v_user_id, v_email, 'oauth', false);
      perform auth_private.audit('sign_up', v_user_id, oauth_sign_in.context, jsonb_build_object('provider', oauth_sign_in.provider));
      exit;
    end if;
  end loop;

  return auth.start_session(v_user_id, oauth_sign_in.refresh_token_hash, oauth_sign_in.refresh_ttl_seconds, null, 'oauth',
    oauth_sign_in.context);
end
$$;
comment on function auth.oauth_sign_in(text, text, boolean, bytea, integer, jsonb) is E'OAuth callback: create the account of a provider-verified email or link the provider to the existing one (providers accumulate), then start a session. Status: ok | unverified_email.';

revoke all on function auth.create_oauth_state(bytea, text, text, text, integer), auth.consume_oauth_state(bytea),
  auth.oauth_sign_in(text, text, boolean, bytea, integer, jsonb) from public;
--! EndIncluded auth/oauth.sql
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
drop function if exists auth.admin_create_user(text, text, text, boolean, jsonb);
create function auth.admin_create_user(email text, password_hash text, role text, email_confirm boolean, context jsonb default null)
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
  perform auth_private.audit('admin_user_created', v_user.id, admin_create_user.context, jsonb_build_object('role', v_user.role));
  return query select 'ok'::text, auth_private.user_json(v_user);
end
$$;
comment on function auth.admin_create_user(text, text, text, boolean, jsonb) is E'Create a user with a role, optional password hash and optionally confirmed address. Status: ok | email_taken.';

/*
 * why: DELETE /auth/v1/admin/users/{id}. Sessions, refresh tokens, one-time tokens and the
 * password go with the user (cascade): its refresh tokens become unknown (401 `invalid
 * refresh token`); access tokens stay valid until they expire (interface §3.1).
 * Status: ok | not_found.
 */
drop function if exists auth.delete_user(uuid);
drop function if exists auth.delete_user(uuid, jsonb);
create function auth.delete_user(user_id uuid, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  delete from auth.users u where u.id = delete_user.user_id;
  if not found then
    return 'not_found';
  end if;
  perform auth_private.audit('admin_user_deleted', delete_user.user_id, delete_user.context, '{}'::jsonb);
  return 'ok';
end
$$;
comment on function auth.delete_user(uuid, jsonb) is E'Delete a user and everything of it (cascade); audited. Status: ok | not_found.';

revoke all on function auth.list_users(), auth.admin_create_user(text, text, text, boolean, jsonb), auth.delete_user(uuid, jsonb) from public;
--! EndIncluded auth/admin.sql
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
    v_session.aal, v_session.amr)::auth.session_result;
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
--! Included auth/hook.sql
/*
 * why: the custom access-token hook (AUTH_HOOK_CUSTOM_ACCESS_TOKEN=schema.function): an
 * application's SQL function `(event jsonb) returns jsonb`, called with GoTrue's event
 * shape {user_id, claims, authentication_method} whenever a token is issued, returns
 * {claims: {...}} to sign. This function runs it and holds the rules:
 * - the claims that make the token what it is cannot change: sub, role (a user has one
 *   role), aud, exp, iat, aal and session_id. A change of one of them is undone and named
 *   in `refused` (the service logs it); every other claim the hook returns is signed.
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
  foreach v_key in array array['sub', 'role', 'aud', 'exp', 'iat', 'aal', 'session_id'] loop
    if (v_claims -> v_key) is distinct from (v_original -> v_key) then
      v_refused := v_refused || v_key;
      v_claims := case when v_original ? v_key then v_claims || pg_catalog.jsonb_build_object(v_key, v_original -> v_key)
                       else v_claims - v_key end;
    end if;
  end loop;
  return query select 'ok'::text, v_claims, v_refused, null::text, null::integer;
end
$$;
comment on function auth.run_access_token_hook(text, jsonb) is E'Run the custom access-token hook on an event; sub, role, aud, exp, iat, aal and session_id cannot change (refused lists the tries). Status: ok | raised | refused | invalid.';
revoke all on function auth.run_access_token_hook(text, jsonb) from public;
--! EndIncluded auth/hook.sql
