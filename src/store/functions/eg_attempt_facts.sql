-- The `attempt` facts of a decision.allow event. p_spent: the operation's attempts that spend the
-- retry budget, this one included (a continuation of an input_required answer spends none).
create or replace function eg_attempt_facts(p jsonb, p_number int, p_retry_of text, p_retry_reason text,
    p_retry_decision text, p_previous_fingerprint text, p_spent int) returns json language sql stable as $$
    select json_build_object('number', p_number, 'retryOfAttemptId', p_retry_of, 'retryReason', p_retry_reason,
      'retryDecision', p_retry_decision, 'attemptBudget', (p ->> 'retryBudget')::int,
      'remainingAttempts', (p ->> 'retryBudget')::int - p_spent,
      'fingerprint', p -> 'request' ->> 'fingerprint', 'previousFingerprint', p_previous_fingerprint)
  $$;
