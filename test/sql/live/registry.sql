-- The live-query registry: who may register, what a query may be, what is stored, and
-- which tables carry triggers (contract §5 "Live queries").
begin;
select plan(38);

create table public.items (id int primary key, v text, n int);
insert into public.items select g, 'x' || g, g % 10 from generate_series(1, 5) g;
create table public.others (id int primary key, item_id int);
create table public.quiet (id int primary key);
-- The service role reaches public's tables by default; these tests need it without a grant.
revoke all on public.items, public.others from service_role;
create view public.items_view as select * from public.items;

-- Privileges
select ok(has_function_privilege('service_role', 'live.subscribe(text, text, text, jsonb, jsonb)', 'execute'), 'service_role may subscribe');
select ok(has_function_privilege('service_role', 'live.unsubscribe(text)', 'execute'), 'service_role may unsubscribe');
select ok(not has_function_privilege('anon', 'live.subscribe(text, text, text, jsonb, jsonb)', 'execute'), 'anon may not subscribe');
select ok(not has_function_privilege('authenticated', 'live.unsubscribe(text)', 'execute'), 'authenticated may not unsubscribe');
select ok(not has_schema_privilege('anon', 'live_private', 'usage'), 'anon cannot use live_private');
select ok(not has_table_privilege('service_role', 'live_private.subscriptions', 'select'), 'the registry is not readable by service_role');

-- Registration stores the first snapshot, its layout and its tables
select lives_ok($$select live.subscribe('a', 'select id, v from items where n < 3;')$$, 'a filter over one table');
select is((select snapshot from live_private.subscriptions where query_id = 'a'), '[{"id": 1, "v": "x1"}, {"id": 2, "v": "x2"}]'::jsonb, 'the first snapshot is the result');
select is((select layout from live_private.subscriptions where query_id = 'a'), array['id', 'v'], 'with its column layout');
select is((select tables from live_private.subscriptions where query_id = 'a'), array['public.items'::regclass::oid], 'its tables come from the catalog');
select is((select seq from live_private.subscriptions where query_id = 'a'), 0::bigint, 'seq starts before 1');
select is((select fast_table from live_private.subscriptions where query_id = 'a'), 'public.items'::regclass::oid, 'a filter over one table takes the fast path');
select is((select registered_by::text from live_private.subscriptions where query_id = 'a'), current_user::text, 'the registering role is recorded');

select lives_ok($$select live.subscribe('b', 'select i.id, o.id as oid from items i join others o on o.item_id = i.id')$$, 'a join');
select is((select array_length(tables, 1) from live_private.subscriptions where query_id = 'b'), 2, 'both tables of a join are found');
select is((select fast_table from live_private.subscriptions where query_id = 'b'), null, 'a join re-runs the query');
select lives_ok($$select live.subscribe('c', 'select count(*) from items', 'notify')$$, 'an aggregate, notify mode');
select is((select fast_table from live_private.subscriptions where query_id = 'c'), null, 'an aggregate re-runs the query');
select lives_ok($$select live.subscribe('d', 'select id from public.items where id in (select item_id from others)')$$, 'a sublink');
select is((select fast_table from live_private.subscriptions where query_id = 'd'), null, 'a sublink re-runs the query');
select lives_ok($$select live.subscribe('e', 'select id from items order by id limit 2')$$, 'a limit');
select is((select fast_table from live_private.subscriptions where query_id = 'e'), null, 'a limit re-runs the query');

-- Refusals
select throws_ok($$select live.subscribe('x', 'insert into items values (99, ''z'', 0) returning id')$$, '22023', 'live query must be one SELECT statement', 'DML is refused');
select throws_ok($$select live.subscribe('x', 'select 1 from items; drop table items')$$, '22023', 'live query must be one SELECT statement', 'a second statement is refused');
select throws_ok($$select live.subscribe('x', 'with d as (delete from items returning *) select * from d')$$, '22023', 'live query must be one SELECT statement', 'a data-modifying WITH is refused');
select throws_ok($$select live.subscribe('x', 'select 1')$$, '22023', 'live query must read at least one table of the public schema', 'a query over no table is refused');
select throws_ok($$select live.subscribe('x', 'select oid from pg_catalog.pg_class')$$, '22023', 'live query must read tables of the public schema only (not pg_class)', 'a catalog table is refused');
select throws_ok($$select live.subscribe('x', 'select id from items_view')$$, '22023', 'live query must read tables of the public schema only (not items_view)', 'a view is refused');
select throws_ok($$select live.subscribe('x', 'select id from items', 'push')$$, '22023', 'mode must be delta or notify', 'an unknown mode is refused');
select throws_ok($$select live.subscribe('x', 'select id from items', 'delta', '[1]')$$, '22023', 'audience must be a JSON object or null', 'a non-object audience is refused');
select throws_ok($$select live.subscribe('a/b', 'select id from items')$$, '22023', null, 'a query_id with / is refused');
select is((select count(*) from live_private.subscriptions where query_id in ('x', 'a/b')), 0::bigint, 'nothing refused was stored');

-- As service_role the caller's rights decide
select tests.act_as('service_role');
select throws_ok($$select live.subscribe('y', 'select id from items')$$, '42501', null, 'service_role cannot register a table it may not read');
select tests.reset_role();
grant select on public.items to service_role;
select tests.act_as('service_role');
select lives_ok($$select live.subscribe('y', 'select id from items')$$, 'once granted, it can');
select tests.reset_role();

-- The definer half cannot be used to claim another role's rights
create role live_tester noinherit;
grant service_role to live_tester;
set session authorization live_tester;
set role service_role;
select throws_ok($$select live_private.register('z', 'select id from others', 'delta', null, 'postgres')$$, '42501',
  'live query must be registered by a role the session may act as', 'register refuses a registering role the session cannot act as');
reset role;
reset session authorization;
select throws_ok($$select live_private.register('z', 'select id from others', 'delta', null, 'service_role')$$, '42501',
  'permission denied for table others', 'register checks the registering role may read every table');

-- Triggers: only on watched tables
select is((select count(*) from pg_trigger where tgrelid = 'public.quiet'::regclass), 0::bigint, 'a table nobody watches has no trigger');
select is((select array_agg(tgname::text order by tgname) from pg_trigger where tgrelid = 'public.items'::regclass),
  array['_900_live_delete', '_900_live_insert', '_900_live_truncate', '_900_live_update'], 'a watched table has four statement triggers');

select * from finish();
rollback;
