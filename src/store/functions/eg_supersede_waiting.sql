-- A proposal that takes an awaiting_input key without continuing its operation (docs/design.md §4.1): a
-- changed request inside the window (p_fork_of: the operation it forks from, which it supersedes)
-- or any request past the window. It is a new operation with the key; the operation that asked for
-- input can never be continued now, and none of its attempts ran the tool, so it is cancelled
-- rather than left open forever. Called by eg_decide with the row it read unlocked; locks in the
-- global order (key, then the old operation) and returns null when the key moved meanwhile (the
-- caller looks again).
create or replace function eg_supersede_waiting(p jsonb, p_input text, p_key dedupe_keys, p_expires_at timestamptz,
    p_fork_of text) returns json language plpgsql as $$
declare
  v_key dedupe_keys%rowtype;
  v_obs jsonb;
  v_old_state text;
begin
  select * into v_key from dedupe_keys where key_hash = p_key.key_hash for update;
  if v_key.state is distinct from 'awaiting_input' or v_key.attempt_id is distinct from p_key.attempt_id then
    return null;
  end if;
  update dedupe_keys set state = 'pending', operation_id = p ->> 'newOperationId', attempt_number = 1,
    input_rounds = 0, attempt_id = p ->> 'newAttemptId', run_id = p ->> 'runId', step = p ->> 'step',
    created_at = now(), expires_at = p_expires_at, confirmed_at = null, window_ends_at = null,
    destination_ref = null, operation_state = 'open'
  where key_hash = v_key.key_hash;
  perform eg_project_operation(v_key.operation_id);
  select state into v_old_state from operations where id = v_key.operation_id for update;
  if v_old_state = 'open' then
    perform eg_set_operation_state(v_key.operation_id, 'cancelled');
    perform eg_withdraw_approvals(v_key.operation_id, 'cancelled, superseded while it awaited input');
  end if;
  -- A lookup made for this proposal (the key left unknown while the gate looked) is evidence too.
  if jsonb_typeof(p -> 'reconciliation') = 'object' then
    v_obs := eg_observe(p, p -> 'reconciliation' ->> 'operationId');
  end if;
  return eg_allow_new(p, p_input, v_key.key_hash, p_expires_at, p_fork_of,
    jsonb_build_object('observation', v_obs, 'closedOperation', case when v_old_state = 'open' then
      jsonb_build_object('id', v_key.operation_id, 'stateChange',
        jsonb_build_object('from', 'open', 'to', 'cancelled')) end));
end $$;
