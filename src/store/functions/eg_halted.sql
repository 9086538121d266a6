-- The loop breaker, step (a) of eg_decide (migration 0009): answers `halted` (recording the
-- decision and, on the proposal that halts the run, the halt) or returns null for the steps that
-- follow, for named runs only. eg_skip counts per run and key (why per key: eg_skip.sql);
-- eg_release_run lets a halted run go on. Takes no lock before the halt's UPDATE of the run's own
-- row, except for a delegated claim of the skipped operation (below): the key's row, then its chain.
create or replace function eg_halted(p jsonb, p_input text) returns json language plpgsql as $$
declare
  v_scope jsonb := p -> 'scope';
  v_tenant text := v_scope ->> 'tenant';
  v_area text := v_scope ->> 'area';
  v_agent text := v_scope ->> 'agent';
  v_run text := p ->> 'runId';
  v_decision text := p ->> 'decisionId';
  v_key jsonb := p -> 'key';
  v_max_skips int := (p ->> 'maxDuplicateSkips')::int;
  v_skips int;
  v_halted_at timestamptz;
  v_halt_decision text;
  v_halt_skips int;
  v_releases int;
  v_skipped_op text;
  v_op text;
begin
  -- Only a named run halts (Effectgate-Run, the interceptor's run, --run-id): a run the gate
  -- derived (derivedClient set) is every process of one scope behind one address, not one agent's
  -- run, and halting it refused other processes' different effects. Its skips are still counted
  -- (eg_skip: the run page shows them), and each duplicate is still answered as one.
  if p ->> 'derivedClient' is not null then
    return null;
  end if;
  -- A run's row is written on its first duplicate skip (eg_skip), and a halt needs that row's
  -- counts, so a run with none has nothing to halt: the common case, answered by a probe of `runs`
  -- alone (a statement opens every relation of its plan, found or not) before the one that joins
  -- its counts.
  if not exists (select 1 from runs r where r.tenant = v_tenant and r.area = v_area and r.agent = v_agent
      and r.id = v_run) then
    return null;
  end if;
  -- A halted run is answered `halted` whatever it proposes, until an
  -- operator releases it (eg_release_run). A run not yet halted halts here when it proposes again
  -- an effect it was already told max_duplicate_skips times is done: eg_skip counts per run and
  -- key (why per key: eg_skip.sql), so a run's distinct duplicates never add up to a halt.
  -- Shadow mode reads its own count (eg_skip.sql): would_halted never follows from what a run
  -- was told, nor a halt from what it was not.
  -- A client's automatic repeat of the call last counted (eg_call_repeat.sql) halts nothing: it
  -- is counted as nothing (eg_skip), so the count it finds was reached by the call it repeats.
  select r.halted_at, r.halt_decision_id, r.releases,
      case when p ->> 'mode' = 'shadow' then s.shadow_skips
        when eg_call_repeat(p, s.call_key, s.call_at, s.call_repeats) then 0 else s.skips end,
      s.operation_id, h.skips
    into v_halted_at, v_halt_decision, v_releases, v_skips, v_skipped_op, v_halt_skips
    from runs r
    left join run_key_skips s on s.tenant = r.tenant and s.area = r.area and s.agent = r.agent
      and s.run_id = r.id and s.key_hash = v_key ->> 'hash'
    left join run_key_skips h on h.tenant = r.tenant and h.area = r.area and h.agent = r.agent
      and h.run_id = r.id and h.key_hash = r.halted_key_hash
    where r.tenant = v_tenant and r.area = v_area and r.agent = v_agent and r.id = v_run;
  -- Only while that effect is still done by the operation it was skipped for: past its window the
  -- key is a new effect, and its next skip counts from one (eg_skip). A delegated worker's claim
  -- of that very operation is the same done effect whatever its key holds now (eg_delegated).
  -- A delegated claim reads the claimed operation's row: the key's lock, then its chain brought up
  -- to date (eg_project_operation.sql).
  if v_halted_at is null and coalesce(v_skips, 0) >= v_max_skips and p ->> 'claimedOperationId' = v_skipped_op then
    perform 1 from dedupe_keys where key_hash = v_key ->> 'hash' for update;
    perform eg_project_operation(v_skipped_op);
  end if;
  if v_halted_at is null and coalesce(v_skips, 0) >= v_max_skips and (exists (
      select 1 from dedupe_keys where key_hash = v_key ->> 'hash' and operation_id = v_skipped_op
        and state = 'confirmed' and (window_ends_at is null or window_ends_at >= now()))
      or (p ->> 'claimedOperationId' = v_skipped_op and exists (select 1 from operations
        where id = v_skipped_op and state in ('succeeded', 'duplicate_effect_confirmed')))) then
    -- Halt now, unless a release (releases moved on) or another proposal's halt got there first.
    -- Shadow mode (migration 0010) halts nothing: it answers would_halted for this proposal and
    -- every later one of the effect, and leaves no halt for an operator to release.
    if p ->> 'mode' is distinct from 'shadow' then
      update runs set halted_at = now(), halt_decision_id = v_decision, halted_key_hash = v_key ->> 'hash'
        where tenant = v_tenant and area = v_area and agent = v_agent and id = v_run
          and halted_at is null and releases = v_releases;
    end if;
    if p ->> 'mode' = 'shadow' or found then
      v_halted_at := now();
      v_halt_decision := v_decision;
      v_halt_skips := v_skips;
      v_op := v_skipped_op;
    else
      select r.halted_at, r.halt_decision_id, h.skips into v_halted_at, v_halt_decision, v_halt_skips
        from runs r left join run_key_skips h on h.tenant = r.tenant and h.area = r.area and h.agent = r.agent
          and h.run_id = r.id and h.key_hash = r.halted_key_hash
        where r.tenant = v_tenant and r.area = v_area and r.agent = v_agent and r.id = v_run;
    end if;
  end if;
  if v_halted_at is not null then
    perform eg_decided(p, p_input, 'halted',
      case when v_halt_decision = v_decision
        then format('loop_breaker: run %s proposed again an effect it was told %s times is done (operation %s; max %s)',
          v_run, v_halt_skips, v_op, v_max_skips)
        else format('run_halted: run %s is halted since %s (decision %s)', v_run, eg_iso(v_halted_at), v_halt_decision) end,
      v_op, null, v_key ->> 'hash', null, json_build_object('duplicateSkips', v_halt_skips,
        'maxDuplicateSkips', v_max_skips, 'haltedAt', eg_iso(v_halted_at), 'haltDecisionId', v_halt_decision));
    return json_build_object('verdict', 'halted', 'decisionId', v_decision, 'runId', v_run,
      'duplicateSkips', coalesce(v_halt_skips, v_max_skips),
      'haltedAt', eg_iso(v_halted_at), 'haltDecisionId', v_halt_decision, 'operationId', v_op);
  end if;
  return null;
end $$;
