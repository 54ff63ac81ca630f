-- TOTP MFA in SQL: RFC vectors, secrets at rest, challenges, codes used once, drift, the
-- failure limit, aal2 sessions and unenrolment.
begin;
select plan(43);

-- RFC 6238 appendix B (SHA-1, secret "12345678901234567890"), last six digits; RFC 4648 base32.
select is(auth_private.totp('12345678901234567890'::bytea, 59 / 30), '287082', 'RFC 6238: T = 59');
select is(auth_private.totp('12345678901234567890'::bytea, 1111111109 / 30), '081804', 'RFC 6238: T = 1111111109');
select is(auth_private.totp('12345678901234567890'::bytea, 1234567890 / 30), '005924', 'RFC 6238: T = 1234567890');
select is(auth_private.totp('12345678901234567890'::bytea, 20000000000 / 30), '353130', 'RFC 6238: T = 20000000000');
select is(auth_private.base32('foobar'::bytea), 'MZXW6YTBOI', 'RFC 4648: base32 of foobar, no padding');
select is(auth_private.base32('12345678901234567890'::bytea), 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ', 'base32 of the RFC secret');

-- sealing
create temp table k as select sha256('mfa test key') as key, sha256('other key') as other;
select is(auth_private.mfa_unseal(auth_private.mfa_seal('secret bytes'::bytea, (select key from k)), (select key from k)), 'secret bytes'::bytea, 'seal and unseal');
select isnt(auth_private.mfa_seal('s'::bytea, (select key from k)), auth_private.mfa_seal('s'::bytea, (select key from k)), 'a random IV each time');
select throws_ok($$select auth_private.mfa_seal('s'::bytea, 'short'::bytea)$$, '22023', null, 'the key must be 32 bytes');

insert into auth.users (id, email) values ('00000000-0000-4000-8000-00000000a001', 'mfa1@example.com');
create temp table s1 as select * from auth.start_session('00000000-0000-4000-8000-00000000a001', sha256('m1'), 3600);
select is((select aal from s1), 'aal1', 'a new session is aal1');
select is((select amr -> 0 ->> 'method' from s1), 'password', 'with its method in amr');

-- enrol
create temp table e1 as select * from auth.mfa_enroll('00000000-0000-4000-8000-00000000a001', 'app', (select key from k), 'aal1');
select is((select status from e1), 'ok', 'enrol: ok');
select matches((select secret from e1), '^[A-Z2-7]{32}$', 'enrol: the secret in base32');
select is((select user_email from e1), 'mfa1@example.com', 'enrol: the account name for the URI');
select is((select status from auth_private.mfa_factors where id = (select factor_id from e1)), 'unverified', 'a new factor is unverified');
select is((select auth_private.base32(auth_private.mfa_unseal(secret, (select key from k))) from auth_private.mfa_factors where id = (select factor_id from e1)),
  (select secret from e1), 'the stored secret opens with the key');
select isnt((select auth_private.base32(secret) from auth_private.mfa_factors where id = (select factor_id from e1)), (select secret from e1), 'and is not stored in clear');
select is((select status from auth.mfa_enroll('00000000-0000-4000-8000-00000000a001', 'app', (select key from k), 'aal1')), 'name_taken', 'enrol: names are unique per user');
select is((select status from auth.mfa_enroll('00000000-0000-4000-8000-0000000000ff', 'x', (select key from k), 'aal1')), 'user_not_found', 'enrol: unknown user');
select is((select auth_private.factors_json('00000000-0000-4000-8000-00000000a001') -> 'factors' -> 0 ->> 'friendly_name'), 'app', 'factors_json lists it');
select is(auth_private.factors_json('00000000-0000-4000-8000-0000000000ff'), '{}'::jsonb, 'factors_json of a user without factors: {}');

-- challenge and verify
create temp table secret1 as select auth_private.mfa_unseal(secret, (select key from k)) as s from auth_private.mfa_factors where id = (select factor_id from e1);
create temp table step as select floor(extract(epoch from now()) / 30)::bigint as now_step;
create temp table c1 as select * from auth.mfa_challenge('00000000-0000-4000-8000-00000000a001', (select factor_id from e1), 300);
select is((select status from c1), 'ok', 'challenge: ok');
select is((select status from auth.mfa_challenge('00000000-0000-4000-8000-00000000a0ff', (select factor_id from e1), 300)), 'factor_not_found', 'challenge: another user''s factor');

create function pg_temp.verify(challenge uuid, code text, hash text) returns auth.session_result language sql as $$
  select * from auth.mfa_verify('00000000-0000-4000-8000-00000000a001', (select session_id from s1), (select factor_id from e1),
    challenge, code, (select key from k), sha256(hash::bytea), 3600, 3, 300)
$$;
select is((pg_temp.verify((select challenge_id from c1), auth_private.totp((select s from secret1), (select now_step from step) + 2), 'm2')).status,
  'invalid_code', 'two steps ahead: invalid_code');
select is((pg_temp.verify((select challenge_id from c1), 'abcdef', 'm2')).status, 'invalid_code', 'not six digits: invalid_code');
create temp table v1 as select * from pg_temp.verify((select challenge_id from c1), auth_private.totp((select s from secret1), (select now_step from step) + 1), 'm2');
select is((select status from v1), 'ok', 'one step ahead: ok');
select is((select aal from v1), 'aal2', 'the session is aal2');
select is((select jsonb_agg(a ->> 'method') from v1, jsonb_array_elements(v1.amr) a), '["password", "totp"]'::jsonb, 'amr gains totp');
select is((select user_json -> 'factors' -> 0 ->> 'status' from v1), 'verified', 'the factor is verified');
select is((select aal from auth.rotate_refresh_token(sha256('m2'), sha256('m2b'), 3600)), 'aal2', 'a refresh keeps aal2');
select is((select status from auth.rotate_refresh_token(sha256('m1'), sha256('m9'), 3600)), 'reuse_detected', 'the aal1 refresh token was retired');
select is((pg_temp.verify((select challenge_id from c1), auth_private.totp((select s from secret1), (select now_step from step)), 'm3')).status,
  'challenge_not_found', 'a challenge is used once');

-- the limit: three failures counted above the window (max 3 here: two above, one now)
create temp table c2 as select * from auth.mfa_challenge('00000000-0000-4000-8000-00000000a001', (select factor_id from e1), 300);
select is((pg_temp.verify((select challenge_id from c2), auth_private.totp((select s from secret1), (select now_step from step) + 1), 'm4')).status,
  'session_not_found', 'the family ended by the reuse cannot be raised');

insert into auth.users (id, email) values ('00000000-0000-4000-8000-00000000a002', 'mfa2@example.com');
create temp table s2 as select * from auth.start_session('00000000-0000-4000-8000-00000000a002', sha256('n1'), 3600);
create temp table e2 as select * from auth.mfa_enroll('00000000-0000-4000-8000-00000000a002', null, (select key from k), 'aal1');
create temp table secret2 as select auth_private.mfa_unseal(secret, (select key from k)) as s from auth_private.mfa_factors where id = (select factor_id from e2);
create function pg_temp.verify2(code text, hash text) returns auth.session_result language sql as $$
  select * from auth.mfa_verify('00000000-0000-4000-8000-00000000a002', (select session_id from s2), (select factor_id from e2),
    (select challenge_id from auth.mfa_challenge('00000000-0000-4000-8000-00000000a002', (select factor_id from e2), 300)),
    code, (select key from k), sha256(hash::bytea), 3600, 3, 300)
$$;
select is((pg_temp.verify2(auth_private.totp((select s from secret2), (select now_step from step) - 1), 'n2')).status, 'ok', 'one step behind: ok');
select is((pg_temp.verify2(auth_private.totp((select s from secret2), (select now_step from step) - 1), 'n3')).status, 'invalid_code', 'the same code again: invalid_code');
select is((pg_temp.verify2(auth_private.totp((select s from secret2), (select now_step from step) - 2), 'n4')).status, 'invalid_code', 'two steps behind: invalid_code');
select is((pg_temp.verify2('000000', 'n5')).status, 'invalid_code', 'a third failure');
select is((pg_temp.verify2(auth_private.totp((select s from secret2), (select now_step from step)), 'n6')).status, 'limited', 'over the failure limit even the right code is refused');

-- enrolling next to a verified factor, unenrolling
select is((select status from auth.mfa_enroll('00000000-0000-4000-8000-00000000a001', 'more', (select key from k), 'aal1')), 'aal2_required', 'a second factor needs aal2');
select is(auth.mfa_unenroll('00000000-0000-4000-8000-00000000a001', (select factor_id from e1), 'aal1'), 'aal2_required', 'unenrolling a verified factor needs aal2');
select is(auth.mfa_unenroll('00000000-0000-4000-8000-00000000a001', (select factor_id from e1), 'aal2'), 'ok', 'with aal2: ok');
select is(auth.mfa_unenroll('00000000-0000-4000-8000-00000000a001', (select factor_id from e1), 'aal2'), 'not_found', 'gone');

-- auth.aal() reads the claim
select tests.act_as('authenticated', '{"aal": "aal2"}');
select is(auth.aal(), 'aal2', 'auth.aal() returns the claim');
select tests.reset_role();

select * from finish();
rollback;
