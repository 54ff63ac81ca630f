-- The diff: after each statement on a watched table, one NOTIFY per changed subscription
-- (delta, invalidated or overflow), with seq counting messages only (contract §5,
-- interface §6.2, §8). The changes commit (autocommit) so their notifications are sent; a
-- dblink session listens. This file runs on its own database clone.
select plan(30);

select dblink_connect('listener', format('host=127.0.0.1 port=%s dbname=%s user=%s', current_setting('port'), current_database(), current_user));
select dblink_exec('listener', 'listen lqs');
-- The service's poller, by hand: re-runs (off the writer's path) commit on their own session.
select dblink_connect('poller', format('host=127.0.0.1 port=%s dbname=%s user=%s', current_setting('port'), current_database(), current_user));

-- The messages received since the last call (after one poll), by query_id, each one's in order.
create function pg_temp.msgs() returns jsonb language plpgsql as $$
declare r jsonb;
begin
  perform dblink_exec('poller', $p$do $d$ begin
    perform live_private.rerun_subscription('00000000-0000-0000-0000-000000000001', c.query_id)
    from live_private.claim('00000000-0000-0000-0000-000000000001', 60000) c where c.group_id is null;
  end $d$ $p$);
  perform pg_sleep(0.1);
  select coalesce(jsonb_agg(x.extra::jsonb order by x.extra::jsonb ->> 'query_id', x.i), '[]') into r
  from dblink_get_notify('listener') with ordinality as x(notify_name, be_pid, extra, i) where x.notify_name = 'lqs';
  return r;
end $$;

create table public.items (id int primary key, v text, n int);
insert into public.items values (1, 'a', 1), (2, 'b', 1), (3, 'c', 5);
select live.subscribe('fast', 'select id, v from items where n < 3');
select live.subscribe('slow', 'select id, v from items where n < 3 order by id limit 1000');
select live.subscribe('dups', 'select n from items');
select live.subscribe('count', 'select count(*) as c from items', 'notify');
select is((select array_agg(query_id order by query_id) from live_private.subscriptions where fast_table is not null), array['dups', 'fast'], 'two fast-path subscriptions, two re-run');
select is(pg_temp.msgs(), '[]'::jsonb, 'registration sends nothing');

insert into public.items values (4, 'd', 2);
select is(pg_temp.msgs(), '[
  {"query_id": "count", "type": "invalidated", "seq": 1},
  {"query_id": "dups", "seq": 1, "inserted": [{"n": 2}], "deleted": []},
  {"query_id": "fast", "seq": 1, "inserted": [{"id": 4, "v": "d"}], "deleted": []},
  {"query_id": "slow", "seq": 1, "inserted": [{"id": 4, "v": "d"}], "deleted": []}]'::jsonb, 'insert: one message per subscription; notify mode sends invalidated');

update public.items set v = 'D' where id = 4;
select is(pg_temp.msgs(), '[
  {"query_id": "fast", "seq": 2, "inserted": [{"id": 4, "v": "D"}], "deleted": [{"id": 4, "v": "d"}]},
  {"query_id": "slow", "seq": 2, "inserted": [{"id": 4, "v": "D"}], "deleted": [{"id": 4, "v": "d"}]}]'::jsonb, 'update: deleted (old) + inserted (new); unchanged results are silent');

update public.items set n = 2 where id = 1;
select is(pg_temp.msgs(), '[{"query_id": "dups", "seq": 2, "inserted": [{"n": 2}], "deleted": [{"n": 1}]}]'::jsonb, 'a change outside the selected columns is silent for them');

delete from public.items where id = 2;
select is(pg_temp.msgs(), '[
  {"query_id": "count", "type": "invalidated", "seq": 2},
  {"query_id": "dups", "seq": 3, "inserted": [], "deleted": [{"n": 1}]},
  {"query_id": "fast", "seq": 3, "inserted": [], "deleted": [{"id": 2, "v": "b"}]},
  {"query_id": "slow", "seq": 3, "inserted": [], "deleted": [{"id": 2, "v": "b"}]}]'::jsonb, 'delete');

insert into public.items select g, 'm' || g, 2 from generate_series(10, 12) g;
create temp table m as select pg_temp.msgs() as j;
select is((select jsonb_array_length(j) from m), 4, 'a multi-row statement is one message per subscription');
select ok((select j -> 2 @> '{"query_id": "fast", "seq": 4, "inserted": [{"id": 10, "v": "m10"}, {"id": 11, "v": "m11"}, {"id": 12, "v": "m12"}], "deleted": []}' and jsonb_array_length(j -> 2 -> 'inserted') = 3 from m), 'with all its rows');
select is((select snapshot -> 'n' from live_private.subscriptions where query_id = 'dups'), null, 'snapshots are arrays of rows');
select is((select jsonb_array_length(snapshot) from live_private.subscriptions where query_id = 'dups'), 6, 'duplicates count: six rows, n = 2 five times');

