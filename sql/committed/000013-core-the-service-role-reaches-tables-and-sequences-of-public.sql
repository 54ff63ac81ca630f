--! Previous: sha1:13cd8b87839c74ff1d624d17b0835953d8f9ad55
--! Hash: sha1:3ca9e5626fdfe5569b71de6bb0c65394786626e6
--! Message: core: the service role reaches tables and sequences of public by default (existing and future ones of the migration role); functions still need GRANT EXECUTE

--! Included core/service_grants.sql
/*
 * why: the service role reaches the application's tables without a GRANT of its own, as
 * Supabase's does: it bypasses row-level security anyway, and a new table that answered the
 * service-role key 403 until someone wrote a GRANT was the most common first-hour stop.
 * Tables, views and sequences in public, existing ones and those that the role running
 * migrations creates from now on (default privileges belong to the role that creates the
 * objects: the role of DATABASE_URL, which applies plinth's and the application's chains).
 * Functions are not included: the interface requires an explicit GRANT EXECUTE for every
 * calling role (docs/api/rest.md, RPC), the service role included.
 */
grant select, insert, update, delete on all tables in schema public to service_role;
grant usage, select on all sequences in schema public to service_role;
alter default privileges in schema public grant select, insert, update, delete on tables to service_role;
alter default privileges in schema public grant usage, select on sequences to service_role;
--! EndIncluded core/service_grants.sql
