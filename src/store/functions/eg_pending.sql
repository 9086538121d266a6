-- Another run holds the key: answered `pending`, recorded as a decision (with its event) only
-- when the input asks for it (recordPending).
create or replace function eg_pending(p jsonb, p_input text, p_key dedupe_keys, p_reason text) returns json
    language plpgsql as $$
  declare
    v_op_state text;
  begin
    select state into v_op_state from operations where id = p_key.operation_id;
    v_op_state := coalesce(v_op_state, 'open');
    if not coalesce((p ->> 'recordPending')::boolean, false) then
      return json_build_object('verdict', 'pending', 'decisionId', null, 'operationId', p_key.operation_id,
        'operationState', v_op_state);
    end if;
    perform eg_decided(p, p_input, 'pending', p_reason, p_key.operation_id, null, p_key.key_hash, null,
      json_build_object('operationState', v_op_state, 'heldBy', json_build_object('runId', p_key.run_id,
        'step', p_key.step, 'attemptId', p_key.attempt_id, 'expiresAt', eg_iso(p_key.expires_at),
        'keyState', p_key.state)));
    return json_build_object('verdict', 'pending', 'decisionId', p ->> 'decisionId',
      'operationId', p_key.operation_id, 'operationState', v_op_state);
  end $$;
