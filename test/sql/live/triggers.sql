-- Trigger installation and removal, and how the trigger function is defined (design.md:
-- SECURITY DEFINER, owned by the migration role, pinned search_path).
begin;
select plan(14);

create table public.t1 (id int primary key);
create table public.t2 (id int primary key);
select live.subscribe('one', 'select id from t1');
select live.subscribe('two', 'select t1.id from t1 join t2 using (id)');
select is((select count(*) from pg_trigger where tgrelid = 'public.t2'::regclass and tgname like '\_900\_live\_%'), 4::bigint, 't2 is watched by a join');
select live.unsubscribe('two');
select is((select count(*) from pg_trigger where tgrelid = 'public.t2'::regclass), 0::bigint, 'its last subscription gone, t2 loses its triggers');
select is((select count(*) from pg_trigger where tgrelid = 'public.t1'::regclass), 4::bigint, 't1 keeps them while another subscription reads it');
select is(live.unsubscribe('one'), true, 'unsubscribe answers true for a known id');
select is((select count(*) from pg_trigger where tgrelid = 'public.t1'::regclass), 0::bigint, 'and removes the last triggers');
select is(live.unsubscribe('one'), false, 'false for an unknown id');
select live.subscribe('again', 'select id from t1');
select live.subscribe('again', 'select id from t2');
select is((select count(*) from pg_trigger where tgrelid = 'public.t1'::regclass), 0::bigint, 'replacing a subscription moves its triggers');

select is((select count(*) from pg_proc where proname = 'tg__changed_' || 'public.t1'::regclass::oid), 0::bigint, 'the generated function of an unwatched table is gone');
select is((select count(distinct tgfoid) from pg_trigger where tgrelid = 'public.t2'::regclass), 1::bigint, 'the four triggers call one generated function');
create temp table f as select tgfoid as oid from pg_trigger where tgrelid = 'public.t2'::regclass limit 1;
select is((select proname::text from pg_proc where oid = (select oid from f)), 'tg__changed_' || 'public.t2'::regclass::oid, 'named after the table');
select is((select prosecdef from pg_proc where oid = (select oid from f)), true, 'the trigger function is security definer');
select ok((select proconfig from pg_proc where oid = (select oid from f)) @> array['search_path=pg_catalog, public, pg_temp'], 'with a pinned search_path');
select is((select proowner::regrole::text from pg_proc where oid = (select oid from f)),
          (select nspowner::regrole::text from pg_namespace where nspname = 'live_private'), 'owned by the migration role');
select ok(not has_function_privilege('anon', (select oid from f), 'execute'), 'not executable by API roles');

select * from finish();
rollback;
