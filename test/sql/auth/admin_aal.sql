-- The second factor of an account gates its admin token (service-role routes) and its
-- email and password changes: aal2 once a factor is verified, anything before.
begin;
select plan(10);

insert into auth.users (id, email) values ('00000000-0000-4000-8000-0000000aa101', 'admin-aal@example.com');
select is(auth.admin_aal_ok('00000000-0000-4000-8000-0000000aa101', 'aal1'), true, 'no factor: aal1 passes');
select is(auth.admin_aal_ok('00000000-0000-4000-8000-0000000aa101', null), true, 'no factor: no aal passes');
insert into auth_private.mfa_factors (user_id, secret) values ('00000000-0000-4000-8000-0000000aa101', '\x00');
select is(auth.admin_aal_ok('00000000-0000-4000-8000-0000000aa101', 'aal1'), true, 'an unverified factor: aal1 still passes');
update auth_private.mfa_factors set status = 'verified' where user_id = '00000000-0000-4000-8000-0000000aa101';
select is(auth.admin_aal_ok('00000000-0000-4000-8000-0000000aa101', 'aal1'), false, 'a verified factor: aal1 is refused');
select is(auth.admin_aal_ok('00000000-0000-4000-8000-0000000aa101', 'aal2'), true, 'a verified factor: aal2 passes');

select is((select status from auth.update_user('00000000-0000-4000-8000-0000000aa101', null, 'new-hash', null, null, null, 'aal1')),
  'insufficient_aal', 'update_user: a password change at aal1');
select is((select status from auth.update_user('00000000-0000-4000-8000-0000000aa101', 'moved@example.com', null, null, null, null, 'aal1')),
  'insufficient_aal', 'update_user: an email change at aal1');
select is((select status from auth.update_user('00000000-0000-4000-8000-0000000aa101', 'ADMIN-AAL@example.com', null, '{"a": 1}', null, null, 'aal1')),
  'ok', 'update_user: the same address and metadata at aal1');
select is((select status from auth.update_user('00000000-0000-4000-8000-0000000aa101', 'moved@example.com', 'new-hash', null, null, null, 'aal2')),
  'ok', 'update_user: both at aal2');
select is((select email from auth.users where id = '00000000-0000-4000-8000-0000000aa101'), 'moved@example.com', 'the address moved');

select * from finish();
rollback;
