-- SUPABASE_COMPAT: GoTrue's User object, a link token and a code per mail, verification that opens a session, logout scopes.
begin;
select plan(32);

-- the GoTrue User object
create temp table a as select * from auth.sign_up('ada@example.com', 'hash-a', '{"name": "Ada"}', null, null, sha256('a-r1'), 3600);
create temp table ada as select (user_json ->> 'id')::uuid as id from a;
create temp table u as select auth.compat_user((select id from ada)) as j;
select is((select j ->> 'aud' from u), 'authenticated', 'aud');
select is((select j -> 'app_metadata' from u), '{"provider": "email", "providers": ["email"]}'::jsonb, 'app_metadata');
select is((select j -> 'identities' -> 0 ->> 'provider' from u), 'email', 'an email identity');
select is((select j ->> 'is_anonymous' from u), 'false', 'is_anonymous');
select ok((select j ->> 'email_confirmed_at' from u) is not null, 'email_confirmed_at');
select is((select j -> 'user_metadata' from u), '{"name": "Ada"}'::jsonb, 'user_metadata');
select is(auth.compat_user('00000000-0000-4000-8000-00000000dead'), null, 'unknown id: null');

-- otp for an unknown address: created (with its data), two tokens of the kind, one mail
select is(auth.compat_send_link('magic_link', 'New@Example.com', true, '{"plan": "free"}', sha256('link-1'), 'sealed', sha256('code-1'), 'sealed-code', 'http://x', 0),
  'created', 'create_user: an account is made');
select is((select count(*)::int from auth_private.one_time_tokens t join auth.users u on u.id = t.user_id where u.email = 'new@example.com' and t.kind = 'magic_link'), 2,
  'a link token and a code');
create temp view mails as
  select j.payload::jsonb as payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'auth__send_email';
select is((select count(*)::int from mails where payload ->> 'to' = 'new@example.com'), 1, 'one mail');
select is((select payload -> 'compat' ->> 'type' from mails where payload ->> 'to' = 'new@example.com'), 'signup', 'its link says signup');
select is(auth.compat_send_link('magic_link', 'ghost@example.com', false, null, sha256('link-g'), 's', sha256('code-g'), 's', 'http://x', 0),
  'not_found', 'without create_user an unknown address is not_found');
select is((select count(*)::int from auth.users where email = 'ghost@example.com'), 0, 'and no account');
select is(auth.compat_send_link('recovery', 'ghost@example.com', true, null, sha256('link-h'), 's', sha256('code-h'), 's', 'http://x', 0),
  'not_found', 'recovery never creates an account');

-- the code opens a session and keeps the data of the request that created the account; the link of the same mail is spent
create temp table v as select * from auth.compat_verify('magic_link', sha256('code-1'), sha256('n-r1'), 3600);
select is((select status from v), 'ok', 'the code opens a session');
select is((select user_json -> 'user_metadata' from v), '{"plan": "free"}'::jsonb, 'an account made by this mail keeps its data');
select ok((select email_confirmed_at is not null from auth.users where email = 'new@example.com'), 'the address is confirmed');
select is((select status from auth.compat_verify('magic_link', sha256('link-1'), sha256('n-r2'), 3600)), 'invalid', 'the link of the same mail is spent');
select is((select status from auth.compat_verify('magic_link', sha256('code-1'), sha256('n-r3'), 3600)), 'invalid', 'the code works once');

-- a newer mail spends the older; a magic link to an existing account purges what was planted
select is(auth.compat_send_link('magic_link', 'ada@example.com', true, null, sha256('link-2'), 's', sha256('code-2'), 's', 'http://x', 0), 'sent', 'sent to an existing account');
select is(auth.compat_send_link('magic_link', 'ada@example.com', true, null, sha256('link-3'), 's', sha256('code-3'), 's', 'http://x', 0), 'sent', 'again');
select is((select status from auth.compat_verify('magic_link', sha256('code-2'), sha256('a-r2'), 3600)), 'invalid', 'the older mail is spent');
create temp table v2 as select * from auth.compat_verify('magic_link', sha256('link-3'), sha256('a-r3'), 3600);
select is((select status from v2), 'ok', 'the newer link works');
select is((select user_json -> 'user_metadata' from v2), '{}'::jsonb, 'a first proof of an account made otherwise removes what may have been planted');

-- recovery: a session, no password change; verification kind; wrong kind
select is(auth.compat_send_link('recovery', 'ada@example.com', false, null, sha256('link-r'), 's', sha256('code-r'), 's', 'http://x', 0), 'sent', 'recovery sent');
select is((select status from auth.compat_verify('magic_link', sha256('link-r'), sha256('a-r4'), 3600)), 'invalid', 'a recovery token is not a magic link');
select is((select status from auth.compat_verify('recovery', sha256('link-r'), sha256('a-r5'), 3600)), 'ok', 'recovery opens a session');

-- a sign-up's verification token (REQUIRE_EMAIL_VERIFICATION): a session, once, the sign-up's data kept
select is((select status from auth.sign_up('eve@example.com', 'hash-e', '{"x": 1}', sha256('v-1'), 'sealed', null, 3600)), 'confirmation_sent', 'eve awaits confirmation');
select is((select user_json -> 'user_metadata' from auth.compat_verify('verification', sha256('v-1'), sha256('e-r1'), 3600)), '{"x": 1}'::jsonb, 'verification opens a session and keeps the data');
select is((select status from auth.compat_verify('verification', sha256('v-1'), sha256('e-r2'), 3600)), 'invalid', 'once');

-- logout scopes
create temp table s as select session_id from auth.start_session((select id from ada), sha256('a-r6'), 3600);
select is(auth.compat_end_sessions((select id from ada), (select session_id from s), 'others'), 'ok', 'others');
select is((select count(*)::int from auth_private.sessions where user_id = (select id from ada) and revoked_at is null), 1, 'only the caller''s session is left');

select * from finish();
rollback;
