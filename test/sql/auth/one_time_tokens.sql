-- Emailed one-time tokens: email verification (§3.2), password recovery (§3.3), magic link;
-- each email is a job added in the same transaction as its token (contract §4).
begin;
select plan(88);

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
  '{"kind": "verification", "to": "ver@example.com", "sealed_token": "sealed-v1", "accept_language": null}'::jsonb, 'the email job carries the sealed token');
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
select is(auth.request_recovery('REC@example.com', sha256('r1'), 'sealed-r1', 5), 'sent', 'recover: registered → sent');
select is(auth.request_recovery('ghost@example.com', sha256('r0'), 'sealed-r0', 5), 'not_found', 'recover: unknown → not_found');
select is((select count(*)::int from auth_private.one_time_tokens where token_hash = sha256('r0')), 0, 'nothing stored for an unknown address');
select is((select count(*)::int from auth_jobs where payload ->> 'to' = 'ghost@example.com'), 0, 'no email to an unknown address');
select is((select count(*)::int from auth_jobs where payload ->> 'to' is null), 1, 'but one job all the same (the same work), without a recipient');
select is((select payload::jsonb from auth_jobs where payload ->> 'to' is null),
  '{"kind": "recovery", "to": null, "sealed_token": null}'::jsonb, 'it carries no token');
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
select is(auth.request_recovery('rec@example.com', sha256('r2'), 's', 5), 'sent', 'another recovery');
update auth_private.one_time_tokens set expires_at = now() - interval '1 second' where token_hash = sha256('r2');
select is(auth.confirm_recovery(sha256('r2'), 'third-hash'), 'invalid', 'expired: invalid');
select is((select hash from auth_private.passwords where user_id = '00000000-0000-4000-8000-0000000000a1'), 'new-hash', 'password unchanged');

-- magic link: registered only, once, starts a session in the same call
select is(auth.request_magic_link('ghost@example.com', sha256('m0'), 's', 5), 'not_found', 'magic link: unknown → not_found');
select is(auth.request_magic_link('rec@example.com', sha256('m1'), 's', 5), 'sent', 'magic link: registered → sent');
create temp table ml as select * from auth.verify_magic_link(sha256('m1'), sha256('ml-refresh'), 3600);
select is((select status from ml), 'ok', 'verify_magic_link: ok');
select is((select status from auth.rotate_refresh_token(sha256('ml-refresh'), sha256('ml-2'), 3600)), 'ok', 'its session is live');
select is((select status from auth.verify_magic_link(sha256('m1'), sha256('ml-refresh-2'), 3600)), 'invalid', 'once: a second use is invalid');

-- token and email job share one transaction: rolled back together
savepoint before_recovery;
select is(auth.request_recovery('rec@example.com', sha256('rb'), 'sealed-rb', 0), 'sent', 'a recovery inside a transaction that will roll back');
rollback to savepoint before_recovery;
select is((select count(*)::int from auth_private.one_time_tokens where token_hash = sha256('rb'))
  + (select count(*)::int from auth_jobs where payload ->> 'sealed_token' = 'sealed-rb'), 0, 'rolled back: neither the token nor its email job remain');

-- ── the address proven mark (auth_private.proven_emails) ─────────────────────────────
create temp view proof as
  select u.email, p.proof, p.email = lower(u.email) as current
    from auth.users u left join auth_private.proven_emails p on p.user_id = u.id;
select is((select proof from proof where email = 'ver@example.com'), 'verification', 'a used verification token proves the address');
select is((select proof from proof where email = 'rec@example.com'), 'recovery', 'so does a used recovery token');
select is((select count(*)::int from proof where email = 'late@example.com' and proof is not null), 0, 'an unused one does not');

-- verification: the link confirms the sign-up, password and user_metadata included
select is((select status from auth.sign_up('keep@example.com', 'hash-k', '{"name": "K"}', sha256('vk'), 's', null, 3600)), 'confirmation_sent', 'a sign-up awaiting confirmation');
select is((select status from auth.start_session((select id from auth.users where email = 'keep@example.com'), sha256('keep-s'), 3600)), 'ok',
  'a session opened before the confirmation (verification was switched off meanwhile)');
