--!include live/subscriptions.sql
--!include live/realtime.sql
-- The tables that have triggers get them generated anew (the table subscriptions' block changed).
select pg_catalog.set_config('live.internal', 'on', true);
select live_private.sync_triggers(r.t) from (select distinct unnest(x.tables) as t from live_private.subscriptions x where x.broken is null) r;
select pg_catalog.set_config('live.internal', '', true);
