-- A lane's failure is not the live query's (broken.sql, live_private.transient): a group's
-- re-run or a table subscription's batch that failed for want of a connection is run again
-- at the next poll; the query's own error marks the subscription broken.
begin;
select plan(22);

select ok(live_private.transient('DB_BUSY|no database connection became free in time'), 'the budget spent: the lane''s');
select ok(live_private.transient('CONNECTION_ENDED|write CONNECTION_ENDED'), 'the driver''s own code');
select ok(live_private.transient('ECONNRESET|read ECONNRESET'), 'the socket''s');
select ok(live_private.transient('EPIPE|write EPIPE'), 'five letters, but no SQLSTATE class');
select ok(live_private.transient('08006|connection failure'), 'a connection lost (08)');
select ok(live_private.transient('40P01|deadlock detected'), 'a deadlock (40)');
select ok(live_private.transient('53300|too many connections for role'), 'out of resources (53)');
select ok(live_private.transient('57P01|terminating connection due to administrator command'), 'shutting down (57P)');
select ok(live_private.transient('55P03|could not obtain lock'), 'a lock not available');
select ok(not live_private.transient('57014|canceling statement due to statement timeout'), 'a statement timeout is the query''s');
select ok(not live_private.transient('42703|column "x" does not exist'), 'a column gone is the query''s');
select ok(not live_private.transient('P0001|raised by the query'), 'a raise is the query''s');
select ok(not live_private.transient('XX000|no code'), 'an error without a code is the query''s');

-- A group of an as-subscriber subscription, leased to an instance.
create table public.tr (id int primary key, v text);
insert into public.tr values (1, 'a');
grant select on public.tr to authenticated;
select live.subscribe('tr', 'select id, v from tr', 'delta', null, '{"as": "subscriber"}');
insert into live_private.groups (query_id, key, role, claims, snapshot, snap, seq, lease_owner, lease_until)
values ('tr', 'k1', 'authenticated', '{"role": "authenticated"}', '[{"id": 1, "v": "a"}]', pg_current_snapshot(), 3,
        '00000000-0000-0000-0000-0000000000aa', now() + interval '15 seconds');
select live_private.publish_groups('00000000-0000-0000-0000-0000000000aa', array[(select id from live_private.groups where key = 'k1')],
                                   array[null]::jsonb[], array['DB_BUSY|no database connection became free in time']);
select is((select broken from live_private.subscriptions where query_id = 'tr'), null, 'the lane''s failure: the subscription still works');
select is((select row(dirty, lease_owner, seq)::text from live_private.groups where key = 'k1'), '(t,,3)', 'the group is released, to be run again, its seq unmoved');
update live_private.groups set dirty = false, lease_owner = '00000000-0000-0000-0000-0000000000aa' where key = 'k1';
select live_private.publish_groups('00000000-0000-0000-0000-0000000000aa', array[(select id from live_private.groups where key = 'k1')],
                                   array[null]::jsonb[], array['42703|column "v" does not exist']);
select is((select broken from live_private.subscriptions where query_id = 'tr'), 'column "v" does not exist', 'the query''s error: broken, with the database''s message');

-- A table subscription's batch: one group's lane failed.
create table public.rtt (id int primary key);
grant select on public.rtt to authenticated;
create temp table j as
  select * from live_private.realtime_join('00000000-0000-0000-0000-0000000000bb', 'rtt', 'authenticated', '{"role": "authenticated"}');
insert into public.rtt values (1);
update live_private.subscriptions set lease_owner = '00000000-0000-0000-0000-0000000000aa', lease_until = now() + interval '15 seconds'
 where query_id = (select query_id from j);
create temp table before as select changes_snap::text as snap from live_private.subscriptions where query_id = (select query_id from j);
select live_private.realtime_done('00000000-0000-0000-0000-0000000000aa', (select query_id from j), pg_current_snapshot()::text,
                                  array[(select group_id from j)], array['[{"t": "INSERT"}]']::jsonb[], array['57P01|terminating connection']);
select is((select broken from live_private.subscriptions where query_id = (select query_id from j)), null, 'the lane''s failure: the table subscription still works');
select is((select changes_snap::text from live_private.subscriptions where query_id = (select query_id from j)), (select snap from before), 'its cursor stays');
select is((select lease_owner from live_private.subscriptions where query_id = (select query_id from j)), null, 'its lease is released');
select is((select seq from live_private.groups where id = (select group_id from j)), 0::bigint, 'nothing was published');
select is((select count(*) from live_private.changes where query_id = (select query_id from j)), 1::bigint, 'the change waits for the next poll');
update live_private.subscriptions set lease_owner = '00000000-0000-0000-0000-0000000000aa', lease_until = now() + interval '15 seconds'
 where query_id = (select query_id from j);
select live_private.realtime_done('00000000-0000-0000-0000-0000000000aa', (select query_id from j), pg_current_snapshot()::text,
                                  array[(select group_id from j)], array[null]::jsonb[], array['P0001|raised']);
select is((select broken from live_private.subscriptions where query_id = (select query_id from j)), 'raised', 'the query''s error: broken');

select * from finish();
rollback;
