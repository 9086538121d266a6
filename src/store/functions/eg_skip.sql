-- The loop breaker's count (migration 0009): a run proposed key p_hash's effect while it was
-- already done by operation p_op, and the gate skipped it. Counts it per run and key
-- (run_key_skips; a skip of another operation of the key, a new window's, counts from one again),
-- and in the run's total (runs.duplicate_skips, shown on the run page). Returns this key's count.
-- Whether the run halts is decided at the top of eg_decide, by the next proposal of the key:
-- counting never refuses, so the duplicate that was counted is still answered as one.
--
-- Why per key: the loop breaker halts a run that keeps proposing the same duplicate. A run that resumes
-- or replays a plan proposes many distinct effects that are done, once each, and each 409 is the
-- gate doing its job; adding them up halted exactly the runs recovering correctly (and, with one
-- run for a whole shared proxy, everyone). A loop through several effects repeats each of them,
-- so it still halts within max_duplicate_skips + 1 rounds.
--
-- Shadow mode (p.mode, migration 0010) counts its would_duplicate answers in shadow_skips, never
-- in skips or the run's total: the run got the destination's answer, it was never told the effect
-- was done, so these must not bring its halt closer once the tool enforces. A new operation of
-- the key resets both counts, as it resets skips. Returns the count of the mode asked.
--
-- A client's automatic repeat of the call whose skip was last counted (eg_call_repeat.sql:
-- the same agent idempotency key, soon after, bounded; migration 0014) is
-- recorded in call_repeats, not counted: one call of the agent's is one proposal, however often
-- its SDK resends it.
create or replace function eg_skip(p jsonb, p_hash text, p_op text) returns int language plpgsql as $$
declare
  v_scope jsonb := p -> 'scope';
  v_skips int;
begin
  if p ->> 'mode' = 'shadow' then
    -- The run's row must exist for eg_halted's probe; its total stays what the run was told.
    insert into runs as r (tenant, area, agent, id, duplicate_skips, client)
    values (v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent', p ->> 'runId', 0, p ->> 'derivedClient')
    on conflict (tenant, area, agent, id) do nothing;
    insert into run_key_skips as s (tenant, area, agent, run_id, key_hash, operation_id, skips, shadow_skips)
    values (v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent', p ->> 'runId', p_hash, p_op, 0, 1)
    on conflict (tenant, area, agent, run_id, key_hash) do update
      set shadow_skips = case when s.operation_id = excluded.operation_id then s.shadow_skips + 1 else 1 end,
        skips = case when s.operation_id = excluded.operation_id then s.skips else 0 end,
        operation_id = excluded.operation_id
    returning shadow_skips into v_skips;
    return v_skips;
  end if;
  -- Only a proposal with the agent's own key can be a repeat (eg_call_repeat's first condition);
  -- without one, the most common duplicate, the statement cannot match a row and is not run.
  if eg_call_key(p) is not null then
    update run_key_skips s set call_repeats = s.call_repeats + 1
      where s.tenant = v_scope ->> 'tenant' and s.area = v_scope ->> 'area' and s.agent = v_scope ->> 'agent'
        and s.run_id = p ->> 'runId' and s.key_hash = p_hash and s.operation_id = p_op
        and eg_call_repeat(p, s.call_key, s.call_at, s.call_repeats)
      returning s.skips into v_skips;
    if found then
      return v_skips;
    end if;
  end if;
  -- client: the address a derived run was derived from (it never halts: eg_halted.sql; the run page names it).
  insert into runs as r (tenant, area, agent, id, duplicate_skips, client)
  values (v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent', p ->> 'runId', 1, p ->> 'derivedClient')
  on conflict (tenant, area, agent, id) do update set duplicate_skips = r.duplicate_skips + 1;
  insert into run_key_skips as s (tenant, area, agent, run_id, key_hash, operation_id, skips,
      call_key, call_at, call_repeats)
  values (v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent', p ->> 'runId', p_hash, p_op, 1,
      eg_call_key(p), now(), 0)
  on conflict (tenant, area, agent, run_id, key_hash) do update
    set skips = case when s.operation_id = excluded.operation_id then s.skips + 1 else 1 end,
      shadow_skips = case when s.operation_id = excluded.operation_id then s.shadow_skips else 0 end,
      operation_id = excluded.operation_id,
      call_key = excluded.call_key, call_at = excluded.call_at, call_repeats = 0
  returning skips into v_skips;
  return v_skips;
end $$;
