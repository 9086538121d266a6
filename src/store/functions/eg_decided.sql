-- Records the decision row and its one event (last: it takes the head row lock). p_owner is the
-- operation the event belongs to (see README.md, events.operation_id); p_facts are the verdict's
-- own facts. Shadow mode (p.mode, migration 0010): every verdict but allow is recorded as
-- would_<verdict>, here and only here, so the steps that compute a verdict are the same in both
-- modes and what shadow mode reports is exactly what enforce mode would have answered.
create or replace function eg_decided(p jsonb, p_input text, p_verdict text, p_reason text, p_operation_id text,
    p_attempt_id text, p_key_hash text, p_owner text, p_facts json) returns void language plpgsql as $$
  declare
    v_scope jsonb := p -> 'scope';
  begin
    if p ->> 'mode' = 'shadow' and p_verdict <> 'allow' then
      p_verdict := 'would_' || p_verdict;
    end if;
    insert into decisions (id, run_id, step, tool_id, verdict, reason, operation_id, attempt_id, key_hash,
      tenant, area, agent, explain)
    values (p ->> 'decisionId', p ->> 'runId', p ->> 'step', p ->> 'toolId', p_verdict, p_reason, p_operation_id,
      p_attempt_id, p_key_hash, v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent',
      coalesce(p ->> 'explain', ''));
    perform eg_append_event(coalesce(p_owner, p ->> 'decisionId'), 'decision.' || p_verdict, p_owner,
      '{"input":' || p_input || ',"decision":' || json_build_object('verdict', p_verdict, 'reason', p_reason,
        'operationId', p_operation_id, 'attemptId', p_attempt_id, 'keyHash', p_key_hash)::text ||
      ',"facts":' || p_facts::text || '}');
  end $$;
