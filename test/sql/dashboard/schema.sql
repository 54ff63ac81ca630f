-- The dashboard's schema changes as SQL text (dashboard_private.schema_sql): each action's
-- text, what it refuses (names, types, defaults, references, templates, grants), and that
-- the text runs twice without error (the migrations watch re-runs current.sql on every save).
begin;
select plan(14);

create temporary table t_sql as select * from dashboard_private.schema_sql($j$[
  {"action": "create_table", "table": "st_notes", "columns": [
    {"name": "id", "type": "bigint", "identity": true, "primary_key": true},
    {"name": "at", "type": "timestamptz", "nullable": false, "default": "now()"},
    {"name": "data", "type": "jsonb", "default": "'{}'::jsonb"},
    {"name": "owner", "type": "uuid", "default": "auth.uid()", "references": {"table": "auth.users", "column": "id", "on_delete": "cascade"}}]},
  {"action": "create_table", "table": "st_items", "columns": [
    {"name": "id", "type": "integer", "primary_key": true},
    {"name": "note_id", "type": "bigint", "references": {"table": "st_notes", "column": "id"}}]},
  {"action": "policy", "table": "st_notes", "template": "read_all_write_owner", "owner_column": "owner"},
  {"action": "grant", "table": "st_notes", "roles": ["anon"], "privileges": ["select"]},
  {"action": "add_column", "table": "st_notes", "column": {"name": "price", "type": "numeric(10,2)"}},
  {"action": "rename_column", "table": "st_notes", "column": "price", "to": "cost"},
  {"action": "drop_column", "table": "st_notes", "column": "data"}
]$j$::jsonb);

select is((select status from t_sql), 'ok', 'a table, a second one referencing it, a policy template, a grant, column changes');
select matches((select statement from t_sql), 'note_id bigint references public.st_notes \(id\) on delete no action', 'a reference to a table made in the same change');
select lives_ok((select statement from t_sql), 'the text runs');
select is((select array_agg(column_name::text order by ordinal_position) from information_schema.columns where table_schema = 'public' and table_name = 'st_notes'),
  array['id', 'at', 'owner', 'cost'], 'the columns after the changes');
-- (A column added and renamed in the same file comes back under its first name on a re-run: docs/dashboard.md says so.)
select lives_ok((select statement from t_sql), 'and runs again without error');
select is((select count(*)::int from pg_policies where schemaname = 'public' and tablename = 'st_notes'), 4, 'read for everyone, write for the owner: four policies');
select ok(has_table_privilege('anon', 'public.st_notes', 'select'), 'granted');

select is((dashboard_private.schema_sql('[{"action": "add_column", "table": "st_notes", "column": {"name": "a", "type": "text); drop table auth.users; --"}}]')).status, 'invalid_type', 'a type is a type');
select is((dashboard_private.schema_sql($j$[{"action": "add_column", "table": "st_notes", "column": {"name": "a", "type": "text", "default": "pg_read_file('/etc/passwd')"}}]$j$)).status, 'invalid_default', 'a default is not any expression');
select is((dashboard_private.schema_sql($j$[{"action": "add_column", "table": "st_notes", "column": {"name": "a", "type": "text", "default": "'x'::text; drop table t"}}]$j$)).status, 'invalid_default', 'nor a literal with a tail');
select is((dashboard_private.schema_sql('[{"action": "drop_column", "table": "St Notes", "column": "a"}]')).status, 'invalid_name', 'plain lower-case names');
select is((dashboard_private.schema_sql('[{"action": "add_column", "table": "st_notes", "column": {"name": "a", "type": "uuid", "references": {"table": "auth.identities", "column": "id"}}}]')).status, 'invalid_reference', 'auth.users(id) is the one table outside public');
select is((dashboard_private.schema_sql('[{"action": "grant", "table": "st_notes", "roles": ["authenticator"], "privileges": ["select"]}]')).status, 'invalid_grant', 'the API roles only');
select is((dashboard_private.schema_sql('[]')).status, 'invalid_action', 'at least one action');

select * from finish();
rollback;
