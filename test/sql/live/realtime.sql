-- Table subscriptions (realtime.sql): the join's refusals, what a writer queues, which
-- changes each group is matched to by its sockets' wants, what each group's statement keeps
-- under RLS, and the sweep of a table nobody subscribes to.
begin;
select plan(23);

create table public.rt (id int primary key, owner uuid, n int not null default 0);
alter table public.rt enable row level security;
create policy own on public.rt for select to authenticated using (owner = auth.uid());
grant select on public.rt to authenticated, anon;
create table public.hidden (id int primary key);
revoke all on public.hidden from anon, authenticated;

select is((select error from live_private.realtime_join(gen_random_uuid(), 'nope', 'anon', '{"role": "anon"}')), 'not found', 'a table that does not exist');
select is((select error from live_private.realtime_join(gen_random_uuid(), 'hidden', 'anon', '{"role": "anon"}')), 'permission denied', 'a table the role may not read');
select is((select count(*) from pg_trigger where tgrelid = 'public.rt'::regclass), 0::bigint, 'no trigger before a subscription');

create temp table j as
  select * from live_private.realtime_join('00000000-0000-0000-0000-00000000000a', 'rt', 'authenticated',
                                           '{"role": "authenticated", "sub": "00000000-0000-4000-8000-000000000001", "exp": 1}');
select is((select pk from j), array['id'], 'the primary key comes back');
select is((select cols from j), array['id', 'n', 'owner'], 'and the columns');
select is((select count(*) from pg_trigger where tgrelid = 'public.rt'::regclass), 4::bigint, 'the first join installs the triggers');
select is((select mode from live_private.subscriptions where query_id = (select query_id from j)), 'changes', 'one internal subscription of mode changes');
select is((select claims from live_private.groups where id = (select group_id from j)),
          '{"role": "authenticated", "sub": "00000000-0000-4000-8000-000000000001"}'::jsonb, 'the group keeps the claims its policies observe');
select is((select group_id from live_private.realtime_join('00000000-0000-0000-0000-00000000000b', 'rt', 'authenticated',
          '{"role": "authenticated", "sub": "00000000-0000-4000-8000-000000000001", "exp": 2}')), (select group_id from j), 'an equal role and claims join the same group');

insert into public.rt values (1, '00000000-0000-4000-8000-000000000001', 1), (2, '00000000-0000-4000-8000-000000000002', 2);
update public.rt set n = 10 where id = 1;
delete from public.rt where id = 2;
select is((select jsonb_agg(e ->> 't' order by c.id, e ->> 't') from live_private.changes c, jsonb_array_elements(c.ins) e),
          '["INSERT", "INSERT", "UPDATE", "DELETE"]'::jsonb, 'each row change is queued with its kind');
select is((select e -> 'old' ->> 'n' from live_private.changes c, jsonb_array_elements(c.ins) e where e ->> 't' = 'UPDATE'), '1', 'an UPDATE carries its old row, paired by key');

-- What the group's statement keeps, as its role with its claims.
create temp table queued as select jsonb_agg(e order by c.id) as all_changes from live_private.changes c, jsonb_array_elements(c.ins) e;
grant select on queued to authenticated, anon;
create temp table stmt as select live_private.realtime_sql('public.rt'::regclass, 'authenticated') as q, live_private.realtime_sql('public.rt'::regclass, 'anon') as qa;
create function pg_temp.run(q text, role text, claims text) returns jsonb language plpgsql as $$
declare r jsonb;
begin
  perform set_config('request.jwt.claims', claims, true);
  execute format('set local role %I', role);
  execute format('prepare rt_stmt(text, text) as %s', q);
  execute format('execute rt_stmt(%L, %L)', (select all_changes::text from queued), '[]') into r;
  deallocate rt_stmt;
  reset role;
  return r;
