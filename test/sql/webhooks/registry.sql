-- The webhook registry: create (defaults, validation), list (no secrets), delete, and the
-- trigger lifecycle: installed with the first webhook of a table, shared, removed with the last,
-- its arguments (the webhooks of INSERT, UPDATE, DELETE) kept in line with the registry.
begin;
select plan(31);

create table public.wh_a (id int primary key, v text);
create table public.wh_b (id int primary key);
create view public.wh_v as select * from public.wh_a;

create function pg_temp.has_trigger(t text) returns boolean language sql as $$
  select exists (select 1 from pg_trigger where tgrelid = ('public.' || t)::regclass and tgname = '_900_plinth_webhooks')
$$;
-- The trigger's arguments as the urls of the webhooks they name, sorted (one transaction: one created_at): one text per operation.
create function pg_temp.args(t text) returns text[] language sql as $$
  select array(
    select coalesce((select string_agg(h.url, ' ' order by h.url) from unnest(a.arg::uuid[]) w(id)
                      join webhooks_private.hooks h on h.id = w.id), '')
      from pg_trigger g cross join lateral unnest(string_to_array(encode(g.tgargs, 'escape'), '\000')) with ordinality a(arg, n)
     where a.arg <> '' and g.tgrelid = ('public.' || t)::regclass and g.tgname = '_900_plinth_webhooks'
     order by a.n)
$$;

select is((select status from webhooks.create_hook('ftp://x', null, null, null)), 'invalid_url', 'ftp is refused');
select is((select status from webhooks.create_hook(null, null, null, null)), 'invalid_url', 'a url is required');
select is((select status from webhooks.create_hook('http://x.test', '{}', null, null)), 'invalid_events', 'no events is refused');
select is((select status from webhooks.create_hook('http://x.test', '{TRUNCATE}', null, null)), 'invalid_events', 'TRUNCATE is refused');
select is((select status from webhooks.create_hook('http://x.test', null, 'nope', null)), 'table_not_found', 'an unknown table');
select is((select status from webhooks.create_hook('http://x.test', null, 'wh_v', null)), 'table_not_found', 'a view is not a table');
select is((select status from webhooks.create_hook('http://x.test', null, 'users', null)), 'table_not_found', 'auth.users is not in public');
select is((select count(*)::int from webhooks_private.hooks), 0, 'nothing created by bad input');

select is((select hook->>'table_name' from webhooks.create_hook('http://x.test/all', null, null, null)), '*', 'table_name defaults to *');
select is((select events from webhooks_private.hooks where url = 'http://x.test/all'), '{*}'::text[], 'events default to {*}');
select is((select secret from webhooks_private.hooks where url = 'http://x.test/all'), '', 'secret defaults to empty');
select ok(not pg_temp.has_trigger('wh_a') and not pg_temp.has_trigger('wh_b'), 'a * webhook installs no trigger');

select is((select status from webhooks.create_hook('http://x.test/a1', '{INSERT}', 'wh_a', 'k1')), 'ok', 'a webhook on wh_a');
select ok(pg_temp.has_trigger('wh_a'), 'its trigger is installed');
select ok(not pg_temp.has_trigger('wh_b'), 'other tables stay untouched');
select is((select status from webhooks.create_hook('http://x.test/a2', '{UPDATE,DELETE}', 'wh_a', null)), 'ok', 'a second webhook on wh_a');
select is((select count(*)::int from pg_trigger where tgrelid = 'public.wh_a'::regclass and not tgisinternal), 1, 'one trigger shared');
select is(pg_temp.args('wh_a'), array['http://x.test/a1 http://x.test/all', 'http://x.test/a2 http://x.test/all', 'http://x.test/a2 http://x.test/all'],
  'its arguments name the webhooks of INSERT, UPDATE and DELETE, the * one included');
select is((select status from webhooks.create_hook('http://x.test/star-ins', '{INSERT}', '*', null)), 'ok', 'a * INSERT webhook');
select is(pg_temp.args('wh_a'), array['http://x.test/a1 http://x.test/all http://x.test/star-ins', 'http://x.test/a2 http://x.test/all', 'http://x.test/a2 http://x.test/all'],
  'a * webhook joins the arguments of every watched table''s trigger');
update webhooks_private.hooks set active = false where url = 'http://x.test/all';
select is(pg_temp.args('wh_a'), array['http://x.test/a1 http://x.test/star-ins', 'http://x.test/a2', 'http://x.test/a2'],
  'a paused webhook (active = false, a DBA''s own SQL) leaves the arguments');
update webhooks_private.hooks set active = true where url = 'http://x.test/all';
select is(webhooks.delete_hook((select id from webhooks_private.hooks where url = 'http://x.test/star-ins')), 'ok', 'delete the * INSERT webhook');
select is(pg_temp.args('wh_a'), array['http://x.test/a1 http://x.test/all', 'http://x.test/a2 http://x.test/all', 'http://x.test/a2 http://x.test/all'],
  'and it leaves the arguments');
select is((select count(*)::int from pg_trigger where tgrelid = 'public.wh_a'::regclass and not tgisinternal), 1, 'still one trigger');

select is(jsonb_array_length(webhooks.list_hooks()), 3, 'the list has all three');
select ok(not webhooks.list_hooks()::text like '%k1%' and not webhooks.list_hooks()::text like '%secret%', 'no secret in the list');

select is(webhooks.delete_hook((select id from webhooks_private.hooks where url = 'http://x.test/a1')), 'ok', 'delete one of two');
select ok(pg_temp.has_trigger('wh_a'), 'the trigger stays while a webhook remains');
select is(webhooks.delete_hook((select id from webhooks_private.hooks where url = 'http://x.test/a2')), 'ok', 'delete the last');
select ok(not pg_temp.has_trigger('wh_a'), 'the last webhook takes the trigger');
select is(webhooks.delete_hook('00000000-0000-4000-8000-000000000000'), 'not_found', 'an unknown id');

select * from finish();
rollback;
