-- Races between two sessions (dblink, two async connections). This file commits its
-- fixtures: it runs on its own clone of the template.
--  1. two transactions rotating one refresh token: exactly one wins, the loser sees reuse;
--  2. the same, sent at the same instant, twenty times;
--  3. two uses of one magic-link token: exactly one session;
--  4. two instances taking the last rate-limit slot: exactly one passes;
--  5. two different magic-link tokens of one user used at once (each spends the other):
--     exactly one session, and no deadlock.
-- The outer transaction below only reads: a lock it held would block a or b.

insert into auth.users (id, email) values ('00000000-0000-4000-8000-00000000ace1', 'race@example.com');
select status from auth.start_session('00000000-0000-4000-8000-00000000ace1', sha256('race-0'), 3600);
select s.status from generate_series(1, 20) i,
  lateral auth.start_session('00000000-0000-4000-8000-00000000ace1', sha256(convert_to('race-' || i, 'UTF8')), 3600) s;
select auth.request_magic_link('race@example.com', sha256('ml-race'), 'sealed', 0);
select auth.take_rate_limit('auth', '192.0.2.50', 3, 60) from generate_series(1, 2);
insert into auth.users (email) select format('race2-%s@example.com', i) from generate_series(1, 20) i;
select auth.request_magic_link(format('race2-%s@example.com', i), sha256(convert_to(format('ml2-%s-%s', i, k), 'UTF8')), 'sealed', 0)
  from generate_series(1, 20) i, unnest(array['a', 'b']) k;

create function pg_temp.conninfo(app text) returns text language sql as $$
  -- A statement timeout turns a deadlock of this test into a failure instead of a hang.
  select format('dbname=%s host=%s port=%s user=%s application_name=%s options=''-c statement_timeout=20000''', current_database(),
    coalesce(host(inet_server_addr()), '127.0.0.1'), current_setting('port'), current_user, app)
$$;

-- Wait until the backend named `app` waits on a lock (or 5 s pass).
create function pg_temp.wait_for_lock(app text) returns boolean language plpgsql as $$
begin
  for i in 1..100 loop
    perform pg_stat_clear_snapshot();
    if exists (select 1 from pg_stat_activity where application_name = app and wait_event_type = 'Lock') then
      return true;
    end if;
    perform pg_sleep(0.05);
  end loop;
  return false;
end
$$;

select dblink_connect('a', pg_temp.conninfo('race_a'));
select dblink_connect('b', pg_temp.conninfo('race_b'));

begin;
select plan(14);

-- 1. a holds the row lock inside an open transaction; b's rotation waits for it.
select dblink_exec('a', 'begin');
select is((select status from dblink('a', $$select status from auth.rotate_refresh_token(sha256('race-0'), sha256('race-0a'), 3600)$$) as r(status text)),
  'ok', 'a rotates the token (not committed yet)');
select dblink_send_query('b', $$select status from auth.rotate_refresh_token(sha256('race-0'), sha256('race-0b'), 3600)$$);
select ok(pg_temp.wait_for_lock('race_b'), 'b waits on a''s row lock');
select dblink_exec('a', 'commit');
select is((select status from dblink_get_result('b') as r(status text)), 'reuse_detected', 'after a commits, b sees a rotated token: reuse');
select is((select count(*)::int from dblink_get_result('b') as r(status text)), 0, '(b is free again)');
select is((select status from auth.rotate_refresh_token(sha256('race-0a'), sha256('race-0c'), 3600)), 'revoked',
  'a''s successor belongs to the family the reuse revoked');
select is((select count(*)::int from auth_private.refresh_tokens where token_hash = sha256('race-0b')), 0, 'the loser issued no token');

-- 2. twenty tokens, each rotated by a and b sent together: one winner each time.
create temp table outcomes (i int, a text, b text);
do $$
declare
  v_a text;
  v_b text;
begin
  for i in 1..20 loop
    perform dblink_send_query('a', format($q$select status from auth.rotate_refresh_token(sha256('race-%s'), sha256('race-%s-a'), 3600)$q$, i, i));
    perform dblink_send_query('b', format($q$select status from auth.rotate_refresh_token(sha256('race-%s'), sha256('race-%s-b'), 3600)$q$, i, i));
    select status into v_a from dblink_get_result('a') as r(status text);
    perform * from dblink_get_result('a') as r(status text);
    select status into v_b from dblink_get_result('b') as r(status text);
    perform * from dblink_get_result('b') as r(status text);
    insert into outcomes values (i, v_a, v_b);
  end loop;
end
$$;
select is((select count(*)::int from outcomes where (a = 'ok') <> (b = 'ok')), 20, 'every one of 20 races has exactly one winner');
select is((select count(*)::int from outcomes where a = 'ok' or b = 'ok'), 20, 'and the winner got ok');
select is((select count(*)::int from outcomes where (a = 'ok' and b in ('reuse_detected')) or (b = 'ok' and a in ('reuse_detected'))), 20,
  'the loser saw reuse');

-- 3. one magic-link token used twice at once: one session.
select dblink_send_query('a', $$select status from auth.verify_magic_link(sha256('ml-race'), sha256('ml-a'), 3600)$$);
select dblink_send_query('b', $$select status from auth.verify_magic_link(sha256('ml-race'), sha256('ml-b'), 3600)$$);
create temp table ml (status text);
insert into ml select status from dblink_get_result('a') as r(status text);
select count(*) from dblink_get_result('a') as r(status text);
insert into ml select status from dblink_get_result('b') as r(status text);
select count(*) from dblink_get_result('b') as r(status text);
select is((select array_agg(status order by status) from ml), '{invalid,ok}'::text[], 'a magic link works once, even raced');

-- 4. the last slot of a rate limit, taken from two instances at once.
select dblink_exec('a', 'begin');
select is((select status from dblink('a', $$select auth.take_rate_limit('auth', '192.0.2.50', 3, 60)$$) as r(status text)), 'ok', 'a takes the last slot (not committed yet)');
select dblink_send_query('b', $$select auth.take_rate_limit('auth', '192.0.2.50', 3, 60)$$);
select pg_temp.wait_for_lock('race_b');
select dblink_exec('a', 'commit');
select is((select status from dblink_get_result('b') as r(status text)), 'limited', 'b waited and is limited');
select count(*) from dblink_get_result('b') as r(status text);

-- 5. two tokens of one user, one used by a and one by b at the same instant, twenty times.
create temp table pairs (i int, a text, b text);
do $$
declare
  v_a text;
  v_b text;
begin
  for i in 1..20 loop
    perform dblink_send_query('a', format($q$select status from auth.verify_magic_link(sha256('ml2-%s-a'), sha256('ml2-%s-ra'), 3600)$q$, i, i));
    perform dblink_send_query('b', format($q$select status from auth.verify_magic_link(sha256('ml2-%s-b'), sha256('ml2-%s-rb'), 3600)$q$, i, i));
    select status into v_a from dblink_get_result('a') as r(status text);
    perform * from dblink_get_result('a') as r(status text);
    select status into v_b from dblink_get_result('b') as r(status text);
    perform * from dblink_get_result('b') as r(status text);
    insert into pairs values (i, v_a, v_b);
  end loop;
end
$$;
select is((select count(*)::int from pairs where (a = 'ok') <> (b = 'ok')), 20, 'two tokens of one user used at once: exactly one session each time');
select is((select count(*)::int from pairs where a in ('ok', 'invalid') and b in ('ok', 'invalid')), 20, 'the other is spent (invalid), never an error');

select * from finish();
rollback;

select dblink_disconnect('a');
select dblink_disconnect('b');
