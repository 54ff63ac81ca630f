-- OAuth sign-in (issue 7): the state machine of auth_private.oauth_states and the link rules of auth.oauth_sign_in.
begin;
select plan(62);

-- ── state: issued → used | expired; unknown is invalid ─────────────────────────────────
select lives_ok(
  $$select auth.create_oauth_state(sha256('state-1'), 'oidc', 'verifier-1', 'nonce-1', 600)$$,
  'a state is stored');
select is((select count(*)::int from auth_private.oauth_states where state_hash = sha256('state-1')), 1, 'only its SHA-256 is the key');
select is((select count(*)::int from auth_private.oauth_states where state_hash = 'state-1'::bytea), 0, 'the clear state is not stored');

select results_eq(
  $$select status, provider, code_verifier, nonce from auth.consume_oauth_state(sha256('state-1'))$$,
  $$values ('ok'::text, 'oidc'::text, 'verifier-1'::text, 'nonce-1'::text)$$,
  'consuming a fresh state returns ok with its provider, verifier and nonce');
select ok((select used_at is not null and code_verifier is null and nonce is null from auth_private.oauth_states where state_hash = sha256('state-1')),
  'a used state is marked used and its verifier and nonce are wiped');
select results_eq(
  $$select status, provider, code_verifier, nonce from auth.consume_oauth_state(sha256('state-1'))$$,
  $$values ('used'::text, 'oidc'::text, null::text, null::text)$$,
  'a second use says used and hands out no secret');
select results_eq(
  $$select status, provider, code_verifier from auth.consume_oauth_state(sha256('never-issued'))$$,
  $$values ('invalid'::text, null::text, null::text)$$,
  'an unknown state is invalid');

select auth.create_oauth_state(sha256('state-2'), 'github', 'verifier-2', null, 600);
update auth_private.oauth_states set expires_at = now() - interval '1 second' where state_hash = sha256('state-2');
select results_eq(
  $$select status, code_verifier from auth.consume_oauth_state(sha256('state-2'))$$,
  $$values ('expired'::text, null::text)$$,
  'an expired state says expired and hands out no secret');
select is((select used_at from auth_private.oauth_states where state_hash = sha256('state-2')), null, 'an expired state is not marked used');

select auth.create_oauth_state(sha256('state-3'), 'apple', null, 'nonce-3', 600);
select results_eq(
  $$select status, provider, code_verifier, nonce from auth.consume_oauth_state(sha256('state-3'))$$,
  $$values ('ok'::text, 'apple'::text, null::text, 'nonce-3'::text)$$,
  'a provider without PKCE has no verifier');

select throws_ok(
  $$select auth.create_oauth_state(sha256('state-4'), 'facebook', null, null, 600)$$,
  '23514', null, 'an unknown provider cannot get a state');
select throws_ok(
  $$select auth.create_oauth_state('short'::bytea, 'oidc', null, null, 600)$$,
  '23514', null, 'the key must be a SHA-256');

-- Rows expired over an hour ago are purged by the next authorize.
insert into auth_private.oauth_states (state_hash, provider, expires_at) values (sha256('old'), 'oidc', now() - interval '2 hours');
select auth.create_oauth_state(sha256('state-5'), 'oidc', 'v', 'n', 600);
select is((select count(*)::int from auth_private.oauth_states where state_hash = sha256('old')), 0, 'long-expired states are purged');
select is((select count(*)::int from auth_private.oauth_states where state_hash = sha256('state-2')), 1, 'recently expired states are kept (they still say expired)');

-- ── accounts: create, link, accumulate ───────────────────────────────────────────────
select results_eq(
  $$select status from auth.oauth_sign_in('google', 'New.User@Example.com', true, sha256('rt-1'), 3600)$$,
  $$values ('ok'::text)$$,
  'a verified email without an account signs in');
select results_eq(
  $$select email, provider, providers, user_metadata, email_confirmed_at is not null from auth.users where email = 'new.user@example.com'$$,
  $$values ('new.user@example.com'::text, 'google'::text, '{google}'::text[], '{}'::jsonb, true)$$,
  'the account is created lower-cased, with provider, providers {google}, metadata {} and a confirmed address');
select is((select count(*)::int from auth_private.refresh_tokens where token_hash = sha256('rt-1')), 1, 'a session starts with the given refresh token');
select is((select (user_json ->> 'provider') from auth.oauth_sign_in('google', 'new.user@example.com', true, sha256('rt-1b'), 3600)),
  'google', 'the User of the grant carries provider');
select is((select providers from auth.users where email = 'new.user@example.com'), '{google}'::text[], 'the same provider again does not repeat in providers');

select results_eq(
  $$select status from auth.oauth_sign_in('github', 'NEW.USER@example.com', true, sha256('rt-2'), 3600)$$,
  $$values ('ok'::text)$$,
  'a second provider with the same verified email signs in');
select is((select count(*)::int from auth.users where lower(email) = 'new.user@example.com'), 1, 'to the same account');
select results_eq(
  $$select provider, providers from auth.users where email = 'new.user@example.com'$$,
  $$values ('github'::text, '{google,github}'::text[])$$,
  'provider is the latest, providers accumulate');
