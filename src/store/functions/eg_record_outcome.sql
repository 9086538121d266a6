-- Records an attempt's outcome, hot path: `select eg_record_outcome(<OutcomeInput as JSON text>)`,
-- one statement, one attempt.outcome event. Only the reservation this attempt still owns moves (a
-- takeover gave it to a newer attempt otherwise); one statement both tests ownership and moves it.
-- The common case, a first attempt's answer while it holds its pending key, is eg_first_outcome's,
-- from the key row alone; everything below is the general path, for every other outcome.
--
-- An attempt that crash recovery marked sent_no_response may still get its real outcome (a gate
-- that was slow, not dead): it is recorded as late evidence and may settle the operation; and the
-- reservation it owns may move from unknown as well as from pending (a late success confirms the
-- key instead of leaving it unknown forever). A definite failure of a retry made under the
-- unknown-outcome rules (honored idempotency, an approval, an accepted risk) settles nothing: the earlier
-- attempt that was sent without a response may still have done the effect (a destination often
-- refuses a retry BECAUSE the first one worked), so the operation and its key stay unknown
-- (docs/design.md §3). Unless every earlier attempt is known not to have been sent: then nothing
-- else may have done the effect, and the retry's answer is the operation's, whichever outcome is
-- recorded last (the retry's keeps its answer in kept_state for an earlier attempt's late not_sent).
--
-- Idempotent, because the gate writes an outcome again when it lost the answer of a write that may
-- have committed: an attempt that already has this very outcome (same dispatch state and
-- status) answers its operation's state again, with no second event; another outcome is refused. An abandoned decide (operationId null: the gate never heard the
-- decide's answer and sent nothing) is found by its attempt id, or is a no-op when that decide
-- never committed.
--
-- `set enable_seqscan = off`: see eg_decide.sql (every lookup here is a key probe; a plan cached
-- from an analyse of a small table must not scan the table as it grows).
-- `set lock_timeout = '4s'`: see eg_decide.sql.
create or replace function eg_record_outcome(p_input text) returns json language plpgsql
set enable_seqscan = off set lock_timeout = '4s' as $$
declare
  p jsonb := p_input::jsonb;
  v_op_id text := p ->> 'operationId';
  v_attempt_id text := p ->> 'attemptId';
  v_key_hash text := p ->> 'keyHash';
  v_state text := p ->> 'operationState';
  v_window interval := eg_ms(p -> 'windowMs');
  v_succeeded boolean := p ->> 'operationState' = 'succeeded';
  v_key_state text;
  v_owned boolean := false;
  v_op_state text;
  v_final text;
  v_key_op_state text;
  v_key_names boolean := false;
  v_number int;
  v_latest int;
  v_change json;
  v_late boolean;
  v_kept_unknown boolean := false;
  v_settles int;
  v_att attempts%rowtype;
  v_last attempts%rowtype;
  v_out record;
  v_answer json;
  v_holder text;
