-- public.demo_items only where POST /api/demo is used: not in a new database, made on demand.
begin;
select plan(5);

select hasnt_table('public', 'demo_items', 'a new database has no public.demo_items');
select lives_ok('select plinth_private.ensure_demo_items()', 'ensure_demo_items() makes it');
select has_table('public', 'demo_items', 'public.demo_items exists then');
insert into public.demo_items (title) values ('kept');
select lives_ok('select plinth_private.ensure_demo_items()', 'a second call leaves it');
select is((select count(*)::int from public.demo_items), 1, 'with its rows');

select * from finish();
rollback;