select is(
  (select s.user_id from auth_private.refresh_tokens t join auth_private.sessions s on s.id = t.session_id where t.token_hash = sha256('rt-2')),
  (select id from auth.users where email = 'new.user@example.com'),
  'the session belongs to the linked account');

-- ── unverified emails: never linked, never created ───────────────────────────────────
select results_eq(
  $$select status, session_id, user_json from auth.oauth_sign_in('microsoft', 'new.user@example.com', false, sha256('rt-3'), 3600)$$,
  $$values ('unverified_email'::text, null::uuid, null::jsonb)$$,
  'an unverified email matching an account is refused');
select is((select providers from auth.users where email = 'new.user@example.com'), '{google,github}'::text[], 'and not linked');
select is((select count(*)::int from auth_private.refresh_tokens where token_hash = sha256('rt-3')), 0, 'and no session starts');
select results_eq(
  $$select status from auth.oauth_sign_in('microsoft', 'nobody@example.com', false, sha256('rt-4'), 3600)$$,
  $$values ('unverified_email'::text)$$,
  'an unverified email without an account is refused');
select is((select count(*)::int from auth.users where email = 'nobody@example.com'), 0, 'and no account is created');
select results_eq(
  $$select status from auth.oauth_sign_in('oidc', 'nobody@example.com', null, sha256('rt-5'), 3600)$$,
  $$values ('unverified_email'::text)$$,
  'an unknown verification state counts as unverified');
select results_eq(
  $$select status from auth.oauth_sign_in('github', null, true, sha256('rt-6'), 3600)$$,
  $$values ('unverified_email'::text)$$,
  'no email at all is refused');
select throws_ok(
  $$select * from auth.oauth_sign_in('facebook', 'x@example.com', true, sha256('rt-7'), 3600)$$,
  '22023', null, 'an unknown provider is a bug, raised');

-- ── linking to email/password accounts ───────────────────────────────────────────────
insert into auth.users (id, email, providers, email_confirmed_at, user_metadata)
  values ('00000000-0000-0000-0000-0000000000c1', 'proven@example.com', '{email}', now() - interval '1 day', '{"name": "C"}');
insert into auth_private.passwords (user_id, hash) values ('00000000-0000-0000-0000-0000000000c1', 'argon2-hash-c1');
insert into auth_private.proven_emails (user_id, email, proof) values ('00000000-0000-0000-0000-0000000000c1', 'proven@example.com', 'magic_link');
select is((select status from auth.start_session('00000000-0000-0000-0000-0000000000c1', sha256('c1-s'), 3600)), 'ok', 'the proven account has a session');
select results_eq(
  $$select status, (user_json ->> 'id')::uuid from auth.oauth_sign_in('apple', 'proven@example.com', true, sha256('rt-8'), 3600)$$,
  $$values ('ok'::text, '00000000-0000-0000-0000-0000000000c1'::uuid)$$,
  'a verified email links to the password account of a proven address');
select results_eq(
  $$select provider, providers, user_metadata from auth.users where id = '00000000-0000-0000-0000-0000000000c1'$$,
  $$values ('apple'::text, '{email,apple}'::text[], '{"name": "C"}'::jsonb)$$,
  'providers keeps email and gains apple; metadata is kept');
select is((select hash from auth_private.passwords where user_id = '00000000-0000-0000-0000-0000000000c1'), 'argon2-hash-c1', 'the password of a proven account is kept');
select is((select status from auth.rotate_refresh_token(sha256('c1-s'), sha256('c1-s2'), 3600)), 'ok', 'and its sessions');

-- confirmed (auto-confirmed sign-up, the default) is not proven: someone may have signed up first
create temp table squat as select * from auth.sign_up('Confirmed@Example.com', 'argon2-hash-c3', '{"planted": true}', null, null, sha256('c3-s'), 3600);
select ok((select email_confirmed_at is not null from auth.users where email = 'confirmed@example.com'), 'the squatter''s sign-up is confirmed at once');
select results_eq(
  $$select status, (user_json ->> 'id')::uuid from auth.oauth_sign_in('google', 'confirmed@example.com', true, sha256('rt-c3'), 3600)$$,
  $$select 'ok'::text, (user_json ->> 'id')::uuid from squat$$,
  'the owner''s verified sign-in links to that account');
select results_eq(
  $$select user_metadata, (select count(*)::int from auth_private.passwords p where p.user_id = u.id) from auth.users u where email = 'confirmed@example.com'$$,
  $$values ('{}'::jsonb, 0)$$,
  'the password and metadata set before the address was proven are removed');
select is((select status from auth.rotate_refresh_token(sha256('c3-s'), sha256('c3-s2'), 3600)), 'revoked', 'the squatter''s session is revoked');
select is((select status from auth.rotate_refresh_token(sha256('rt-c3'), sha256('rt-c3b'), 3600)), 'ok', 'the owner''s session lives');
select is((select proof from auth_private.proven_emails p join auth.users u on u.id = p.user_id where u.email = 'confirmed@example.com'), 'oauth', 'the address is proven');

