-- The continuation of a call whose latest attempt was answered MCP `input_required` (docs/design.md
-- §4.1 "MCP and other JSON-RPC tools"): that attempt did not run the tool, it asked for input, and
-- the same request again (with `inputResponses`, which the fingerprint ignores) is the next attempt
-- of the SAME operation: same id, so the same Idempotency-Key goes out; parent the attempt that
-- asked; reason input_required; decision input_continuation. It spends no retry budget
-- (input_rounds counts it). Called by eg_decide with the row it read unlocked, after it checked the
-- window and the fingerprint; locks in the global order (key, then operation in eg_retry) and
-- returns null when the key moved meanwhile (the caller looks again).
create or replace function eg_continue(p jsonb, p_input text, p_key dedupe_keys, p_expires_at timestamptz)
returns json language plpgsql as $$
declare
  v_key dedupe_keys%rowtype;
  v_prev attempts%rowtype;
  v_obs jsonb;
begin
  select * into v_key from dedupe_keys where key_hash = p_key.key_hash for update;
  -- Same attempt, same state: nothing (window start, operation) changed since the caller's read.
  if v_key.state is distinct from 'awaiting_input' or v_key.attempt_id is distinct from p_key.attempt_id then
    return null;
  end if;
  perform eg_project_operation(v_key.operation_id);
  select * into v_prev from attempts where id = v_key.attempt_id;
  -- A lookup made for this proposal (the key left unknown while the gate looked) is evidence too.
  if jsonb_typeof(p -> 'reconciliation') = 'object' then
    v_obs := eg_observe(p, v_key.operation_id);
  end if;
  update dedupe_keys set state = 'pending', attempt_number = v_key.attempt_number + 1,
    input_rounds = v_key.input_rounds + 1, attempt_id = p ->> 'newAttemptId', run_id = p ->> 'runId',
    step = p ->> 'step', expires_at = p_expires_at, operation_state = 'open'
  where key_hash = v_key.key_hash;
  return eg_retry(p, p_input, v_key.key_hash, v_key.operation_id, v_key.attempt_number + 1,
    v_key.attempt_number - v_key.input_rounds, v_prev,
    'input_continuation', p_expires_at, jsonb_build_object('observation', v_obs));
end $$;
