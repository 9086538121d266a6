-- Once per store, the first time the projection runs after migration 0025 (the functions step
-- calls it, eg_sync_heads.sql): projects what the per-chain frontiers of the previous versions
-- (event_projection, row_projection) had not reached, then starts the projection by snapshot
-- there (log_projection). Every later call finds the cursor started and returns at once.
--
-- A snapshot is taken first, in a statement of its own, and the events drained are those it sees
-- (and every event from before migration 0024, which has no transaction id: all of those had
-- committed when that migration's ALTER TABLE got its lock). Events committed after it are not
-- seen by it, so they are the first batch of the projection by snapshot. Legacy rows may hold no
-- position (event_pos null), and drained ones one of an event from before migration 0024 (0, or
-- below every other since migration 0027): every event written since is newer.
create or replace function eg_project_legacy() returns void language plpgsql
set enable_seqscan = off set jit = off as $$
  declare
    v_started boolean;
    v_snapshot pg_snapshot;
    v_pos bigint[];
  begin
    select after_snapshot is not null into v_started from log_projection where id;
    if v_started then
      return;
    end if;
    -- Locked and read again: of two callers, the second finds it started.
    select after_snapshot is not null into v_started from log_projection where id for update;
    if v_started then
      return;
    end if;
    v_snapshot := pg_current_snapshot();
    select array_agg(e.pos order by e.pos) into v_pos
    from event_projection f join events e on e.chain = f.chain and e.seq > f.seq and e.seq is not null
    where e.type like 'decision.%' and (e.tx is null or pg_visible_in_snapshot(e.tx, v_snapshot));
    perform eg_project_decisions(v_pos);
    select array_agg(e.pos order by e.pos) into v_pos
    from row_projection r join events e on e.chain = r.chain and e.seq > r.seq and e.seq is not null
    where e.operation_id is not null and (e.tx is null or pg_visible_in_snapshot(e.tx, v_snapshot));
    perform eg_project_rows(v_pos);
    update log_projection set after_snapshot = v_snapshot, target_snapshot = null, through_pos = 0 where id;
  end $$;