delete from public.items where id = 10;
select is((pg_temp.msgs() -> 1), '{"query_id": "dups", "seq": 5, "inserted": [], "deleted": [{"n": 2}]}'::jsonb, 'deleting one of several equal rows deletes one');
-- (fast and slow: seq 5)
select is((select count(*) from jsonb_array_elements((select snapshot from live_private.subscriptions where query_id = 'dups')) e where e = '{"n": 2}'), 4::bigint, 'and the others stay in the snapshot');

update public.items set v = v where id = 11;
select is(pg_temp.msgs(), '[]'::jsonb, 'an update that changes nothing is silent and uses no seq');
insert into public.items values (50, 'z', 9);
select is((pg_temp.msgs() -> 1), '{"query_id": "dups", "seq": 6, "inserted": [{"n": 9}], "deleted": []}'::jsonb, 'the next change uses the next seq');

begin;
insert into public.items values (51, 'r', 1);
rollback;
select is(pg_temp.msgs(), '[]'::jsonb, 'a rolled-back change sends nothing');
select is((select seq from live_private.subscriptions where query_id = 'fast'), 5::bigint, 'and uses no seq');

-- Overflow by size: 8000 - length('lqs') - 100 = 7897 bytes
select is(live_private.payload_limit('lqs'), 7897, 'the payload limit for lqs is 7897');
insert into public.items select g, repeat('x', 100), 1 from generate_series(100, 170) g;
select is((pg_temp.msgs() -> 2), '{"type": "overflow", "query_id": "fast", "seq": 6, "fetch": true}'::jsonb, 'a delta over the limit is an overflow');
select is((select jsonb_array_length(snapshot) from live_private.subscriptions where query_id = 'fast'), 75, 'the snapshot is still replaced');
select is((pg_temp.msgs()), '[]'::jsonb, 'nothing else');

-- Overflow by layout change
create table public.shapes (id int primary key);
insert into public.shapes values (1);
select live.subscribe('shape', 'select * from shapes');
alter table public.shapes add column label text;
insert into public.shapes values (2, 'two');
select is(pg_temp.msgs(), '[{"type": "overflow", "query_id": "shape", "seq": 1, "fetch": true}]'::jsonb, 'a changed column layout is an overflow');
select is((select layout from live_private.subscriptions where query_id = 'shape'), array['id', 'label'], 'the new layout is stored');
insert into public.shapes values (3, 'three');
select is(pg_temp.msgs(), '[{"query_id": "shape", "seq": 2, "inserted": [{"id": 3, "label": "three"}], "deleted": []}]'::jsonb, 'then deltas again');

-- Truncate re-runs even a fast-path query
truncate public.shapes;
select ok((select j -> 0 @> '{"query_id": "shape", "seq": 3, "inserted": [], "deleted": [{"id": 1, "label": null}, {"id": 2, "label": "two"}, {"id": 3, "label": "three"}]}'
  and jsonb_array_length(j) = 1 and jsonb_array_length(j -> 0 -> 'deleted') = 3 from (select pg_temp.msgs() as j) x), 'truncate re-runs: every row deleted, with the new layout');

-- Replacing a subscription keeps counting and sends an overflow
select live.subscribe('shape', 'select id from shapes');
select is(pg_temp.msgs(), '[{"type": "overflow", "query_id": "shape", "seq": 4, "fetch": true}]'::jsonb, 'a replaced subscription sends an overflow with the next seq');

-- An API role writing a watched table needs no rights on live_private
grant insert on public.shapes to anon;
set role anon;
insert into public.shapes values (7);
reset role;
select is(pg_temp.msgs(), '[{"query_id": "shape", "seq": 5, "inserted": [{"id": 7}], "deleted": []}]'::jsonb, 'anon writes; the security-definer trigger diffs');

-- LIVE_MAX_ROWS holds on the fast path too: a write that grows the result past it breaks the
-- subscription (as a re-run does), and later writes leave its snapshot alone.
select live_private.configure((select channel from live_private.settings), 3);
create table public.capped (id int primary key);
select live.subscribe('capped', 'select id from capped');
insert into public.capped values (1), (2), (3);
select is((select array[(fast_table is not null)::text, coalesce(broken, 'working')] from live_private.subscriptions where query_id = 'capped'),
  array['true', 'working'], 'a fast-path subscription at the limit works');
select is((select jsonb_agg(jsonb_build_object('seq', m->'seq', 'inserted', jsonb_array_length(m->'inserted'))) from jsonb_array_elements(pg_temp.msgs()) m where m->>'query_id' = 'capped'),
  '[{"seq": 1, "inserted": 3}]'::jsonb, 'and sends its delta');
insert into public.capped values (4);
select is((select broken from live_private.subscriptions where query_id = 'capped'), 'live query result has more than 3 rows (LIVE_MAX_ROWS)',
  'a write past LIVE_MAX_ROWS breaks it, with the reason');
insert into public.capped values (5);
select is((select array[jsonb_array_length(snapshot), seq] from live_private.subscriptions where query_id = 'capped'), array[3, 1]::bigint[],
  'later writes neither grow its snapshot nor use a seq');
select live_private.configure((select channel from live_private.settings), 10000);

select dblink_disconnect('listener');
select * from finish();
