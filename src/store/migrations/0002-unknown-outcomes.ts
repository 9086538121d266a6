import { type Kysely, type Migration, sql } from 'kysely';
import { APPROVAL, RECOVER } from './0002-recovery-approvals.js';
import { UNKNOWN } from './0002-unknown-rule.js';

/*
 * 0002: unknown outcomes (DESIGN.md §3, seed attempt-lineage): retry lineage with a recorded retry
 * decision, forks of a materially changed request into a new operation, the unknown-outcome rules
 * (honored idempotency, reconciliation, approval), observations, approval cards, gate instances
 * and crash recovery.
 *
 * The design of 0001 holds: every function is one statement for the caller, every state change
 * appends exactly one event in its own transaction, the same lock order everywhere
 * (dedupe_keys -> operations -> approvals -> attempts -> runs -> chain_head).
 *
 * New and changed events (payload `{ "input": <as sent>, "decision"?: …, "facts": … }`):
 *   decision.allow      facts gain attempt.retryDecision, attempt.fingerprint,
 *                       operation.supersedesOperationId, observation (a negative lookup that preceded
 *                       an approved retry) and approval ({ id, state: used }).
 *   decision.duplicate  after a reconciliation: owned by the operation (its state changes), facts
 *                       gain observation, operation.stateChange and key.
 *   decision.hold       { approval: { id, created }, previousAttempt: { id, dispatchState, status },
 *                         lastApproval, observation }
 *   attempt.recovered   { input: { attemptId, operationId, gateInstance, recoveredBy },
 *                         facts: { observation, stateChange, key, approvalId } }
 *   approval.approved | approval.denied | approval.revoked
 *                       { input: <as sent>, facts: { approvalId, operationId, from, to, expiresAt } }
 *   attempt.outcome     facts gain late: true when the attempt had been marked by recovery.
 *
 * Errors meant for the caller use their own SQLSTATEs: EG404 (no such approval) and EG409 (the
 * approval is not in a state the action applies to); the store maps them to typed errors.
 */

const TABLES: readonly string[] = [
  'alter table operations add column supersedes_operation_id text',
  `alter table attempts add column retry_decision text check (retry_decision in
    ('previous_attempt_failed', 'reservation_expired', 'destination_idempotency_honored', 'operator_approved'))`,
  'alter table attempts add column remaining_attempts int',
  'alter table attempts add column gate_instance text',
  'alter table attempts add column deadline_at timestamptz',
  'alter table attempts add column recovered_at timestamptz',
  // Recovery scans only attempts without an outcome: a partial index keeps that set tiny.
  'create index attempts_open_idx on attempts (started_at) where dispatch_state is null',
  `create table observations (
    id text primary key,
    operation_id text not null references operations (id),
    attempt_id text,
    kind text not null check (kind in ('reconciliation', 'gate_restarted')),
    result text not null,
    facts jsonb not null,
    decision_id text,
    created_at timestamptz not null default now()
  )`,
  'create index observations_operation_idx on observations (operation_id, created_at)',
  // A projection for operators; the events are the evidence. 'expired' is not stored: an approved
  // card whose expires_at passed reads as expired.
  `create table approvals (
    id text primary key,
    operation_id text not null references operations (id),
    state text not null check (state in ('requested', 'approved', 'denied', 'revoked', 'used', 'withdrawn')),
    intent jsonb not null,
    previous_attempt_id text,
    previous_dispatch_state text,
    previous_status int,
    planned_recovery text not null,
    requested_at timestamptz not null default now(),
    requested_by text not null,
    decided_by text,
    decided_at timestamptz,
    reason text,
    expires_at timestamptz,
    revoked_by text,
    revoked_at timestamptz,
    used_by_attempt_id text,
    used_at timestamptz
  )`,
  // At most one open request per operation, whatever the number of concurrent holds.
  `create unique index approvals_one_open_idx on approvals (operation_id) where state = 'requested'`,
  'create index approvals_operation_idx on approvals (operation_id, requested_at)',
  'create index approvals_state_idx on approvals (state, requested_at desc)',
  `create table gate_instances (
    id text primary key,
    started_at timestamptz not null default now(),
    heartbeat_at timestamptz not null default now(),
    stopped_at timestamptz
  )`,
  `create table settings (
    name text primary key,
    value text not null
  )`,
  // gen_random_uuid() draws from the server's strong random source: 244 random bits.
  `insert into settings (name, value)
    values ('authority_key', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))`,
];