select is(auth.verify_email(sha256('vk')), 'ok', 'verified');
select results_eq($$select p.hash, u.user_metadata from auth.users u join auth_private.passwords p on p.user_id = u.id where u.email = 'keep@example.com'$$,
  $$values ('hash-k'::text, '{"name": "K"}'::jsonb)$$, 'verification keeps the password and metadata of the sign-up it confirms');
select is((select status from auth.rotate_refresh_token(sha256('keep-s'), sha256('keep-s2'), 3600)), 'revoked', 'sessions opened before the proof end');
select is((select revoked_reason from auth_private.sessions s join auth.users u on u.id = s.user_id where u.email = 'keep@example.com'), 'address_proven', 'as address_proven');

-- verification after the account changed since the token was issued: nothing of it is vouched for
select is((select status from auth.sign_up('chg@example.com', 'hash-c', '{"x": 1}', sha256('vc'), 's', null, 3600)), 'confirmation_sent', 'another sign-up');
update auth_private.one_time_tokens set created_at = now() - interval '1 minute' where token_hash = sha256('vc');
select is(auth.verify_email(sha256('vc')), 'ok', 'verified after a change');
select results_eq($$select u.user_metadata, (select count(*)::int from auth_private.passwords p where p.user_id = u.id) from auth.users u where u.email = 'chg@example.com'$$,
  $$values ('{}'::jsonb, 0)$$, 'what changed after the token was issued is removed: password and metadata');

-- magic link on an address confirmed at sign-up but never proven: what was planted goes
create temp table ml2 as select * from auth.sign_up('ML2@example.com', 'hash-m', '{"planted": true}', null, null, sha256('ml2-r'), 3600);
select is((select proof from proof where email = 'ml2@example.com'), null, 'an auto-confirmed sign-up is not proven');
select is(auth.request_magic_link('ml2@example.com', sha256('ml2-a'), 's', 5), 'sent', 'a magic link');
select is(auth.request_magic_link('ml2@example.com', sha256('ml2-b'), 's', 5), 'sent', 'a second one');
select is(auth.request_recovery('ml2@example.com', sha256('ml2-c'), 's', 5), 'sent', 'and a recovery');
select is((select status from auth.verify_magic_link(sha256('ml2-a'), sha256('ml2-s'), 3600)), 'ok', 'the first link is used');
select is((select count(*)::int from auth_private.passwords p join auth.users u on u.id = p.user_id where u.email = 'ml2@example.com'), 0, 'the password set before the proof is removed');
select is((select user_metadata from auth.users where email = 'ml2@example.com'), '{}'::jsonb, 'so is the metadata');
select is((select status from auth.rotate_refresh_token(sha256('ml2-r'), sha256('ml2-r2'), 3600)), 'revoked', 'and the sessions from before');
select is((select status from auth.rotate_refresh_token(sha256('ml2-s'), sha256('ml2-s2'), 3600)), 'ok', 'the new session lives');
select is((select proof from proof where email = 'ml2@example.com'), 'magic_link', 'the address is proven');
select is((select status from auth.verify_magic_link(sha256('ml2-b'), sha256('ml2-x'), 3600)), 'invalid', 'the other magic link is spent with it');
select is(auth.check_recovery_token(sha256('ml2-c')), 'invalid', 'so is the recovery token');

-- a proven address: later proofs change nothing
insert into auth_private.passwords (user_id, hash) select id, 'hash-m2' from auth.users where email = 'ml2@example.com';
update auth.users set user_metadata = '{"mine": true}' where email = 'ml2@example.com';
select is(auth.request_magic_link('ml2@example.com', sha256('ml2-d'), 's', 5), 'sent', 'another magic link');
select is((select status from auth.verify_magic_link(sha256('ml2-d'), sha256('ml2-t'), 3600)), 'ok', 'used');
select results_eq($$select p.hash, u.user_metadata from auth.users u join auth_private.passwords p on p.user_id = u.id where u.email = 'ml2@example.com'$$,
  $$values ('hash-m2'::text, '{"mine": true}'::jsonb)$$, 'password and metadata set after the proof stay');
select is((select status from auth.rotate_refresh_token(sha256('ml2-s2'), sha256('ml2-s3'), 3600)), 'ok', 'and so do the sessions');

