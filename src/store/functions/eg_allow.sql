-- The `allow` answer eg_decide returns to the gate (a DecideResult), with the idempotency key the
-- store chose for the attempt (eg_insert_attempt.sql), which the gate sends: p_attempt, the
-- attempt facts eg_insert_attempt returned.
create or replace function eg_allow(p jsonb, p_operation_id text, p_number int, p_retry_of text, p_retry_reason text,
    p_retry_decision text, p_supersedes text, p_attempt json) returns json language sql stable as $$
    select json_build_object('verdict', 'allow', 'decisionId', p ->> 'decisionId', 'operationId', p_operation_id,
      'attemptId', p ->> 'newAttemptId', 'attemptNumber', p_number, 'retryOfAttemptId', p_retry_of,
      'retryReason', p_retry_reason, 'retryDecision', p_retry_decision, 'supersedesOperationId', p_supersedes,
      'idempotencyKey', p_attempt ->> 'idempotencyKey')
  $$;
