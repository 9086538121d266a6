-- Another run holds the key: answered `pending`, recorded as a decision (with its event) only
-- when the input asks for it (recordPending). The operation's state is the key row's copy
-- (migration 0021), not the operation's row: p_key is the row eg_decide's upsert found and locked,
-- and every change of the operation's state writes that copy under the same lock. So a pending,
-- like a duplicate, reads the key alone (two agents proposing one effect at once meet it).
create or replace function eg_pending(p jsonb, p_input text, p_key dedupe_keys, p_reason text) returns json
    language plpgsql as $$
  declare
    v_op_state text;
  begin
    v_op_state := coalesce(p_key.operation_state, 'open');
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
