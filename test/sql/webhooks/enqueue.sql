-- The trigger: transactional enqueue into the outbox (a rolled-back change leaves no row), the
-- matching rules (events, table, *, inactive), the body of each event, the request id, the
-- rights it needs (none: anon writes a watched table without any right on webhooks_private or
-- graphile_worker), and the drain's poll that takes due rows as batches of attempts, one per webhook.
begin;
select plan(30);

create table public.wh_t (id int primary key, v text);
create table public.wh_u (id int primary key);
grant select, insert, update, delete on public.wh_t to anon;

-- The urls of the webhooks named by the outbox rows, sorted.
create function pg_temp.urls() returns text[] language sql as $$
  select coalesce(array_agg(h.url order by h.url), '{}')
    from webhooks_private.outbox o cross join lateral unnest(o.hooks) w(id) join webhooks_private.hooks h on h.id = w.id
$$;
create function pg_temp.body() returns jsonb language sql as $$
  select o.body::jsonb from webhooks_private.outbox o
$$;
-- An instance's poll (claim_batches): the rows it took.
create temp table claimed (c jsonb);
create function pg_temp.claim(lim int, inst uuid default '00000000-0000-4000-8000-0000000000a0') returns int language sql as $$
  insert into claimed select webhooks_private.claim_batches(lim, inst) returning (c->>'taken')::int
$$;

select is((select status from webhooks.create_hook('http://x.test/ins', '{INSERT}', 'wh_t', null)), 'ok', 'an INSERT webhook on wh_t');
select is((select status from webhooks.create_hook('http://x.test/any', null, 'wh_t', null)), 'ok', 'a * events webhook on wh_t');
select is((select status from webhooks.create_hook('http://x.test/star-del', '{DELETE}', '*', null)), 'ok', 'a DELETE webhook on every table');
select is((select status from webhooks.create_hook('http://x.test/other', null, 'wh_u', null)), 'ok', 'a webhook on wh_u');

savepoint before_insert;
insert into public.wh_t values (1, 'rolled back');
select is(pg_temp.urls(), '{http://x.test/any,http://x.test/ins}', 'an insert appends to the outbox, inside the transaction');
rollback to savepoint before_insert;
select is((select count(*)::int from webhooks_private.outbox), 0, 'a rolled-back insert leaves no outbox row');

insert into public.wh_t values (1, 'a');
select is(pg_temp.urls(), '{http://x.test/any,http://x.test/ins}', 'INSERT: the INSERT and * webhooks of the table');
select is((select count(*)::int from webhooks_private.outbox), 1, 'one outbox row per changed row, naming every matching webhook');
select is(pg_temp.body(), '{"event": "INSERT", "table": "wh_t", "record": {"id": 1, "v": "a"}}'::jsonb, 'INSERT body: record only');
select is(
  (select row(o.event, o.table_name, o.delivery_id, o.attempt, o.created_at = now(), o.due_at <= now(), o.request_id)::text from webhooks_private.outbox o),
  row('INSERT', 'wh_t', null::uuid, 1, true, true, null::text)::text,
  'the row: event, table, no delivery id yet, attempt 1, the change''s time, due at once, no request');

-- The poll: the due row becomes one batch per webhook, each attempt with its own delivery id.
select is(pg_temp.claim(100), 1, 'the poll takes the due row');
select is((select count(*)::int from webhooks_private.outbox), 0, 'and deletes it from the outbox');
select is((select count(*)::int from webhooks_private.batches where instance_id = '00000000-0000-4000-8000-0000000000a0'), 2, 'one batch per matching webhook, the instance''s');
select is(
  (select array_agg(b->>'url' order by b->>'url') || array[count(distinct i->>'d')::text, count(*)::text]
     from claimed c cross join lateral jsonb_array_elements(c.c->'batches') b cross join lateral jsonb_array_elements(b->'items') i
    where (i->>'n')::int = 1 and (i->>'b')::jsonb = '{"event": "INSERT", "table": "wh_t", "record": {"id": 1, "v": "a"}}'::jsonb
      and (b->>'webhook')::uuid = (i->>'w')::uuid and b->>'repeat' = 'false'),
  '{http://x.test/any,http://x.test/ins,2,2}', 'each batch carries attempt 1 of the body for its webhook (with its url), under a delivery id of its own');
