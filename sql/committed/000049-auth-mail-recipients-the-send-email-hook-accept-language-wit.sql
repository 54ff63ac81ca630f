--! Previous: sha1:553de4eb1fe9c4dae14db507e122b83c5b069737
--! Hash: sha1:8cbae3dda59a3f6b6ed55c9bf89ef9681f196ce4
--! Message: auth: mail recipients, the send-email hook, Accept-Language with mail jobs

-- Enter migration here
--! Included auth/mail.sql
/*
 * why: the auth__send_email task renders the app's templates (docs/emails.md) with the
 * recipient's account as it is when the mail goes: its User object (the send-email hook's
 * `user`) and user_metadata (the templates' `.Data`, whose `locale` picks the language).
 * Null: no account has the address any more (deleted since); the mail still goes, with
 * empty `.Data`. Internal: the service's worker calls it.
 */
create or replace function auth_private.mail_recipient(email text)
  returns jsonb
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select auth_private.user_json(u) from auth.users u where lower(u.email) = lower(mail_recipient.email) limit 1
$$;
comment on function auth_private.mail_recipient(text) is E'The User object of the account an email goes to (null: none), for the send-email task.';
revoke all on function auth_private.mail_recipient(text) from public;

/*
 * why: the send-email hook in its SQL form (AUTH_HOOK_SEND_EMAIL=pg-functions://…, as
 * GoTrue's): the application's function `(event jsonb) returns jsonb` is called with
 * {user, email_data: {token, token_hash, redirect_to, email_action_type, site_url,
 * token_new, token_hash_new}} and sends the mail itself (an http extension, a queue of its
 * own). It answers `{}` (or anything without an error), or GoTrue's
 * `{error: {http_code, message}}` to refuse the mail: status `refused`, which is not
 * retried. A hook that raises: status `raised` (the task retries the job); a missing
 * function: `invalid` (retried too: the function may be created later). The hook runs
 * with the rights of the service's database role.
 * Status: ok | raised | refused | invalid.
 */