end $$;
select is((select jsonb_agg(jsonb_build_array(x ->> 't', x -> 'new' ->> 'id')) from jsonb_array_elements(pg_temp.run((select q from stmt), 'authenticated', '{"role": "authenticated", "sub": "00000000-0000-4000-8000-000000000001"}')) x),
          '[["INSERT", "1"], ["UPDATE", "1"]]'::jsonb, 'user 1 keeps the changes of its own row only');
select is((select jsonb_agg(jsonb_build_array(x ->> 't', case when x ->> 't' = 'DELETE' then x -> 'old' else x -> 'new' end ->> 'id')) from jsonb_array_elements(pg_temp.run((select q from stmt), 'authenticated', '{"role": "authenticated", "sub": "00000000-0000-4000-8000-000000000002"}')) x),
          '[["INSERT", "2"], ["DELETE", "2"]]'::jsonb, 'user 2 its own, and the delete of its row');
select is(pg_temp.run((select qa from stmt), 'anon', '{"role": "anon"}'), '[]'::jsonb, 'anon none: no policy lets it read');
update public.rt set owner = '00000000-0000-4000-8000-000000000002' where id = 1;
select is((select count(*) from live_private.changes c, jsonb_array_elements(c.ins) e where e ->> 't' = 'UPDATE'), 2::bigint, 'the move of a row is queued');

-- The match by the sockets' wants (group_members.wants): by text, by number, by event. (The
-- group's join snapshot sees this transaction's own changes: it is set as if it joined before.)
update live_private.groups set snap = '1:1:' where id = (select group_id from j);
create function pg_temp.pending(wants jsonb) returns jsonb language sql as $$
  update live_private.group_members set wants = pending.wants where group_id = (select group_id from j);
  select coalesce(jsonb_agg(jsonb_build_array(x ->> 't', x -> 'new' ->> 'id') order by o), '[]')
  from live_private.realtime_pending((select query_id from j), null) p, jsonb_array_elements(p.ins) with ordinality x(x, o)
  where p.group_id = (select group_id from j)
$$;
select is(pg_temp.pending('[{"e": "UPDATE", "c": "owner", "s": ["00000000-0000-4000-8000-000000000002"], "n": []}]'),
          '[["UPDATE", "1"]]'::jsonb, 'wants by text and event: the UPDATE whose new row has that owner');
select is(pg_temp.pending('[{"e": "*", "c": "n", "s": ["10.0"], "n": [10]}]'),
          '[["UPDATE", "1"], ["UPDATE", "1"]]'::jsonb, 'wants by number: n = 10 in the new row, as the service compares');
select is(pg_temp.pending(null), '[["INSERT", "1"], ["INSERT", "2"], ["UPDATE", "1"], ["DELETE", null], ["UPDATE", "1"]]'::jsonb, 'no wants: every change');

-- The lanes' statements are kept per role, and built again after DDL (a policy changed).
select is(live_private.realtime_statement((select query_id from j), 'authenticated'), live_private.realtime_sql('public.rt'::regclass, 'authenticated'), 'the statement of a role, kept');
create policy more on public.rt for select to authenticated using (n > 100);
select is((select count(*) from live_private.realtime_statements), 0::bigint, 'forgotten at DDL: the new policy applies at the next step');

-- Nobody subscribed: after the grace the subscription and its triggers go.
delete from live_private.groups where query_id = (select query_id from j);
update live_private.subscriptions set idle_since = now() - interval '1 hour' where query_id = (select query_id from j);
select is(live_private.realtime_sweep(1000), 1, 'the sweep removes the idle table subscription');
select is((select count(*) from pg_trigger where tgrelid = 'public.rt'::regclass), 0::bigint, 'and its triggers');
insert into public.rt values (3, null, 0);
select is((select count(*) from live_private.changes c, jsonb_array_elements(c.ins) e where e -> 'new' ->> 'id' = '3'), 0::bigint, 'a write after it queues nothing');

select * from finish();
rollback;
