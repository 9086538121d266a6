-- A reservation whose pending_ttl passed while its attempt still has no outcome (docs/design.md §2,
-- §4.1 "Reservation TTL and unknown operations"): the gate that held it lost track of it (it
-- crashed, or the store failed when the outcome was written), so the attempt may have done the
-- effect. It is not a free key: the attempt becomes sent_no_response with an outcome_lost
-- observation, its operation unknown, and (p_key_to_unknown) the key unknown, so the proposal that
-- found it is answered by the unknown-outcome rules. Called by eg_decide with the row it read
-- unlocked; locks in the global order (key, operation, attempt) and re-checks. An attempt an earlier
-- call already marked (on_expired: retry with no budget left keeps the key pending) is not marked
-- again, but the key still follows p_key_to_unknown. Returns the facts for the caller's one event;
-- `marked: false` when the key moved meanwhile or its attempt has a real outcome (the usual rules
-- apply then).
create or replace function eg_expire(p jsonb, p_key dedupe_keys, p_key_to_unknown boolean) returns jsonb
language plpgsql as $$
declare
  v_key dedupe_keys%rowtype;
  v_op operations%rowtype;
  v_att attempts%rowtype;
  v_latest int;
  v_change jsonb;
  v_obs_id text := gen_random_uuid()::text;
  v_error constant text := 'outcome_lost: no outcome was recorded before the reservation expired (pending_ttl)';
begin
  select * into v_key from dedupe_keys where key_hash = p_key.key_hash for update;
  if v_key.state is distinct from 'pending' or v_key.expires_at >= now()
      or v_key.attempt_id is distinct from p_key.attempt_id then
    return jsonb_build_object('marked', false);
  end if;
  perform eg_project_operation(v_key.operation_id);
  select * into v_op from operations where id = v_key.operation_id for update;
  select * into v_att from attempts where id = v_key.attempt_id for update;
  if not found or v_att.finished_at is not null then
    return jsonb_build_object('marked', false);
  end if;
  -- The key records that its attempt is marked (migration 0022), whether it stays pending or not:
  -- an outcome that still finds the key pending is then a late one. Also when the attempt was
  -- marked before: an expiry of the previous version may have marked it without the key.
  update dedupe_keys set lost_attempt_id = v_att.id,
    state = case when p_key_to_unknown then 'unknown' else state end,
    expires_at = case when p_key_to_unknown then null else expires_at end
  where key_hash = v_key.key_hash;
  if v_att.dispatch_state is not null then
    -- Marked before (by an expiry or a recovery): unknown already, nothing new to observe.
    return jsonb_build_object('marked', true, 'alreadyMarked', true, 'operationId', v_op.id,
      'attemptId', v_att.id, 'dispatchState', v_att.dispatch_state,
      'key', case when p_key_to_unknown then jsonb_build_object('state', 'unknown') end);
  end if;
  -- recovered_at marks an outcome the gate did not see: a late real outcome is still accepted.
  update attempts set dispatch_state = 'sent_no_response', recovered_at = now(), error = v_error
  where id = v_att.id;
  select max(number) into v_latest from attempts where operation_id = v_op.id;
  if v_att.number = v_latest and v_op.state = 'open' then
    perform eg_set_operation_state(v_op.id, 'unknown');
    v_change := jsonb_build_object('from', v_op.state, 'to', 'unknown');
  end if;
  insert into observations (id, operation_id, attempt_id, kind, result, facts, decision_id)
  values (v_obs_id, v_op.id, v_att.id, 'outcome_lost', 'marked_unknown', jsonb_build_object(
    'gateInstance', v_att.gate_instance, 'startedAt', eg_iso(v_att.started_at),
    'reservationExpiredAt', eg_iso(v_key.expires_at), 'onExpired', coalesce(p ->> 'onExpired', 'unknown')),
    p ->> 'decisionId');
  return jsonb_build_object('marked', true,
    'observation', jsonb_build_object('id', v_obs_id, 'kind', 'outcome_lost', 'result', 'marked_unknown'),
    'operationId', v_op.id, 'attemptId', v_att.id, 'dispatchState', 'sent_no_response', 'error', v_error,
    'stateChange', v_change, 'key', case when p_key_to_unknown then jsonb_build_object('state', 'unknown') end);
end $$;
