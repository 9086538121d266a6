-- Inserts attempt p_number of operation p_operation_id for the proposal p, with its retry lineage
-- and the attempt budget it leaves (p_spent: the attempts that spent it, this one included).
-- plpgsql, not `language sql`: PostgreSQL plans a SQL function's INSERT again on every call (98-106
-- µs per allow, measured), while plpgsql keeps the plan for the session.
create or replace function eg_insert_attempt(p jsonb, p_operation_id text, p_number int, p_retry_of text,
    p_retry_reason text, p_retry_decision text, p_spent int) returns void language plpgsql as $$
  begin
    insert into attempts (id, operation_id, number, decision_id, run_id, step, worker, retry_of_attempt_id,
      retry_reason, retry_decision, remaining_attempts, request, gate_instance, deadline_at)
    values (p ->> 'newAttemptId', p_operation_id, p_number, p ->> 'decisionId', p ->> 'runId', p ->> 'step',
      p ->> 'worker', p_retry_of, p_retry_reason, p_retry_decision,
      coalesce((p ->> 'retryBudget')::int, 1) - p_spent, p -> 'request', p ->> 'gateInstance',
      now() + eg_ms(p -> 'deadlineMs'));
  end $$;
