-- Brings the operation and attempt rows of one operation's chain up to its committed head, under
-- that chain's row_projection lock (migration 0023), held until this transaction ends; with
-- p_operation_id null, every chain, in chain order. Every function that reads or writes an
-- operation's rows calls it first, after the key lock it takes if it takes one: the hot path no
-- longer writes those rows (a fresh operation, its first attempt, that attempt's outcome), so until
-- the projector has passed they are only in the events.
--
-- Why that is enough, and why the lock: a rare path writes its own changes to the rows directly
-- and appends its event; the projector later applies that event again, to the same values
-- (eg_project_rows.sql). What must never happen is the projector applying an OLDER event over a
-- row a rare path has already moved, which it could only do while it still had events before the
-- rare path's to project. So the rare path first projects every event before its own, and holds
-- the chain's frontier row while it writes: the projector takes frontier rows `for update skip
-- locked` and leaves this chain alone until the rare path commits, and from then on every event
-- it projects is the rare path's or a later one. The hot path's own writes of an operation's rows
-- are in the events alone; the key lock taken first (lock order: key, chain frontier, operation)
-- means the one hot writer of an existing operation, its first outcome (eg_first_outcome.sql), has
-- committed before this reads the head.
--
-- Inside eg_batch an event is queued, not appended, until the batch's end (eg_batch.sql), so the
-- head does not yet hold it. The hot writers name the operations whose rows the batch has queued
-- and not written (eg.unprojected); projecting one of those now would miss its queued event, so
-- this refuses with SQLSTATE EG425, which rolls the batch back and makes the store send its calls
-- one by one (group-commit.ts), where nothing is queued. A rare path's own queued events need no
-- refusal: it wrote their rows itself.
create or replace function eg_project_chain(p_operation_id text) returns void language plpgsql as $$
  declare
    v_locked int[];
  begin
    if p_operation_id = any(string_to_array(current_setting('eg.unprojected', true), ' ')) then
      raise exception 'effectgate: operation % has events this batch has not appended yet', p_operation_id
        using errcode = 'EG425';
    end if;
    select array_agg(chain) into v_locked from (select chain from row_projection
      where p_operation_id is null or chain = eg_chain_of(p_operation_id) order by chain for update) l;
    perform eg_project_frontiers(v_locked, null);
  end $$;
