--! Previous: sha1:8cbae3dda59a3f6b6ed55c9bf89ef9681f196ce4
--! Hash: sha1:aae9e25fca6aefc7b23e250d0056adea0c81319e
--! Message: compat: OAuth in the PKCE flow

-- Enter migration here
--! Included auth/oauth.sql
/*
 * why: OAuth sign-in (docs/api/auth.md). The service speaks to the providers (openid-client, network I/O stays in
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
 * why: the callback's account step (docs/api/auth.md), then the
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
/*
 * why: the account step alone (auth.oauth_sign_in below, and SUPABASE_COMPAT's PKCE
 * callback, which issues an auth code instead of a session: compat_pkce.sql).
 * Returns the account's id; null: the email is not provider-verified (nothing changes).
 */
create or replace function auth_private.oauth_account(provider text, email text, email_verified boolean, context jsonb)
  returns uuid
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
  v_email text := pg_catalog.lower(oauth_account.email);
  v_user_id uuid;
  v_newly_proven boolean;
begin
  if oauth_account.provider is null or oauth_account.provider not in ('google', 'github', 'apple', 'microsoft', 'oidc') then
    raise exception 'oauth_sign_in: unknown provider %', oauth_account.provider using errcode = '22023';
  end if;
  if v_email is null or oauth_account.email_verified is distinct from true then
    return null;
  end if;

  loop
    select u.id into v_user_id
      from auth.users u
      where pg_catalog.lower(u.email) = v_email
      for update;
    if found then
      if not exists (select 1 from auth.users u where u.id = v_user_id and oauth_account.provider = any (u.providers)) then
        perform auth_private.audit('oauth_linked', v_user_id, oauth_account.context,
          jsonb_build_object('provider', oauth_account.provider));
      end if;
      v_newly_proven := auth_private.prove_address(v_user_id, v_email, 'oauth', true);
      update auth.users u set
          provider = oauth_account.provider,
          providers = case when oauth_account.provider = any (u.providers) then u.providers
                           else pg_catalog.array_append(u.providers, oauth_account.provider) end,
          email_confirmed_at = coalesce(u.email_confirmed_at, now()),
          updated_at = case
            when u.provider is distinct from oauth_account.provider or v_newly_proven or u.email_confirmed_at is null
              or not (oauth_account.provider = any (u.providers)) then now()
            else u.updated_at end
        where u.id = v_user_id;
      exit;
    end if;

    insert into auth.users (email, provider, providers, user_metadata, email_confirmed_at)
      values (v_email, oauth_account.provider, array[oauth_account.provider], '{}'::jsonb, now())
      on conflict ((lower(email))) do nothing
      returning id into v_user_id;
    if found then
      perform auth_private.prove_address(v_user_id, v_email, 'oauth', false);
      perform auth_private.audit('sign_up', v_user_id, oauth_account.context, jsonb_build_object('provider', oauth_account.provider));
      exit;
    end if;
  end loop;

  return v_user_id;
end
$$;
comment on function auth_private.oauth_account(text, text, boolean, jsonb) is E'OAuth callback''s account step: create the account of a provider-verified email or link the provider to the existing one; null when the email is not verified.';

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
declare
  v_user_id uuid;
begin
  v_user_id := auth_private.oauth_account(oauth_sign_in.provider, oauth_sign_in.email, oauth_sign_in.email_verified, oauth_sign_in.context);
  if v_user_id is null then
    return auth_private.session_status('unverified_email');
  end if;
  return auth.start_session(v_user_id, oauth_sign_in.refresh_token_hash, oauth_sign_in.refresh_ttl_seconds, null, 'oauth',
    oauth_sign_in.context);
end
$$;
comment on function auth.oauth_sign_in(text, text, boolean, bytea, integer, jsonb) is E'OAuth callback: create the account of a provider-verified email or link the provider to the existing one (providers accumulate), then start a session. Status: ok | unverified_email.';

revoke all on function auth.create_oauth_state(bytea, text, text, text, integer), auth.consume_oauth_state(bytea),
  auth_private.oauth_account(text, text, boolean, jsonb), auth.oauth_sign_in(text, text, boolean, bytea, integer, jsonb) from public;
--! EndIncluded auth/oauth.sql
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

/*
 * why: supabase-js's signInWithOAuth with `flowType: 'pkce'` (GoTrue's external.go): the
 * authorize request carries a code challenge and a `redirect_to`; the callback then issues
 * an auth code bound to a flow state of the account (method `oauth`), redirecting to
 * `redirect_to?code=…`, and POST /token?grant_type=pkce (auth.compat_exchange_pkce) opens
 * the session. The OAuth state (oauth.sql) keeps the challenge and the checked
 * `redirect_to` until the callback.
 */
alter table auth_private.flow_states add column if not exists provider text;
alter table auth_private.flow_states drop constraint if exists flow_states_authentication_method_check;
alter table auth_private.flow_states add constraint flow_states_authentication_method_check
  check (authentication_method in ('magiclink', 'recovery', 'oauth'));
alter table auth_private.oauth_states add column if not exists redirect_to text;
alter table auth_private.oauth_states add column if not exists code_challenge text;
alter table auth_private.oauth_states add column if not exists code_challenge_method text;
alter table auth_private.oauth_states drop constraint if exists oauth_states_challenge_check;
alter table auth_private.oauth_states add constraint oauth_states_challenge_check check (
  (code_challenge is null and code_challenge_method is null)
  or (code_challenge ~ '^[A-Za-z0-9._~-]{43,128}$' and code_challenge_method in ('s256', 'plain')));
