-- Admins manage users: update (metadata merged, role, confirm, ban), bans refusing sessions and refreshes, app_metadata in grants, invite and generate_link.
begin;
select plan(22);

insert into auth.users (id, email, providers, app_metadata) values
  ('00000000-0000-0000-0000-0000000000a1', 'a@example.com', '{email}', '{"plan": "free", "keep": 1}'),
  ('00000000-0000-0000-0000-0000000000a2', 'b@example.com', '{email}', '{}');
insert into auth.users (id, role, is_anonymous) values ('00000000-0000-0000-0000-0000000000a3', 'anonymous', true);

select is(auth_private.parse_ban_duration('24h'), interval '24 hours', 'a Go duration');
select is(auth_private.parse_ban_duration('1h30m'), interval '90 minutes', 'a compound duration');
select is(auth_private.parse_ban_duration('none'), interval '0', 'none lifts the ban');
select is(auth_private.parse_ban_duration('24 hours'), null, 'not a Go duration: null');
select is(auth_private.parse_ban_duration('99999999999h'), null, 'beyond Go''s limit: null');

create temp table r as select * from auth.admin_update_user('00000000-0000-0000-0000-0000000000a1', null, null, '{"name": "A"}',
  '{"plan": "pro", "keep": null}', 'service_role', true, null);
select is((select status from r), 'ok', 'updated');
select is((select user_json -> 'app_metadata' from r), '{"plan": "pro", "provider": "email", "providers": ["email"]}'::jsonb,
  'app_metadata merged, a null key removed, provider and providers added');
select is((select user_json ->> 'role' from r), 'service_role', 'role set');
select isnt((select user_json ->> 'email_confirmed_at' from r), null, 'email_confirm confirms');
select is((select detail -> 'fields' from auth.audit_log_entries where action = 'admin_user_updated'),
  '["role", "email_confirm", "user_metadata", "app_metadata"]'::jsonb, 'audited with the changed fields');
select is((select status from auth.admin_update_user('00000000-0000-0000-0000-0000000000a1', 'B@example.com', null, null, null, null, null, null)),
  'email_taken', 'another account''s address');
select is((select status from auth.admin_update_user('00000000-0000-0000-0000-0000000000ff', null, null, null, null, null, null, null)),
  'not_found', 'unknown id');

-- a ban refuses new sessions and refreshes; lifting it lets them through again
select is((select status from auth.start_session('00000000-0000-0000-0000-0000000000a2', sha256('r1'), 60)), 'ok', 'a session before the ban');
select ok((select user_json ->> 'banned_until' from auth.admin_update_user('00000000-0000-0000-0000-0000000000a2', null, null, null, null,
  null, null, interval '24 hours')) is not null, 'banned_until shown');
select throws_ok($$ select auth.start_session('00000000-0000-0000-0000-0000000000a2', sha256('r2'), 60) $$, 'PT403', 'user is banned',
  'a banned user starts no session');
select throws_ok($$ select auth.rotate_refresh_token(sha256('r1'), sha256('r3'), 60) $$, 'PT403', 'user is banned',
  'a banned user refreshes nothing');
select is((select user_json -> 'banned_until' from auth.admin_update_user('00000000-0000-0000-0000-0000000000a2', null, null, null, null,
  null, null, interval '0')), 'null'::jsonb, 'ban lifted');
select is((select (rotate_refresh_token).status from (select auth.rotate_refresh_token(sha256('r1'), sha256('r3'), 60)) x),
  'ok', 'the old refresh token works again once the ban is lifted');

select is((select (s).app_metadata from (select auth.start_session('00000000-0000-0000-0000-0000000000a1', sha256('r4'), 60) as s) x),
  '{"plan": "pro", "provider": "email", "providers": ["email"]}'::jsonb, 'the grant carries app_metadata');

-- a guest given a confirmed email by an admin stops being a guest
select is((select user_json ->> 'role' || ' ' || (user_json ->> 'is_anonymous') from auth.admin_update_user('00000000-0000-0000-0000-0000000000a3',
  'guest@example.com', null, null, null, null, true, null)), 'authenticated false', 'a guest upgraded by an admin');

-- invite and generate_link
select is((select status from auth.admin_invite_user('a@example.com', null, sha256('i1'), 'sealed')), 'email_taken', 'a confirmed address is not invited');
select is((select row(status, user_json -> 'user_metadata', verification_type)::text
  from auth.admin_generate_link('magiclink', 'new@example.com', null, '{"x": 1}', sha256('g1'))), '(ok,"{""x"": 1}",signup)',
  'a magic link for an unknown address is a signup');

select * from finish();
rollback;
