-- Passkeys in SQL: challenges (issued, bound, used once, expiring), registration (limit,
-- unique credential), sign-in (counter, last use, amr passkey, bans), list, rename, delete,
-- and no grant to the API roles.
begin;
select plan(54);

insert into auth.users (id, email, user_metadata) values
  ('00000000-0000-4000-8000-00000000b001', 'pk1@example.com', '{"name": "Pat Key"}'),
  ('00000000-0000-4000-8000-00000000b002', 'pk2@example.com', '{}');
insert into auth.users (id, is_anonymous, role) values ('00000000-0000-4000-8000-00000000b003', true, 'anon');

-- issuing
create temp table r1 as select * from auth.passkey_challenge('registration', '00000000-0000-4000-8000-00000000b001', 'aal1', 300, 2);
select is((select status from r1), 'ok', 'registration challenge: ok');
select is((select octet_length(challenge) from r1), 32, 'of 32 random bytes');
select ok((select expires_at from r1) between now() + interval '299 seconds' and now() + interval '301 seconds', 'expiring in 5 minutes');
select is((select user_name from r1), 'pk1@example.com', 'the user name is the address');
select is((select user_display_name from r1), 'Pat Key', 'the display name is user_metadata.name');
select is((select exclude from r1), '{}'::bytea[], 'no passkey to exclude yet');
select isnt((select challenge from auth.passkey_challenge('authentication', null, 'aal1', 300, 2)), (select challenge from r1), 'each challenge is new');
select is((select status from auth.passkey_challenge('registration', '00000000-0000-4000-8000-0000000000ff', 'aal1', 300, 2)), 'user_not_found', 'unknown user');
select is((select status from auth.passkey_challenge('registration', '00000000-0000-4000-8000-00000000b003', 'aal1', 300, 2)), 'anonymous', 'guests register no passkey');
select throws_ok($$select auth.passkey_challenge('other', null, 'aal1', 300, 2)$$, '22023', null, 'an unknown kind raises');

-- consuming
select is((select status from auth.passkey_consume_challenge((select challenge_id from r1), 'registration', '00000000-0000-4000-8000-00000000b002')),
  'not_found', 'another user''s registration challenge: not_found');
select is((select status from auth.passkey_consume_challenge((select challenge_id from r1), 'authentication', null)),
  'not_found', 'a registration challenge is no authentication challenge');
create temp table c1 as select * from auth.passkey_consume_challenge((select challenge_id from r1), 'registration', '00000000-0000-4000-8000-00000000b001');
select is((select status from c1), 'ok', 'its user consumes it');
select is((select challenge from c1), (select challenge from r1), 'and gets its bytes');
select is((select status from auth.passkey_consume_challenge((select challenge_id from r1), 'registration', '00000000-0000-4000-8000-00000000b001')),
  'not_found', 'a replay: not_found');
create temp table a1 as select * from auth.passkey_challenge('authentication', null, 'aal1', 300, 2);
update auth_private.passkey_challenges set expires_at = now() - interval '1 second' where id = (select challenge_id from a1);
select is((select status from auth.passkey_consume_challenge((select challenge_id from a1), 'authentication', null)), 'expired', 'a late one: expired');
select is((select count(*)::int from auth_private.passkey_challenges where id = (select challenge_id from a1)), 0, 'and gone');

-- registering
create temp table g1 as select * from auth.passkey_register('00000000-0000-4000-8000-00000000b001', 'cred-1'::bytea, 'key-1'::bytea, 0,
  '{internal,hybrid}', 'laptop', null, true, true, 2, '{"ip": "127.0.0.1"}');
select is((select status from g1), 'ok', 'register: ok');
select is((select passkey ->> 'friendly_name' from g1), 'laptop', 'with its name');
select ok((select passkey ? 'created_at' and not passkey ? 'last_used_at' from g1), 'created, never used');
select is((select action from auth.audit_log_entries where detail ->> 'passkey_id' = (select passkey ->> 'id' from g1)), 'passkey_created', 'audited');
select is((select status from auth.passkey_register('00000000-0000-4000-8000-00000000b002', 'cred-1'::bytea, 'k'::bytea, 0, '{}', null, null, false, false, 2)),
  'credential_taken', 'a credential id belongs to one passkey');
select is((select status from auth.passkey_register('00000000-0000-4000-8000-00000000b001', 'cred-2'::bytea, 'key-2'::bytea, 5, '{}', '', null, false, false, 2)),
  'ok', 'a second passkey');
select is((select status from auth.passkey_register('00000000-0000-4000-8000-00000000b001', 'cred-3'::bytea, 'k'::bytea, 0, '{}', null, null, false, false, 2)),
  'too_many', 'over the limit: too_many');
select is((select status from auth.passkey_challenge('registration', '00000000-0000-4000-8000-00000000b001', 'aal1', 300, 2)), 'too_many', 'and no challenge either');
select is((select cardinality(exclude) from auth.passkey_challenge('registration', '00000000-0000-4000-8000-00000000b001', 'aal1', 300, 3)), 2,
  'the options exclude the passkeys the user has');
select is((select status from auth.passkey_register('00000000-0000-4000-8000-0000000000ff', 'cred-4'::bytea, 'k'::bytea, 0, '{}', null, null, false, false, 2)),
  'user_not_found', 'unknown user');

