-- A proposal for a key whose operation the destination accepted and has not finished (migration
-- 0015: `outcome.accepted`, a 202, or an MCP task): the key stays reserved for that operation and
-- is never taken over, whatever its pending_ttl. A tool with a reconcile lookup (hasLookup, or a
-- `reconcile` unknown rule; `idempotency.honored: true` does not stop it looking) looks first (the
-- first call answers `reconcile` and records nothing; the gate looks and calls again with the
-- observation): an item found settles the operation succeeded (two or more:
-- duplicate_effect_confirmed), confirms the key and answers the proposal as a duplicate of it.
-- Otherwise, or when the lookup found nothing (the work may not be done yet), the proposal is
-- answered `pending`, recorded at once (the gate does not wait on it: a destination's job can
-- take hours), naming the operation and the destination's reference. Returns null when the key
-- left the accepted state before it was locked: the caller looks again.
create or replace function eg_accepted(p jsonb, p_input text, p_key dedupe_keys) returns json
    language plpgsql as $$
declare
  v_rec jsonb := case when jsonb_typeof(p -> 'reconciliation') = 'object'
    and p -> 'reconciliation' ->> 'operationId' = p_key.operation_id then p -> 'reconciliation' end;
  v_window interval := eg_ms(p -> 'key' -> 'windowMs');
  v_key dedupe_keys%rowtype;
  v_op text;
  v_op_state text;
  v_obs jsonb;
  v_to text;
  v_ref text;
  v_skips int;
  v_source json;
begin
  if jsonb_typeof(p -> 'reconciliation') is distinct from 'object'
      and (coalesce(p ->> 'unknownRule', 'hold') = 'reconcile'
        or coalesce((p ->> 'hasLookup')::boolean, false)) then
    return json_build_object('verdict', 'reconcile', 'decisionId', null, 'operationId', p_key.operation_id,
      'attemptId', p_key.attempt_id);
  end if;
  select * into v_key from dedupe_keys where key_hash = p_key.key_hash for update;
  if v_key.state is distinct from 'accepted' then
    return null;
  end if;
  v_op := v_key.operation_id;
  perform eg_project_operation(v_op);
  select state into v_op_state from operations where id = v_op for update;
  if v_rec is not null then
    v_obs := eg_observe(p, v_op);
    if v_rec ->> 'result' in ('match', 'multiple') then
      v_to := case when v_rec ->> 'result' = 'match' then 'succeeded' else 'duplicate_effect_confirmed' end;
      v_ref := coalesce(v_rec -> 'remoteRefs' ->> 0, v_key.destination_ref);
      update dedupe_keys set state = 'confirmed', confirmed_at = now(), window_ends_at = now() + v_window,
        destination_ref = v_ref, expires_at = null
      where key_hash = v_key.key_hash;
      perform eg_set_operation_state(v_op, v_to);
      v_skips := eg_skip(p, v_key.key_hash, v_op);
      v_source := json_build_object('runId', v_key.run_id, 'step', v_key.step, 'operationId', v_op,
        'attemptId', v_key.attempt_id, 'confirmedAt', eg_iso(now()), 'destinationRef', v_ref);
      perform eg_decided(p, p_input, 'duplicate', 'reconciled_' || (v_rec ->> 'result'), v_op, null,
        v_key.key_hash, v_op, json_build_object('duplicateSkips', v_skips,
          'windowEndsAt', eg_iso(now() + v_window), 'source', v_source, 'observation', v_obs,
          'operation', json_build_object('stateChange', json_build_object('from', v_op_state, 'to', v_to)),
          'key', json_build_object('state', 'confirmed')));
      return json_build_object('verdict', 'duplicate', 'decisionId', p ->> 'decisionId', 'operationId', v_op,
        'duplicateSkips', v_skips, 'source', v_source, 'operationState', v_to,
        'reconciliation', v_rec ->> 'result');
    end if;
  end if;
  perform eg_decided(p, p_input, 'pending', 'accepted_by_destination', v_op, null, v_key.key_hash, null,
    json_build_object('operationState', v_op_state, 'destinationRef', v_key.destination_ref, 'observation', v_obs,
      'heldBy', json_build_object('runId', v_key.run_id, 'step', v_key.step, 'attemptId', v_key.attempt_id,
        'keyState', v_key.state)));
  return json_build_object('verdict', 'pending', 'decisionId', p ->> 'decisionId', 'operationId', v_op,
    'operationState', v_op_state, 'destinationRef', v_key.destination_ref,
    'reconciliation', v_rec ->> 'result');
end $$;
