-- Writes an attempt's outcome onto its row, for eg_record_outcome and eg_first_outcome: the one
-- statement both make, so the columns an outcome sets are listed once. Only an attempt with no
-- outcome yet takes it, or one crash recovery or an expiry marked sent_no_response (recovered_at)
-- and that has not had its real outcome: that one is late. Returns the attempt's number and whether
-- it was late; a null number when no attempt of that id and operation can take an outcome.
-- p_kept_unknown: the operation stays unknown although this outcome says otherwise (eg_record_outcome's
-- unknown-outcome rule); what the outcome said is kept in kept_state (migration 0020).
create or replace function eg_attempt_outcome(p jsonb, p_attempt_id text, p_op_id text, p_kept_unknown boolean,
    out o_number int, out o_late boolean) language plpgsql as $$
  begin
    update attempts set
      dispatch_state = p ->> 'dispatchState',
      status = (p ->> 'status')::int,
      response_fingerprint = p ->> 'responseFingerprint',
      destination_ref = p ->> 'destinationRef',
      replayed = (p ->> 'replayed')::boolean,
      duration_ms = (p ->> 'durationMs')::double precision,
      error = p ->> 'error',
      -- Which rule decided, and the destination's error code (migration 0012).
      outcome_rule = p ->> 'outcomeRule',
      error_code = p ->> 'errorCode',
      kept_state = case when p_kept_unknown then p ->> 'operationState' end,
      finished_at = now()
    where id = p_attempt_id and operation_id = p_op_id
      and (dispatch_state is null or (recovered_at is not null and finished_at is null))
    -- late: crash recovery marked this attempt first (read from the row this update locked).
    returning number, recovered_at is not null into o_number, o_late;
  end $$;
