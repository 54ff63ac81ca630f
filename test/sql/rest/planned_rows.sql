-- rest.planned_rows(): the planner's estimate for Prefer: count=planned, as the caller.
begin;
select plan(9);

create table public.t_many (id int primary key, v text);
insert into public.t_many select g, 'v' || g from generate_series(1, 500) g;
analyze public.t_many;
grant select on public.t_many to anon;

select is(rest.planned_rows('select 1 from public.t_many _t0', array[]::text[]), 500::bigint, 'no filter: the table estimate');
select cmp_ok(rest.planned_rows('select 1 from public.t_many _t0 where _t0.id < $1::text::int4', array['50']), '<', 200::bigint, 'the bound value is used for the estimate');
select cmp_ok(rest.planned_rows('select 1 from public.t_many _t0 where _t0.id = any($1::text::int4[]) and _t0.v like $2::text', array['{1,2,3}', 'v%']), '<=', 3::bigint, 'several text parameters, an array literal among them');
select is((select count(*) from pg_prepared_statements), 0::bigint, 'no prepared statement is left behind');
select throws_ok($$select rest.planned_rows('select 1 from public.t_many _t0 where _t0.id = $1::text::int4', array['x'])$$, '22P02', null, 'a bad value raises the data exception');
select is((select count(*) from pg_prepared_statements), 0::bigint, 'and leaves nothing behind');
select throws_ok($$select rest.planned_rows('drop table public.t_many', array[]::text[])$$, '42601', null, 'only plannable statements are accepted');

select tests.act_as('anon');
select is(rest.planned_rows('select 1 from public.t_many _t0', array[]::text[]), 500::bigint, 'anon may call it');
select tests.reset_role();
select ok(has_function_privilege('anonymous', 'rest.planned_rows(text, text[])', 'execute'), 'the guest role too');

select * from finish();
rollback;
