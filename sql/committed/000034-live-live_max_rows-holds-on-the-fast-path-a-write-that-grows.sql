--! Previous: sha1:a794a8ccb2919c01f4938ddcfc413006b74a3be9
--! Hash: sha1:850f1214f184ff9dd534cd0f7442a7cefa0f4bb6
--! Message: live: LIVE_MAX_ROWS holds on the fast path: a write that grows a result past it breaks the subscription

-- Enter migration here
--! Included live/diff.sql
/*
 * why: after each statement that changes a watched table, each affected subscription's
 * result is compared with its snapshot (rows as jsonb, as multisets), the snapshot is
 * replaced, seq raised and one NOTIFY sent on LIVE_CHANNEL (docs/api/live.md,
 * docs/api/overview.md). Nothing is sent and no seq used when the result did not change.
 *
 * Concurrency: on the fast path the subscription row is locked (FOR UPDATE) before its
 * snapshot is changed, so concurrent writers apply their deltas one after the other and
 * seq follows commit order; a statement whose transition rows match nothing takes no lock
 * at all. Every other query is re-run off the writer's path (rerun.sql): the writer only
 * leaves a mark, and `refresh` here serves the fast path's layout change alone.
 */

/*
 * why: the one place a message is built and sent. `ins`/`del` are the net changes;
 * `new_layout` the result's layout when known. Overflow when the layout changed or the
 * delta does not fit the payload limit; `invalidated` in notify mode.
 */
create or replace function live_private.publish(query_id text, new_snapshot jsonb, ins jsonb, del jsonb, new_layout text[])
  returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  v_seq bigint;
  v_mode text;
  v_old_layout text[];
  v_channel text;
  v_max int;
  v_payload text;
begin
  select st.channel, st.max_rows into v_channel, v_max from live_private.settings st;
  -- LIVE_MAX_ROWS holds on every path: a fast-path delta (or a re-run through refresh) that
  -- grows the result past it breaks the subscription, as a re-run does (rerun_subscription),
  -- rather than let every later write copy an ever larger snapshot under its row lock. In a
  -- writer's trigger, so its table's trigger is not regenerated (mark_broken's resync).
  if pg_catalog.jsonb_array_length(publish.new_snapshot) > v_max then
    perform live_private.mark_broken(publish.query_id, pg_catalog.format('live query result has more than %s rows (LIVE_MAX_ROWS)', v_max), false);
    return;
  end if;
  select s.layout into v_old_layout from live_private.subscriptions s where s.query_id = publish.query_id;
  update live_private.subscriptions s
     set snapshot = publish.new_snapshot, seq = s.seq + 1, layout = coalesce(publish.new_layout, s.layout)
   where s.query_id = publish.query_id
  returning s.seq, s.mode into v_seq, v_mode;
  if publish.new_layout is not null and publish.new_layout is distinct from v_old_layout then
    v_payload := jsonb_build_object('type', 'overflow', 'query_id', publish.query_id, 'seq', v_seq, 'fetch', true)::text;
  elsif v_mode = 'notify' then
    v_payload := jsonb_build_object('type', 'invalidated', 'query_id', publish.query_id, 'seq', v_seq)::text;
  else
    v_payload := jsonb_build_object('query_id', publish.query_id, 'seq', v_seq, 'inserted', publish.ins, 'deleted', publish.del)::text;
    if octet_length(v_payload) > live_private.payload_limit(v_channel) then
      v_payload := jsonb_build_object('type', 'overflow', 'query_id', publish.query_id, 'seq', v_seq, 'fetch', true)::text;
    end if;
  end if;
  perform pg_catalog.pg_notify(v_channel, v_payload);
end
$$;
comment on function live_private.publish(text, jsonb, jsonb, jsonb, text[]) is E'plinth: stores a new snapshot, raises seq and sends delta, invalidated or overflow; a snapshot past LIVE_MAX_ROWS breaks the subscription instead.';
revoke all on function live_private.publish(text, jsonb, jsonb, jsonb, text[]) from public;

/* why: the general path: lock, re-run the query, diff against the snapshot. */
create or replace function live_private.refresh(query_id text) returns void
  language plpgsql security definer
  set search_path = pg_catalog, public, pg_temp
as $$
declare
  s live_private.subscriptions;
  v_new jsonb;
  v_ins jsonb;
  v_del jsonb;
begin
  select * into s from live_private.subscriptions x where x.query_id = refresh.query_id for update;
  if not found then
    return;
  end if;
  v_new := live_private.run(s.query);
  v_ins := live_private.minus(v_new, s.snapshot);
  v_del := live_private.minus(s.snapshot, v_new);
  if v_ins = '[]'::jsonb and v_del = '[]'::jsonb then
    return;
  end if;
  perform live_private.publish(s.query_id, v_new, v_ins, v_del, live_private.layout_of(v_new));
end
$$;
comment on function live_private.refresh(text) is E'plinth: re-runs a live query, diffs it with its snapshot, publishes a change.';
revoke all on function live_private.refresh(text) from public;

/* why: the fast path: the statement's matching transition rows are the delta. Pairs that
   cancel (an update that left the selected columns alone) are silent. */
create or replace function live_private.apply(query_id text, ins jsonb, del jsonb) returns void
  language plpgsql security definer
  set search_path = pg_catalog, pg_temp
as $$
declare
  s live_private.subscriptions;
  v_ins jsonb := live_private.minus(apply.ins, apply.del);
  v_del jsonb := live_private.minus(apply.del, apply.ins);
  v_layout text[];
begin
  if v_ins = '[]'::jsonb and v_del = '[]'::jsonb then
    return;
  end if;
  select * into s from live_private.subscriptions x where x.query_id = apply.query_id for update;
  -- Broken by an earlier write of this table (its trigger still calls in until regenerated).
  if not found or s.broken is not null then
    return;
  end if;
  v_layout := coalesce(live_private.layout_of(v_ins), live_private.layout_of(v_del));
  if v_layout is distinct from s.layout then
    -- The table's shape changed under a `select *`: the stored rows are stale, re-run.
    perform live_private.refresh(s.query_id);
    return;
  end if;
  perform live_private.publish(s.query_id, live_private.minus(s.snapshot, v_del) || v_ins, v_ins, v_del, v_layout);
end
$$;
comment on function live_private.apply(text, jsonb, jsonb) is E'plinth: applies a fast-path delta (from transition rows) to a snapshot and publishes it.';
revoke all on function live_private.apply(text, jsonb, jsonb) from public;
--! EndIncluded live/diff.sql
