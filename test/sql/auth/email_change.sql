-- SUPABASE_COMPAT: the pending address change (GoTrue's email_change): request, verify by link or code, a taken address, aal2.
begin;
select plan(27);

create temp table a as select * from auth.sign_up('ada@example.com', 'hash-a', '{}', null, null, sha256('a-r1'), 3600);
create temp table ada as select (user_json ->> 'id')::uuid as id from a;
select auth.sign_up('bob@example.com', 'hash-b', '{}', null, null, sha256('b-r1'), 3600);
create temp view mails as
  select j.payload::jsonb as payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'auth__send_email';

-- request: nothing changes at once; the new address is mailed a link and a code
select is(auth.compat_request_email_change((select id from ada), 'Ada.New@Example.com', 'aal1', sha256('l-1'), 'st', sha256('c-1'), 'sc', 'http://x', 0),
  'pending', 'a change is pending');
select is((select email from auth.users where id = (select id from ada)), 'ada@example.com', 'the address is not changed at once');
select is((select new_email from auth_private.email_changes where user_id = (select id from ada)), 'ada.new@example.com', 'the new address waits, lower-cased');
select is((select payload ->> 'kind' from mails where payload ->> 'to' = 'ada.new@example.com'), 'email_change', 'an email_change mail to the new address');
select is((select payload -> 'compat' ->> 'email' from mails where payload ->> 'to' = 'ada.new@example.com'), 'ada@example.com', 'it names the current address');
select is((select auth.compat_user((select id from ada)) ->> 'new_email'), 'ada.new@example.com', 'the User shows new_email');
select ok((select auth.compat_user((select id from ada)) ->> 'email_change_sent_at') is not null, 'and email_change_sent_at');
select is((select auth.compat_user((select id from ada)) ->> 'email'), 'ada@example.com', 'and the current email');

-- the paths that are no pending change
select is(auth.compat_request_email_change((select id from ada), 'ADA@example.com', null, sha256('l-x'), 'st', sha256('c-x'), 'sc', 'http://x', 0),
  'unchanged', 'the same address is no change');
select is(auth.compat_request_email_change((select id from ada), 'bob@example.com', null, sha256('l-x'), 'st', sha256('c-x'), 'sc', 'http://x', 0),
  'email_taken', 'an address another account holds');
select is(auth.compat_request_email_change('00000000-0000-4000-8000-00000000dead', 'x@example.com', null, sha256('l-x'), 'st', sha256('c-x'), 'sc', 'http://x', 0),
  'not_found', 'unknown user');
create temp table g as select * from auth.sign_in_anonymously('anon', null, sha256('g-r1'), 3600);
select is(auth.compat_request_email_change((select (user_json ->> 'id')::uuid from g), 'guest@example.com', null, sha256('l-x'), 'st', sha256('c-x'), 'sc', 'http://x', 0),
  'direct', 'a guest takes the interface''s path');

-- a newer request replaces the older; wrong codes count and burn
select is(auth.compat_request_email_change((select id from ada), 'ada.new@example.com', null, sha256('l-2'), 'st', sha256('c-2'), 'sc', 'http://x', 0),
  'pending', 'requested again');
select is((select status from auth.compat_verify_email_change(sha256('l-1'), null, sha256('a-r2'), 3600, 5)), 'invalid', 'the older link no longer works');
select is((select status from auth.compat_verify_email_change(sha256('c-1'), 'ada.new@example.com', sha256('a-r3'), 3600, 5)), 'invalid', 'nor the older code');
select is((select failed_attempts from auth_private.email_changes where user_id = (select id from ada)), 1, 'a wrong code counts');
select is((select status from auth.compat_verify_email_change(sha256('c-2'), 'other@example.com', sha256('a-r4'), 3600, 5)), 'invalid', 'a code names its new address');

-- the code applies the change
create temp table v as select * from auth.compat_verify_email_change(sha256('c-2'), 'ADA.NEW@example.com', sha256('a-r5'), 3600, 5);
select is((select status from v), 'ok', 'the code opens a session');
select is((select email from auth.users where id = (select id from ada)), 'ada.new@example.com', 'the address is changed');
select ok((select email_confirmed_at is not null from auth.users where id = (select id from ada)), 'and confirmed');
select is((select email from auth_private.proven_emails where user_id = (select id from ada)), 'ada.new@example.com', 'and proven');
select is((select count(*)::int from auth_private.email_changes where user_id = (select id from ada)), 0, 'nothing pending any more');
select is((select count(*)::int from mails where payload ->> 'kind' = 'account_changed' and payload ->> 'to' = 'ada@example.com'), 1, 'the former address is told');
select is((select status from auth.compat_verify_email_change(sha256('l-2'), null, sha256('a-r6'), 3600, 5)), 'invalid', 'the link of the same mail is spent');

-- a pending change to an address another account takes meanwhile fails at verify, nothing written
select is(auth.compat_request_email_change((select id from ada), 'carol@example.com', null, sha256('l-3'), 'st', sha256('c-3'), 'sc', 'http://x', 0), 'pending', 'ada asks for carol@');
select auth.sign_up('carol@example.com', 'hash-c', '{}', null, null, sha256('c-r1'), 3600);
select is((select status from auth.compat_verify_email_change(sha256('l-3'), null, sha256('a-r7'), 3600, 5)), 'email_taken', 'the address was taken meanwhile');
select is((select email from auth.users where id = (select id from ada)), 'ada.new@example.com', 'ada keeps her address');

select * from finish();
rollback;
