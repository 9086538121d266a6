-- Shadow mode (migration 0010): what a request got back that the gate sent although its decision
-- was would_<verdict>. `select eg_shadow_dispatched(<ShadowDispatchInput as JSON text>)`, one
-- statement, after the response (or its failure) came back. Not an attempt of the operation the
-- verdict named: the gate reserved nothing for it and injected no Idempotency-Key, and the state of
-- that operation is not changed by it (the destination may have deduplicated it by its own key).
-- It is an effect the destination may have done, so the trail shows it beside its decision, and
-- one shadow.dispatched event in the decision's operation chain (or the decision's own, when it
-- named none) makes it part of the hash-chained record. A second call for the same decision (the
-- gate retrying after a lost answer) is ignored: returns false.
create or replace function eg_shadow_dispatched(p_input text) returns boolean language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_scope jsonb := p -> 'scope';
begin
  if (p ->> 'verdict') not like 'would\_%' then
    raise exception 'effectgate: eg_shadow_dispatched records would_* decisions only, not %', p ->> 'verdict'
      using errcode = 'EG400';
  end if;
  insert into shadow_dispatches (decision_id, operation_id, tool_id, run_id, tenant, area, agent, verdict,
    dispatch_state, status, duration_ms, error)
  values (p ->> 'decisionId', p ->> 'operationId', p ->> 'toolId', p ->> 'runId', v_scope ->> 'tenant',
    v_scope ->> 'area', v_scope ->> 'agent', p ->> 'verdict', p ->> 'dispatchState', (p ->> 'status')::int,
    (p ->> 'durationMs')::double precision, p ->> 'error')
  on conflict (decision_id) do nothing;
  if not found then
    return false;
  end if;
  perform eg_append_event(coalesce(p ->> 'operationId', p ->> 'decisionId'), 'shadow.dispatched',
    p ->> 'operationId', '{"input":' || p_input || '}');
  return true;
end $$;