begin
  if v_state not in ('succeeded', 'failed', 'unknown', 'open', 'accepted') then
    raise exception 'effectgate: outcome state must be succeeded, failed, unknown, open or accepted, not %', v_state;
  end if;
  -- The common outcome, a first attempt's that still holds its pending key, from the key row alone.
  if v_key_hash is not null and v_op_id is not null then
    v_answer := eg_first_outcome(p, p_input);
    if v_answer is not null then
      return v_answer;
    end if;
  end if;
  -- Read unlocked: an outcome, once written (finished_at), never changes.
  -- Every other outcome reads its attempt's and its operation's rows, which the hot path no longer
  -- writes: the key's lock first, then the operation's chain brought up to date
  -- (eg_project_operation.sql). An abandoned decide's outcome names only its attempt: its key names the
  -- operation while the attempt holds it; otherwise (keyless, the key moved on, or the decide never
  -- committed) every chain is projected.
  if v_key_hash is not null then
    select case when attempt_id = v_attempt_id then operation_id end into v_holder from dedupe_keys
    where key_hash = v_key_hash for update;
  end if;
  perform eg_project_operation(coalesce(v_op_id, v_holder));
  select * into v_att from attempts where id = v_attempt_id;
  if not found and v_op_id is null then
    return json_build_object('operationState', null);
  end if;
  if found then
    v_op_id := coalesce(v_op_id, v_att.operation_id);
    -- The same write again: every fact the outcome carries, not only the status (an MCP result,
    -- a JSON-RPC error and input_required can all be response_received with 200).
    if v_att.finished_at is not null and v_att.operation_id = v_op_id
        and v_att.dispatch_state is not distinct from p ->> 'dispatchState'
        and v_att.status is not distinct from (p ->> 'status')::int
        and v_att.response_fingerprint is not distinct from p ->> 'responseFingerprint'
        and v_att.destination_ref is not distinct from p ->> 'destinationRef'
        and v_att.error is not distinct from p ->> 'error' then
      return json_build_object('operationState', (select state from operations where id = v_op_id),
        'alreadyRecorded', true);
    end if;
  end if;
  if v_state in ('failed', 'open') then
    -- Every retry decision but previous_attempt_failed and input_continuation retried an attempt
    -- that may have done the effect (honored, approved, curator_accepted_risk, reservation_expired):
    -- its definite failure, or its request for more input, proves nothing about that one.
    -- From the attempt read above: its retry decision is written with it and never changes.
    -- Unless every earlier attempt is known by now not to have been sent (its decide's answer was
    -- lost, or the store was away as it dispatched: the outcome came late, the retry was already
    -- made): then nothing may have done the effect, and this failure is the operation's.
    v_kept_unknown := v_att.operation_id = v_op_id
      and coalesce(v_att.retry_decision, 'previous_attempt_failed') not in ('previous_attempt_failed', 'input_continuation')
      and eg_maybe_sent_before(v_op_id, v_att.number);
    if coalesce(v_kept_unknown, false) then
      v_state := 'unknown';
    end if;
  end if;
  -- open: the destination answered without running the tool (MCP input_required); the next
  -- proposal of the same request continues the operation (eg_continue).
  -- accepted (migration 0015): the destination took the work and has not done it; the key stays
  -- reserved for this operation, with the destination's reference, until evidence settles it.
  v_key_state := eg_key_state(v_state);
  if v_key_hash is not null then
    update dedupe_keys set
      state = v_key_state,
      confirmed_at = case when v_succeeded then now() end,
      window_ends_at = case when v_succeeded then now() + v_window end,
      destination_ref = case when v_succeeded or v_state = 'accepted' then p ->> 'destinationRef' end,
      -- The operation's state as the rule below will set it (migration 0021), written with the
      -- key's own so the hot outcome writes the key row once: an owned key's attempt is the
      -- latest, so an open or unknown operation takes the outcome, and any but a settled success
      -- takes a success. The column is the operation's state before this outcome.
      operation_state = case when operation_state in ('open', 'unknown')
          or (v_succeeded and operation_state in ('failed', 'cancelled', 'accepted'))
        then v_state else operation_state end
    where key_hash = v_key_hash and operation_id = v_op_id
      and ((state in ('pending', 'unknown') and attempt_id = v_attempt_id)
        -- A success is proof the effect happened, whichever attempt of the operation reports it
        -- (a late outcome of an attempt that a retry superseded): the key is confirmed.
        or (v_succeeded and state in ('pending', 'unknown', 'released', 'awaiting_input', 'accepted')))
    returning operation_state into v_key_op_state;
    v_owned := found;
    v_key_names := v_owned;
    -- A key this outcome does not move may still name the operation (a late outcome of an attempt
    -- a retry superseded): locked now, before the operation (the global lock order), and its copy
    -- read, for the writes below that bring it along.
    if not v_owned then
      select operation_state into v_key_op_state from dedupe_keys
      where key_hash = v_key_hash and operation_id = v_op_id for update;
      v_key_names := found;
    end if;
  end if;
  -- Accepted, but the key is not this operation's any more: nothing can hold the work it does for
  -- it, and the destination is doing it, so the operation stays accepted without a key (settled
  -- by evidence as any other).
  -- Asked for input, but nothing can continue this operation: no key ties a continuation to it,
  -- or its key went to another operation meanwhile (a fork, a new window). None of its attempts ran
  -- the tool (otherwise the state would be unknown by now), so it ends cancelled, not open forever.
  if v_state = 'open' and not v_owned then
    v_state := 'cancelled';
  end if;
  select state into v_op_state from operations where id = v_op_id for update;
  if not found then
    raise exception 'effectgate: no operation %', v_op_id;
  end if;
  v_final := v_op_state;

  select * into v_out from eg_attempt_outcome(p, v_attempt_id, v_op_id, coalesce(v_kept_unknown, false));
  v_number := v_out.o_number;
  v_late := v_out.o_late;
  if v_number is null then
    -- The same outcome written concurrently (a retry of a write still running on a cut
    -- connection): the first one recorded it.
    if exists (select 1 from attempts where id = v_attempt_id and operation_id = v_op_id and finished_at is not null
        and dispatch_state is not distinct from p ->> 'dispatchState'
        and status is not distinct from (p ->> 'status')::int
        and response_fingerprint is not distinct from p ->> 'responseFingerprint'
        and destination_ref is not distinct from p ->> 'destinationRef'
        and error is not distinct from p ->> 'error') then
      return json_build_object('operationState', v_op_state, 'alreadyRecorded', true);
    end if;
    raise exception 'effectgate: attempt % of operation % does not exist or already has an outcome',
      v_attempt_id, v_op_id;
  end if;
  if v_owned then
    v_latest := v_number;
  else
    select max(number) into v_latest from attempts where operation_id = v_op_id;
  end if;

  -- An earlier attempt proves it was never sent, while its operation is unknown only because the
  -- latest attempt's answer was kept: when no earlier attempt is left that may have been sent, that
  -- answer (kept_state) settles the operation and the key the latest attempt holds. The not_sent of
  -- an attempt that had no outcome was the last piece of evidence the rule waited for.
  if v_number < v_latest and v_op_state = 'unknown' and p ->> 'dispatchState' = 'not_sent' then
    select * into v_last from attempts where operation_id = v_op_id and number = v_latest;
    if v_last.kept_state is not null and not eg_maybe_sent_before(v_op_id, v_latest) then
      v_state := v_last.kept_state;
      v_key_state := eg_key_state(v_state);
      update dedupe_keys set state = v_key_state, operation_state = v_state
      where key_hash = v_key_hash and operation_id = v_op_id and attempt_id = v_last.id and state = 'unknown'
      returning operation_state into v_key_op_state;
      v_owned := found;
      if v_state = 'open' and not v_owned then
        v_state := 'cancelled';
      end if;
      v_settles := v_latest;
    end if;
  end if;

  -- Only an operation still open or unknown takes its latest attempt's outcome: one that other
  -- evidence settled (a reconciliation found the effect) keeps it, and the late outcome is kept
  -- as evidence in the event (reconciliation appends, never rewrites). A success settles it
  -- whichever attempt reports it, even one a later definite failure had closed: the effect is there.
  if ((v_number = v_latest and v_op_state in ('open', 'unknown')) or v_settles is not null
      or (v_succeeded and v_op_state in ('open', 'unknown', 'failed', 'cancelled', 'accepted')))
      and v_op_state is distinct from v_state then
    update operations set state = v_state, updated_at = now() where id = v_op_id;
    v_final := v_state;
    -- byAttempt: the state is a later attempt's kept answer, which this outcome set free.
    v_change := case when v_settles is null then json_build_object('from', v_op_state, 'to', v_state)
      else json_build_object('from', v_op_state, 'to', v_state, 'byAttempt', v_settles) end;
    -- open: a late answer showed the tool did not run; nothing is left to approve either. Only an
    -- operation that was ever unknown can have approvals (eg_unknown asks for them): the first
    -- attempt of one still open never was, so the hot path makes no approvals statement.
    if v_state in ('succeeded', 'failed', 'open', 'cancelled', 'accepted') and not (v_op_state = 'open' and v_number = 1) then
      perform eg_withdraw_approvals(v_op_id,
        case when v_state = 'open' then 'open, the tool asked for input' else v_state end);
    end if;
  end if;

  -- The key's copy of the operation's state, where the writes above did not leave it right: a key
  -- that names the operation but that this outcome did not move. (Were the key update's CASE ever
  -- to disagree with the rule above, this corrects the copy, at the cost of a second write.)
  if v_key_names and v_key_op_state is distinct from v_final then
    update dedupe_keys set operation_state = v_final where key_hash = v_key_hash and operation_id = v_op_id;
  end if;

  perform eg_outcome_event(p_input, v_op_id, v_number, v_number < v_latest, v_late, v_kept_unknown, v_change,
    case when v_owned then v_key_state end, v_window);
  return json_build_object('operationState', case when v_change is not null then v_state
    when v_number = v_latest and v_op_state not in ('open', 'unknown') then v_op_state
    when v_number < v_latest then v_op_state else v_state end);
end $$;
