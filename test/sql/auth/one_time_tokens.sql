-- Emailed one-time tokens: email verification (§3.2), password recovery (§3.3), magic link;
-- each email is a job added in the same transaction as its token (contract §4).
begin;
select plan(40);

create temp view auth_jobs as
  select j.payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
  where t.identifier = 'auth__send_email';

-- §3.2 no account → awaiting confirmation (signup with a verification token)
create temp table su as select * from auth.sign_up('Ver@Example.com', 'hash-v', null, sha256('v1'), 'sealed-v1', null, 3600);
select is((select status from su), 'confirmation_sent', 'signup with verification: confirmation_sent');
select is((select session_id from su), null, 'no session');
select is((select count(*)::int from auth_private.sessions s join auth.users u on u.id = s.user_id where u.email = 'ver@example.com'), 0, 'no refresh token issued');
select is((select email_confirmed_at from auth.users where email = 'ver@example.com'), null, 'awaiting confirmation');
select is((select kind from auth_private.one_time_tokens where token_hash = sha256('v1')), 'verification', 'a verification token is stored by hash');
select is((select extract(epoch from expires_at - created_at)::int from auth_private.one_time_tokens where token_hash = sha256('v1')), 86400, 'valid 24 hours');
select is((select payload::jsonb from auth_jobs where payload ->> 'to' = 'ver@example.com'),
  '{"kind": "verification", "to": "ver@example.com", "sealed_token": "sealed-v1"}'::jsonb, 'the email job carries the sealed token');
select is((select password_hash from auth.password_credentials('ver@example.com')), 'hash-v', 'awaiting confirmation: the hash is there for sign-in');
select is((select email_confirmed from auth.password_credentials('ver@example.com')), false, 'password_credentials tells it is unconfirmed (the service answers 403)');

-- §3.2 awaiting confirmation → confirmed
select is(auth.verify_email(sha256('v1')), 'ok', 'verify_email: ok');
select ok((select email_confirmed_at is not null from auth.users where email = 'ver@example.com'), 'confirmed');
select is((select email_confirmed from auth.password_credentials('ver@example.com')), true, 'sign-in may proceed');
select is(auth.verify_email(sha256('v1')), 'ok', 'again within 24 hours: ok (idempotent)');
select is(auth.verify_email(sha256('nope')), 'invalid', 'unknown token: invalid');
select is((select status from auth.sign_up('late@example.com', 'h', null, sha256('v2'), 's', null, 3600)), 'confirmation_sent', 'a second account');
update auth_private.one_time_tokens set expires_at = now() - interval '1 second' where token_hash = sha256('v2');
select is(auth.verify_email(sha256('v2')), 'invalid', 'expired verification token: invalid');
select is((select email_confirmed_at from auth.users where email = 'late@example.com'), null, 'still awaiting confirmation');

-- §3.3 issued (registered address) / same status-free answer for unknown ones
insert into auth.users (id, email, email_confirmed_at) values ('00000000-0000-4000-8000-0000000000a1', 'rec@example.com', now());
insert into auth_private.passwords (user_id, hash) values ('00000000-0000-4000-8000-0000000000a1', 'old-hash');
select is(auth.request_recovery('REC@example.com', sha256('r1'), 'sealed-r1'), 'sent', 'recover: registered → sent');
select is(auth.request_recovery('ghost@example.com', sha256('r0'), 'sealed-r0'), 'not_found', 'recover: unknown → not_found');
select is((select count(*)::int from auth_private.one_time_tokens where token_hash = sha256('r0')), 0, 'nothing stored for an unknown address');
select is((select count(*)::int from auth_jobs where payload ->> 'to' = 'ghost@example.com'), 0, 'nothing enqueued for an unknown address');
select is((select payload ->> 'kind' from auth_jobs where payload ->> 'to' = 'rec@example.com'), 'recovery', 'the recovery email is enqueued');
select is((select extract(epoch from expires_at - created_at)::int from auth_private.one_time_tokens where token_hash = sha256('r1')), 3600, 'valid 1 hour');

-- §3.3 issued → used
select is(auth.check_recovery_token(sha256('r1')), 'valid', 'check: valid');
select is((select status from auth.start_session('00000000-0000-4000-8000-0000000000a1', sha256('rec-session'), 3600)), 'ok', 'a session before the reset');
select is(auth.confirm_recovery(sha256('r1'), 'new-hash'), 'ok', 'confirm: ok');
select is((select hash from auth_private.passwords where user_id = '00000000-0000-4000-8000-0000000000a1'), 'new-hash', 'password replaced');
select is((select status from auth.rotate_refresh_token(sha256('rec-session'), sha256('x'), 3600)), 'revoked', 'sessions from before are revoked');

-- §3.3 used or expired → unchanged
select is(auth.confirm_recovery(sha256('r1'), 'third-hash'), 'invalid', 'used: invalid');
select is(auth.check_recovery_token(sha256('r1')), 'invalid', 'check: used is invalid');
select is(auth.request_recovery('rec@example.com', sha256('r2'), 's'), 'sent', 'another recovery');
update auth_private.one_time_tokens set expires_at = now() - interval '1 second' where token_hash = sha256('r2');
select is(auth.confirm_recovery(sha256('r2'), 'third-hash'), 'invalid', 'expired: invalid');
select is((select hash from auth_private.passwords where user_id = '00000000-0000-4000-8000-0000000000a1'), 'new-hash', 'password unchanged');

-- magic link: registered only, once, starts a session in the same call
select is(auth.request_magic_link('ghost@example.com', sha256('m0'), 's'), 'not_found', 'magic link: unknown → not_found');
select is(auth.request_magic_link('rec@example.com', sha256('m1'), 's'), 'sent', 'magic link: registered → sent');
create temp table ml as select * from auth.verify_magic_link(sha256('m1'), sha256('ml-refresh'), 3600);
select is((select status from ml), 'ok', 'verify_magic_link: ok');
select is((select status from auth.rotate_refresh_token(sha256('ml-refresh'), sha256('ml-2'), 3600)), 'ok', 'its session is live');
select is((select status from auth.verify_magic_link(sha256('m1'), sha256('ml-refresh-2'), 3600)), 'invalid', 'once: a second use is invalid');

-- token and email job share one transaction: rolled back together
savepoint before_recovery;
select is(auth.request_recovery('rec@example.com', sha256('rb'), 'sealed-rb'), 'sent', 'a recovery inside a transaction that will roll back');
rollback to savepoint before_recovery;
select is((select count(*)::int from auth_private.one_time_tokens where token_hash = sha256('rb'))
  + (select count(*)::int from auth_jobs where payload ->> 'sealed_token' = 'sealed-rb'), 0, 'rolled back: neither the token nor its email job remain');

select * from finish();
rollback;
