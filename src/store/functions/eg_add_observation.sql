-- Evidence from outside the gate (docs/design.md §3 "Observations", §4.4): an operator's
-- decision (`effectgate operations resolve`), a destination's callback, an agent's read-back or an
-- operator's note, appended to its operation as one observation row and one observation.<kind>
-- event. `select eg_add_observation(<ObservationInput as JSON text>)`.
--
-- Settling (`settles`: succeeded | failed | duplicate_effect_confirmed) applies only to an operation
-- whose outcome nobody knows: `unknown`, or `open` with its latest attempt past its deadline and
-- still without an outcome (its gate lost track of it; then not as failed, see below). An attempt is never edited: the evidence
-- sits beside it. The key follows the operation, as a recorded outcome would move it: succeeded
-- and duplicate_effect_confirmed confirm it (for the window recorded with the operation, from now;
-- the proposal that repeats it is a duplicate pointing here), failed releases it (the next
-- proposal inside the window is a retry of this very operation, with the same Idempotency-Key).
-- Open approval requests are withdrawn: there is nothing left to approve.
--
-- An operator's decision on an operation that cannot be settled is refused (EG409, nothing
-- written; resolving twice names the state the first one left). A callback or read-back that
-- cannot settle is still evidence: it is recorded as `not_settled` with the state it found (a
-- destination's webhook that lost the race with the response, or one that contradicts it, is
-- kept, never dropped). The same delivery again (same kind, payload fingerprint and claim) answers
-- the first observation and writes nothing: webhooks are delivered at least once.
--
-- Locks in the global order (key, operation, then the chain head of the one event, last).
create or replace function eg_add_observation(p_input text) returns json language plpgsql
set enable_seqscan = off as $$
declare
  p jsonb := p_input::jsonb;
  v_kind text := p ->> 'kind';
  v_to text := p ->> 'settles';
  v_op_id text := p ->> 'operationId';
  v_refs jsonb := coalesce(p -> 'refs', '[]'::jsonb);
  v_ref text := coalesce(p ->> 'destinationRef', p -> 'refs' ->> 0);
  v_hash text;
  v_key dedupe_keys%rowtype;
  v_op operations%rowtype;
  v_att attempts%rowtype;
  v_prior observations%rowtype;
  v_settleable boolean;
  v_result text;
  v_id text := gen_random_uuid()::text;
  v_change json;
  v_key_change json;
  v_window_ends timestamptz;
  v_withdrawn int := 0;
  v_why text;
