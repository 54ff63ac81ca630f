-- SUPABASE_COMPAT: PKCE flow states: a mailed link with a challenge issues an auth code, exchanged once for a session with the verifier.
begin;
select plan(39);

-- RFC 7636, appendix B
create temp table rfc as select 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'::text as verifier, 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM'::text as challenge;
select ok(auth_private.pkce_matches((select challenge from rfc), 's256', (select verifier from rfc)), 'S256: the RFC''s example');
select ok(not auth_private.pkce_matches((select challenge from rfc), 's256', (select verifier from rfc) || 'x'), 'S256: another verifier fails');
select ok(auth_private.pkce_matches((select verifier from rfc), 'plain', (select verifier from rfc)), 'plain');

select throws_ok($$select auth.compat_send_link_pkce('magic_link', 'x@example.com', true, null, sha256('l0'), 's', sha256('c0'), 's', 'http://x', 0, 'short', 's256')$$,
  'PT400', 'invalid code challenge', 'a challenge under 43 characters is refused');
select throws_ok($$select auth.compat_send_link_pkce('magic_link', 'x@example.com', true, null, sha256('l0'), 's', sha256('c0'), 's', 'http://x', 0, (select challenge from rfc), 'md5')$$,
  'PT400', 'invalid code challenge', 'an unknown method is refused');

-- a magic link of a PKCE flow
select is(auth.compat_send_link_pkce('magic_link', 'pk@example.com', true, '{"a": 1}', sha256('link-1'), 's', sha256('code-1'), 's', 'http://x', 0,
  (select challenge from rfc), 'S256'), 'created', 'sent, with a flow state');
select is((select count(*)::int from auth_private.flow_states f join auth.users u on u.id = f.user_id where u.email = 'pk@example.com'), 1, 'one flow state');
select is((select code_challenge_method || ' ' || authentication_method from auth_private.flow_states), 's256 magiclink', 'its method and kind');
select is(auth.compat_verify_pkce('magic_link', sha256('code-1'), sha256('ac-0')), 'implicit', 'the mail''s 6-digit code has no flow state: the implicit flow');
select is(auth.compat_send_link_pkce('magic_link', 'pk@example.com', true, null, sha256('link-2'), 's', sha256('code-2'), 's', 'http://x', 0,
  (select challenge from rfc), 's256'), 'sent', 'a second mail');
select is(auth.compat_verify_pkce('magic_link', sha256('link-1'), sha256('ac-1')), 'invalid', 'the older link is spent');
select is(auth.compat_verify_pkce('recovery', sha256('link-2'), sha256('ac-2')), 'invalid', 'a magic link is not a recovery');
select is(auth.compat_verify_pkce('magic_link', sha256('link-2'), sha256('ac-2')), 'ok', 'the link issues an auth code');
select is(auth.compat_verify_pkce('magic_link', sha256('link-2'), sha256('ac-3')), 'implicit', 'the link is no longer bound to the flow');
select is((select status from auth.compat_verify('magic_link', sha256('link-2'), sha256('r-0'), 3600)), 'invalid', 'and is spent');

-- the exchange
select is((select status from auth.compat_exchange_pkce(sha256('nope'), (select verifier from rfc), sha256('r-1'), 3600)), 'not_found', 'an unknown code');
create temp table s as select * from auth.compat_exchange_pkce(sha256('ac-2'), (select verifier from rfc), sha256('r-2'), 3600);
select is((select status from s), 'ok', 'code and verifier open a session');
select is((select user_json ->> 'email' from s), 'pk@example.com', 'of the flow''s user');
select is((select amr -> 0 ->> 'method' from s), 'magiclink', 'by magic link');
select is((select status from auth.compat_exchange_pkce(sha256('ac-2'), (select verifier from rfc), sha256('r-3'), 3600)), 'not_found', 'once');

-- a wrong verifier spends the flow; an old code is expired
select is(auth.compat_send_link_pkce('recovery', 'pk@example.com', false, null, sha256('link-3'), 's', sha256('code-3'), 's', 'http://x', 0,
  (select challenge from rfc), 's256'), 'sent', 'a recovery mail');