select is(pg_temp.claim(100), 0, 'a taken row is not taken again');
delete from webhooks_private.batches;

update public.wh_t set v = 'b';
select is(pg_temp.urls(), '{http://x.test/any}', 'UPDATE: only the * events webhook');
select is(pg_temp.body(), '{"event": "UPDATE", "table": "wh_t", "record": {"id": 1, "v": "b"}, "old_record": {"id": 1, "v": "a"}}'::jsonb, 'UPDATE body: record and old_record');
delete from webhooks_private.outbox;

delete from public.wh_t;
select is(pg_temp.urls(), '{http://x.test/any,http://x.test/star-del}', 'DELETE: the table''s * webhook and the * table DELETE webhook');
select is(pg_temp.body(), '{"event": "DELETE", "table": "wh_t", "old_record": {"id": 1, "v": "b"}}'::jsonb, 'DELETE body: old_record only');
delete from webhooks_private.outbox;

update webhooks_private.hooks set active = false where url = 'http://x.test/any';
select set_config('request.id', 'req-1', true);
insert into public.wh_t values (2, 'c');
select is((select array[h.url, o.request_id] from webhooks_private.outbox o join webhooks_private.hooks h on h.id = any (o.hooks)),
  '{http://x.test/ins,req-1}', 'an inactive webhook gets nothing; the row carries the request id');
select set_config('request.id', '', true);
delete from webhooks_private.outbox;

select tests.act_as('anon');
insert into public.wh_t values (3, 'by anon');
select tests.reset_role();
select is(pg_temp.urls(), '{http://x.test/ins}', 'anon writes a watched table without rights on the private schemas');
delete from webhooks_private.outbox;

select is(has_schema_privilege('anon', 'webhooks_private', 'usage') or has_schema_privilege('service_role', 'webhooks_private', 'usage')
  or has_table_privilege('anon', 'webhooks_private.outbox', 'insert'), false, 'API roles have no USAGE on webhooks_private nor a right on the outbox');

-- A trigger made by hand, without arguments, looks its webhooks up in the registry.
create table public.wh_h (id int primary key);
insert into public.wh_h values (1);
create trigger by_hand after insert or update or delete on public.wh_h for each row execute function webhooks_private.tg__enqueue();
insert into public.wh_h values (2);
select is((select count(*)::int from webhooks_private.outbox), 0, 'a trigger without arguments: an INSERT no webhook matches leaves nothing');
delete from public.wh_h where id = 1;
select is(pg_temp.urls(), '{http://x.test/star-del}', 'and a DELETE reaches the * DELETE webhook');
delete from webhooks_private.outbox;

-- An instance's poll records it awake while it takes rows (writers then send no wake-up) and
-- no longer once a poll takes none.
insert into public.wh_t values (4, 'd');
select is(pg_temp.claim(100, '00000000-0000-4000-8000-0000000000a1'), 1, 'an instance''s poll takes the due row');
select ok((select d.awake_until > clock_timestamp() from webhooks_private.drains d where d.instance_id = '00000000-0000-4000-8000-0000000000a1'),
  'and records the instance awake');
select is(pg_temp.claim(100, '00000000-0000-4000-8000-0000000000a1'), 0, 'its next poll takes none');
select is((select count(*)::int from webhooks_private.drains), 0, 'and the instance is no longer recorded awake');

-- A stopping instance is no longer awake at once (its attempts given back then wake the others).
insert into public.wh_t values (5, 'e');
select is(pg_temp.claim(100, '00000000-0000-4000-8000-0000000000a1'), 1, 'a poll takes a row: awake again');
select webhooks_private.drain_stopped('00000000-0000-4000-8000-0000000000a1');
select is((select count(*)::int from webhooks_private.drains), 0, 'drain_stopped: no longer recorded awake');

select * from finish();
rollback;