begin
  if v_kind is null or v_kind not in ('operator_decision', 'callback', 'read_back', 'operator_note') then
    raise exception 'effectgate: observation kind must be operator_decision, callback, read_back or operator_note, not %', v_kind;
  end if;
  if (v_kind = 'operator_decision' and v_to is null) or (v_kind = 'operator_note' and v_to is not null) then
    raise exception 'effectgate: an operator_decision settles the operation, an operator_note never does';
  end if;
  if v_to is not null and v_to not in ('succeeded', 'failed', 'duplicate_effect_confirmed') then
    raise exception 'effectgate: an observation settles succeeded, failed or duplicate_effect_confirmed, not %', v_to;
  end if;

  -- The key's lock, then the operation's rows brought up to date (eg_project_operation.sql). Its key is
  -- read from its row, which an operation has once the projector has passed (a key never changes);
  -- for one too young for that, every operation not yet projected is brought up to date first,
  -- which takes no operation's lock (the lock order puts the key first).
  select key_hash into v_hash from operations where id = v_op_id;
  if not found then
    perform eg_project_operation(null);
    select key_hash into v_hash from operations where id = v_op_id;
  end if;
  if not found then
    raise exception 'no operation %', v_op_id using errcode = 'EG404';
  end if;
  if v_hash is not null then
    select * into v_key from dedupe_keys where key_hash = v_hash for update;
  end if;
  perform eg_project_operation(v_op_id);
  select * into v_op from operations where id = v_op_id for update;
  select * into v_att from attempts where operation_id = v_op_id order by number desc limit 1;

  -- failed is never taken while the latest attempt has no outcome at all: the gate that sent it may
  -- still record "sent, no response", and a key released meanwhile would let the next proposal
  -- go out as a plain retry of a write that may have happened. Recovery (or the gate) makes it
  -- unknown first; then it can be resolved as failed.
  -- accepted (migration 0015): the destination took the work; this evidence says how it ended.
  v_settleable := (v_op.state in ('unknown', 'accepted')
    or (v_op.state = 'open' and v_att.id is not null and v_att.dispatch_state is null and v_att.deadline_at < now()
      and v_to is distinct from 'failed'))
    -- Evidence gathered before a later attempt (an agent's read-back) cannot speak for that one.
    and (p ->> 'asOfAttemptId' is null or v_att.id is not distinct from p ->> 'asOfAttemptId');

  -- The same delivery again is the same observation, unless it could not settle then and can now
  -- (a webhook that beat the response, redelivered once the operation became unknown).
  if p ->> 'payloadFingerprint' is not null then
    select * into v_prior from observations
      where operation_id = v_op_id and kind = v_kind and facts ->> 'payloadFingerprint' = p ->> 'payloadFingerprint'
        and (facts ->> 'settles') is not distinct from v_to
        and not (result = 'not_settled' and v_settleable)
      -- the delivery that settled, if one did
      order by result = 'not_settled', created_at, id limit 1;
    if found then
      return json_build_object('observationId', v_prior.id, 'operationId', v_op_id, 'kind', v_kind,
        'result', v_prior.result, 'operationState', v_op.state, 'stateChange', null, 'key', null,
        'approvalsWithdrawn', 0, 'alreadyRecorded', true);
    end if;
  end if;

  if v_to is not null and not v_settleable then
    v_why := case
      when p ->> 'asOfAttemptId' is not null and v_att.id is distinct from p ->> 'asOfAttemptId' then format(
        'its attempt %s started after this evidence was gathered', v_att.number)
      when v_op.state = 'open' and v_att.dispatch_state is null and v_att.deadline_at < now() then format(
        'its attempt %s has no outcome yet, and the gate that sent it may still record one; it can be resolved as failed once it is unknown (effectgate recover marks a dead gate''s attempts)',
        v_att.number)
      when v_op.state = 'open' and v_att.dispatch_state is null then format(
        'its attempt %s is still in flight (deadline %s): its own outcome will settle it', v_att.number,
        eg_iso(v_att.deadline_at))
      when v_op.state = 'open' then 'it is waiting for its next attempt (MCP input_required)'
      else 'its outcome is already settled' end;
    if v_kind = 'operator_decision' then
      raise exception 'operation % is %: %; only an unknown or accepted operation, or an open one whose attempt is past its deadline without an outcome, can be resolved',
        v_op_id, v_op.state, v_why using errcode = 'EG409';
    end if;
    v_result := 'not_settled';
  elsif v_to is not null then
    v_result := v_to;
    perform eg_set_operation_state(v_op_id, v_to);
    v_change := json_build_object('from', v_op.state, 'to', v_to);
    if v_key.key_hash is not null and v_key.operation_id = v_op_id then
      if v_to = 'failed' then
        update dedupe_keys set state = 'released', expires_at = null where key_hash = v_key.key_hash;
        v_key_change := json_build_object('state', 'released');
      else
        -- window_ms NULL: a permanent window (or an operation older than migration 0007).
        v_window_ends := now() + v_op.window_ms * interval '1 millisecond';
        update dedupe_keys set state = 'confirmed', confirmed_at = now(), window_ends_at = v_window_ends,
          destination_ref = coalesce(v_ref, destination_ref), expires_at = null
        where key_hash = v_key.key_hash;
        v_key_change := json_build_object('state', 'confirmed', 'confirmedAt', eg_iso(now()),
          'windowEndsAt', eg_iso(v_window_ends));
      end if;
    end if;
    v_withdrawn := eg_withdraw_approvals(v_op_id, v_to || ' (' || v_kind || ' by ' || (p ->> 'by') || ')');
  else
    v_result := 'noted';
  end if;

  insert into observations (id, operation_id, attempt_id, kind, result, facts)
  values (v_id, v_op_id, v_att.id, v_kind, v_result, jsonb_strip_nulls(jsonb_build_object(
    'by', p -> 'by', 'reason', p -> 'reason', 'source', p -> 'source', 'settles', v_to,
    'status', p -> 'status', 'destinationRef', v_ref,
    'refs', case when jsonb_array_length(v_refs) > 0 then v_refs end,
    'payloadFingerprint', p -> 'payloadFingerprint', 'asOfAttemptId', p -> 'asOfAttemptId',
    'stateAtObservation', v_op.state)));
  perform eg_append_event(v_op_id, 'observation.' || v_kind, v_op_id, '{"input":' || p_input || ',"facts":' ||
    json_build_object('observationId', v_id, 'observedAt', now(), 'result', v_result, 'stateChange', v_change,
      'key', v_key_change,
      'approvalsWithdrawn', v_withdrawn)::text || '}');
  return json_build_object('observationId', v_id, 'operationId', v_op_id, 'kind', v_kind, 'result', v_result,
    'operationState', case when v_change is not null then v_to else v_op.state end, 'stateChange', v_change, 'key', v_key_change,
    'approvalsWithdrawn', v_withdrawn, 'alreadyRecorded', false);
end $$;
