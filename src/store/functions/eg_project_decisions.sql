-- The `decisions` rows made from the `decision.<verdict>` events among those named by
-- position in p_pos (migrations 0019, 0027), in one statement. The hot path does not write them:
-- the projection does (eg_project, eg_project_legacy). A row already there (a decision a previous
-- version's gate wrote as a row too, or one an earlier round took) is left as it is. An event
-- that names no decision is not one a gate wrote (`audit verify` reports a forged or damaged
-- event): it is left out rather than stopping the projection there for good.
create or replace function eg_project_decisions(p_pos bigint[]) returns void
    language plpgsql as $$
  begin
    with parsed as materialized (
      -- Materialized: each payload is parsed once, not once per field read from it.
      select x.p -> 'input' as i, x.p -> 'decision' as d, x.recorded_at
      from (select e.payload::jsonb as p, e.recorded_at
            from unnest(p_pos) as k(pos) join events e on e.pos = k.pos
            where e.type like 'decision.%' offset 0) x
    )
    insert into decisions (id, run_id, step, tool_id, verdict, reason, operation_id, attempt_id, key_hash,
      tenant, area, agent, explain, created_at)
    select i ->> 'decisionId', i ->> 'runId', i ->> 'step', i ->> 'toolId', d ->> 'verdict', d ->> 'reason',
      d ->> 'operationId', d ->> 'attemptId', d ->> 'keyHash', i -> 'scope' ->> 'tenant', i -> 'scope' ->> 'area',
      i -> 'scope' ->> 'agent', coalesce(i ->> 'explain', ''),
      coalesce((d ->> 'decidedAt')::timestamptz, recorded_at)
    from parsed
    where i ->> 'decisionId' is not null
    on conflict (id) do nothing;
  end $$;
