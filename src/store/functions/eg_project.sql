-- Projects committed events onto the tables made from them: the `decisions` rows, from the
-- `decision.<verdict>` events (eg_project_decisions.sql, migration 0019), and the `operations` and
-- `attempts` rows, from every event of an operation (eg_project_rows.sql, migration 0023), none of
-- which the hot path writes. Called by the gate's projector in the background (p_wait false: a
-- round another process is running is skipped, not waited for) and by every reader of those
-- tables before it reads (p_wait true: it waits for a running round, then projects; it rounds
-- until `more` is false, and then sees every event committed before it asked). Takes at most
-- p_limit events; answers how many it took and whether there are more.
--
-- In batches by snapshot (log_projection, migration 0025), which is how PgQ reads its queues: a
-- batch is the events its target snapshot sees and the previous batch's snapshot did not, in
-- `pos` order (migration 0024), taken p_limit at a time (through_pos). An event is seen by a
-- snapshot exactly when its writer has committed, so no committed event is ever passed over for
-- one that commits later, and nothing is waited for: events still being written are in a later
-- batch. No row lock is held for any of it but the cursor's, and the rows' own while they are
-- written; an operation's rows take its events only over older ones (eg_project_rows.sql), so a
-- rare path that brought them up to date meanwhile (eg_project_operation.sql) is never undone.
-- A batch is found by transaction id (eg_unseen_events: the transactions the previous snapshot saw
-- running, and the newer ones).
create or replace function eg_project(p_limit int, p_wait boolean) returns json language plpgsql
set enable_seqscan = off set jit = off as $$
  declare
    v_c log_projection%rowtype;
    v_started boolean;
    v_pos bigint[];
    v_last bigint;
    v_taken int;
  begin
    if p_wait then
      perform pg_advisory_xact_lock(1701273974);
    elsif not pg_try_advisory_xact_lock(1701273974) then
      return json_build_object('events', 0, 'more', false, 'busy', true);
    end if;
    perform eg_project_legacy();
    select * into v_c from log_projection where id;
    v_started := v_c.target_snapshot is null;
    if v_started then
      -- Its own statement: the batch is what this snapshot sees, and every later statement sees
      -- all of it.
      update log_projection set target_snapshot = pg_current_snapshot(), through_pos = 0 where id returning * into v_c;
    end if;
    if v_c.through_pos = 0 then
      -- A batch's first round finds it by transaction id, and takes its first events.
      select array_agg(b.pos order by b.pos), max(b.pos), count(*)
        into v_pos, v_last, v_taken
      from (select e.pos from eg_unseen_events(v_c.after_snapshot) e
            where pg_visible_in_snapshot(e.tx, v_c.target_snapshot)
            order by e.pos limit p_limit) b;
    else
      -- The rounds after it go on from the last position taken, in the primary key's order
      -- (migration 0027): each reads about the events it takes, where reading the batch again
      -- by transaction id would read all of its rest, every round (a long backlog's cost would
      -- grow with its square).
      select array_agg(b.pos order by b.pos), max(b.pos), count(*)
        into v_pos, v_last, v_taken
      from (select e.pos from events e
            where e.pos > v_c.through_pos and pg_visible_in_snapshot(e.tx, v_c.target_snapshot)
              and not pg_visible_in_snapshot(e.tx, v_c.after_snapshot)
            order by e.pos limit p_limit) b;
    end if;
    if v_taken > 0 then
      perform eg_project_decisions(v_pos);
      perform eg_project_rows(v_pos);
    end if;
    if v_taken < p_limit then
      update log_projection set after_snapshot = target_snapshot, target_snapshot = null, through_pos = 0 where id;
    else
      update log_projection set through_pos = v_last where id;
    end if;
    -- A batch an earlier round started may end before events this caller is waiting for: one more
    -- round, which starts its own.
    return json_build_object('events', v_taken, 'more', v_taken >= p_limit or not v_started, 'busy', false);
  end $$;
