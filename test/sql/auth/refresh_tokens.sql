-- Refresh-token families (interface §3.1): every row of the state table, as SQL sees it.
begin;
select plan(40);

insert into auth.users (id, email) values
  ('00000000-0000-4000-8000-000000000001', 'rt1@example.com'),
  ('00000000-0000-4000-8000-000000000002', 'rt2@example.com');

-- start_session: a family and its first token
create temp table s1 as select * from auth.start_session('00000000-0000-4000-8000-000000000001', sha256('t1'), 3600);
select is((select status from s1), 'ok', 'start_session: ok');
select isnt((select session_id from s1), null, 'start_session: the family id is returned');
select is((select is_anonymous from s1), false, 'start_session: is_anonymous');
select is((select user_json ->> 'email' from s1), 'rt1@example.com', 'start_session: the User object');
select is((select user_json ->> 'role' from s1), 'authenticated', 'start_session: role in the User object');
select ok(not (select user_json ? 'provider' from s1), 'no provider for a non-OAuth user');
select ok((select last_sign_in_at is not null from auth.users where email = 'rt1@example.com'), 'last_sign_in_at is set');
select is((select count(*)::int from auth_private.refresh_tokens where session_id = (select session_id from s1)), 1, 'one token in the family');
select is((select token_hash from auth_private.refresh_tokens where session_id = (select session_id from s1)), sha256('t1'), 'only the SHA-256 is stored');
select is((select status from auth.start_session('00000000-0000-4000-8000-0000000000ff', sha256('tx'), 3600)), 'user_not_found', 'start_session: unknown user');

create temp table s0 as select * from auth.start_session('00000000-0000-4000-8000-000000000001', sha256('t0'), 3600, '00000000-0000-4000-8000-0000000000c0');
select is((select session_id from s0), '00000000-0000-4000-8000-0000000000c0'::uuid, 'start_session: a family id chosen by the service');
select is((select session_id from auth_private.refresh_tokens where token_hash = sha256('t0')), '00000000-0000-4000-8000-0000000000c0'::uuid, 'its token belongs to it');

-- valid → rotated
create temp table r1 as select * from auth.rotate_refresh_token(sha256('t1'), sha256('t2'), 3600);
select is((select status from r1), 'ok', 'valid → rotated: ok');
select is((select session_id from r1), (select session_id from s1), 'rotation keeps the family (session_id)');
select is((select user_json ->> 'id' from r1), '00000000-0000-4000-8000-000000000001', 'rotation returns the user');
select ok((select rotated_at is not null from auth_private.refresh_tokens where token_hash = sha256('t1')), 'the old token is retired');
select ok((select rotated_at is null from auth_private.refresh_tokens where token_hash = sha256('t2')), 'the new token is live');
select ok((select expires_at between now() + interval '3599 seconds' and now() + interval '3601 seconds' from auth_private.refresh_tokens where token_hash = sha256('t2')), 'the new token gets the TTL');
select is((select status from auth.rotate_refresh_token(sha256('t2'), sha256('t3'), 3600)), 'ok', 'the successor rotates in turn');

-- revoked (rotated) → replay revokes the whole family
select is((select status from auth.rotate_refresh_token(sha256('t1'), sha256('t4'), 3600)), 'reuse_detected', 'replay of a rotated token: reuse_detected');
select is((select revoked_reason from auth_private.sessions where id = (select session_id from s1)), 'reuse_detected', 'the family is revoked');
select is((select status from auth.rotate_refresh_token(sha256('t3'), sha256('t5'), 3600)), 'revoked', 'the live token of the family is dead too');
select is((select status from auth.rotate_refresh_token(sha256('t1'), sha256('t6'), 3600)), 'revoked', 'a later replay: revoked (no second revocation)');
select is((select count(*)::int from auth_private.refresh_tokens where token_hash in (sha256('t4'), sha256('t5'), sha256('t6'))), 0, 'failed rotations issue nothing');

-- unknown
select is((select status from auth.rotate_refresh_token(sha256('never issued'), sha256('t7'), 3600)), 'invalid', 'unknown token: invalid');

-- valid → expired
create temp table s2 as select * from auth.start_session('00000000-0000-4000-8000-000000000002', sha256('e1'), 3600);
update auth_private.refresh_tokens set expires_at = now() - interval '1 second' where token_hash = sha256('e1');
select is((select status from auth.rotate_refresh_token(sha256('e1'), sha256('e2'), 3600)), 'expired', 'past expiry: expired');
select is((select status from auth.rotate_refresh_token(sha256('e1'), sha256('e2'), 3600)), 'expired', 'and it stays expired');
select ok((select revoked_at is null from auth_private.sessions where id = (select session_id from s2)), 'expiry revokes nothing');

-- valid → invalidated by logout (the caller's family only)
create temp table s3 as select * from auth.start_session('00000000-0000-4000-8000-000000000002', sha256('l1'), 3600);
create temp table s4 as select * from auth.start_session('00000000-0000-4000-8000-000000000002', sha256('l2'), 3600);
select is(auth.end_session((select session_id from s3), '00000000-0000-4000-8000-000000000001'), 'not_found', 'logout needs the family''s own user');
select is(auth.end_session((select session_id from s3), '00000000-0000-4000-8000-000000000002'), 'ok', 'logout: ok');
select is(auth.end_session((select session_id from s3), '00000000-0000-4000-8000-000000000002'), 'not_found', 'logout twice: not_found');
select is((select revoked_reason from auth_private.sessions where id = (select session_id from s3)), 'logout', 'the family is revoked for logout');
select is((select status from auth.rotate_refresh_token(sha256('l1'), sha256('l3'), 3600)), 'revoked', 'its token: revoked (401 invalid refresh token)');
select is((select status from auth.rotate_refresh_token(sha256('l2'), sha256('l4'), 3600)), 'ok', 'another family of the user lives');

-- user deleted → tokens unknown
select is(auth.delete_user('00000000-0000-4000-8000-000000000002'), 'ok', 'delete the user');
select is((select status from auth.rotate_refresh_token(sha256('l4'), sha256('l5'), 3600)), 'invalid', 'its tokens are gone: invalid');

-- the API roles cannot reach any of it
select ok(not has_schema_privilege('anon', 'auth_private', 'usage'), 'anon has no usage on auth_private');
select ok(not has_schema_privilege('authenticated', 'auth_private', 'usage'), 'authenticated has no usage on auth_private');
select ok(not has_function_privilege('authenticated', 'auth.rotate_refresh_token(bytea, bytea, integer, jsonb)', 'execute'), 'authenticated cannot rotate tokens');
select ok(not has_table_privilege('authenticated', 'auth.users', 'select'), 'no default grant on auth.users');

select * from finish();
rollback;
