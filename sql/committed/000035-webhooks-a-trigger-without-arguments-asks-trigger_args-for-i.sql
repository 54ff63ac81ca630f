--! Previous: sha1:850f1214f184ff9dd534cd0f7442a7cefa0f4bb6
--! Hash: sha1:f4b7f7bc4698447d52b36f1fa52be3908cefae9f
--! Message: webhooks: a trigger without arguments asks trigger_args for its webhooks (one matching rule)

--! Included webhooks/enqueue.sql
/*
 * why: the row trigger function of every watched table (docs/api/webhooks.md; docs/architecture.md,
 * Jobs and Triggers on application tables). Its arguments name the active webhooks that
 * INSERT, UPDATE and DELETE match on this table (its own and the `*` ones, in registration
 * order: hooks.sql, trigger_args, kept in line by the registry's trigger), so the writer
 * looks nothing up (docs/decisions/0307-a-watched-table-s-trigger-carries-its-webhooks.md). When
 * the operation matches some, it appends one row to webhooks_private.outbox (outbox.sql)
 * naming them all, in the transaction of the change: a rolled-back change delivers nothing, a
 * committed one is never lost. The instances drain the outbox into webhooks__deliver jobs,
 * one per webhook (webhooks_private.drain_outbox).
 *
 * The row carries the event, the table, the change's time, the id of the request that made
 * it and the request body as text, built here once for all matching webhooks: `{"event",
 * "table", "record"?, "old_record"?}` (docs/api/webhooks.md; record omitted for DELETE,
 * old_record for INSERT) with the row's columns in table order. As text, the body keeps every
 * number exact (a bigint beyond 2^53 would lose digits through a JavaScript parse); the task
 * sends these bytes and signs them. The secret never enters the outbox or a job: the task
 * reads it when it makes the attempt.
 *
 * The drains are woken only when none is awake (outbox.sql, `drains`, says why): the writer
 * pays a read of one page (the awake drains) and one insert into a table with one index.
 * A trigger without arguments (made by hand, or before they existed) asks the registry for
 * the arguments it would have (trigger_args). SECURITY DEFINER with a pinned search_path
 * (STYLE): the writer needs no right on webhooks_private. A table without a webhook has no
 * trigger and pays nothing; `*` webhooks ride on the triggers of table-specific ones
 * (docs/api/webhooks.md).
 */
create or replace function webhooks_private.tg__enqueue() returns trigger
  language plpgsql volatile security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_args text[];
  v_hooks uuid[];
begin
  if TG_NARGS = 3 then
    v_hooks := (case TG_OP when 'INSERT' then TG_ARGV[0] when 'UPDATE' then TG_ARGV[1] else TG_ARGV[2] end)::uuid[];
  else
    -- The arguments the registry would give this trigger (one matching rule: hooks.sql).
    v_args := webhooks_private.trigger_args(TG_TABLE_NAME);
    v_hooks := (case TG_OP when 'INSERT' then v_args[1] when 'UPDATE' then v_args[2] else v_args[3] end)::uuid[];
  end if;
  if pg_catalog.cardinality(v_hooks) = 0 then
    return null;
  end if;
  -- webhooks_private.wake_drains, inlined (one function call less per write).
  if not exists (select 1 from webhooks_private.drains d where d.awake_until > pg_catalog.clock_timestamp()) then
    perform pg_catalog.pg_notify('plinth_webhooks', '');
  end if;
  insert into webhooks_private.outbox (hooks, event, table_name, created_at, body, request_id)
    values (v_hooks, TG_OP, TG_TABLE_NAME, pg_catalog.now(),
      '{"event":"' || TG_OP || '","table":' || pg_catalog.to_json(TG_TABLE_NAME::text)::text
        || case when TG_OP <> 'DELETE' then ',"record":' || pg_catalog.to_json(NEW)::text else '' end
        || case when TG_OP <> 'INSERT' then ',"old_record":' || pg_catalog.to_json(OLD)::text else '' end
        || '}',
      nullif(pg_catalog.current_setting('request.id', true), ''));
  return null;
end
$$;
comment on function webhooks_private.tg__enqueue() is E'plinth: trigger of watched tables (arguments: the webhooks of INSERT, UPDATE, DELETE); appends the change to webhooks_private.outbox for the webhooks it matches (drained into webhooks__deliver jobs).';
revoke all on function webhooks_private.tg__enqueue() from public;
--! EndIncluded webhooks/enqueue.sql
