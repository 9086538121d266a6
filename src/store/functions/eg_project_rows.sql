-- The operation and attempt rows made from the events, in one statement. The hot path does not
-- write them (a fresh operation, its first attempt, that attempt's outcome): they are made here,
-- by the projector in the background (eg_project), by a reader before it reads and by a rare path
-- before it reads or writes an operation's rows (eg_project_operation). Every test store, as it
-- closes, also rebuilds both tables with it from the events alone into empty tables and compares
-- them with the rows the store holds (test/helpers/projected-rows.ts).
--
-- Takes the events at the positions in p_pos (migration 0027): the projection's batch (eg_project),
-- or one operation's events not yet projected (eg_project_operation). Only an operation's own
-- events (operation_id set) change its rows, and its events are in the order its writers saw each
-- other in by `pos` (migration 0024; an event from before it was numbered by migration 0027 below
-- every other, in its chain's order). An operation's rows take the events only when the newest of
-- them is newer than the newest the rows hold (operations.event_pos, migration 0025): so an older
-- event never lands over a newer one, whichever of the projector, a reader and a rare path brought
-- it. Within the events taken, an operation's state is its last stated change, and an attempt's row
-- is the union of what its events state: the proposal (decision.allow), a lost outcome (a
-- decision's outcomeLost, attempt.recovered) and its outcome (attempt.outcome), the outcome's
-- columns winning over the lost outcome's: an attempt is marked lost only while it has no outcome,
-- and its late outcome is still recorded. So each row is written once per call, whatever number of
-- events it takes, which is where the projection saves over the hot path's old
-- insert-then-update. Events the rows already hold may be among those taken: applied again with
-- the newer ones, they give the same values.
--
-- A row may already be there: a rare path writes its own changes directly (a retry's attempt, an
-- expiry's lost mark, a state an operator settled) before its event is projected, and a previous
-- version's functions wrote every row. Such a row is left as inserted and takes the event's
-- changes again, which are the ones it holds: the inserts skip a row that exists, and the updates
-- apply to rows that existed before this statement (it cannot see its own inserts), so a new row
-- is written once and an old one is brought to the same values it would have had. A row another
-- transaction inserted after this statement's snapshot is skipped by both: eg_project_operation
-- reads once more in a new statement for that.
--
-- What each column is made of mirrors the functions that write it directly (eg_insert_attempt,
-- eg_attempt_outcome, eg_record_outcome, eg_expire, eg_recover_attempt, eg_set_operation_state).
--
-- `plan_cache_mode = force_generic_plan`: planned once per connection, not on every call. Its
-- plan is key probes whatever the number of events, and planning this statement cost about as
-- much as running it for the one operation a rare path brings up to date (bench/README.md, "The
-- projection by snapshot").
create or replace function eg_project_rows(p_pos bigint[])
    returns void language plpgsql set plan_cache_mode = force_generic_plan as $$
  begin
    with ev as materialized (
      select e.pos, e.type, e.operation_id as op, x.p -> 'input' as i, x.p -> 'decision' as d,
        x.p -> 'facts' as f,
        -- The time of the transaction that wrote it, as the event states it.
        coalesce(x.p -> 'decision' ->> 'decidedAt', x.p -> 'facts' ->> 'finishedAt',
          x.p -> 'facts' ->> 'recoveredAt', x.p -> 'facts' ->> 'observedAt',
          x.p -> 'facts' ->> 'takenAt')::timestamptz as at,
        -- The state it leaves its operation in, if it changes it: a lost outcome found on the way
        -- comes before the rest of the decision that found it (a retry reopens what the lost
        -- outcome made unknown), so it counts only when nothing else in the event changes it.
        coalesce(x.p -> 'facts' -> 'operation' -> 'stateChange' ->> 'to', x.p -> 'facts' -> 'stateChange' ->> 'to',
          x.p -> 'facts' -> 'outcomeLost' -> 'stateChange' ->> 'to') as to_state
      from unnest(p_pos) as k(pos)
      join events e on e.pos = k.pos
      -- `offset 0`: parsed once. Without it the planner inlines the subquery and every `x.p` below
      -- parses the payload again (15 times an event: 448 against 79 ms for 4,400 events).
      cross join lateral (select e.payload::jsonb as p offset 0) x
      where e.operation_id is not null
    ), versions as (
      -- Each operation's newest event among those taken that changes its rows: its rows take these
      -- events only if they hold none as new (operations.event_pos). Only those count: an event
      -- that merely names the operation (a pending or duplicate decision of its key) is written
      -- without the operation's key or lock, so its position says nothing of the operation's
      -- order, and counting it could pass over an outcome that commits after it.
      select op, max(pos) as v from ev
      where to_state is not null or type in ('attempt.outcome', 'attempt.recovered')
        or (type = 'decision.allow' and d ->> 'attemptId' is not null)
        or ((f -> 'outcomeLost' ->> 'marked')::boolean and (f -> 'outcomeLost' ->> 'alreadyMarked') is distinct from 'true')
      group by op
    ), changed as (
      -- Each operation's last change among the events taken.
      select distinct on (op) op, at, to_state as state from ev where to_state is not null order by op, pos desc
    ), opened as (
      select ev.*, (ev.f -> 'operation' ->> 'opened')::boolean as new_op, ev.f -> 'attempt' as att
      from ev where ev.type = 'decision.allow' and ev.d ->> 'attemptId' is not null
    ), outcome as (
      select i ->> 'attemptId' as id, op, i, f from ev where type = 'attempt.outcome'
    ), lost as (
      select distinct on (id) id, op, error, at from (
        select f -> 'outcomeLost' ->> 'attemptId' as id, op, f -> 'outcomeLost' ->> 'error' as error, at, pos from ev
        where (f -> 'outcomeLost' ->> 'marked')::boolean and (f -> 'outcomeLost' ->> 'alreadyMarked') is distinct from 'true'
        union all
        select i ->> 'attemptId', op, f ->> 'error', at, pos from ev where type = 'attempt.recovered'
      ) l order by id, pos desc
    ), new_operations as (
      insert into operations (id, tool_id, tenant, area, agent, state, key_hash, key_values, idempotency_header,
        run_id, step, worker, agent_version, supersedes_operation_id, unknown_rule, window_ms, created_at, updated_at,
        event_pos)
      select a.op, a.i ->> 'toolId', a.i -> 'scope' ->> 'tenant', a.i -> 'scope' ->> 'area', a.i -> 'scope' ->> 'agent',
        coalesce(c.state, 'open'), a.d ->> 'keyHash',
        case when a.d ->> 'keyHash' is not null then a.i -> 'key' -> 'values' end,
        a.i ->> 'idempotencyHeader', a.i ->> 'runId', a.i ->> 'step', a.i ->> 'worker', a.i ->> 'agentVersion',
        a.f -> 'operation' ->> 'supersedesOperationId', a.i ->> 'unknownRule',
        case when a.d ->> 'keyHash' is not null then (a.i -> 'key' ->> 'windowMs')::numeric::bigint end,
        a.at, coalesce(c.at, a.at), w.v
      from opened a join versions w on w.op = a.op left join changed c on c.op = a.op
      where a.new_op
      on conflict (id) do nothing
    ), old_operations as (
      -- Only where the events are newer than the row: an older event never lands over a newer
      -- one, whoever wrote that one and whenever it committed (a concurrent writer's row is
      -- re-read under its lock before this applies, and skipped when it is no longer older).
      update operations o set state = coalesce(c.state, o.state), updated_at = coalesce(c.at, o.updated_at),
        event_pos = w.v
      from versions w left join changed c on c.op = w.op
      where o.id = w.op and (o.event_pos is null or o.event_pos < w.v)
      returning o.id
    ), new_attempts as (
      insert into attempts (id, operation_id, number, decision_id, run_id, step, worker, dispatch_state,
        retry_of_attempt_id, retry_reason, request, status, response_fingerprint, destination_ref, replayed,
        duration_ms, error, retry_decision, remaining_attempts, gate_instance, outcome_rule, error_code,
        idempotency_key, agent_idempotency_key, gate_idempotency_key, kept_state, started_at, finished_at,
        deadline_at, recovered_at)
      select a.d ->> 'attemptId', a.op, (a.att ->> 'number')::int, a.i ->> 'decisionId', a.i ->> 'runId',
        a.i ->> 'step', a.i ->> 'worker',
        case when o.id is not null then o.i ->> 'dispatchState' when l.id is not null then 'sent_no_response' end,
        a.att ->> 'retryOfAttemptId', a.att ->> 'retryReason', a.i -> 'request', (o.i ->> 'status')::int,
        o.i ->> 'responseFingerprint', o.i ->> 'destinationRef', (o.i ->> 'replayed')::boolean,
        (o.i ->> 'durationMs')::double precision, case when o.id is not null then o.i ->> 'error' else l.error end,
        a.att ->> 'retryDecision', (a.att ->> 'remainingAttempts')::int, a.i ->> 'gateInstance',
        o.i ->> 'outcomeRule', o.i ->> 'errorCode', a.att ->> 'idempotencyKey',
        left(case when jsonb_typeof(a.i -> 'idempotency') = 'object' then a.i -> 'idempotency' ->> 'agentKey' end, 255),
        a.att ->> 'gateIdempotencyKey',
        case when (o.f ->> 'keptUnknown')::boolean then o.i ->> 'operationState' end,
        a.at, (o.f ->> 'finishedAt')::timestamptz, a.at + eg_ms(a.i -> 'deadlineMs'), l.at
      from opened a
      left join outcome o on o.id = a.d ->> 'attemptId'
      left join lost l on l.id = a.d ->> 'attemptId'
      on conflict (id) do nothing
    ), touched as (
      select coalesce(o.id, l.id) as id, coalesce(o.op, l.op) as op, o.i, o.f, l.error as lost_error, l.at as lost_at
      from outcome o full join lost l on l.id = o.id
    )
    update attempts t set
      dispatch_state = case when x.i is not null then x.i ->> 'dispatchState'
        when t.finished_at is null then 'sent_no_response' else t.dispatch_state end,
      error = case when x.i is not null then x.i ->> 'error' when t.finished_at is null then x.lost_error else t.error end,
      recovered_at = coalesce(x.lost_at, t.recovered_at),
      status = case when x.i is not null then (x.i ->> 'status')::int else t.status end,
      response_fingerprint = case when x.i is not null then x.i ->> 'responseFingerprint' else t.response_fingerprint end,
      destination_ref = case when x.i is not null then x.i ->> 'destinationRef' else t.destination_ref end,
      replayed = case when x.i is not null then (x.i ->> 'replayed')::boolean else t.replayed end,
      duration_ms = case when x.i is not null then (x.i ->> 'durationMs')::double precision else t.duration_ms end,
      outcome_rule = case when x.i is not null then x.i ->> 'outcomeRule' else t.outcome_rule end,
      error_code = case when x.i is not null then x.i ->> 'errorCode' else t.error_code end,
      kept_state = case when x.i is null then t.kept_state
        when (x.f ->> 'keptUnknown')::boolean then x.i ->> 'operationState' end,
      finished_at = case when x.i is not null then (x.f ->> 'finishedAt')::timestamptz else t.finished_at end
    from touched x
    where t.id = x.id and x.op in (select id from old_operations);
  end $$;
