-- Projects committed events onto the tables made from them (migration 0019): today the
-- `decisions` rows, from the `decision.<verdict>` events, which the hot path no longer writes
-- twice. Called by the gate's projector in the background (p_wait false: a round another process
-- is running is skipped, not waited for) and by every reader of decisions before it reads (p_wait
-- true: it waits for a running round and then projects what is left, so it sees every decision
-- committed before it asked). Takes at most p_per_chain events of each chain; answers how many it
-- took and whether a chain has more.
--
-- One statement does the reading, the inserts and the frontier move, so they share one snapshot:
-- an event committed while it runs is neither projected nor passed. A chain's committed events are
-- a gap-free prefix of it (an append holds its head row until it commits), so "after the
-- frontier, in seq order" never skips an event that commits later. A row already there (a
-- decision a previous version's gate wrote as a row too) is left as it is.
create or replace function eg_project(p_per_chain int, p_wait boolean) returns json language plpgsql
set enable_seqscan = off as $$
  declare
    v_events int;
    v_more boolean;
  begin
    if p_wait then
      perform pg_advisory_xact_lock(1701273974);
    elsif not pg_try_advisory_xact_lock(1701273974) then
      return json_build_object('events', 0, 'more', false, 'busy', true);
    end if;
    with taken as (
      select e.chain, e.seq, e.type, e.payload, e.recorded_at
      from event_projection f
      cross join lateral (
        select chain, seq, type, payload, recorded_at from events
        where events.chain = f.chain and events.seq > f.seq
        order by events.seq limit p_per_chain
      ) e
    ), decided as (
      insert into decisions (id, run_id, step, tool_id, verdict, reason, operation_id, attempt_id, key_hash,
        tenant, area, agent, explain, created_at)
      select d.p -> 'input' ->> 'decisionId', d.p -> 'input' ->> 'runId', d.p -> 'input' ->> 'step',
        d.p -> 'input' ->> 'toolId', d.p -> 'decision' ->> 'verdict', d.p -> 'decision' ->> 'reason',
        d.p -> 'decision' ->> 'operationId', d.p -> 'decision' ->> 'attemptId', d.p -> 'decision' ->> 'keyHash',
        d.p -> 'input' -> 'scope' ->> 'tenant', d.p -> 'input' -> 'scope' ->> 'area',
        d.p -> 'input' -> 'scope' ->> 'agent', coalesce(d.p -> 'input' ->> 'explain', ''),
        coalesce((d.p -> 'decision' ->> 'decidedAt')::timestamptz, d.recorded_at)
      from (select payload::jsonb as p, recorded_at from taken where type like 'decision.%') d
      on conflict (id) do nothing
    ), moved as (
      update event_projection f set seq = m.seq
      from (select chain, max(seq) as seq from taken group by chain) m
      where f.chain = m.chain
    ), counted as (
      select chain, count(*) as n from taken group by chain
    )
    select coalesce(sum(n), 0), coalesce(max(n) >= p_per_chain, false) into v_events, v_more from counted;
    return json_build_object('events', v_events, 'more', v_more, 'busy', false);
  end $$;
