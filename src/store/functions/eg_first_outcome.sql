-- The common outcome, read from the key row alone: the answer of an operation's first attempt
-- while it still holds its pending key. eg_record_outcome calls it first and takes its general path
-- when it answers null (any other outcome: a retry's, a late one, one written twice, a keyless
-- operation's). Nothing of the attempt's or the operation's row is read or written.
--
-- Why the key row is enough, each condition of its UPDATE:
-- - state pending and attempt_id this attempt: every recorded outcome moves its key out of
--   pending, so no outcome of this attempt is recorded yet (an outcome written again, after its
--   first write committed or while it ran, finds the key moved and takes the general path);
-- - attempt_number 1: the operation's first attempt, which retried nothing, so no retry decision
--   can keep its failure unknown and no earlier attempt can still report;
-- - lost_attempt_id not this attempt (migration 0022): no expiry marked it, so its answer is not late;
-- - operation_state open (migration 0021): the operation takes this outcome as its state.
-- The key row's lock, taken by the UPDATE, holds off every other change of the operation until this
-- transaction ends: each one takes the key first (eg_project_operation.sql). So the outcome writes the
-- key and its event, nothing else: the attempt's outcome columns and the operation's state are
-- made from the event by the projection, exactly as the general path writes them for this outcome.
create or replace function eg_first_outcome(p jsonb, p_input text) returns json language plpgsql as $$
declare
  v_op_id text := p ->> 'operationId';
  v_attempt_id text := p ->> 'attemptId';
  v_state text := p ->> 'operationState';
  v_succeeded boolean := p ->> 'operationState' = 'succeeded';
  v_window interval := eg_ms(p -> 'windowMs');
  v_key_state text;
  v_change json;
begin
  v_key_state := eg_key_state(v_state);
  update dedupe_keys set
    state = v_key_state,
    confirmed_at = case when v_succeeded then now() end,
    window_ends_at = case when v_succeeded then now() + v_window end,
    destination_ref = case when v_succeeded or v_state = 'accepted' then p ->> 'destinationRef' end,
    operation_state = v_state
  where key_hash = p ->> 'keyHash' and operation_id = v_op_id and state = 'pending' and attempt_id = v_attempt_id
    and attempt_number = 1 and lost_attempt_id is distinct from v_attempt_id and operation_state = 'open';
  if not found then
    return null;
  end if;
  -- open: the destination asked for input without running the tool; the operation stays open and
  -- its key awaits the continuation (eg_continue).
  if v_state <> 'open' then
    v_change := json_build_object('from', 'open', 'to', v_state);
  end if;
  -- The attempt's outcome and the operation's state are made from the outcome event
  -- (eg_project_rows.sql): number 1, not late (no expiry marked it), as the key row says.
  perform eg_rows_unwritten(v_op_id, p, true);
  perform eg_outcome_event(p_input, v_op_id, 1, false, false, false, v_change,
    v_key_state, v_window);
  return json_build_object('operationState', v_state);
end $$;
