--! Previous: sha1:513cfa4cda95b89129457b618799b61b5a37feb3
--! Hash: sha1:13cd8b87839c74ff1d624d17b0835953d8f9ad55
--! Message: auth: proven addresses apart from confirmation, the first proof purges what was planted; per-address mail limit; spent tokens; a notice on account changes

-- Enter migration here
/*
 * why: account safety. Sign-ups count as confirmed at once by default and an email change
 * takes effect at once (interface §4.2, contract §9), so `email_confirmed_at` says nothing
 * about who owns an address. Whoever signed up or moved an account to `victim@corp` first
 * could wait for the owner's "Sign in with Google" or magic link and keep a password, data
 * and sessions in the account the owner then uses (account pre-takeover).
 *
 * `auth_private.proven_emails` is the separate mark: an address counts as proven only
 * while a row holds the account's current address, and rows are written only by a used
 * emailed token (verification, magic link, recovery) or a provider-verified OAuth
 * sign-in (auth_private.prove_address) — never by auto-confirmation, the admin API or a
 * PATCH, which removes the row. The first proof of an address removes what someone else
 * may have planted before it (sql/fixtures/auth/proven.sql).
 *
 * It lives in auth_private, not as a column of auth.users, so no grant of auth.users
 * columns to an API role reaches it and no application policy comes to rely on it.
 */
create table if not exists auth_private.proven_emails (
  user_id uuid primary key references auth.users (id) on delete cascade,
  email text not null,
  proof text not null,
  proven_at timestamptz not null default now(),
  constraint proven_emails_proof_check check (proof in ('verification', 'magic_link', 'recovery', 'oauth', 'legacy')),
  constraint proven_emails_email_check check (email = lower(email))
);
comment on table auth_private.proven_emails is E'plinth: the address of an account proven by a used emailed token or a provider-verified OAuth sign-in. Proven only while email matches the account''s current address.';
comment on column auth_private.proven_emails.proof is E'What proved it: verification, magic_link, recovery, oauth, or legacy (proven before this mark existed, read from the account''s record).';

