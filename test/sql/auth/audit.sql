-- The audit log: entries written by the auth functions, the request id, reading, paging and retention.
begin;
select plan(26);

select set_config('request.id', '', true);
create temp table ctx as select '{"ip": "203.0.113.9", "user_agent": "pgtap", "request_id": "req-42"}'::jsonb as c;
create temp table su as select * from auth.sign_up('audit@example.com', 'hash', null, null, null, sha256('a1'), 3600, (select c from ctx));
select is((select status from su), 'ok', 'sign-up with a context');
select is((select count(*)::int from auth.audit_log_entries where action = 'sign_up' and user_id = (select (user_json ->> 'id')::uuid from su)), 1, 'sign_up recorded');
select is((select detail ->> 'method' from auth.audit_log_entries where action = 'sign_in' and user_id = (select (user_json ->> 'id')::uuid from su)), 'password', 'sign_in recorded with its method');
select is((select row(ip, user_agent, request_id)::text from auth.audit_log_entries where action = 'sign_up'), '(203.0.113.9,pgtap,req-42)', 'ip, user agent and request id');

-- request.id holds the caller's X-Request-Id on the request lanes: the context's id (the
-- service's own) wins, and the caller's is kept beside it.
select set_config('request.id', 'from-the-setting', true);
select auth.record_failed_sign_in('AUDIT@example.com', (select c || '{"client_request_id": "chosen-by-caller"}' from ctx));
select is((select request_id from auth.audit_log_entries where action = 'sign_in_failed'), 'req-42', 'the context''s request id wins over request.id');
select is((select client_request_id from auth.audit_log_entries where action = 'sign_in_failed'), 'chosen-by-caller', 'the caller''s id is kept beside it');
select is((select client_request_id from auth.audit_log_entries where action = 'sign_up'), null, 'no caller''s id: null');
select is((select user_id from auth.audit_log_entries where action = 'sign_in_failed'), (select (user_json ->> 'id')::uuid from su), 'a failed sign-in names the user of the address');
select auth.record_failed_sign_in('nobody@example.com', null);
select is((select request_id from auth.audit_log_entries where action = 'sign_in_failed' and user_id is null), 'from-the-setting', 'without a context, request.id is the request id');
select is((select count(*)::int from auth.audit_log_entries where action = 'sign_in_failed' and user_id is null), 1, 'an unknown address: no user');
select set_config('request.id', '', true);

select auth.rotate_refresh_token(sha256('a1'), sha256('a2'), 3600, (select c from ctx));
select auth.rotate_refresh_token(sha256('a1'), sha256('a3'), 3600, (select c from ctx));
select is((select count(*)::int from auth.audit_log_entries where action = 'refresh_reuse_detected'), 1, 'reuse detected recorded');
create temp table s2 as select * from auth.start_session((select (user_json ->> 'id')::uuid from su), sha256('a9'), 3600, null, 'password', (select c from ctx));
select auth.end_session((select session_id from s2), (select (user_json ->> 'id')::uuid from su), (select c from ctx));
select is((select count(*)::int from auth.audit_log_entries where action = 'sign_out' and detail ->> 'session_id' = (select session_id::text from s2)), 1, 'sign-out recorded');
select auth.end_session((select session_id from s2), (select (user_json ->> 'id')::uuid from su), (select c from ctx));
select is((select count(*)::int from auth.audit_log_entries where action = 'sign_out'), 1, 'a second logout of the same session records nothing');
select auth.admin_create_user('made@example.com', null, 'authenticated', true, (select c from ctx));
select is((select detail ->> 'role' from auth.audit_log_entries where action = 'admin_user_created'), 'authenticated', 'admin creation recorded');
select auth.update_user((select (user_json ->> 'id')::uuid from su), 'audit2@example.com', 'hash2', null, null, (select c from ctx));
select is((select count(*)::int from auth.audit_log_entries where action in ('email_changed', 'password_changed')), 2, 'email and password changes recorded');
select auth.delete_user((select (user_json ->> 'id')::uuid from su), (select c from ctx));
select is((select count(*)::int from auth.audit_log_entries where action = 'admin_user_deleted'), 1, 'admin deletion recorded; entries outlive the user');
select ok(not exists (select 1 from auth.audit_log_entries e where e.detail::text like '%hash%'), 'no password hash in any entry');

-- recovery and OAuth linking
insert into auth.users (id, email, providers) values ('00000000-0000-4000-8000-00000000ad01', 'rec-audit@example.com', '{email}');
select auth.request_recovery('rec-audit@example.com', sha256('r1'), 'sealed', 0, (select c from ctx));
select is((select count(*)::int from auth.audit_log_entries where action = 'recovery_requested' and user_id = '00000000-0000-4000-8000-00000000ad01'), 1, 'recovery requested recorded');
select auth.confirm_recovery(sha256('r1'), 'newhash', (select c from ctx));
select is((select count(*)::int from auth.audit_log_entries where action = 'recovery_completed' and user_id = '00000000-0000-4000-8000-00000000ad01'), 1, 'recovery completed recorded');
select auth.oauth_sign_in('github', 'rec-audit@example.com', true, sha256('o1'), 3600, (select c from ctx));
select is((select detail ->> 'provider' from auth.audit_log_entries where action = 'oauth_linked' and user_id = '00000000-0000-4000-8000-00000000ad01'), 'github', 'an OAuth link recorded with its provider');
select is((select detail ->> 'method' from auth.audit_log_entries where action = 'sign_in' and user_id = '00000000-0000-4000-8000-00000000ad01'), 'oauth', 'and the sign-in with method oauth');

-- reading
select is((select json_array_length(auth.list_audit_log(null, null, null, null, 1, 3)::json)), 3, 'a page of 3');
select is((select auth.list_audit_log(null, null, null, null, 1, 1)::json -> 0 ->> 'action'), 'sign_in', 'newest first');
select is((select json_array_length(auth.list_audit_log(null, 'sign_in_failed', null, null, 1, 50)::json)), 2, 'filtered by action');

-- only service_role reads the table
select tests.act_as('authenticated');
select throws_ok('select * from auth.audit_log_entries', '42501', null, 'authenticated cannot read it');
select tests.reset_role();

-- retention
update auth.audit_log_entries set created_at = now() - interval '100 days' where action = 'sign_up';
select is((select auth.purge_audit_log(90) ->> 'audit_log_entries')::int, 1, 'entries past the retention go');

select * from finish();
rollback;
