-- Records the decision as its one event (last: it takes the head row lock); the `decisions` row
-- is projected from it off the hot path (eg_project.sql), dated decidedAt: the transaction's time,
-- as the operation and attempt rows it opens are, so a timeline orders them as they happened. p_owner is the
-- operation the event belongs to (see README.md, events.operation_id; null: none, unless the
-- decision changed the operation it names); p_facts are the verdict's
-- own facts. Shadow mode (p.mode, migration 0010): every verdict but allow is recorded as
-- would_<verdict>, here and only here, so the steps that compute a verdict are the same in both
-- modes and what shadow mode reports is exactly what enforce mode would have answered.
create or replace function eg_decided(p jsonb, p_input text, p_verdict text, p_reason text, p_operation_id text,
    p_attempt_id text, p_key_hash text, p_owner text, p_facts json) returns void language plpgsql as $$
  begin
    -- A decision that changed the operation it names (it found that operation's reservation expired
    -- and marked its attempt lost) belongs to it, whatever its verdict: every change of an
    -- operation is told on its own chain (eg_key_taken.sql says why).
    if p_owner is null and json_typeof(p_facts -> 'outcomeLost') = 'object' then
      p_owner := p_operation_id;
    end if;
    if p ->> 'mode' = 'shadow' and p_verdict <> 'allow' then
      p_verdict := 'would_' || p_verdict;
    end if;
    perform eg_append_event(coalesce(p_owner, p ->> 'decisionId'), 'decision.' || p_verdict, p_owner,
      '{"input":' || p_input || ',"decision":' || json_build_object('verdict', p_verdict, 'reason', p_reason,
        'operationId', p_operation_id, 'attemptId', p_attempt_id, 'keyHash', p_key_hash,
        'decidedAt', now())::text ||
      ',"facts":' || p_facts::text || '}');
  end $$;