// Replaced helpers of 0001 (new signatures); eg_decide is replaced below and no longer calls them.
const DROPS: readonly string[] = [
  'drop function eg_allow(text, text, text, int, text, text)',
  'drop function eg_attempt_facts(jsonb, int, text, text, text)',
  'drop function eg_allow_new(jsonb, text, text, timestamptz)',
];

const HELPERS: readonly string[] = [
  `create function eg_allow(p jsonb, p_operation_id text, p_number int, p_retry_of text, p_retry_reason text,
    p_retry_decision text, p_supersedes text) returns json language sql stable as $$
    select json_build_object('verdict', 'allow', 'decisionId', p ->> 'decisionId', 'operationId', p_operation_id,
      'attemptId', p ->> 'newAttemptId', 'attemptNumber', p_number, 'retryOfAttemptId', p_retry_of,
      'retryReason', p_retry_reason, 'retryDecision', p_retry_decision, 'supersedesOperationId', p_supersedes)
  $$`,
  `create function eg_attempt_facts(p jsonb, p_number int, p_retry_of text, p_retry_reason text,
    p_retry_decision text, p_previous_fingerprint text) returns json language sql stable as $$
    select json_build_object('number', p_number, 'retryOfAttemptId', p_retry_of, 'retryReason', p_retry_reason,
      'retryDecision', p_retry_decision, 'attemptBudget', (p ->> 'retryBudget')::int,
      'remainingAttempts', (p ->> 'retryBudget')::int - p_number,
      'fingerprint', p -> 'request' ->> 'fingerprint', 'previousFingerprint', p_previous_fingerprint)
  $$`,
  // The reason of a later attempt, from the closed set (DESIGN.md §3): the client may only claim
  // operator_requested; a changed credential reference is credential_refreshed; otherwise it
  // follows from how the previous attempt ended. A definite 4xx other than 429 has no reason in
  // the set: null, and the retry decision says previous_attempt_failed.
  `create function eg_retry_reason(p jsonb, p_prev attempts) returns text language sql stable as $$
    select case
      when p_prev.id is null then null
      when p ->> 'clientRetryReason' = 'operator_requested' then 'operator_requested'
      when p_prev.request ->> 'authorityRef' is not null and p -> 'request' ->> 'authorityRef' is not null
        and p_prev.request ->> 'authorityRef' <> p -> 'request' ->> 'authorityRef' then 'credential_refreshed'
      when p_prev.dispatch_state = 'not_sent' then 'connection_not_established'
      when p_prev.status = 429 then 'rate_limited'
      when p_prev.status between 500 and 599 then 'destination_5xx'
      when p_prev.dispatch_state is null or p_prev.dispatch_state = 'sent_no_response'
        then 'response_lost_after_dispatch'
      else null end
  $$`,
  `create function eg_insert_attempt(p jsonb, p_operation_id text, p_number int, p_retry_of text,
    p_retry_reason text, p_retry_decision text) returns void language sql as $$
    insert into attempts (id, operation_id, number, decision_id, run_id, step, worker, retry_of_attempt_id,
      retry_reason, retry_decision, remaining_attempts, request, gate_instance, deadline_at)
    values (p ->> 'newAttemptId', p_operation_id, p_number, p ->> 'decisionId', p ->> 'runId', p ->> 'step',
      p ->> 'worker', p_retry_of, p_retry_reason, p_retry_decision,
      coalesce((p ->> 'retryBudget')::int, 1) - p_number, p -> 'request', p ->> 'gateInstance',
      now() + eg_ms(p -> 'deadlineMs'))
  $$`,
  // A new operation with its first attempt (the key, if any, is already reserved for it).
  // p_supersedes: the operation this one forks from; p_extra: { observation, approval } facts.
  `create function eg_allow_new(p jsonb, p_input text, p_key_hash text, p_expires_at timestamptz,
    p_supersedes text, p_extra jsonb) returns json language plpgsql as $$
  declare
    v_op text := p ->> 'newOperationId';
    v_scope jsonb := p -> 'scope';
  begin
    insert into operations (id, tool_id, tenant, area, agent, state, key_hash, key_values, idempotency_header,
      run_id, step, worker, agent_version, supersedes_operation_id)
    values (v_op, p ->> 'toolId', v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent', 'open',
      p_key_hash, case when p_key_hash is null then null else p -> 'key' -> 'values' end,
      p ->> 'idempotencyHeader', p ->> 'runId', p ->> 'step', p ->> 'worker', p ->> 'agentVersion', p_supersedes);
    perform eg_insert_attempt(p, v_op, 1, null, null, null);
    perform eg_decided(p, p_input, 'allow', p ->> 'keyError', v_op, p ->> 'newAttemptId', p_key_hash, v_op,
      json_build_object(
        'operation', json_build_object('opened', true, 'supersedesOperationId', p_supersedes),
        'attempt', eg_attempt_facts(p, 1, null, null, null, null),
        'key', case when p_key_hash is not null then json_build_object('expiresAt', eg_iso(p_expires_at)) end,
        'observation', p_extra -> 'observation', 'approval', p_extra -> 'approval'));
    return eg_allow(p, v_op, 1, null, null, null, p_supersedes);
  end $$`,
  // Attempt p_number of operation p_op, whose key row the caller already moved to this attempt.
  `create function eg_retry(p jsonb, p_input text, p_key_hash text, p_op text, p_number int, p_prev attempts,
    p_retry_decision text, p_expires_at timestamptz, p_extra jsonb) returns json language plpgsql as $$
  declare
    v_op_state text;
    v_reason text := eg_retry_reason(p, p_prev);
  begin
    select state into v_op_state from operations where id = p_op for update;
    if v_op_state is distinct from 'open' then
      update operations set state = 'open', updated_at = now() where id = p_op;
    end if;
    perform eg_insert_attempt(p, p_op, p_number, p_prev.id, v_reason, p_retry_decision);
    perform eg_decided(p, p_input, 'allow', p ->> 'keyError', p_op, p ->> 'newAttemptId', p_key_hash, p_op,
      json_build_object(
        'operation', json_build_object('opened', false, 'stateChange',
          case when v_op_state is distinct from 'open' then json_build_object('from', v_op_state, 'to', 'open') end),
        'attempt', eg_attempt_facts(p, p_number, p_prev.id, v_reason, p_retry_decision,
          p_prev.request ->> 'fingerprint'),
        'key', json_build_object('expiresAt', eg_iso(p_expires_at)),
        'observation', p_extra -> 'observation', 'approval', p_extra -> 'approval'));
    return eg_allow(p, p_op, p_number, p_prev.id, v_reason, p_retry_decision, null);
  end $$`,
  // Records a reconciliation lookup as an observation row; returns its facts for the event.
  `create function eg_observe(p jsonb, p_op text) returns jsonb language plpgsql as $$
  declare
    v_rec jsonb := p -> 'reconciliation';
    v_id text := gen_random_uuid()::text;
    v_facts jsonb := jsonb_build_object('endpoint', v_rec -> 'endpoint', 'queryFingerprint', v_rec -> 'queryFingerprint',
      'matches', v_rec -> 'matches', 'remoteRefs', v_rec -> 'remoteRefs', 'status', v_rec -> 'status',
      'error', v_rec -> 'error', 'durationMs', v_rec -> 'durationMs', 'startedAt', v_rec -> 'startedAt',
      'lookedUpOperationId', v_rec -> 'operationId', 'lookedUpAttemptId', v_rec -> 'attemptId');
  begin
    insert into observations (id, operation_id, attempt_id, kind, result, facts, decision_id)
    values (v_id, p_op, v_rec ->> 'attemptId', 'reconciliation', v_rec ->> 'result', v_facts, p ->> 'decisionId');
    return jsonb_build_object('id', v_id, 'kind', 'reconciliation', 'result', v_rec ->> 'result') || v_facts;
  end $$`,
  // Evidence settled the operation (an outcome, a reconciliation): an open request has nothing
  // left to approve. Returns how many were withdrawn.
  `create function eg_withdraw_approvals(p_op_id text, p_state text) returns int language plpgsql as $$
  declare
    v_n int;
  begin
    update approvals set state = 'withdrawn', decided_at = now(), reason = 'operation settled: ' || p_state
    where operation_id = p_op_id and state = 'requested';
    get diagnostics v_n = row_count;
    return v_n;
  end $$`,
  // What approving a held retry will do, in words, for the approval card.
  `create function eg_planned_recovery(p_op operations, p_prev attempts) returns text language sql stable as $$
    select format('One more attempt (#%s) of operation %s after attempt #%s ended %s%s. ',
        coalesce(p_prev.number, 0) + 1, p_op.id, coalesce(p_prev.number, 0),
        coalesce(p_prev.dispatch_state, 'without a recorded outcome'),
        case when p_prev.status is not null then format(' (status %s)', p_prev.status) else '' end) ||
      case when p_op.idempotency_header is not null
        then format('It will carry the same %s: %s, but the destination is not declared to honor it, so it may repeat the effect if the first attempt reached it.',
          p_op.idempotency_header, p_op.id)
        else 'It carries no idempotency key: if the first attempt reached the destination, the effect will happen twice.' end
  $$`,
  // The open approval request of an operation, created when there is none. Returns (id, created).
  `create function eg_request_approval(p_op_id text, p_prev attempts, p_requested_by text, p_changed boolean,
    out o_id text, out o_created boolean) language plpgsql as $$
  declare
    v_op operations%rowtype;
  begin
    select id into o_id from approvals where operation_id = p_op_id and state = 'requested';
    o_created := false;
    if found then return; end if;
    select * into v_op from operations where id = p_op_id;
    insert into approvals (id, operation_id, state, intent, previous_attempt_id, previous_dispatch_state,
      previous_status, planned_recovery, requested_by)
    values (gen_random_uuid()::text, p_op_id, 'requested', jsonb_build_object(
        'toolId', v_op.tool_id,
        'scope', jsonb_build_object('tenant', v_op.tenant, 'area', v_op.area, 'agent', v_op.agent),
        'keyValues', v_op.key_values, 'method', p_prev.request ->> 'method', 'host', p_prev.request ->> 'host',
        'path', p_prev.request ->> 'path', 'route', p_prev.request ->> 'route',
        'fingerprint', p_prev.request ->> 'fingerprint', 'idempotencyHeader', v_op.idempotency_header),
      p_prev.id, p_prev.dispatch_state, p_prev.status, eg_planned_recovery(v_op, p_prev) || case when p_changed
        then ' The proposal that asked for this approval CHANGED the request (another fingerprint): approving lets the changed request go as a new operation, with its own idempotency key, that supersedes this one, which stays unknown.'
        else '' end, p_requested_by)
    on conflict do nothing
    returning id into o_id;
    if o_id is not null then
      o_created := true;
    else
      -- A concurrent hold created it first (the unique partial index): use that one.
      select id into o_id from approvals where operation_id = p_op_id and state = 'requested';
    end if;
  end $$`,
];

