-- Housekeeping: auth.purge_expired removes only rows that can no longer change an answer.
begin;
select plan(10);

insert into auth.users (id, email) values ('00000000-0000-4000-8000-0000000000b1', 'purge@example.com');
select is((select status from auth.start_session('00000000-0000-4000-8000-0000000000b1', sha256('old'), 3600, '00000000-0000-4000-8000-0000000000f1')), 'ok', 'an old family');
select is((select status from auth.start_session('00000000-0000-4000-8000-0000000000b1', sha256('recent'), 3600, '00000000-0000-4000-8000-0000000000f2')), 'ok', 'a family expired recently');
select is((select status from auth.start_session('00000000-0000-4000-8000-0000000000b1', sha256('live'), 3600, '00000000-0000-4000-8000-0000000000f3')), 'ok', 'a live family');
update auth_private.refresh_tokens set expires_at = now() - interval '8 days' where token_hash = sha256('old');
update auth_private.refresh_tokens set expires_at = now() - interval '6 days' where token_hash = sha256('recent');
update auth_private.sessions set created_at = now() - interval '30 days';
select auth.request_magic_link('purge@example.com', sha256('ml-old'), 's', 0);
update auth_private.one_time_tokens set expires_at = now() - interval '8 days' where token_hash = sha256('ml-old');
insert into auth_private.rate_limits (bucket, ip, updated_at) values ('auth', 'idle', now() - interval '25 hours'), ('auth', 'busy', now());
insert into auth_private.mail_limits (email_hash, updated_at) values (sha256('idle'), now() - interval '25 hours'), (sha256('busy'), now());

select is(auth.purge_expired(), '{"refresh_tokens": 1, "sessions": 1, "one_time_tokens": 1, "rate_limits": 1, "mail_limits": 1}'::jsonb, 'one of each purged');
select is((select array_agg(id order by id) from auth_private.sessions), '{00000000-0000-4000-8000-0000000000f2,00000000-0000-4000-8000-0000000000f3}'::uuid[], 'the emptied family went');
select is((select status from auth.rotate_refresh_token(sha256('recent'), sha256('x'), 3600)), 'expired', 'a token expired less than a week ago still answers expired');
select is((select status from auth.rotate_refresh_token(sha256('old'), sha256('y'), 3600)), 'invalid', 'an older one is unknown');
select is((select array_agg(ip) from auth_private.rate_limits), '{busy}'::text[], 'idle rate-limit rows go');
select is((select array_agg(email_hash) from auth_private.mail_limits), array[sha256('busy')], 'idle mail-limit rows go');
select is(auth.purge_expired(), '{"refresh_tokens": 0, "sessions": 0, "one_time_tokens": 0, "rate_limits": 0, "mail_limits": 0}'::jsonb, 'a second run finds nothing');

select * from finish();
rollback;
