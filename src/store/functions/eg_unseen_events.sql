-- The events snapshot p_after does not see: those of the transactions it saw running, and of
-- newer ones, found through events_tx_idx rather than by scanning the log (for a transaction id
-- below the snapshot's xmax, "not seen" is "listed as running"). With p_after the projection's last
-- finished batch (log_projection.after_snapshot), these are the events it has not finished: the
-- one definition eg_project, eg_project_operation and eg_projected_seq read. A single SELECT in
-- `language sql`, so the planner inlines it and keeps the index.
create or replace function eg_unseen_events(p_after pg_snapshot) returns setof events language sql stable as $$
    select * from events e
    where e.tx = any(array(select pg_snapshot_xip(p_after))) or e.tx >= pg_snapshot_xmax(p_after)
  $$;
