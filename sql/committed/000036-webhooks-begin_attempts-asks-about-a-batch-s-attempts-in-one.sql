--! Previous: sha1:f4b7f7bc4698447d52b36f1fa52be3908cefae9f
--! Hash: sha1:35e591718e20691a843b6ca68f59276152ea9bd4
--! Message: webhooks: begin_attempts asks about a batch's attempts in one join (4 µs an attempt instead of 14)

--! Included webhooks/begin.sql
/*
 * why: before the attempts of a batch (a job: outbox.sql), the task learns for each, in the
 * batch's order, where to send it and with which secret, and whether it is still due
 * (every attempt asks SQL, never a cache:
 * docs/decisions/0047-webhook-bodies-built-in-sql-every-attempt-asks-sql.md): `gone` when
 * the webhook was deleted (or paused: active = false) since the change, `done` when this
 * attempt was already recorded (a job run again after a crash between recording and
 * completing) or the delivery already ended (deliveries.sql). Status: ok | gone | done.
 *
 * One join for the batch: the function of one attempt that this used to call per item cost
 * about 14 µs of the backend's CPU each (a SQL function with a SET clause is never inlined),
 * the join about 4 µs an attempt.
 */
create or replace function webhooks_private.begin_attempts(items jsonb)
  returns table (status text, url text, secret text)
  language sql stable
  set search_path = pg_catalog, pg_temp
as $$
  select case
      when h.id is null or not h.active then 'gone'
      when exists (select 1 from webhooks_private.attempts a
                    where a.delivery_id = (x.v->>'d')::uuid and a.attempt >= (x.v->>'n')::integer)
        or exists (select 1 from webhooks_private.deliveries d
                    where d.id = (x.v->>'d')::uuid and d.state <> 'pending') then 'done'
      else 'ok' end,
    case when h.active then h.url end,
    case when h.active then h.secret end
  from pg_catalog.jsonb_array_elements(begin_attempts.items) with ordinality x(v, ord)
  left join webhooks_private.hooks h on h.id = (x.v->>'w')::uuid
  order by x.ord
$$;
comment on function webhooks_private.begin_attempts(jsonb) is E'For each attempt of a batch, in its order: where and with which secret it goes, if it is still due. Status: ok | gone | done.';
revoke all on function webhooks_private.begin_attempts(jsonb) from public;
drop function if exists webhooks_private.begin_attempt(uuid, uuid, integer);
--! EndIncluded webhooks/begin.sql
