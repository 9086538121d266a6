-- The `attempt` facts of a decision.allow event.
create or replace function eg_attempt_facts(p jsonb, p_number int, p_retry_of text, p_retry_reason text,
    p_retry_decision text, p_previous_fingerprint text) returns json language sql stable as $$
    select json_build_object('number', p_number, 'retryOfAttemptId', p_retry_of, 'retryReason', p_retry_reason,
      'retryDecision', p_retry_decision, 'attemptBudget', (p ->> 'retryBudget')::int,
      'remainingAttempts', (p ->> 'retryBudget')::int - p_number,
      'fingerprint', p -> 'request' ->> 'fingerprint', 'previousFingerprint', p_previous_fingerprint)
  $$;