create or replace function auth.run_send_email_hook(hook text, event jsonb)
  returns table (status text, message text, http_code integer)
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
    v_proc := pg_catalog.to_regproc(run_send_email_hook.hook);
  exception when others then
    v_proc := null;
  end;
  if v_proc is null then
    return query select 'invalid'::text, 'send-email hook not found'::text, null::integer;
    return;
  end if;
  begin
    execute pg_catalog.format('select %s($1)::jsonb', v_proc::text) into v_result using run_send_email_hook.event;
  exception when others then
    get stacked diagnostics v_message = message_text;
    return query select 'raised'::text, v_message, null::integer;
    return;
  end;
  if pg_catalog.jsonb_typeof(v_result -> 'error') = 'object' then
    return query select 'refused'::text, coalesce(v_result #>> '{error,message}', 'refused'),
      case when (v_result #>> '{error,http_code}') ~ '^[1-5][0-9][0-9]$' then (v_result #>> '{error,http_code}')::integer end;
    return;
  end if;
  return query select 'ok'::text, null::text, null::integer;
end
$$;
comment on function auth.run_send_email_hook(text, jsonb) is E'Run the send-email hook (a SQL function of the app) on an event. Status: ok | raised | refused | invalid.';
revoke all on function auth.run_send_email_hook(text, jsonb) from public;
--! EndIncluded auth/mail.sql
--! Included auth/one_time_tokens.sql
/*
 * why: emailed one-time tokens (docs/api/auth.md): email verification (24 h,
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
 * of docs/api/auth.md are written once. The request's Accept-Language (its `context`)
 * rides with the job: the mail's language when the account names none (docs/emails.md).
 * Internal: called by the entry functions below.
 */
drop function if exists auth_private.issue_one_time_token(uuid, text, text, bytea, text);
create or replace function auth_private.issue_one_time_token(user_id uuid, email text, kind text, token_hash bytea, sealed_token text,
    context jsonb default null)
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
    pg_catalog.json_build_object('kind', issue_one_time_token.kind, 'to', issue_one_time_token.email, 'sealed_token', issue_one_time_token.sealed_token,
      'accept_language', issue_one_time_token.context ->> 'accept_language'),
    max_attempts => 5);
end
$$;
comment on function auth_private.issue_one_time_token(uuid, text, text, bytea, text, jsonb) is E'Store a one-time token (SHA-256) with its contract lifetime and enqueue its email (auth__send_email) in the same transaction.';
revoke all on function auth_private.issue_one_time_token(uuid, text, text, bytea, text, jsonb) from public;

/*
 * why: the one place a one-time token is spent, so every entry function locks and checks
 * it alike: the user's row first (two of their tokens used at once, each spending the
 * other, or a token used during an OAuth sign-in or PATCH take their turns instead of
 * deadlocking), then the token of this kind, unexpired, unused (or, `repeatable`, used
 * before too: verification), still bound to the account's current address, marked used.
 * No row: invalid (unknown, used, expired, or the address changed since). Internal.
 */
create or replace function auth_private.spend_one_time_token(token_hash bytea, kind text, repeatable boolean default false)
  returns table (user_id uuid, email text, issued_at timestamptz)
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
  perform 1 from auth.users u join auth_private.one_time_tokens t on t.user_id = u.id
    where t.token_hash = spend_one_time_token.token_hash for update of u;
  return query
    with spent as (
      update auth_private.one_time_tokens t set used_at = coalesce(t.used_at, now())
        from auth.users u
       where t.token_hash = spend_one_time_token.token_hash and t.kind = spend_one_time_token.kind
         and (spend_one_time_token.repeatable or t.used_at is null) and t.expires_at > now()
         and u.id = t.user_id and lower(u.email) = lower(t.email)
      returning t.user_id, u.email, t.created_at
    )
    select * from spent;
end
$$;
comment on function auth_private.spend_one_time_token(bytea, text, boolean) is E'Spend a one-time token of a kind (the user\'s row locked first): its user, address and issue time, or no row when it is invalid.';
revoke all on function auth_private.spend_one_time_token(bytea, text, boolean) from public;

/*
 * why: GET /auth/v1/verify (docs/api/auth.md): awaiting confirmation → confirmed. Valid for
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
  select s.user_id, s.email, s.issued_at into v_user_id, v_email, v_issued_at
    from auth_private.spend_one_time_token(verify_email.token_hash, 'verification', true) s;
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
 * why: POST /auth/v1/recover (docs/api/auth.md). The service answers the same either way
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
  perform auth_private.issue_one_time_token(v_user.id, v_user.email, 'recovery', request_recovery.token_hash, request_recovery.sealed_token,
    request_recovery.context);
  perform auth_private.audit('recovery_requested', v_user.id, request_recovery.context, '{}'::jsonb);
  return 'sent';
end
$$;
comment on function auth.request_recovery(text, bytea, text, integer, jsonb) is E'Issue a recovery token (1 h, once) and enqueue its email, if the address is registered and under its mail limit; otherwise enqueue a job that sends nothing. Status: sent | not_found | limited.';

/*
 * why: POST /auth/v1/recover/confirm must answer `invalid or expired token` for a used or
 * expired token whatever the password (docs/api/auth.md); the service asks this only
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
 * why: POST /auth/v1/recover/confirm (docs/api/auth.md): issued → used, password replaced
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
  select s.user_id, s.email into v_user_id, v_email
    from auth_private.spend_one_time_token(confirm_recovery.token_hash, 'recovery') s;
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
 * why: POST /auth/v1/magiclink (docs/api/auth.md): sent only to a registered address; the
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
  select s.user_id, s.email into v_user_id, v_email
    from auth_private.spend_one_time_token(verify_magic_link.token_hash, 'magic_link') s;
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
      sign_up.verification_token_hash, sign_up.sealed_verification_token, sign_up.context);
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
        update_user.verification_token_hash, update_user.sealed_verification_token, update_user.context);
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
          'new_email', case when v_email_changed then v_user.email end,
          'accept_language', update_user.context ->> 'accept_language'),
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
