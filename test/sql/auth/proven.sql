-- The proven-address mark for accounts from before it existed: auth_private.backfill_proven_emails
-- marks only accounts whose record shows a proof of their current address and no change since.
begin;
select plan(9);

delete from auth_private.proven_emails;
create function pg_temp.account(p_email text, p_created timestamptz, p_confirmed timestamptz, p_updated timestamptz,
  p_provider text, p_providers text[]) returns uuid language sql as $$
  insert into auth.users (email, created_at, email_confirmed_at, updated_at, provider, providers)
    values (p_email, p_created, p_confirmed, p_updated, p_provider, p_providers) returning id
$$;
select pg_temp.account('autoconfirmed@example.com', '2025-01-01', '2025-01-01', '2025-01-01', null, '{email}');
select pg_temp.account('verified@example.com', '2025-01-01', '2025-01-02', '2025-01-02', null, '{email}');
select pg_temp.account('verified-then-patched@example.com', '2025-01-01', '2025-01-02', '2025-01-03', null, '{email}');
select pg_temp.account('oauth-made@example.com', '2025-01-01', '2025-01-01', '2025-01-01', 'google', '{google}');
select pg_temp.account('oauth-made-then-patched@example.com', '2025-01-01', '2025-01-01', '2025-01-05', 'google', '{google}');
select pg_temp.account('linked-to-autoconfirmed@example.com', '2025-01-01', '2025-01-01', '2025-01-04', 'google', '{email,google}');
select pg_temp.account('awaiting@example.com', '2025-01-01', null, '2025-01-01', null, '{email}');
select pg_temp.account('token-proven@example.com', '2025-01-01', '2025-01-01', '2025-01-06', null, '{email}');
insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at, used_at)
  select sha256('bf-1'), id, 'magic_link', 'token-proven@example.com', now(), now() - interval '1 hour' from auth.users where email = 'token-proven@example.com';
select pg_temp.account('token-for-old-address@example.com', '2025-01-01', '2025-01-01', '2025-01-06', null, '{email}');
insert into auth_private.one_time_tokens (token_hash, user_id, kind, email, expires_at, used_at)
  select sha256('bf-2'), id, 'recovery', 'the-old-address@example.com', now(), now() - interval '1 hour' from auth.users where email = 'token-for-old-address@example.com';
select auth.admin_create_user('admin-made@example.com', null, 'authenticated', true);

select is(auth_private.backfill_proven_emails(), 3::bigint, 'three accounts are marked');
create temp view marked as select u.email, p.proof from auth.users u left join auth_private.proven_emails p on p.user_id = u.id;
select is((select proof from marked where email = 'verified@example.com'), 'legacy', 'confirmed after sign-up and unchanged since: proven');
select is((select proof from marked where email = 'oauth-made@example.com'), 'legacy', 'made by an OAuth sign-in and unchanged: proven');
select is((select proof from marked where email = 'token-proven@example.com'), 'magic_link', 'a used token bound to the current address: proven');
select is((select array_agg(email order by email) from marked where proof is null and email in
    ('autoconfirmed@example.com', 'verified-then-patched@example.com', 'oauth-made-then-patched@example.com',
     'linked-to-autoconfirmed@example.com', 'awaiting@example.com', 'token-for-old-address@example.com', 'admin-made@example.com')),
  '{admin-made@example.com,autoconfirmed@example.com,awaiting@example.com,linked-to-autoconfirmed@example.com,oauth-made-then-patched@example.com,token-for-old-address@example.com,verified-then-patched@example.com}'::text[],
  'auto-confirmed, changed since, awaiting confirmation, a token of an old address, admin-made: not proven');
select is((select proof from marked where email = 'linked-to-autoconfirmed@example.com'), null,
  'an auto-confirmed account linked to a provider before the mark existed waits for its next proof');
select is(auth_private.backfill_proven_emails(), 0::bigint, 'a second run marks nothing more');

-- the mark follows the address
select is((select status from auth.update_user((select id from auth.users where email = 'verified@example.com'), 'moved@example.com', null, null, null)), 'ok', 'a PATCH moves the account');
select is((select proof from marked where email = 'moved@example.com'), null, 'the moved address is not proven');

select * from finish();
rollback;
