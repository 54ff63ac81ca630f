-- The mail task's SQL: the recipient's User object, the send-email hook runner, and the
-- request's Accept-Language riding with each mail job.
begin;
select plan(12);

create temp view auth_jobs as
  select j.payload::jsonb as payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'auth__send_email';

-- the recipient, read when the mail goes
create temp table su as select * from auth.sign_up('Mia@Example.com', 'hash-m', '{"locale": "fr", "name": "Mia"}', sha256('m1'), 'sealed-m1', null, 3600,
  '{"ip": "127.0.0.1", "user_agent": null, "request_id": null, "accept_language": "fr-CA,fr;q=0.9"}');
select is((auth_private.mail_recipient('MIA@example.com') ->> 'email'), 'mia@example.com', 'the account, whatever the case of the address');
select is((auth_private.mail_recipient('mia@example.com') -> 'user_metadata'), '{"locale": "fr", "name": "Mia"}'::jsonb, 'with its user_metadata');
select is(auth_private.mail_recipient('nobody@example.com'), null, 'no account: null');

-- Accept-Language rides with the job
select is((select payload ->> 'accept_language' from auth_jobs where payload ->> 'to' = 'mia@example.com'), 'fr-CA,fr;q=0.9', 'sign-up: the request''s Accept-Language in the job');
select is(auth.request_recovery('mia@example.com', sha256('m2'), 'sealed-m2', 5, '{"ip": "127.0.0.1", "accept_language": "de"}'), 'sent', 'recovery');
select is((select payload ->> 'accept_language' from auth_jobs where payload ->> 'kind' = 'recovery'), 'de', 'recovery: its request''s');
select is(auth.request_recovery('mia@example.com', sha256('m3'), 'sealed-m3', 5), 'sent', 'recovery without a context');
select is((select count(*)::int from auth_jobs where payload ->> 'kind' = 'recovery' and payload -> 'accept_language' = 'null'::jsonb), 1, 'no context: null');

-- the send-email hook
create schema mail_hook_test;
create table mail_hook_test.got (event jsonb);
create function mail_hook_test.ok(event jsonb) returns jsonb language plpgsql as $$ begin insert into mail_hook_test.got values (event); return '{}'; end $$;
create function mail_hook_test.boom(event jsonb) returns jsonb language plpgsql as $$ begin raise exception 'provider down'; end $$;
create function mail_hook_test.no(event jsonb) returns jsonb language sql as $$ select '{"error": {"http_code": 403, "message": "not this one"}}'::jsonb $$;

select is((select row(status, message, http_code)::text from auth.run_send_email_hook('mail_hook_test.ok', '{"user": {}, "email_data": {"token": "1"}}')), '(ok,,)', 'sent');
select is((select event #>> '{email_data,token}' from mail_hook_test.got), '1', 'the function got the event');
select is((select row(status, message, http_code)::text from auth.run_send_email_hook('mail_hook_test.boom', '{}')), '(raised,"provider down",)', 'a raise: its message');
select is((select row(status, message, http_code)::text from auth.run_send_email_hook('mail_hook_test.no', '{}')), '(refused,"not this one",403)', 'an error answer: refused');

select * from finish();
rollback;
