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

--!include auth/proven.sql

-- Accounts from before the mark: see auth_private.backfill_proven_emails.
select auth_private.backfill_proven_emails();

--!include auth/one_time_tokens.sql
--!include auth/accounts.sql
--!include auth/oauth.sql
--!include auth/purge.sql