-- recovery on a never-proven address: metadata goes, the new password is set
select is((select status from auth.sign_up('rec2@example.com', 'hash-r', '{"planted": true}', null, null, sha256('rec2-r'), 3600)), 'ok', 'an auto-confirmed sign-up');
select is(auth.request_recovery('rec2@example.com', sha256('rec2-a'), 's', 5), 'sent', 'a recovery');
select is(auth.request_magic_link('rec2@example.com', sha256('rec2-b'), 's', 5), 'sent', 'and a magic link');
select is(auth.confirm_recovery(sha256('rec2-a'), 'hash-r2'), 'ok', 'the recovery is used');
select results_eq($$select p.hash, u.user_metadata from auth.users u join auth_private.passwords p on p.user_id = u.id where u.email = 'rec2@example.com'$$,
  $$values ('hash-r2'::text, '{}'::jsonb)$$, 'the new password is set, the planted metadata is gone');
select is((select status from auth.verify_magic_link(sha256('rec2-b'), sha256('rec2-x'), 3600)), 'invalid', 'the outstanding magic link is spent');

-- ── mails per address and hour (MAIL_RATE_LIMIT_PER_HOUR) ───────────────────────────
insert into auth.users (email, email_confirmed_at) values ('lim@example.com', now());
select is(array[auth.request_recovery('lim@example.com', sha256('l1'), 's', 2), auth.request_magic_link('LIM@example.com', sha256('l2'), 's', 2),
  auth.request_recovery('lim@example.com', sha256('l3'), 's', 2), auth.request_magic_link('lim@EXAMPLE.com', sha256('l4'), 's', 2)],
  '{sent,sent,limited,limited}'::text[], 'two mails, then limited: recovery and magic link share the limit, any case of the address');
select is((select count(*)::int from auth_private.one_time_tokens where token_hash in (sha256('l3'), sha256('l4'))), 0, 'no token is stored over the limit');
select is((select count(*)::int from auth_jobs where payload ->> 'to' = 'lim@example.com'), 2, 'two emails are enqueued');
select is((select cardinality(hits) from auth_private.mail_limits where email_hash = sha256('lim@example.com')), 2,
  'counted by the SHA-256 of the address; a limited request is not counted');
select throws_ok($$insert into auth_private.mail_limits (email_hash) values (convert_to('lim@example.com', 'UTF8'))$$, '23514', null,
  'only a SHA-256 fits the key: no address is kept in clear');
select is(auth.request_recovery('lim@example.com', sha256('l5'), 's', 0), 'sent', 'a limit of 0 disables it');
select is(array[auth.request_recovery('nolim@example.com', sha256('n1'), 's', 1), auth.request_recovery('nolim@example.com', sha256('n2'), 's', 1)],
  '{not_found,not_found}'::text[], 'an unknown address answers not_found either way');
select is((select cardinality(hits) from auth_private.mail_limits where email_hash = sha256('nolim@example.com')), 1,
  'its requests are counted too (the same work)');

-- every request adds exactly one job: sent, unknown or limited
create temp table jobs_before as select count(*)::int as n from auth_jobs;
select auth.request_recovery('lim@example.com', sha256('j1'), 's', 2);
select auth.request_magic_link('nobody-at-all@example.com', sha256('j2'), 's', 2);
select auth.request_magic_link('rec@example.com', sha256('j3'), 's', 0);
select is((select count(*)::int from auth_jobs) - (select n from jobs_before), 3, 'limited, unknown and sent: one job each');

-- ── privileges ───────────────────────────────────────────────────────────────────────
select ok(not has_function_privilege('anon', 'auth.request_recovery(text, bytea, text, integer, jsonb)', 'execute')
  and not has_function_privilege('anon', 'auth.request_magic_link(text, bytea, text, integer)', 'execute'), 'API roles cannot request emails directly');
select ok(not has_function_privilege('service_role', 'auth_private.prove_address(uuid, text, text, boolean)', 'execute'), 'nor prove an address');
select ok(not has_table_privilege('service_role', 'auth_private.proven_emails', 'select'), 'nor read the proven marks');

select * from finish();
rollback;
