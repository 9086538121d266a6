-- The events of one sealed batch (audit-sealer.ts): those snapshot p_after did not see and
-- snapshot p_target sees. Found by transaction id as eg_unseen_events finds them, and bounded
-- above by p_target's xmax (no transaction at or past it is visible in it): so reading the batch
-- of a checkpoint sealed long ago costs its own events, not every event written since, and
-- `audit verify` and `audit export`, which read every checkpoint's batch, stay linear in the log.
-- A single SELECT in `language sql`, so the planner inlines it and keeps the index (events_tx_idx).
create or replace function eg_batch_events(p_after pg_snapshot, p_target pg_snapshot) returns setof events
  language sql stable as $$
    select * from events e
    where (e.tx = any(array(select pg_snapshot_xip(p_after)))
           or (e.tx >= pg_snapshot_xmax(p_after) and e.tx < pg_snapshot_xmax(p_target)))
      and pg_visible_in_snapshot(e.tx, p_target)
  $$;
