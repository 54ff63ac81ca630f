-- The trigger: transactional enqueue (a rolled-back change enqueues nothing), the matching
-- rules (events, table, *, inactive), the body of each event, and the rights it needs
-- (none: anon writes a watched table without any right on webhooks_private or graphile_worker).
begin;
select plan(16);

create table public.wh_t (id int primary key, v text);
create table public.wh_u (id int primary key);
grant select, insert, update, delete on public.wh_t to anon;

create function pg_temp.jobs() returns setof json language sql as $$
  select j.payload from graphile_worker._private_jobs j join graphile_worker._private_tasks k on k.id = j.task_id
   where k.identifier = 'webhooks__deliver' order by j.id
$$;
create function pg_temp.urls() returns text[] language sql as $$
  select coalesce(array_agg(h.url order by h.url), '{}') from pg_temp.jobs() p join webhooks_private.hooks h on h.id = (p->>'w')::uuid
$$;

select is((select status from webhooks.create_hook('http://x.test/ins', '{INSERT}', 'wh_t', null)), 'ok', 'an INSERT webhook on wh_t');
select is((select status from webhooks.create_hook('http://x.test/any', null, 'wh_t', null)), 'ok', 'a * events webhook on wh_t');
select is((select status from webhooks.create_hook('http://x.test/star-del', '{DELETE}', '*', null)), 'ok', 'a DELETE webhook on every table');
select is((select status from webhooks.create_hook('http://x.test/other', null, 'wh_u', null)), 'ok', 'a webhook on wh_u');

savepoint before_insert;
insert into public.wh_t values (1, 'rolled back');
select is(cardinality(pg_temp.urls()), 2, 'an insert enqueues, inside the transaction');
rollback to savepoint before_insert;
select is(cardinality(pg_temp.urls()), 0, 'a rolled-back insert leaves no job');

insert into public.wh_t values (1, 'a');
select is(pg_temp.urls(), '{http://x.test/any,http://x.test/ins}', 'INSERT: the INSERT and * webhooks of the table');
select is((select (p->>'b')::jsonb from pg_temp.jobs() p limit 1), '{"event": "INSERT", "table": "wh_t", "record": {"id": 1, "v": "a"}}'::jsonb, 'INSERT body: record only');
select is((select count(distinct p->>'d')::int from pg_temp.jobs() p), 2, 'one delivery id per webhook');
delete from graphile_worker._private_jobs;

update public.wh_t set v = 'b';
select is(pg_temp.urls(), '{http://x.test/any}', 'UPDATE: only the * events webhook');
select is((select (p->>'b')::jsonb from pg_temp.jobs() p), '{"event": "UPDATE", "table": "wh_t", "record": {"id": 1, "v": "b"}, "old_record": {"id": 1, "v": "a"}}'::jsonb, 'UPDATE body: record and old_record');
delete from graphile_worker._private_jobs;

delete from public.wh_t;
select is(pg_temp.urls(), '{http://x.test/any,http://x.test/star-del}', 'DELETE: the table''s * webhook and the * table DELETE webhook');
select is((select (p->>'b')::jsonb from pg_temp.jobs() p limit 1), '{"event": "DELETE", "table": "wh_t", "old_record": {"id": 1, "v": "b"}}'::jsonb, 'DELETE body: old_record only');
delete from graphile_worker._private_jobs;

update webhooks_private.hooks set active = false where url = 'http://x.test/any';
insert into public.wh_t values (2, 'c');
select is(pg_temp.urls(), '{http://x.test/ins}', 'an inactive webhook gets nothing');
delete from graphile_worker._private_jobs;

select tests.act_as('anon');
insert into public.wh_t values (3, 'by anon');
select tests.reset_role();
select is(pg_temp.urls(), '{http://x.test/ins}', 'anon writes a watched table without rights on the private schemas');
delete from graphile_worker._private_jobs;

select is(has_schema_privilege('anon', 'webhooks_private', 'usage') or has_schema_privilege('service_role', 'webhooks_private', 'usage'), false, 'API roles have no USAGE on webhooks_private');

select * from finish();
rollback;
