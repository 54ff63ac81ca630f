-- The one place a one-time token is spent (auth_private.spend_one_time_token), which the
-- verify, recovery, magic-link and compat functions call.
begin;
select plan(9);

insert into auth.users (id, email) values ('00000000-0000-4000-8000-0000000005e1', 'spend@example.com');
insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at) values
  (sha256('once'), '00000000-0000-4000-8000-0000000005e1', 'recovery', 'spend@example.com', now() + interval '1 hour'),
  (sha256('again'), '00000000-0000-4000-8000-0000000005e1', 'verification', 'spend@example.com', now() + interval '1 hour'),
  (sha256('late'), '00000000-0000-4000-8000-0000000005e1', 'magic_link', 'spend@example.com', now() - interval '1 second');

select is((select s.user_id from auth_private.spend_one_time_token(sha256('once'), 'recovery') s),
  '00000000-0000-4000-8000-0000000005e1'::uuid, 'spent: its user');
select ok((select used_at is not null from auth_private.one_time_tokens where token_hash = sha256('once')), 'marked used');
select is((select count(*)::int from auth_private.spend_one_time_token(sha256('once'), 'recovery')), 0, 'once only');
select is((select count(*)::int from auth_private.spend_one_time_token(sha256('again'), 'recovery')), 0, 'not as another kind');
select is((select s.email from auth_private.spend_one_time_token(sha256('again'), 'verification', true) s), 'spend@example.com', 'repeatable: its address');
select is((select count(*)::int from auth_private.spend_one_time_token(sha256('again'), 'verification', true)), 1, 'repeatable: again');
select is((select count(*)::int from auth_private.spend_one_time_token(sha256('late'), 'magic_link')), 0, 'not once expired');
update auth.users set email = 'moved@example.com' where id = '00000000-0000-4000-8000-0000000005e1';
update auth_private.one_time_tokens set used_at = null where token_hash = sha256('once');
select is((select count(*)::int from auth_private.spend_one_time_token(sha256('once'), 'recovery')), 0, 'not once the address changed');
select is((select count(*)::int from auth_private.spend_one_time_token(sha256('nope'), 'recovery')), 0, 'not an unknown one');

select * from finish();
rollback;