comment on column auth_private.oauth_states.redirect_to is E'SUPABASE_COMPAT: the checked redirect_to of the authorize request; null: SITE_URL.';
comment on column auth_private.oauth_states.code_challenge is E'SUPABASE_COMPAT: the PKCE challenge of the application (not the provider''s): the callback issues an auth code instead of a session.';

/* why: GET /auth/v1/authorize under SUPABASE_COMPAT: auth.create_oauth_state with the application's redirect and PKCE challenge. */
create or replace function auth.compat_create_oauth_state(state_hash bytea, provider text, code_verifier text, nonce text,
    ttl_seconds integer, redirect_to text, code_challenge text, code_challenge_method text)
  returns void
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
begin
  if compat_create_oauth_state.code_challenge is not null
     and (lower(compat_create_oauth_state.code_challenge_method) is distinct from 's256'
          and lower(compat_create_oauth_state.code_challenge_method) is distinct from 'plain'
          or compat_create_oauth_state.code_challenge !~ '^[A-Za-z0-9._~-]{43,128}$') then
    raise exception 'invalid code challenge' using errcode = 'PT400';
  end if;
  perform auth.create_oauth_state(compat_create_oauth_state.state_hash, compat_create_oauth_state.provider,
    compat_create_oauth_state.code_verifier, compat_create_oauth_state.nonce, compat_create_oauth_state.ttl_seconds);
  update auth_private.oauth_states s
     set redirect_to = compat_create_oauth_state.redirect_to,
         code_challenge = compat_create_oauth_state.code_challenge,
         code_challenge_method = lower(compat_create_oauth_state.code_challenge_method)
   where s.state_hash = compat_create_oauth_state.state_hash;
end
$$;
comment on function auth.compat_create_oauth_state(bytea, text, text, text, integer, text, text, text) is E'SUPABASE_COMPAT: store a pending OAuth request with the application''s redirect_to and PKCE challenge.';

/* why: the callback under SUPABASE_COMPAT: where it redirects, and whether it issues an auth code (a challenge) or a session. */
create or replace function auth.compat_oauth_flow(state_hash bytea)
  returns table (redirect_to text, pkce boolean)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.redirect_to, s.code_challenge is not null from auth_private.oauth_states s where s.state_hash = compat_oauth_flow.state_hash
$$;
comment on function auth.compat_oauth_flow(bytea) is E'SUPABASE_COMPAT: an OAuth state''s redirect_to and whether it is a PKCE flow.';

/*
 * why: the PKCE callback's account step (auth_private.oauth_account) and, instead of a
 * session, a flow state of the account with the auth code (SHA-256 given) issued now:
 * 5 minutes, used once by auth.compat_exchange_pkce. The state must have been consumed
 * (auth.consume_oauth_state) and carry a challenge. A banned user raises PT403 `user is
 * banned` (nothing changes), as auth.oauth_sign_in does.
 * Status: ok | unverified_email | invalid (no such consumed PKCE state).
 */
create or replace function auth.compat_oauth_sign_in_pkce(state_hash bytea, provider text, email text, email_verified boolean,
    auth_code_hash bytea, context jsonb default null)
  returns text
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_state auth_private.oauth_states;
  v_user_id uuid;
begin
  select * into v_state from auth_private.oauth_states s
   where s.state_hash = compat_oauth_sign_in_pkce.state_hash and s.used_at is not null and s.code_challenge is not null
     and s.provider = compat_oauth_sign_in_pkce.provider;
  if not found then
    return 'invalid';
  end if;
  v_user_id := auth_private.oauth_account(compat_oauth_sign_in_pkce.provider, compat_oauth_sign_in_pkce.email,
    compat_oauth_sign_in_pkce.email_verified, compat_oauth_sign_in_pkce.context);
  if v_user_id is null then
    return 'unverified_email';
  end if;
  -- A banned user is refused here, as the implicit callback's session would be (PT403, all rolled back).
  perform auth_private.refuse_if_banned(u.banned_until) from auth.users u where u.id = v_user_id;
  delete from auth_private.flow_states f where f.created_at < now() - interval '1 hour 5 minutes';
  insert into auth_private.flow_states (user_id, auth_code_hash, code_challenge, code_challenge_method, authentication_method,
      provider, auth_code_issued_at)
    values (v_user_id, compat_oauth_sign_in_pkce.auth_code_hash, v_state.code_challenge, v_state.code_challenge_method, 'oauth',
      compat_oauth_sign_in_pkce.provider, now());
  return 'ok';
end
$$;
comment on function auth.compat_oauth_sign_in_pkce(bytea, text, text, boolean, bytea, jsonb) is E'SUPABASE_COMPAT: the OAuth PKCE callback: the account, then an auth code bound to a flow state (5 minutes, single use). Status: ok | unverified_email | invalid.';

revoke all on table auth_private.flow_states from public;
revoke all on function auth_private.pkce_matches(text, text, text),
  auth.compat_send_link_pkce(text, text, boolean, jsonb, bytea, text, bytea, text, text, integer, text, text, jsonb),
  auth.compat_verify_pkce(text, bytea, bytea), auth.compat_exchange_pkce(bytea, text, bytea, integer, jsonb),
  auth.compat_create_oauth_state(bytea, text, text, text, integer, text, text, text), auth.compat_oauth_flow(bytea),
  auth.compat_oauth_sign_in_pkce(bytea, text, text, boolean, bytea, jsonb) from public;
--! EndIncluded auth/compat_pkce.sql