const DECIDE = `create or replace function eg_decide(p_input text) returns json language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_scope jsonb := p -> 'scope';
  v_tenant text := v_scope ->> 'tenant';
  v_area text := v_scope ->> 'area';
  v_agent text := v_scope ->> 'agent';
  v_run text := p ->> 'runId';
  v_decision text := p ->> 'decisionId';
  v_key jsonb := p -> 'key';
  v_new_op text := p ->> 'newOperationId';
  v_budget int := coalesce((p ->> 'retryBudget')::int, 1);
  v_max_skips int := (p ->> 'maxDuplicateSkips')::int;
  v_skips int;
  v_hash text;
  v_window interval;
  v_expires timestamptz;
  v_row dedupe_keys%rowtype;
  v_source json;
  v_op text;
  v_number int;
  v_op_state text;
  v_prev attempts%rowtype;
  v_fork_of text;
  v_result json;
  v_obs jsonb;
begin
  -- (a) The loop breaker. Read only: a run's row is written on its first duplicate skip.
  select duplicate_skips into v_skips from runs
    where tenant = v_tenant and area = v_area and agent = v_agent and id = v_run;
  v_skips := coalesce(v_skips, 0);
  if v_skips >= v_max_skips then
    perform eg_decided(p, p_input, 'halted',
      format('loop_breaker: run %s has %s duplicate skips (max %s)', v_run, v_skips, v_max_skips),
      null, null, null, null, json_build_object('duplicateSkips', v_skips, 'maxDuplicateSkips', v_max_skips));
    return json_build_object('verdict', 'halted', 'decisionId', v_decision, 'duplicateSkips', v_skips);
  end if;

  if p ->> 'kind' = 'block' then
    perform eg_decided(p, p_input, 'block', p ->> 'reason', null, null, null, null, json_build_object());
    return json_build_object('verdict', 'block', 'decisionId', v_decision, 'reason', p ->> 'reason',
      'operationId', null);
  end if;

  -- (b) No duplicate recognition: every proposal is a new operation.
  if jsonb_typeof(v_key) is distinct from 'object' then
    return eg_allow_new(p, p_input, null, null, null, null);
  end if;

  v_hash := v_key ->> 'hash';
  v_window := eg_ms(v_key -> 'windowMs');
  v_expires := now() + eg_ms(v_key -> 'pendingTtlMs');
  -- (c) Read before locking. A key confirmed inside its window is in a state no eg_decide can
  -- change, so the committed row is the answer: no upsert, no row lock, and concurrent duplicates
  -- of one key do not queue behind each other.
  select * into v_row from dedupe_keys where key_hash = v_hash;
  for v_try in 1..8 loop
    if v_row.state = 'confirmed' and (v_row.window_ends_at is null or v_row.window_ends_at >= now()) then
      select state into v_op_state from operations where id = v_row.operation_id;
      -- A lookup made for this proposal is evidence even when another proposal settled the key first.
      if jsonb_typeof(p -> 'reconciliation') = 'object' then
        v_obs := eg_observe(p, p -> 'reconciliation' ->> 'operationId');
      end if;
      insert into runs as r (tenant, area, agent, id, duplicate_skips) values (v_tenant, v_area, v_agent, v_run, 1)
      on conflict (tenant, area, agent, id) do update set duplicate_skips = r.duplicate_skips + 1
      returning duplicate_skips into v_skips;
      v_source := case when v_row.run_id is not null then json_build_object(
        'runId', v_row.run_id, 'step', v_row.step, 'operationId', v_row.operation_id,
        'attemptId', v_row.attempt_id, 'confirmedAt', eg_iso(v_row.confirmed_at),
        'destinationRef', v_row.destination_ref) end;
      perform eg_decided(p, p_input, 'duplicate', null, v_row.operation_id, null, v_hash, null, json_build_object(
        'duplicateSkips', v_skips, 'windowEndsAt', eg_iso(v_row.window_ends_at), 'source', v_source,
        'observation', v_obs));
      return json_build_object('verdict', 'duplicate', 'decisionId', v_decision, 'operationId', v_row.operation_id,
        'duplicateSkips', v_skips, 'source', v_source, 'operationState', coalesce(v_op_state, 'succeeded'),
        'reconciliation', null);
    end if;
    if v_row.state = 'unknown' then
      v_result := eg_unknown(p, p_input, v_row, v_expires);
      if v_result is not null then
        return v_result;
      end if;
      select * into v_row from dedupe_keys where key_hash = v_hash;
      continue;
    end if;

    -- (d) A materially changed request for a key whose operation is still inside its window is not
    -- a retry: it forks a new operation that supersedes the old one (seed: attempt-lineage).
    v_fork_of := null;
    if v_row.state in ('released', 'pending') and (v_window is null or v_row.created_at + v_window > now()) then
      select * into v_prev from attempts where id = v_row.attempt_id;
      if v_prev.id is not null
          and (v_prev.request ->> 'fingerprint') is distinct from (p -> 'request' ->> 'fingerprint') then
        v_fork_of := v_row.operation_id;
      end if;
    end if;

    -- (e) Reserve the key: one atomic upsert decides ownership, across processes.
    insert into dedupe_keys as k (key_hash, tenant, area, agent, tool_id, state, operation_id, run_id, step,
      attempt_id, attempt_number, created_at, expires_at)
    values (v_hash, v_tenant, v_area, v_agent, p ->> 'toolId', 'pending', v_new_op, v_run, p ->> 'step',
      p ->> 'newAttemptId', 1, now(), v_expires)
    on conflict (key_hash) do update set
      state = 'pending',
      -- A released or lost (expired pending) reservation of an operation still inside the window is
      -- a retry of THAT operation: same id, so the same Idempotency-Key goes out again.
      operation_id = case when v_fork_of is null and k.state <> 'confirmed'
          and (v_window is null or k.created_at + v_window > now())
        then k.operation_id else excluded.operation_id end,
      attempt_number = case when v_fork_of is null and k.state <> 'confirmed'
          and (v_window is null or k.created_at + v_window > now())
        then k.attempt_number + 1 else 1 end,
      created_at = case when v_fork_of is null and k.state <> 'confirmed'
          and (v_window is null or k.created_at + v_window > now())
        then k.created_at else excluded.created_at end,
      run_id = excluded.run_id,
      step = excluded.step,
      attempt_id = excluded.attempt_id,
      expires_at = excluded.expires_at,
      confirmed_at = null,
      window_ends_at = null,
      destination_ref = null
    where (k.state = 'released'
        or (k.state = 'pending' and k.expires_at < now())
        or (k.state = 'confirmed' and k.window_ends_at < now()))
      -- 'unknown' is never taken over here (DESIGN 4.1), and a retry needs attempt budget left.
      and (k.state = 'confirmed'
        or v_fork_of is not null
        or (v_window is not null and k.created_at + v_window <= now())
        or k.attempt_number < v_budget)
    returning k.operation_id, k.attempt_number into v_op, v_number;

    if found and v_op = v_new_op then
      return eg_allow_new(p, p_input, v_hash, v_expires, case when v_number = 1 then v_fork_of end, null);
    end if;

    if found then
      -- A retry of operation v_op: its parent is the previous attempt. A previous attempt without
      -- an outcome lost its reservation (pending_ttl passed); one with an outcome definitely failed.
      select * into v_prev from attempts where operation_id = v_op and number = v_number - 1;
      return eg_retry(p, p_input, v_hash, v_op, v_number, v_prev,
        case when v_prev.id is not null and v_prev.dispatch_state is null then 'reservation_expired'
          else 'previous_attempt_failed' end, v_expires, null);
    end if;

    -- (f) Not ours. The upsert locked the row, so this read sees what the upsert saw.
    select * into v_row from dedupe_keys where key_hash = v_hash;
    if v_row.state = 'pending' and v_row.expires_at >= now() then
      return eg_pending(p, p_input, v_row, 'reserved_by_another_run');
    end if;
    if v_row.state in ('released', 'pending') and (v_window is null or v_row.created_at + v_window > now())
        and v_row.attempt_number >= v_budget and v_fork_of is null then
      perform eg_decided(p, p_input, 'block', 'retry_budget_exhausted', v_row.operation_id, null, v_hash, null,
        json_build_object('attemptsUsed', v_row.attempt_number, 'attemptBudget', v_budget));
      return json_build_object('verdict', 'block', 'decisionId', v_decision, 'reason', 'retry_budget_exhausted',
        'operationId', v_row.operation_id);
    end if;
    -- Confirmed or unknown: answered at the top of the loop. Anything else changed under us: again.
  end loop;
  raise exception 'effectgate: dedupe key % kept changing under eg_decide', v_hash;
end $$`;

