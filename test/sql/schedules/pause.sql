-- A paused schedule has no pending tick (so no run), keeps its pause when changed, and a
-- resume arms its next tick again.
begin;
select plan(7);

create function public.sp_target(p jsonb) returns void language sql as $$ select null::void $$;
select is((plinth_private.upsert_schedule('sp', '0 3 * * *', 'sql:public.sp_target', '{}', '{}')).status, 'ok', 'a schedule');
select is(plinth_private.pause_schedule('sp', true), 'ok', 'paused');
select is((select count(*)::int from graphile_worker.jobs where key = 'plinth:schedule:sp'), 0, 'no pending tick');
select is(plinth_private.tick('sp', now()), 0, 'a tick already taken adds no run while paused');
select is((plinth_private.upsert_schedule('sp', '0 4 * * *', 'sql:public.sp_target', '{}', '{}')).schedule->>'paused', 'true', 'changed, still paused');
select is(plinth_private.pause_schedule('sp', false), 'ok', 'resumed');
select is((select count(*)::int from graphile_worker.jobs where key = 'plinth:schedule:sp'), 1, 'its tick is pending again');

select * from finish();
rollback;
