-- One-time codes: an emailed code beside its link (one grant), wrong tries burning a code, phone codes and their SMS jobs.
begin;
select plan(38);

create temp view sms as
  select j.payload::jsonb as payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'auth__send_sms';
create temp view mails as
  select j.payload::jsonb as payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'auth__send_email';

-- the interface's magic link (no redirect_to): a link and a code, the mail without `compat`
create temp table a as select * from auth.sign_up('ada@example.com', 'hash-a', '{}', null, null, sha256('a-r1'), 3600);
select is(auth.compat_send_link('magic_link', 'ada@example.com', false, null, sha256('link-1'), 'sealed', sha256('code-1'), 'sealed-code', null, 0),
  'sent', 'default mode: sent');
select is((select payload ->> 'sealed_code' from mails where payload ->> 'to' = 'ada@example.com'), 'sealed-code', 'the mail carries the sealed code');
select is((select payload -> 'compat' from mails where payload ->> 'to' = 'ada@example.com'), 'null'::jsonb, 'and no compat fields');
select is((select array_agg(is_code order by is_code) from auth_private.one_time_tokens where token_hash in (sha256('link-1'), sha256('code-1'))),
  '{f,t}'::boolean[], 'one link, one code');
select is(auth.compat_send_link('magic_link', 'nobody@example.com', false, null, sha256('link-n'), 's', sha256('code-n'), 's', null, 0),
  'not_found', 'an unknown address: not_found, no account');

-- the code signs in (amr otp) and spends the link
create temp table v as select * from auth.verify_code('{magic_link}', 'ADA@example.com', null, sha256('code-1'), sha256('a-r2'), 3600, 5);
select is((select status from v), 'ok', 'the code opens a session');
select is((select amr -> 0 ->> 'method' from v), 'otp', 'amr otp');
select is((select status from auth.verify_magic_link(sha256('link-1'), sha256('a-r3'), 3600)), 'invalid', 'the link of the same mail is spent');
select is((select status from auth.verify_code('{magic_link}', 'ada@example.com', null, sha256('code-1'), sha256('a-r4'), 3600, 5)), 'invalid', 'once');

-- the link spends the code
select is(auth.compat_send_link('magic_link', 'ada@example.com', false, null, sha256('link-2'), 's', sha256('code-2'), 's', null, 0), 'sent', 'again');
select is((select status from auth.verify_magic_link(sha256('link-2'), sha256('a-r5'), 3600)), 'ok', 'the link works');
select is((select status from auth.verify_code('{magic_link}', 'ada@example.com', null, sha256('code-2'), sha256('a-r6'), 3600, 5)), 'invalid',
  'and spends the code');
select is((select status from auth.verify_code('{magic_link}', 'ada@example.com', null, sha256('link-x'), sha256('a-r6'), 3600, 5)), 'invalid',
  'a link token is not a code');

-- wrong tries: the 5th burns the code; an expired code does not work
select is(auth.compat_send_link('magic_link', 'ada@example.com', false, null, sha256('link-3'), 's', sha256('code-3'), 's', null, 0), 'sent', 'a third mail');
select is((select count(*)::int from generate_series(1, 4) i
  cross join lateral auth.verify_code('{magic_link}', 'ada@example.com', null, sha256(('wrong-' || i)::bytea), sha256(('w-' || i)::bytea), 3600, 5) r
  where r.status = 'invalid'), 4, 'four wrong codes');
select is((select failed_attempts from auth_private.one_time_tokens where token_hash = sha256('code-3')), 4, 'counted on the live code');
select is((select status from auth.verify_code('{magic_link}', 'ada@example.com', null, sha256('wrong-5'), sha256('w-5'), 3600, 5)), 'invalid', 'a fifth');
select is((select status from auth.verify_code('{magic_link}', 'ada@example.com', null, sha256('code-3'), sha256('a-r7'), 3600, 5)), 'invalid',
  'then even the right code is burnt');