-- moved there by a PATCH: the proof of the account's former address does not count
create temp table mover as select * from auth.sign_up('mover@example.com', 'argon2-hash-mv', '{"planted": true}', null, null, sha256('mv-s'), 3600);
insert into auth_private.proven_emails (user_id, email, proof) select (user_json ->> 'id')::uuid, 'mover@example.com', 'magic_link' from mover;
select is((select status from auth.update_user((select (user_json ->> 'id')::uuid from mover), 'target@example.com', null, null, null)), 'ok', 'the mover takes the target''s address');
select is((select count(*)::int from auth.oauth_sign_in('github', 'target@example.com', true, sha256('rt-mv'), 3600) where status = 'ok'), 1, 'the target signs in with a verified address');
select results_eq(
  $$select user_metadata, (select count(*)::int from auth_private.passwords p where p.user_id = u.id) from auth.users u where email = 'target@example.com'$$,
  $$values ('{}'::jsonb, 0)$$,
  'the mover''s password and metadata are gone');
select is((select count(*)::int from auth_private.sessions s join auth.users u on u.id = s.user_id where u.email = 'target@example.com' and s.revoked_at is null), 1,
  'only the target''s session is left');

-- a new account is proven at once
select is((select proof from auth_private.proven_emails p join auth.users u on u.id = p.user_id where u.email = 'new.user@example.com'), 'oauth', 'an account made by OAuth is proven');

insert into auth.users (id, email, providers, email_confirmed_at, user_metadata)
  values ('00000000-0000-0000-0000-0000000000c2', 'pending@example.com', '{email}', null, '{"planted": true}');
insert into auth_private.passwords (user_id, hash) values ('00000000-0000-0000-0000-0000000000c2', 'argon2-hash-c2');
select results_eq(
  $$select status, (user_json ->> 'id')::uuid from auth.oauth_sign_in('google', 'pending@example.com', true, sha256('rt-9'), 3600)$$,
  $$values ('ok'::text, '00000000-0000-0000-0000-0000000000c2'::uuid)$$,
  'a verified email links to an unconfirmed account of that address');
select results_eq(
  $$select providers, user_metadata, email_confirmed_at is not null from auth.users where id = '00000000-0000-0000-0000-0000000000c2'$$,
  $$values ('{email,google}'::text[], '{}'::jsonb, true)$$,
  'the address is now confirmed and whatever the unproven sign-up planted is reset');
select is((select count(*)::int from auth_private.passwords where user_id = '00000000-0000-0000-0000-0000000000c2'), 0,
  'the password set by an unproven sign-up is removed (pre-account-takeover)');

-- updated_at moves only when something changed
update auth.users set updated_at = '2000-01-01' where email = 'new.user@example.com';
select lives_ok($$select auth.oauth_sign_in('github', 'new.user@example.com', true, sha256('rt-10'), 3600)$$, 'github again');
select is((select updated_at from auth.users where email = 'new.user@example.com'), '2000-01-01'::timestamptz, 'a repeated sign-in leaves updated_at');
select lives_ok($$select auth.oauth_sign_in('oidc', 'new.user@example.com', true, sha256('rt-11'), 3600)$$, 'a third provider');
select ok((select updated_at > '2000-01-01' from auth.users where email = 'new.user@example.com'), 'a newly linked provider moves updated_at');
select is((select last_sign_in_at is not null from auth.users where email = 'new.user@example.com'), true, 'last_sign_in_at is set');

-- ── privileges: API roles reach none of it ───────────────────────────────────────────
select ok(not has_function_privilege('anon', 'auth.create_oauth_state(bytea, text, text, text, integer)', 'execute'), 'anon cannot create states');
select ok(not has_function_privilege('authenticated', 'auth.consume_oauth_state(bytea)', 'execute'), 'authenticated cannot consume states');
select ok(not has_function_privilege('service_role', 'auth.oauth_sign_in(text, text, boolean, bytea, integer, jsonb)', 'execute'), 'service_role cannot call oauth_sign_in');
select ok(not has_schema_privilege('anon', 'auth_private', 'usage'), 'the verifiers live where anon has no USAGE');
select ok(not has_schema_privilege('service_role', 'auth_private', 'usage'), 'nor service_role');
select is(
  (select prosecdef and proconfig @> array['search_path=pg_catalog, pg_temp'] from pg_proc where oid = 'auth.oauth_sign_in(text, text, boolean, bytea, integer, jsonb)'::regprocedure),
  true, 'oauth_sign_in is security definer with a pinned search_path');
select is(
  (select count(*)::int from pg_proc where oid in ('auth.create_oauth_state(bytea, text, text, text, integer)'::regprocedure, 'auth.consume_oauth_state(bytea)'::regprocedure)
     and prosecdef and proconfig @> array['search_path=pg_catalog, pg_temp']),
  2, 'so are the state functions');

select * from finish();
rollback;
