--! Previous: sha1:0e559975b0738e53026e70441bd67851b9515ea2
--! Hash: sha1:32199b6089ad1d90dfca6a5eb05cc3ef969f7f7b
--! Message: live: the stored result at its seq, for a resume

-- Enter migration here
--! Included live/resume.sql
/*
 * why: the stored result a socket resumes from (docs/api/live.md, "Resuming"; decision
 * 0300). A subscription's result, or one group's, and the seq it is at, read in one row:
 * every path (a writer's fast-path delta, a re-run, a group's re-run or fast-path delta)
 * replaces the result and raises seq in one update, the same that sends the message, so
 * the result read here holds exactly the changes of seq 1 to `seq`, whenever each was
 * computed. Delta mode only (notify mode has no result on the client to double); no row
 * when there is nothing to send: notify mode, a broken subscription, a group that went or
 * has no result yet, or a group that is not of this subscription.
 */
create or replace function live_private.stored_result(query_id text, group_id bigint default null)
  returns table (seq bigint, rows text)
  language sql stable security definer
  set search_path = pg_catalog, pg_temp
as $$
  select s.seq, s.snapshot::text from live_private.subscriptions s
   where s.query_id = stored_result.query_id and stored_result.group_id is null
     and s.mode = 'delta' and s.broken is null and not s.as_subscriber
  union all
  select g.seq, g.snapshot::text from live_private.groups g
  join live_private.subscriptions s on s.query_id = g.query_id
   where g.id = stored_result.group_id and g.query_id = stored_result.query_id
     and s.mode = 'delta' and s.broken is null and g.snapshot is not null
$$;
comment on function live_private.stored_result(text, bigint) is E'plinth: a delta-mode live query\'s stored result (or one group\'s) and the seq it is at, for a socket\'s snapshot message.';
revoke all on function live_private.stored_result(text, bigint) from public;
--! EndIncluded live/resume.sql
