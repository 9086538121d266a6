-- A new operation with its first attempt (the key, if any, is already reserved for it), told by its
-- decision.allow event alone: the projection makes both rows from it (eg_project_rows.sql).
-- p_supersedes: the operation this one forks from; p_extra: { observation, approval, outcomeLost,
-- closedOperation } facts (closedOperation: the operation that awaited input and was cancelled).
-- outcomeLost and closedOperation are changes of the operation that had the key: this decision
-- only names them, and eg_key_taken states them on that operation's own chain; the two events
-- are appended last, in chain order (eg_batch.sql says why).
-- The tool's unknown rule and dedupe window are recorded with the operation, so recovery and an
-- operator's resolution (eg_add_observation) need no policies.
create or replace function eg_allow_new(p jsonb, p_input text, p_key_hash text, p_expires_at timestamptz,
    p_supersedes text, p_extra jsonb) returns json language plpgsql as $$
  declare
    v_op text := p ->> 'newOperationId';
    v_attempt json;
    -- The operation that lost the key, when this proposal changed it (marked its attempt lost, or
    -- cancelled it as it awaited input).
    v_taken_from text := coalesce(p_extra -> 'outcomeLost' ->> 'operationId', p_extra -> 'closedOperation' ->> 'id');
    v_taken_first boolean;
  begin
    -- The operation's row and its first attempt's are made from this decision's event
    -- (eg_project_rows.sql); eg_insert_attempt writes no row for a first attempt.
    perform eg_rows_unwritten(v_op, p, false);
    v_attempt := eg_insert_attempt(p, v_op, 1, null, null, null, 1, null);
    v_taken_first := v_taken_from is not null and eg_chain_of(v_taken_from) < eg_chain_of(v_op);
    if v_taken_first then
      perform eg_key_taken(p, v_taken_from, v_op, p_key_hash, p_extra);
    end if;
    perform eg_decided(p, p_input, 'allow', p ->> 'keyError', v_op, p ->> 'newAttemptId', p_key_hash, v_op,
      json_build_object(
        'operation', json_build_object('opened', true, 'supersedesOperationId', p_supersedes),
        'attempt', v_attempt,
        'key', case when p_key_hash is not null then json_build_object('expiresAt', eg_iso(p_expires_at)) end,
        'observation', p_extra -> 'observation', 'approval', p_extra -> 'approval',
        'outcomeLost', case when p_extra -> 'outcomeLost' ->> 'operationId' is not null then json_build_object(
          'operationId', p_extra -> 'outcomeLost' ->> 'operationId', 'attemptId', p_extra -> 'outcomeLost' ->> 'attemptId',
          'statedBy', 'operation.key_taken') end,
        'closedOperation', case when p_extra -> 'closedOperation' ->> 'id' is not null then json_build_object(
          'id', p_extra -> 'closedOperation' ->> 'id', 'statedBy', 'operation.key_taken') end));
    if v_taken_from is not null and not v_taken_first then
      perform eg_key_taken(p, v_taken_from, v_op, p_key_hash, p_extra);
    end if;
    return eg_allow(p, v_op, 1, null, null, null, p_supersedes, v_attempt);
  end $$;
