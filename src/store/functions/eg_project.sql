-- Projects committed events onto the tables made from them: the `decisions` rows, from the
-- `decision.<verdict>` events (migration 0019), and the `operations` and `attempts` rows, from
-- every event of an operation (eg_project_rows.sql; migration 0023), none of which the hot path
-- writes. Called by the gate's projector in the background (p_wait false: a round another process
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
--
-- The rows have their own frontier (row_projection), and a chain's frontier row is locked before
-- its events are read, in a statement of its own, so they are read in a snapshot that holds every
-- event committed before the lock; it is held until this transaction ends. In the background the
-- chains a rare path holds are skipped (`skip locked`): that rare path projects them itself
-- (eg_project_chain.sql), and they are taken next round. A reader waits for every chain with
-- events to project, in chain order.
create or replace function eg_project(p_per_chain int, p_wait boolean) returns json language plpgsql
set enable_seqscan = off set jit = off as $$
  declare
    v_events int;
    v_more boolean;
    v_locked int[];
  begin
    if p_wait then
      perform pg_advisory_xact_lock(1701273974);
    elsif not pg_try_advisory_xact_lock(1701273974) then
      return json_build_object('events', 0, 'more', false, 'busy', true);
    end if;
    with taken as (
      select e.chain, e.seq, e.type
      from event_projection f
      cross join lateral (
        select chain, seq, type from events
        where events.chain = f.chain and events.seq > f.seq
        order by events.seq limit p_per_chain
      ) e
    ), parsed as materialized (
      -- Materialized: each payload is parsed once, not once per field read from it.
      select x.p -> 'input' as i, x.p -> 'decision' as d, x.recorded_at
      from (select e.payload::jsonb as p, e.recorded_at
            from taken t join events e on e.chain = t.chain and e.seq = t.seq
            where t.type like 'decision.%' offset 0) x
    ), decided as (
      insert into decisions (id, run_id, step, tool_id, verdict, reason, operation_id, attempt_id, key_hash,
        tenant, area, agent, explain, created_at)
      select i ->> 'decisionId', i ->> 'runId', i ->> 'step', i ->> 'toolId', d ->> 'verdict', d ->> 'reason',
        d ->> 'operationId', d ->> 'attemptId', d ->> 'keyHash', i -> 'scope' ->> 'tenant', i -> 'scope' ->> 'area',
        i -> 'scope' ->> 'agent', coalesce(i ->> 'explain', ''),
        coalesce((d ->> 'decidedAt')::timestamptz, recorded_at)
      from parsed
      on conflict (id) do nothing
    ), moved as (
      update event_projection f set seq = m.seq
      from (select chain, max(seq) as seq from taken group by chain) m
      where f.chain = m.chain
    ), counted as (
      select chain, count(*) as n from taken group by chain
    )
    select coalesce(sum(n), 0), coalesce(max(n) >= p_per_chain, false) into v_events, v_more from counted;

    if p_wait then
      select array_agg(chain) into v_locked from (select r.chain from row_projection r
        join chain_head h on h.id = r.chain where h.last_seq > r.seq order by r.chain for update of r) l;
    else
      select array_agg(chain) into v_locked from (select r.chain from row_projection r
        join chain_head h on h.id = r.chain where h.last_seq > r.seq order by r.chain for update of r skip locked) l;
    end if;
    if v_locked is not null then
      -- Its own statement, whatever v_more is: the frontiers move on every call.
      if eg_project_frontiers(v_locked, p_per_chain) then
        v_more := true;
      end if;
    end if;
    return json_build_object('events', v_events, 'more', v_more, 'busy', false);
  end $$;