-- Two more reasons a refresh-token family ends: the first proof of the address, and a
-- change of the email or password (the caller's own family stays).
alter table auth_private.sessions drop constraint if exists sessions_revoked_reason_check;
alter table auth_private.sessions add constraint sessions_revoked_reason_check
  check (revoked_reason is null or revoked_reason in ('logout', 'reuse_detected', 'password_recovery', 'address_proven', 'account_changed'));

/*
 * why: MAIL_RATE_LIMIT_PER_HOUR: recovery and magic-link mails per address in any hour
 * (auth_private.mail_allowed). Held here, not in process memory, so it holds across
 * instances; a sliding window like auth_private.rate_limits. Keyed by the SHA-256 of the
 * lower-cased address, so no address that was merely typed into a form is kept in clear.
 * Rows idle for a day are removed by auth.purge_expired.
 */
create table if not exists auth_private.mail_limits (
  email_hash bytea primary key,
  hits timestamptz[] not null default '{}'::timestamptz[],
  updated_at timestamptz not null default now(),
  constraint mail_limits_hash_check check (octet_length(email_hash) = 32)
);
comment on table auth_private.mail_limits is E'plinth: sliding-window times of the recovery and magic-link mails per address (by SHA-256 of the lower-cased address); shared by every instance.';

--! Included auth/proven.sql
/*
 * why: the "address proven" rule (table auth_private.proven_emails) and the helpers the
 * emailed-token and account functions share: the mail limit per address, the job for an
 * address that gets no mail, and spending a user's other outstanding tokens.
 */

/*
 * why: the one place an address becomes proven. Called, after the proof was checked, by
 * verify_email, confirm_recovery, verify_magic_link and oauth_sign_in (a provider-verified
 * address). Returns true when the address was not proven before.
 *
 * Until then, whoever signed the account up or moved it to this address may not own the
 * address, so with `purge` the first proof removes what they may have planted: the
 * password, the user_metadata and every refresh-token family (revoked as
 * `address_proven`; an access token already out lives until its `exp`). The address owner
 * holds the account alone afterwards. A later proof of the same address changes nothing.
 */
create or replace function auth_private.prove_address(user_id uuid, email text, proof text, purge boolean)
  returns boolean
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
begin
  if exists (select 1 from auth_private.proven_emails p
              where p.user_id = prove_address.user_id and p.email = lower(prove_address.email)) then
    return false;
  end if;
  insert into auth_private.proven_emails as p (user_id, email, proof)
    values (prove_address.user_id, lower(prove_address.email), prove_address.proof)
    on conflict on constraint proven_emails_pkey do update set email = excluded.email, proof = excluded.proof, proven_at = now();
  if prove_address.purge then
    delete from auth_private.passwords p where p.user_id = prove_address.user_id;
    update auth.users u set user_metadata = '{}'::jsonb, updated_at = now()
      where u.id = prove_address.user_id;
    update auth_private.sessions s set revoked_at = now(), revoked_reason = 'address_proven'
      where s.user_id = prove_address.user_id and s.revoked_at is null;
  end if;
  return true;
end
$$;
comment on function auth_private.prove_address(uuid, text, text, boolean) is E'Mark an account''s address proven; on its first proof (with purge) remove password, user_metadata and sessions planted before. Returns true when it was not proven before.';

/*
 * why: a recovery or magic-link token grants the account (a session, a new password).
 * Once one is used, the others of that user still in mailboxes, forwards or logs are
 * spent with it: every unused recovery and magic-link token of the user. Verification
 * tokens only confirm the address and stay as they are.
 */
create or replace function auth_private.spend_other_tokens(user_id uuid, token_hash bytea)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  update auth_private.one_time_tokens t set used_at = now()
    where t.user_id = spend_other_tokens.user_id and t.kind in ('recovery', 'magic_link')
      and t.used_at is null and t.token_hash <> spend_other_tokens.token_hash
$$;
comment on function auth_private.spend_other_tokens(uuid, bytea) is E'Spend every other unused recovery and magic-link token of a user (one was just used).';

/*
 * why: MAIL_RATE_LIMIT_PER_HOUR: recovery and magic-link mails per address in any hour
 * (table auth_private.mail_limits, shared by every instance). Every request counts, for a
 * registered address or not, so the two cost the same and a limited request looks like
 * any other; a request over the limit is not counted. The row lock serialises concurrent
 * requests for one address. max_per_hour <= 0 disables.
 */
create or replace function auth_private.mail_allowed(email text, max_per_hour integer)
  returns boolean
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_hash bytea := sha256(convert_to(lower(mail_allowed.email), 'UTF8'));
  v_now timestamptz := clock_timestamp();
  v_hits timestamptz[];
begin
  if mail_allowed.max_per_hour <= 0 then
    return true;
  end if;
  insert into auth_private.mail_limits (email_hash) values (v_hash) on conflict do nothing;
  select m.hits into v_hits from auth_private.mail_limits m where m.email_hash = v_hash for update;
  v_hits := array(select h from unnest(v_hits) h where h > v_now - interval '1 hour' order by h);
  if coalesce(cardinality(v_hits), 0) >= mail_allowed.max_per_hour then
    update auth_private.mail_limits m set hits = v_hits where m.email_hash = v_hash;
    return false;
  end if;
  update auth_private.mail_limits m set hits = v_hits || v_now, updated_at = v_now where m.email_hash = v_hash;
  return true;
end
$$;
comment on function auth_private.mail_allowed(text, integer) is E'Count one mail to an address against MAIL_RATE_LIMIT_PER_HOUR; false (not counted) when the hour''s mails are used up. max_per_hour <= 0 disables.';

/*
 * why: recovery and magic-link requests do the same work for every address: an unknown
 * or limited address gets a job too, one without a recipient, which the auth__send_email
 * task ends without sending anything. So a request for a registered address and one for
 * any other both add exactly one job.
 */
create or replace function auth_private.enqueue_no_mail(kind text)
  returns void
  language sql volatile
  set search_path = pg_catalog, pg_temp
as $$
  select null::void from graphile_worker.add_job('auth__send_email',
    pg_catalog.json_build_object('kind', enqueue_no_mail.kind, 'to', null, 'sealed_token', null), max_attempts => 5)
$$;
comment on function auth_private.enqueue_no_mail(text) is E'Enqueue an auth__send_email job without a recipient (nothing is sent): the same work for unknown and limited addresses.';

/*
 * why: accounts from before the proven mark existed count as proven where their record
 * shows that the current address was proven and nothing changed since. Meant to run once,
 * by the migration that added the mark (afterwards the mark itself is the record):
 * - a used emailed token bound to the current address (tokens are kept a week past
 *   expiry);
 * - confirmed after sign-up (a verification, magic-link or recovery token, or an OAuth
 *   link, each set email_confirmed_at and updated_at to the same now()) and updated_at
 *   untouched since: a PATCH of the email, password or metadata, or a later link, would
 *   have moved it;
 * - created by an OAuth sign-in (a provider-verified address: created_at,
 *   email_confirmed_at and updated_at are the one now() of the insert, and `email` is not
 *   among the providers) and unchanged since.
 * An auto-confirmed sign-up (the three the same, providers {email}) and an account made
 * by the admin API prove nothing and stay unproven. Returns how many were marked.
 */
create or replace function auth_private.backfill_proven_emails()
  returns bigint
  language plpgsql volatile
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_tokens bigint;
  v_records bigint;
begin
  insert into auth_private.proven_emails (user_id, email, proof, proven_at)
    select distinct on (t.user_id) t.user_id, lower(u.email), t.kind, t.used_at
      from auth_private.one_time_tokens t
      join auth.users u on u.id = t.user_id
      where t.used_at is not null and lower(t.email) = lower(u.email)
      order by t.user_id, t.used_at desc
    on conflict (user_id) do nothing;
  get diagnostics v_tokens = row_count;
  insert into auth_private.proven_emails (user_id, email, proof, proven_at)
    select u.id, lower(u.email), 'legacy', u.email_confirmed_at
      from auth.users u
      where u.email is not null and u.email_confirmed_at is not null and u.updated_at = u.email_confirmed_at
        and (u.email_confirmed_at > u.created_at
             or (u.email_confirmed_at = u.created_at and u.provider is not null and not ('email' = any (u.providers))))
    on conflict (user_id) do nothing;
  get diagnostics v_records = row_count;
  return v_tokens + v_records;
end
$$;
comment on function auth_private.backfill_proven_emails() is E'Mark the addresses of accounts from before the proven mark as proven where their record shows a proof and no change since. Returns how many were marked.';

revoke all on function auth_private.prove_address(uuid, text, text, boolean), auth_private.spend_other_tokens(uuid, bytea),
  auth_private.mail_allowed(text, integer), auth_private.enqueue_no_mail(text),
  auth_private.backfill_proven_emails() from public;
--! EndIncluded auth/proven.sql

-- Accounts from before the mark: see auth_private.backfill_proven_emails.
select auth_private.backfill_proven_emails();

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
create function auth.request_recovery(email text, token_hash bytea, sealed_token text, mail_limit integer)
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
  return 'sent';
end
$$;
comment on function auth.request_recovery(text, bytea, text, integer) is E'Issue a recovery token (1 h, once) and enqueue its email, if the address is registered and under its mail limit; otherwise enqueue a job that sends nothing. Status: sent | not_found | limited.';

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
create function auth.confirm_recovery(token_hash bytea, password_hash text)
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
  return 'ok';
end
$$;
comment on function auth.confirm_recovery(bytea, text) is E'Use a recovery token: prove the address, set the password hash, revoke live sessions, spend the other tokens. Status: ok | invalid.';

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
create function auth.verify_magic_link(token_hash bytea, refresh_token_hash bytea, ttl_seconds integer)
  returns table (status text, session_id uuid, is_anonymous boolean, user_json jsonb)
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
    return query select 'invalid'::text, null::uuid, null::boolean, null::jsonb;
    return;
  end if;
  perform auth_private.spend_other_tokens(v_user_id, verify_magic_link.token_hash);
  perform auth_private.prove_address(v_user_id, v_email, 'magic_link', true);
  update auth.users u set email_confirmed_at = now(), updated_at = now()
    where u.id = v_user_id and u.email_confirmed_at is null;
  return query select * from auth.start_session(v_user_id, verify_magic_link.refresh_token_hash, verify_magic_link.ttl_seconds);
end
$$;
comment on function auth.verify_magic_link(bytea, bytea, integer) is E'Use a magic-link token (proving the address, spending the other tokens) and start a session in one transaction. Status: ok | invalid.';

revoke all on function auth.verify_email(bytea), auth.request_recovery(text, bytea, text, integer), auth.check_recovery_token(bytea),
  auth.confirm_recovery(bytea, text), auth.request_magic_link(text, bytea, text, integer), auth.verify_magic_link(bytea, bytea, integer)
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
 * Confirmed is not proven: a sign-up proves nothing about who owns the address (see
 * auth_private.prove_address); only a used emailed token or a provider-verified OAuth
 * sign-in does.
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
create function auth.update_user(user_id uuid, email text, password_hash text, user_metadata jsonb, session_id uuid)
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
comment on function auth.update_user(uuid, text, text, jsonb, uuid) is E'Change a user''s own email, password hash and metadata (merged; null keys removed); an email or password change ends the other sessions and tells the former address. Status: ok | not_found | email_taken.';

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
  auth.get_user(uuid), auth.update_user(uuid, text, text, jsonb, uuid), auth.sign_in_anonymously(text, jsonb, bytea, integer),
  auth.rehash_password(uuid, text, text)
  from public;
--! EndIncluded auth/accounts.sql
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
  v_newly_proven boolean;
begin
  if oauth_sign_in.provider is null or oauth_sign_in.provider not in ('google', 'github', 'apple', 'microsoft', 'oidc') then
    raise exception 'oauth_sign_in: unknown provider %', oauth_sign_in.provider using errcode = '22023';
  end if;
  if v_email is null or oauth_sign_in.email_verified is distinct from true then
    return query select 'unverified_email'::text, null::uuid, null::boolean, null::jsonb;
    return;
  end if;

  loop
    select u.id into v_user_id
      from auth.users u
      where pg_catalog.lower(u.email) = v_email
      for update;
    if found then
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
      exit;
    end if;
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
 * expiry, rate-limit and mail-limit rows idle for a day (no window is longer than an hour). Run hourly by
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
  v_mail_limits bigint;
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
  delete from auth_private.mail_limits m where m.updated_at < now() - interval '1 day';
  get diagnostics v_mail_limits = row_count;
  return pg_catalog.jsonb_build_object('refresh_tokens', v_refresh_tokens, 'sessions', v_sessions,
    'one_time_tokens', v_one_time_tokens, 'rate_limits', v_rate_limits, 'mail_limits', v_mail_limits);
end
$$;
comment on function auth.purge_expired() is E'Delete auth rows that can no longer change an answer (tokens a week past expiry, empty families, idle rate-limit and mail-limit rows). Returns the counts.';

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
