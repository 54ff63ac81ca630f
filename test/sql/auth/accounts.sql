-- Accounts: signup, sign-in lookup, the user's own record, guests, admin, rate limits.
begin;
select plan(49);

-- the table
select has_table('auth', 'users', 'auth.users exists');
select col_is_pk('auth', 'users', 'id', 'id is the primary key');
select col_type_is('auth', 'users', 'id', 'uuid', 'id is a uuid');
select col_type_is('auth', 'users', 'providers', 'text[]', 'providers is text[]');
select has_index('auth', 'users', 'users_email_key', 'unique index on lower(email)');

-- signup without verification: a session at once, address autoconfirmed
create temp table a as select * from auth.sign_up('Alice@Example.com', 'hash-a', '{"plan": "free"}', null, null, sha256('a-r1'), 3600);
select is((select status from a), 'ok', 'sign_up: ok');
select is((select user_json ->> 'email' from a), 'alice@example.com', 'email stored lower-cased');
select is((select user_json -> 'user_metadata' from a), '{"plan": "free"}'::jsonb, 'data → user_metadata');
select is((select providers from auth.users where email = 'alice@example.com'), '{email}'::text[], 'providers: email');
select ok((select email_confirmed_at is not null from auth.users where email = 'alice@example.com'), 'autoconfirmed without verification');
select is((select status from auth.rotate_refresh_token(sha256('a-r1'), sha256('a-r2'), 3600)), 'ok', 'its refresh token works');
select is((select status from auth.sign_up('ALICE@example.COM', 'h', null, null, null, sha256('a-r3'), 3600)), 'email_taken', 'unique case-insensitively');
select throws_ok($$insert into auth.users (email) values ('ALICE@EXAMPLE.COM')$$, '23505', null, 'the index enforces it for direct inserts too');

-- password_credentials
select is((select status from auth.password_credentials('alice@EXAMPLE.com')), 'ok', 'credentials by any case');
select is((select password_hash from auth.password_credentials('alice@example.com')), 'hash-a', 'the stored hash');
select is((select status from auth.password_credentials('nobody@example.com')), 'not_found', 'unknown address: not_found');
select is((select password_hash from auth.password_credentials('nobody@example.com')), null, 'and no hash');

-- get_user / update_user
create temp table alice as select (user_json ->> 'id')::uuid as id from a;
select is((select status from auth.get_user((select id from alice))), 'ok', 'get_user: ok');
select is((select status from auth.get_user('00000000-0000-4000-8000-00000000dead')), 'not_found', 'get_user: not_found');
select is((select user_json -> 'user_metadata' from auth.update_user((select id from alice), null, null, '{"plan": null, "theme": "dark"}')),
  '{"theme": "dark"}'::jsonb, 'update_user: metadata merged, null removes a key');
select is((select status from auth.sign_up('bob@example.com', 'hash-b', null, null, null, sha256('b-r1'), 3600)), 'ok', 'bob signs up');
select is((select status from auth.update_user((select id from alice), 'BOB@example.com', 'never', null)), 'email_taken', 'update_user: email_taken');
select is((select hash from auth_private.passwords where user_id = (select id from alice)), 'hash-a', 'nothing changed on email_taken');
select is((select user_json ->> 'email' from auth.update_user((select id from alice), 'Alice2@Example.com', 'hash-a2', null)), 'alice2@example.com', 'update_user: new email');
select is((select password_hash from auth.password_credentials('alice2@example.com')), 'hash-a2', 'update_user: new password hash');
select is((select status from auth.update_user('00000000-0000-4000-8000-00000000dead', 'x@example.com', null, null)), 'not_found', 'update_user: not_found');
select is(auth.rehash_password((select id from alice), 'hash-a2', 'hash-a3'), 'ok', 'rehash_password: ok');
select is(auth.rehash_password((select id from alice), 'hash-a2', 'hash-a4'), 'not_found', 'rehash_password: not when the hash changed meanwhile');

-- guests
create temp table g as select * from auth.sign_in_anonymously('anonymous', null, sha256('g-r1'), 3600);
select is((select status from g), 'ok', 'sign_in_anonymously: ok');
select is((select is_anonymous from g), true, 'is_anonymous');
select is((select user_json ->> 'role' from g), 'anonymous', 'the guest role');
select is((select user_json -> 'email' from g), 'null'::jsonb, 'email null');
select throws_ok($$insert into auth.users (email) values (null)$$, '23514', null, 'only guests (or OAuth users) may lack an email');

-- admin
select is((select status from auth.admin_create_user('Carol@Example.com', null, 'service_role', true)), 'ok', 'admin_create_user: ok');
select is((select role from auth.users where email = 'carol@example.com'), 'service_role', 'with the role');
select ok((select email_confirmed_at is not null from auth.users where email = 'carol@example.com'), 'email_confirm: confirmed');
select is((select status from auth.password_credentials('carol@example.com')), 'not_found', 'no password: no password sign-in');
select is((select status from auth.admin_create_user('carol@EXAMPLE.com', 'h', 'authenticated', false)), 'email_taken', 'admin_create_user: email_taken');
select is((select json_array_length(auth.list_users()::json)), 4, 'list_users: everyone');
select is((select array(select json_object_keys(auth.list_users()::json -> 0))), '{id,email,role,created_at}'::text[], 'list_users: id, email, role, created_at');
select is(auth.delete_user((select id from alice)), 'ok', 'delete_user: ok');
select is(auth.delete_user((select id from alice)), 'not_found', 'delete_user: not_found');
select is((select count(*)::int from auth_private.passwords where user_id = (select id from alice)), 0, 'the password went with the user');

-- rate limits: ok until the limit, then limited (not counted); per bucket and ip
select is(array[auth.take_rate_limit('auth', '10.0.0.1', 2, 60), auth.take_rate_limit('auth', '10.0.0.1', 2, 60), auth.take_rate_limit('auth', '10.0.0.1', 2, 60)],
  '{ok,ok,limited}'::text[], 'take_rate_limit: two pass, the third is limited');
select is((select cardinality(hits) from auth_private.rate_limits where bucket = 'auth' and ip = '10.0.0.1'), 2, 'the limited hit was not counted');
select is(array[auth.take_rate_limit('anonymous', '10.0.0.1', 2, 3600), auth.take_rate_limit('auth', '10.0.0.2', 2, 60), auth.take_rate_limit('auth', '10.0.0.1', 0, 60)],
  '{ok,ok,ok}'::text[], 'other bucket, other ip, and max 0 (disabled) pass');

-- the window slides: hits older than the window no longer count
update auth_private.rate_limits set hits = array(select h - interval '50 seconds' from unnest(hits) h) where bucket = 'auth' and ip = '10.0.0.1';
select is(auth.take_rate_limit('auth', '10.0.0.1', 2, 60), 'limited', 'still limited 50 seconds later');
update auth_private.rate_limits set hits = array(select h - interval '11 seconds' from unnest(hits) h) where bucket = 'auth' and ip = '10.0.0.1';
select is(auth.take_rate_limit('auth', '10.0.0.1', 2, 60), 'ok', 'free again once the hits are older than the window');
select is((select cardinality(hits) from auth_private.rate_limits where bucket = 'auth' and ip = '10.0.0.1'), 1, 'expired hits are dropped from the row');

select * from finish();
rollback;
