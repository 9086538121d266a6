-- Brings the operation and attempt rows of operation p_op up to date with every committed event
-- of it, under its lock (eg_lock_operation), held until this transaction ends; with p_op null,
-- every operation's (no lock: the functions step, and an outcome that names only its attempt).
-- Every function that reads or writes an operation's rows calls it first, after the key lock it
-- takes if it takes one: the hot path does not write those rows (a fresh operation, its first
-- attempt, that attempt's outcome), so until the projection has passed they are only in the
-- events.
--
-- Which events: those of the operation the projection has not finished (eg_unseen_events of
-- log_projection.after_snapshot) that are newer than its rows (operations.event_pos). Every
-- earlier writer of the operation held its key or its lock until it committed, so all of its events are
-- committed and seen here, in the order eg_project_rows needs. The projector may be applying some
-- of them at the same time: eg_project_rows applies an operation's events only over older rows,
-- so whichever commits second changes nothing. Twice, the second time in a new statement: a row
-- the projector inserted after the first statement's snapshot is invisible to it (its insert waits
-- for that row, then skips it, and its updates never see it), and the second read sees the row
-- and applies what it lacks. After that the operation's writers are all held off by its lock and
-- the projector only ever applies what is newer.
--
-- A rare path then reads the rows and writes its own changes to them directly; the projection
-- applies its event again later, to the same values (eg_project_rows.sql).
--
-- Inside eg_batch an event is queued, not appended, until the batch's end (eg_batch.sql). The hot
-- writers name the operations whose rows the batch has queued and not written (eg.unprojected);
-- projecting one of those now would miss its queued event, so this refuses with SQLSTATE EG425,
-- which rolls the batch back and makes the store send its calls one by one (group-commit.ts),
-- where nothing is queued. A rare path's own queued events need no refusal: it wrote their rows
-- itself.
create or replace function eg_project_operation(p_op text) returns void language plpgsql
set enable_seqscan = off set jit = off as $$
  declare
    v_after pg_snapshot;
    v_pos bigint[];
  begin
    if p_op = any(string_to_array(current_setting('eg.unprojected', true), ' ')) then
      raise exception 'effectgate: operation % has events this batch has not appended yet', p_op
        using errcode = 'EG425';
    end if;
    if p_op is not null then
      perform eg_lock_operation(p_op);
    end if;
    for pass in 1..2 loop
      select after_snapshot into v_after from log_projection where id;
      if v_after is null then
        -- Only before the functions step has drained the events of older versions (it does so
        -- before any call can get here, eg_project_legacy.sql): said here all the same.
        perform eg_project_legacy();
        select after_snapshot into v_after from log_projection where id;
      end if;
      select array_agg(e.pos order by e.pos) into v_pos
      from eg_unseen_events(v_after) e
      where e.operation_id is not null and (p_op is null or e.operation_id = p_op)
        and e.pos > coalesce((select o.event_pos from operations o where o.id = e.operation_id), -1);
      exit when v_pos is null;
      perform eg_project_rows(v_pos);
    end loop;
  end $$;
