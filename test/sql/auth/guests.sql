-- Guests become users: a confirmed email ends the guest (is_anonymous false, role authenticated), whatever confirms it.
begin;
select plan(8);

insert into auth.users (id, role, is_anonymous) values
  ('00000000-0000-0000-0000-0000000000b1', 'anonymous', true),
  ('00000000-0000-0000-0000-0000000000b2', 'anonymous', true);

update auth.users set email = 'g1@example.com' where id = '00000000-0000-0000-0000-0000000000b1';
select is((select is_anonymous from auth.users where id = '00000000-0000-0000-0000-0000000000b1'), true, 'an unconfirmed email keeps the guest');
update auth.users set email_confirmed_at = now() where id = '00000000-0000-0000-0000-0000000000b1';
select is((select row(is_anonymous, role, providers)::text from auth.users where id = '00000000-0000-0000-0000-0000000000b1'),
  '(f,authenticated,{email})', 'confirmed: a user with the authenticated role');
select is((select count(*)::int from auth.audit_log_entries where user_id = '00000000-0000-0000-0000-0000000000b1' and action = 'guest_upgraded'), 1, 'audited');

select is((select status from auth.update_user('00000000-0000-0000-0000-0000000000b2', 'G2@example.com', null, null, null, null, null,
  sha256('v'), 'sealed')), 'ok', 'a guest gives an address under verification');
select is((select row(is_anonymous, email, (select kind from auth_private.one_time_tokens t where t.user_id = u.id))::text
  from auth.users u where id = '00000000-0000-0000-0000-0000000000b2'), '(t,g2@example.com,verification)', 'a guest until the emailed token is used');

insert into auth.users (id, role, is_anonymous) values ('00000000-0000-0000-0000-0000000000b3', 'anonymous', true);
select is((select status from auth.oauth_link_guest('00000000-0000-0000-0000-0000000000b3', 'github', 'g1@example.com', true, sha256('o1'), 60)),
  'email_taken', 'linking another account''s address');
select is((select (s).status || ' ' || (s).is_anonymous::text from (select auth.oauth_link_guest('00000000-0000-0000-0000-0000000000b3', 'github',
  'G3@example.com', true, sha256('o2'), 60) as s) x), 'ok false', 'a linked identity makes the guest a user');
select is((select status from auth.oauth_link_guest('00000000-0000-0000-0000-0000000000b3', 'github', 'g4@example.com', true, sha256('o3'), 60)),
  'not_a_guest', 'a user links no more');

select * from finish();
rollback;
