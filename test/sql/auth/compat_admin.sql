-- SUPABASE_COMPAT: the admin API's GoTrue shapes: a paged list newest first with the total; createUser with metadata.
begin;
select plan(9);

select is((select status from auth.compat_admin_create_user('a@example.com', null, 'authenticated', true, '{"n": 1}', '{"plan": "pro", "provider": "x"}')),
  'ok', 'created');
create temp table a as select user_json from auth.compat_admin_create_user('b@example.com', 'hash', 'authenticated', false, null, null);
select is((select user_json ->> 'aud' from a), 'authenticated', 'a GoTrue User');
select is((select user_metadata from auth.users where email = 'a@example.com'), '{"n": 1}'::jsonb, 'user_metadata set');
select is((select app_metadata from auth.users where email = 'a@example.com'), '{"plan": "pro"}'::jsonb, 'app_metadata set, provider left to the server');
select is((select auth.compat_user(id) -> 'app_metadata' from auth.users where email = 'a@example.com'),
  '{"plan": "pro", "provider": "email", "providers": ["email"]}'::jsonb, 'the User''s app_metadata: what the admin set and the provider');
select is((select status from auth.compat_admin_create_user('A@example.com', null, 'authenticated', false, null, null)), 'email_taken', 'a taken address');
update auth.users set created_at = now() - interval '1 day' where email = 'a@example.com';

select is((select total from auth.compat_list_users(1, 1)), (select count(*) from auth.users), 'the total');
select is((select users -> 0 ->> 'email' from auth.compat_list_users(1, 1)), (select email from auth.users order by created_at desc, id desc limit 1), 'newest first');
select is((select jsonb_array_length(users) from auth.compat_list_users(1000, 50)), 0, 'past the last page: none');

select * from finish();
rollback;