select auth.compat_verify_pkce('recovery', sha256('link-3'), sha256('ac-4'));
select is((select status from auth.compat_exchange_pkce(sha256('ac-4'), 'wrong-verifier-wrong-verifier-wrong-verifier', sha256('r-4'), 3600)) || ' '
  || (select status from auth.compat_exchange_pkce(sha256('ac-4'), (select verifier from rfc), sha256('r-5'), 3600)), 'bad_verifier not_found',
  'a wrong verifier spends the code');
select is(auth.compat_send_link_pkce('recovery', 'pk@example.com', false, null, sha256('link-4'), 's', sha256('code-4'), 's', 'http://x', 0,
  (select challenge from rfc), 's256'), 'sent', 'another recovery mail');
select is(auth.compat_verify_pkce('recovery', sha256('link-4'), sha256('ac-5')), 'ok', 'its code is issued');
update auth_private.flow_states set auth_code_issued_at = now() - interval '6 minutes' where auth_code_hash = sha256('ac-5');
select is((select status from auth.compat_exchange_pkce(sha256('ac-5'), (select verifier from rfc), sha256('r-6'), 3600)), 'expired', 'a code older than 5 minutes is expired');
-- OAuth with PKCE: the challenge and redirect_to ride the OAuth state; the callback issues an auth code
select throws_ok($$select auth.compat_create_oauth_state(sha256('st-0'), 'oidc', 'v', 'n', 600, null, 'short', 's256')$$,
  'PT400', 'invalid code challenge', 'a bad OAuth challenge is refused');
select lives_ok($$select auth.compat_create_oauth_state(sha256('st-1'), 'oidc', 'v', 'n', 600, 'http://localhost:5173/cb',
  (select challenge from rfc), 'S256')$$, 'an OAuth state with a challenge and a redirect');
select lives_ok($$select auth.compat_create_oauth_state(sha256('st-2'), 'oidc', 'v', 'n', 600, 'http://localhost:5173/cb', null, null)$$,
  'an OAuth state with a redirect only (the implicit flow)');
select results_eq($$select redirect_to, pkce from auth.compat_oauth_flow(sha256('st-1'))
  union all select redirect_to, pkce from auth.compat_oauth_flow(sha256('st-2'))$$,
  $$values ('http://localhost:5173/cb'::text, true), ('http://localhost:5173/cb'::text, false)$$, 'the callback reads where to and which flow');
select is(auth.compat_oauth_sign_in_pkce(sha256('st-1'), 'oidc', 'oa@example.com', true, sha256('oac-1')), 'invalid', 'not before the state is consumed');
select is((select status from auth.consume_oauth_state(sha256('st-1'))), 'ok', 'the callback consumes the state');
select is(auth.compat_oauth_sign_in_pkce(sha256('st-1'), 'github', 'oa@example.com', true, sha256('oac-1')), 'invalid', 'the state pins the provider');
select is(auth.compat_oauth_sign_in_pkce(sha256('st-1'), 'oidc', 'oa@example.com', false, sha256('oac-1')), 'unverified_email', 'an unverified email: no account');
select is((select count(*)::int from auth.users where email = 'oa@example.com'), 0, 'none made');
select is(auth.compat_oauth_sign_in_pkce(sha256('st-1'), 'oidc', 'OA@example.com', true, sha256('oac-1')), 'ok', 'the account, and an auth code');
select is((select authentication_method || ' ' || provider || ' ' || code_challenge_method from auth_private.flow_states where auth_code_hash = sha256('oac-1')),
  'oauth oidc s256', 'a flow state of the provider');
select is((select status from auth.consume_oauth_state(sha256('st-2'))), 'ok', 'an implicit state consumed');
select is(auth.compat_oauth_sign_in_pkce(sha256('st-2'), 'oidc', 'oa@example.com', true, sha256('oac-2')), 'invalid', 'no challenge: no auth code');
create temp table os as select * from auth.compat_exchange_pkce(sha256('oac-1'), (select verifier from rfc), sha256('r-7'), 3600);
select is((select status || ' ' || (user_json ->> 'email') || ' ' || (amr -> 0 ->> 'method') from os), 'ok oa@example.com oauth',
  'the exchange opens the session by oauth');
select * from finish();
rollback;