/*
 * 0001's eg_record_outcome, changed in two ways: an attempt that crash recovery marked
 * sent_no_response may still get its real outcome (a gate that was slow, not dead): it is
 * recorded as late evidence and may settle the operation; and the reservation it owns may move
 * from unknown as well as from pending (a late success confirms the key instead of leaving it
 * unknown forever). And a definite failure of a retry made under the unknown-outcome rules
 * (honored idempotency, an operator's approval) settles nothing: the earlier attempt that was sent
 * without a response may still have done the effect (a destination often refuses a retry BECAUSE
 * the first one worked), so the operation and its key stay unknown (DESIGN.md §3).
 */
const RECORD_OUTCOME = `create or replace function eg_record_outcome(p_input text) returns json language plpgsql as $$
declare
  p jsonb := p_input::jsonb;
  v_op_id text := p ->> 'operationId';
  v_attempt_id text := p ->> 'attemptId';
  v_key_hash text := p ->> 'keyHash';
  v_state text := p ->> 'operationState';
  v_window interval := eg_ms(p -> 'windowMs');
  v_succeeded boolean := p ->> 'operationState' = 'succeeded';
  v_key_state text;
  v_owned boolean := false;
  v_op_state text;
  v_number int;
  v_latest int;
  v_change json;
  v_late boolean;
  v_kept_unknown boolean := false;
begin
  if v_state not in ('succeeded', 'failed', 'unknown') then
    raise exception 'effectgate: outcome state must be succeeded, failed or unknown, not %', v_state;
  end if;
  if v_state = 'failed' then
    select retry_decision in ('destination_idempotency_honored', 'operator_approved') into v_kept_unknown
    from attempts where id = v_attempt_id and operation_id = v_op_id;
    if coalesce(v_kept_unknown, false) then
      v_state := 'unknown';
    end if;
  end if;
  v_key_state := case v_state when 'succeeded' then 'confirmed' when 'failed' then 'released' else 'unknown' end;
  if v_key_hash is not null then
    update dedupe_keys set
      state = v_key_state,
      confirmed_at = case when v_succeeded then now() end,
      window_ends_at = case when v_succeeded then now() + v_window end,
      destination_ref = case when v_succeeded then p ->> 'destinationRef' end
    where key_hash = v_key_hash and state in ('pending', 'unknown') and operation_id = v_op_id
      and attempt_id = v_attempt_id;
    v_owned := found;
  end if;
  select state into v_op_state from operations where id = v_op_id for update;
  if not found then
    raise exception 'effectgate: no operation %', v_op_id;
  end if;

  select recovered_at is not null into v_late from attempts where id = v_attempt_id and operation_id = v_op_id;
  update attempts set
    dispatch_state = p ->> 'dispatchState',
    status = (p ->> 'status')::int,
    response_fingerprint = p ->> 'responseFingerprint',
    destination_ref = p ->> 'destinationRef',
    replayed = (p ->> 'replayed')::boolean,
    duration_ms = (p ->> 'durationMs')::double precision,
    error = p ->> 'error',
    finished_at = now()
  where id = v_attempt_id and operation_id = v_op_id
    and (dispatch_state is null or (recovered_at is not null and finished_at is null))
  returning number into v_number;
  if not found then
    raise exception 'effectgate: attempt % of operation % does not exist or already has an outcome',
      v_attempt_id, v_op_id;
  end if;
  if v_owned then
    v_latest := v_number;
  else
    select max(number) into v_latest from attempts where operation_id = v_op_id;
  end if;

  -- Only an operation still open or unknown takes its latest attempt's outcome: one that other
  -- evidence settled (a reconciliation found the effect) keeps it, and the late outcome is kept
  -- as evidence in the event (reconciliation appends, never rewrites).
  if v_number = v_latest and v_op_state in ('open', 'unknown') and v_op_state is distinct from v_state then
    update operations set state = v_state, updated_at = now() where id = v_op_id;
    v_change := json_build_object('from', v_op_state, 'to', v_state);
    if v_state in ('succeeded', 'failed') then
      perform eg_withdraw_approvals(v_op_id, v_state);
    end if;
  end if;

  perform eg_append_event(v_op_id, 'attempt.outcome', v_op_id, '{"input":' || p_input || ',"facts":' ||
    json_build_object('number', v_number, 'superseded', v_number < v_latest, 'late', coalesce(v_late, false),
      'keptUnknown', coalesce(v_kept_unknown, false),
      'stateChange', v_change,
      'key', case when v_owned then json_build_object('state', v_key_state,
        'confirmedAt', case when v_succeeded then eg_iso(now()) end,
        'windowEndsAt', case when v_succeeded then eg_iso(now() + v_window) end) end)::text || '}');
  return json_build_object('operationState', case when v_change is null and v_number = v_latest
    and v_op_state not in ('open', 'unknown') then v_op_state
    when v_number < v_latest then v_op_state else v_state end);
end $$`;

export const migration0002: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of [
      ...TABLES,
      ...DROPS,
      ...HELPERS,
      UNKNOWN,
      DECIDE,
      RECORD_OUTCOME,
      RECOVER,
      APPROVAL,
    ]) {
      await sql.raw(statement).execute(db);
    }
  },
};