select is((select status from auth.verify_magic_link(sha256('link-3'), sha256('a-r8'), 3600)), 'ok', 'its link still works (not guessable)');
select is(auth.compat_send_link('magic_link', 'ada@example.com', false, null, sha256('link-4'), 's', sha256('code-4'), 's', null, 0), 'sent', 'a fourth mail');
update auth_private.one_time_tokens set expires_at = now() - interval '1 second' where token_hash = sha256('code-4');
select is((select status from auth.verify_code('{magic_link}', 'ada@example.com', null, sha256('code-4'), sha256('a-r9'), 3600, 5)), 'invalid', 'expired');

-- phone: a new number gets an account and an SMS job; a malformed one is refused
select throws_ok($$select auth.send_phone_code('0612345678', true, null, sha256('p'), 's', 0)$$, 'PT400', 'invalid phone number', 'E.164 only');
select is(auth.send_phone_code('+15550000001', true, '{"plan": "free"}', sha256('pc-1'), 'sealed-1', 0), 'created', 'a new number: created');
select is((select payload ->> 'sealed_code' from sms where payload ->> 'to' = '+15550000001'), 'sealed-1', 'one SMS job with the sealed code');
select is(auth.send_phone_code('+15550000002', false, null, sha256('pc-x'), 's', 0), 'not_found', 'without create_user: not_found');
select is((select count(*)::int from sms where payload ->> 'to' is null), 1, 'and a job that sends nothing (the same work)');
select is((select count(*)::int from auth.users where phone = '+15550000002'), 0, 'and no account');

-- the phone code signs in, proves the number, keeps the creating request's data
create temp table p as select * from auth.verify_code('{sms}', null, '+15550000001', sha256('pc-1'), sha256('p-r1'), 3600, 5);
select is((select status from p), 'ok', 'the phone code opens a session');
select is((select user_json ->> 'phone' from p), '+15550000001', 'the User carries the phone');
select is((select (amr -> 0 ->> 'method') || ' ' || (app_metadata ->> 'provider') from p), 'otp phone', 'amr otp, provider phone');
select ok((select phone_confirmed_at is not null and user_metadata = '{"plan": "free"}' from auth.users where phone = '+15550000001'),
  'the number is proven; the data of the request that created the account stays');
select is((select status from auth.verify_code('{sms}', null, '+15550000001', sha256('pc-1'), sha256('p-r2'), 3600, 5)), 'invalid', 'once');

-- per-number limit
select is((select count(*)::int from generate_series(1, 3) i
  cross join lateral auth.send_phone_code('+15550000003', true, null, sha256(('lim-' || i)::bytea), 's', 2) r where r = 'limited'), 1, 'the third SMS in an hour is limited');

-- the SQL-function send-SMS hook: GoTrue's event, its answers
create function pg_temp.sms_ok(event jsonb) returns jsonb language sql as $$ select '{}'::jsonb $$;
create function pg_temp.sms_error(event jsonb) returns jsonb language sql as $$ select '{"error": {"http_code": 500, "message": "provider down"}}'::jsonb $$;
create function pg_temp.sms_raise(event jsonb) returns jsonb language plpgsql as $$ begin raise exception 'no credit'; end $$;
select is((select status from auth.run_send_sms_hook('pg_temp.sms_ok', '{"sms": {"otp": "123456"}}')), 'ok', 'a hook answering {} sent it');
select is((select status || ': ' || message from auth.run_send_sms_hook('pg_temp.sms_error', '{}')), 'failed: provider down', 'an {error} answer is a failed send');
select is((select status || ': ' || message from auth.run_send_sms_hook('pg_temp.sms_raise', '{}')), 'failed: no credit', 'so is raising');
select is((select status from auth.run_send_sms_hook('public.no_such_hook', '{}')), 'invalid', 'a missing function: invalid');
select is((select j ->> 'phone' from (select auth.sms_hook_user(id) as j from auth.users where phone = '+15550000001') x), '15550000001',
  'the hook''s user is GoTrue''s (phone without +)');

select * from finish();
rollback;
