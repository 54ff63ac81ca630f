-- Accounts: signup, sign-in lookup, the user's own record, guests, admin, rate limits.
begin;
select plan(68);

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
select is((select user_json -> 'user_metadata' from auth.update_user((select id from alice), null, null, '{"plan": null, "theme": "dark"}', null)),
  '{"theme": "dark"}'::jsonb, 'update_user: metadata merged, null removes a key');
select is((select status from auth.sign_up('bob@example.com', 'hash-b', null, null, null, sha256('b-r1'), 3600)), 'ok', 'bob signs up');
select is((select status from auth.update_user((select id from alice), 'BOB@example.com', 'never', null, null)), 'email_taken', 'update_user: email_taken');
select is((select hash from auth_private.passwords where user_id = (select id from alice)), 'hash-a', 'nothing changed on email_taken');
select is((select user_json ->> 'email' from auth.update_user((select id from alice), 'Alice2@Example.com', 'hash-a2', null, null)), 'alice2@example.com', 'update_user: new email');
select is((select password_hash from auth.password_credentials('alice2@example.com')), 'hash-a2', 'update_user: new password hash');
select is((select status from auth.update_user('00000000-0000-4000-8000-00000000dead', 'x@example.com', null, null, null)), 'not_found', 'update_user: not_found');
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

-- update_user: an email or password change ends the other sessions, tells the former
-- address, and a new address is not proven
create temp view notices as
  select j.payload::jsonb as payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'auth__send_email' and j.payload ->> 'kind' = 'account_changed';
delete from graphile_worker._private_jobs; -- alice's notices above
create temp table dan as select (user_json ->> 'id')::uuid as id, session_id from auth.sign_up('dan@example.com', 'hash-d', null, null, null, sha256('d-r1'), 3600);
select is((select status from auth.start_session((select id from dan), sha256('d-r2'), 3600)), 'ok', 'dan has a second session');
insert into auth_private.proven_emails (user_id, email, proof) select id, 'dan@example.com', 'magic_link' from dan;
select is((select status from auth.update_user((select id from dan), null, null, '{"a": 1}', (select session_id from dan))), 'ok', 'a metadata change');
select is((select count(*)::int from auth_private.sessions where user_id = (select id from dan) and revoked_at is null), 2, 'ends no session');
select is((select count(*)::int from notices), 0, 'and tells nobody');
select is((select status from auth.update_user((select id from dan), 'DAN@example.com', null, null, (select session_id from dan))), 'ok', 'the same address in another case');
select is((select count(*)::int from notices), 0, 'is no change');
select is((select count(*)::int from auth_private.proven_emails where user_id = (select id from dan)), 1, 'and keeps the proof');

select is((select status from auth.update_user((select id from dan), 'Dan.New@example.com', null, null, (select session_id from dan))), 'ok', 'an email change');
select is((select count(*)::int from auth_private.proven_emails where user_id = (select id from dan)), 0, 'the new address is not proven');
select is((select status from auth.rotate_refresh_token(sha256('d-r2'), sha256('d-r3'), 3600)), 'revoked', 'the other session ends');
select is((select revoked_reason from auth_private.sessions where user_id = (select id from dan) and revoked_at is not null), 'account_changed', 'as account_changed');
select is((select status from auth.rotate_refresh_token(sha256('d-r1'), sha256('d-r4'), 3600)), 'ok', 'the caller''s session stays');
select is((select payload from notices),
  '{"kind": "account_changed", "to": "dan@example.com", "email_changed": true, "password_changed": false, "new_email": "dan.new@example.com", "accept_language": null}'::jsonb,
  'the former address is told, with no token');

select is((select status from auth.start_session((select id from dan), sha256('d-r5'), 3600)), 'ok', 'another session');
select is((select status from auth.update_user((select id from dan), null, 'hash-d2', null, null)), 'ok', 'a password change from a token without a session');
select is((select count(*)::int from auth_private.sessions where user_id = (select id from dan) and revoked_at is null), 0, 'ends every session');
select is((select payload from notices where payload ->> 'to' = 'dan.new@example.com'),
  '{"kind": "account_changed", "to": "dan.new@example.com", "email_changed": false, "password_changed": true, "new_email": null, "accept_language": null}'::jsonb,
  'the address is told of the password change');

create temp table guest as select (user_json ->> 'id')::uuid as id from auth.sign_in_anonymously('anonymous', null, sha256('guest-r1'), 3600);
select is((select status from auth.update_user((select id from guest), 'was-guest@example.com', 'hash-g', null, null)), 'ok', 'a guest gets an address and a password');
select is((select count(*)::int from notices where payload ->> 'new_email' = 'was-guest@example.com'), 0, 'it had no address to tell');

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
