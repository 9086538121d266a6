-- Makes attempt p_number of operation p_operation_id for the proposal p, with its retry lineage
-- and the attempt budget it leaves (p_spent: the attempts that spent it, this one included), and
-- returns the `attempt` facts of its decision.allow event: every column of the row the proposal
-- does not carry itself, so the row can be made again from the events alone (the idempotency
-- keys it chose included; eg_allow hands the one it sends to the gate).
-- plpgsql, not `language sql`: PostgreSQL plans a SQL function's INSERT again on every call (98-106
-- µs per allow, measured), while plpgsql keeps the plan for the session.
-- The idempotency key it sends (migration 0013; p -> 'idempotency', null when none is sent): a
-- retry after an outcome nobody knows sends the key of the attempt before, whatever the agent sends
-- now, since only that key lets the destination deduplicate it; otherwise the agent's own key when
-- the tool keeps it (agent_key: keep), else the gate's key for the operation: its id, or the first
-- max_length hex characters of SHA-256(id) when the id is longer (idempotency-key.ts says the same).
create or replace function eg_insert_attempt(p jsonb, p_operation_id text, p_number int, p_retry_of text,
    p_retry_reason text, p_retry_decision text, p_spent int, p_previous_fingerprint text) returns json
    language plpgsql as $$
  declare
    v_idem jsonb := case when jsonb_typeof(p -> 'idempotency') = 'object' then p -> 'idempotency' end;
    v_max int := (v_idem ->> 'maxLength')::int;
    v_agent text := v_idem ->> 'agentKey';
    v_gate text;
    v_sent text;
    v_budget int := coalesce((p ->> 'retryBudget')::int, 1);
  begin
    if v_idem is not null then
      v_gate := case when v_max is null or char_length(p_operation_id) <= v_max then p_operation_id
        else left(encode(sha256(convert_to(p_operation_id, 'UTF8')), 'hex'), v_max) end;
      if p_retry_of is not null and p_retry_decision is distinct from 'previous_attempt_failed' then
        -- Attempts recorded before 0013 sent their operation id when the operation had a header.
        select coalesce(a.idempotency_key, case when o.idempotency_header is not null then o.id end)
          into v_sent
          from attempts a join operations o on o.id = a.operation_id where a.id = p_retry_of;
      end if;
      v_sent := coalesce(v_sent,
        case when v_idem ->> 'agentKeyMode' in ('keep', 'require') and v_agent is not null then v_agent end,
        v_gate);
    end if;
    -- An operation's first attempt (eg_allow_new's) is a hot write: its row is made from its
    -- decision's event (eg_project_rows.sql). A later one is a rare path's, written here.
    if p_number > 1 then
      insert into attempts (id, operation_id, number, decision_id, run_id, step, worker, retry_of_attempt_id,
        retry_reason, retry_decision, remaining_attempts, request, gate_instance, deadline_at,
        idempotency_key, agent_idempotency_key, gate_idempotency_key)
      values (p ->> 'newAttemptId', p_operation_id, p_number, p ->> 'decisionId', p ->> 'runId', p ->> 'step',
        p ->> 'worker', p_retry_of, p_retry_reason, p_retry_decision,
        v_budget - p_spent, p -> 'request', p ->> 'gateInstance',
        now() + eg_ms(p -> 'deadlineMs'), v_sent, left(v_agent, 255), v_gate);
    end if;
    return json_build_object('number', p_number, 'retryOfAttemptId', p_retry_of, 'retryReason', p_retry_reason,
      'retryDecision', p_retry_decision, 'attemptBudget', v_budget, 'remainingAttempts', v_budget - p_spent,
      'fingerprint', p -> 'request' ->> 'fingerprint', 'previousFingerprint', p_previous_fingerprint,
      'idempotencyKey', v_sent, 'gateIdempotencyKey', v_gate);
  end $$;