-- signing in
create temp table f1 as select * from auth.passkey_for_credential('cred-1'::bytea);
select is((select (status, user_id, public_key, transports)::text from f1),
  (row('ok', '00000000-0000-4000-8000-00000000b001'::uuid, 'key-1'::bytea, '{internal,hybrid}'::text[]))::text, 'the passkey of a credential id');
select is((select status from auth.passkey_for_credential('nope'::bytea)), 'not_found', 'an unknown credential id');
create temp table s1 as select * from auth.passkey_sign_in((select passkey_id from f1), 0, sha256('p1'), 3600);
select is((select status from s1), 'ok', 'sign-in with a counter-less authenticator (0 and 0): ok');
select is((select (aal, amr -> 0 ->> 'method') from s1)::text, '(aal1,passkey)', 'an aal1 session with amr passkey');
select ok((select last_used_at is not null from auth.passkeys where credential_id = 'cred-1'), 'last_used_at set');
create temp table f2 as select * from auth.passkey_for_credential('cred-2'::bytea);
select is((select status from auth.passkey_sign_in((select passkey_id from f2), 5, sha256('p2'), 3600)), 'counter', 'a counter that does not grow: refused');
select is((select count(*)::int from auth.audit_log_entries where action = 'passkey_counter_rejected'), 1, 'and audited');
select is((select status from auth.passkey_sign_in((select passkey_id from f2), 6, sha256('p3'), 3600)), 'ok', 'a larger counter: ok');
select is((select sign_count from auth.passkeys where credential_id = 'cred-2'), 6::bigint, 'and kept');
update auth.users set banned_until = now() + interval '1 hour' where id = '00000000-0000-4000-8000-00000000b001';
select throws_ok(format('select auth.passkey_sign_in(%L, 7, sha256(''p4''), 3600)', (select passkey_id from f2)), 'PT403', 'user is banned', 'a banned user: user is banned');
select is((select sign_count from auth.passkeys where credential_id = 'cred-2'), 6::bigint, 'and nothing of it kept');
update auth.users set banned_until = null where id = '00000000-0000-4000-8000-00000000b001';

-- a verified second factor: passkeys are managed from aal2 sessions only
insert into auth_private.mfa_factors (user_id, status, secret) values ('00000000-0000-4000-8000-00000000b002', 'verified', 'x'::bytea);
select is((select status from auth.passkey_challenge('registration', '00000000-0000-4000-8000-00000000b002', 'aal1', 300, 2)), 'aal2_required',
  'with a verified factor, an aal1 session gets no registration challenge');
select is((select status from auth.passkey_challenge('registration', '00000000-0000-4000-8000-00000000b002', 'aal2', 300, 2)), 'ok', 'an aal2 session does');

-- list, rename, delete
select is((select jsonb_array_length(auth.passkey_list('00000000-0000-4000-8000-00000000b001'))), 2, 'list: two passkeys');
select is(auth.passkey_list('00000000-0000-4000-8000-00000000b002'), '[]'::jsonb, 'list: none');
select is(auth.passkey_list('00000000-0000-4000-8000-0000000000ff'), null, 'list: an unknown user is null');
select is((select status from auth.passkey_rename('00000000-0000-4000-8000-00000000b002', (select passkey_id from f1), 'mine', null)), 'not_found',
  'another user''s passkey cannot be renamed');
select is((select passkey ->> 'friendly_name' from auth.passkey_rename('00000000-0000-4000-8000-00000000b001', (select passkey_id from f1), 'phone', null)),
  'phone', 'rename');
select is(auth.passkey_delete('00000000-0000-4000-8000-00000000b002', (select passkey_id from f1), 'aal1'), 'aal2_required', 'with a verified factor, not from aal1');
select is(auth.passkey_delete('00000000-0000-4000-8000-00000000b002', (select passkey_id from f1), 'aal2'), 'not_found', 'another user''s passkey cannot be deleted');
select is(auth.passkey_delete('00000000-0000-4000-8000-00000000b001', (select passkey_id from f1), 'aal1'), 'ok', 'delete');
select is((select status from auth.passkey_sign_in((select passkey_id from f1), 1, sha256('p5'), 3600)), 'not_found', 'a deleted passkey signs no one in');
select is(auth.passkey_admin_delete('00000000-0000-4000-8000-00000000b002', (select passkey_id from f2)), 'not_found', 'admin delete: the passkey of another user');
select is(auth.passkey_admin_delete('00000000-0000-4000-8000-00000000b001', (select passkey_id from f2)), 'ok', 'admin delete, with no aal rule');
select is((select detail ->> 'by' from auth.audit_log_entries where action = 'passkey_deleted' and detail ->> 'passkey_id' = (select passkey_id::text from f2)), 'admin', 'audited as the admin''s');

-- the API roles read nothing
select is(has_table_privilege('authenticated', 'auth.passkeys', 'select'), false, 'authenticated cannot read auth.passkeys');
select is(has_function_privilege('anon', 'auth.passkey_sign_in(uuid, bigint, bytea, integer, jsonb)', 'execute'), false, 'anon cannot call the functions');

select * from finish();
rollback;
