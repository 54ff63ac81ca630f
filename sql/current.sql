-- Enter migration here

-- The instance tables named once: live's own heartbeat table was live_private.instances,
-- the same name as the registry of instances (plinth_private.instances); it is what it is,
-- live_private.heartbeats. Renamed in place (its rows kept), once.
do $$
begin
  if to_regclass('live_private.instances') is not null and to_regclass('live_private.heartbeats') is null then
    alter table live_private.instances rename to heartbeats;
    alter index live_private.instances_pkey rename to heartbeats_pkey;
  end if;
end
$$;

--!include live/presence.sql
--!include live/rerun.sql
--!include core/instances.sql
--!include auth/one_time_tokens.sql
--!include auth/compat.sql
