-- Attempt p_number of operation p_op, whose key row the caller already moved to this attempt.
-- p_spent: the operation's attempts that spend the retry budget, this one included (p_number minus
-- the key's input_rounds: continuations of an input_required answer spend none). p_extra:
-- { observation, approval, outcomeLost } facts for the allow event.
create or replace function eg_retry(p jsonb, p_input text, p_key_hash text, p_op text, p_number int, p_spent int,
    p_prev attempts, p_retry_decision text, p_expires_at timestamptz, p_extra jsonb) returns json
    language plpgsql as $$
  declare
    v_op_state text;
    v_attempt json;
    v_reason text := case when p_retry_decision = 'input_continuation' then 'input_required'
      else eg_retry_reason(p, p_prev) end;
  begin
    select state into v_op_state from operations where id = p_op for update;
    if v_op_state is distinct from 'open' then
      -- Not eg_set_operation_state: the caller's move of the key to this attempt already set the
      -- key's operation_state to open.
      update operations set state = 'open', updated_at = now() where id = p_op;
    end if;
    v_attempt := eg_insert_attempt(p, p_op, p_number, p_prev.id, v_reason, p_retry_decision, p_spent,
      p_prev.request ->> 'fingerprint');
    perform eg_decided(p, p_input, 'allow', p ->> 'keyError', p_op, p ->> 'newAttemptId', p_key_hash, p_op,
      json_build_object(
        'operation', json_build_object('opened', false, 'stateChange',
          case when v_op_state is distinct from 'open' then json_build_object('from', v_op_state, 'to', 'open') end),
        'attempt', v_attempt,
        'key', json_build_object('expiresAt', eg_iso(p_expires_at)),
        'observation', p_extra -> 'observation', 'approval', p_extra -> 'approval',
        'outcomeLost', p_extra -> 'outcomeLost'));
    return eg_allow(p, p_op, p_number, p_prev.id, v_reason, p_retry_decision, null, v_attempt);
  end $$;
