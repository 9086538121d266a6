import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0001: tables, indexes, the append-only hash-chained event log and the reservation protocol as
 * PL/pgSQL functions.
 *
 * Why the protocol lives in SQL: `decide` and `recordOutcome` are each ONE statement (one round
 * trip, one implicit transaction), the key reservation is a single atomic
 * `INSERT ... ON CONFLICT DO UPDATE ... WHERE <takeover allowed>`, so two gate processes sharing a
 * database can never both own a key, and every event is appended in the transaction of the state
 * change it describes.
 *
 * Lock order, the same in every function, so concurrent calls cannot deadlock:
 * runs row -> dedupe_keys row -> operations row -> attempts row -> chain_head (always last: the
 * events of a call are collected and appended at its very end, which also keeps the one global
 * lock, chain_head, held for the shortest time).
 *
 * All timestamps come from the database clock (now() = transaction start; clock_timestamp() for
 * events), never from the gate's.
 *
 * Statements are listed one by one (no multi-statement strings): PGlite's extended-protocol query
 * runs one statement at a time.
 */

const TABLES: readonly string[] = [
  // A run id comes from a client header, so it is only unique inside one scope: keyed by scope,
  // one tenant's duplicates can never trip another tenant's loop breaker.
  `create table runs (
    tenant text not null,
    area text not null,
    agent text not null,
    id text not null,
    duplicate_skips int not null default 0,
    created_at timestamptz not null default now(),
    primary key (tenant, area, agent, id)
  )`,
  `create table operations (
    id text primary key,
    tool_id text not null,
    tenant text not null,
    area text not null,
    agent text not null,
    state text not null check (state in
      ('open', 'succeeded', 'failed', 'unknown', 'cancelled', 'duplicate_effect_confirmed')),
    key_hash text,
    key_values jsonb,
    idempotency_header text,
    run_id text not null,
    step text,
    worker text,
    agent_version text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
  )`,
  'create index operations_state_created_idx on operations (state, created_at desc)',
  'create index operations_created_idx on operations (created_at desc)',
  'create index operations_key_hash_idx on operations (key_hash)',
  'create index operations_run_idx on operations (run_id)',
  `create table attempts (
    id text primary key,
    operation_id text not null references operations (id),
    number int not null check (number >= 1),
    decision_id text not null,
    run_id text not null,
    step text,
    worker text,
    dispatch_state text check (dispatch_state in
      ('not_sent', 'sent_no_response', 'response_received', 'execution_error')),
    retry_of_attempt_id text references attempts (id),
    retry_reason text check (retry_reason in ('connection_not_established', 'rate_limited', 'destination_5xx',
      'response_lost_after_dispatch', 'credential_refreshed', 'operator_requested')),
    request jsonb not null,
    status int,
    response_fingerprint text,
    destination_ref text,
    replayed boolean,
    duration_ms double precision,
    error text,
    started_at timestamptz not null default now(),
    finished_at timestamptz,
    unique (operation_id, number)
  )`,
  `create table decisions (
    id text primary key,
    run_id text not null,
    step text,
    tool_id text not null,
    verdict text not null check (verdict in ('allow', 'duplicate', 'pending', 'hold', 'halted', 'block')),
    reason text,
    operation_id text,
    attempt_id text,
    key_hash text,
    tenant text not null,
    area text not null,
    agent text not null,
    explain text not null,
    created_at timestamptz not null default now()
  )`,
  'create index decisions_run_idx on decisions (run_id, created_at)',
  'create index decisions_operation_idx on decisions (operation_id, created_at)',
  // No foreign key to operations: the key row is reserved before the decision to create the
  // operation is known (one atomic upsert); the functions keep the two consistent.
  `create table dedupe_keys (
    key_hash text primary key,
    tenant text not null,
    area text not null,
    agent text not null,
    tool_id text not null,
    state text not null check (state in ('pending', 'confirmed', 'unknown', 'released')),
    operation_id text not null,
    run_id text,
    step text,
    attempt_id text,
    created_at timestamptz not null default now(),
    expires_at timestamptz,
    confirmed_at timestamptz,
    window_ends_at timestamptz,
    destination_ref text
  )`,
  `create table events (
    seq bigint primary key,
    type text not null,
    operation_id text,
    recorded_at timestamptz not null,
    recorded_at_us bigint not null,
    payload text not null,
    prev_hash text not null,
    hash text not null
  )`,
  'create index events_operation_idx on events (operation_id, seq)',
  `create table chain_head (
    id int primary key check (id = 1),
    last_seq bigint not null,
    last_hash text not null
  )`,
  `insert into chain_head (id, last_seq, last_hash) values (1, 0, repeat('0', 64))`,
];

const EVENT_LOG: readonly string[] = [
  `create function eg_events_append_only() returns trigger language plpgsql as $$
  begin
    raise exception 'effectgate: the events table is append-only (% refused)', tg_op
      using errcode = 'insufficient_privilege';
  end $$`,
  `create trigger events_no_update_delete before update or delete on events
    for each row execute function eg_events_append_only()`,
  `create trigger events_no_truncate before truncate on events
    for each statement execute function eg_events_append_only()`,
  // Appends [{type, operationId, payload}] in order. Locking the chain head serializes appends
  // across all processes, so the chain never forks; the hash input is reproduced byte for byte by
  // computeEventHash() in audit-chain.ts.
  `create function eg_append_events(p_events jsonb) returns bigint language plpgsql as $$
  declare
    v_seq bigint;
    v_prev text;
    v_hash text;
    v_event jsonb;
    v_at timestamptz;
    v_us bigint;
    v_payload text;
  begin
    if p_events is null or jsonb_array_length(p_events) = 0 then
      return null;
    end if;
    select last_seq, last_hash into v_seq, v_hash from chain_head where id = 1 for update;
    for v_event in select value from jsonb_array_elements(p_events) loop
      v_seq := v_seq + 1;
      v_prev := v_hash;
      v_at := clock_timestamp();
      -- extract(epoch) is numeric (exact) since PostgreSQL 14: no float rounding of microseconds.
      v_us := (extract(epoch from v_at) * 1000000)::bigint;
      v_payload := coalesce(v_event -> 'payload', '{}'::jsonb)::text;
      v_hash := encode(sha256(convert_to(
        v_prev || E'\\n' || v_seq::text || E'\\n' || (v_event ->> 'type') || E'\\n' ||
        coalesce(v_event ->> 'operationId', '') || E'\\n' || v_us::text || E'\\n' || v_payload,
        'UTF8')), 'hex');
      insert into events (seq, type, operation_id, recorded_at, recorded_at_us, payload, prev_hash, hash)
      values (v_seq, v_event ->> 'type', v_event ->> 'operationId', v_at, v_us, v_payload, v_prev, v_hash);
    end loop;
    update chain_head set last_seq = v_seq, last_hash = v_hash where id = 1;
    return v_seq;
  end $$`,
  `create function eg_append_event(p_type text, p_operation_id text, p_payload jsonb) returns bigint
  language sql as $$
    select eg_append_events(jsonb_build_array(
      jsonb_build_object('type', p_type, 'operationId', p_operation_id, 'payload', p_payload)))
  $$`,
];

// Small builders shared by eg_decide and eg_record_outcome. Each inserts one row and returns the
// event describing it (appended by the caller, last).
const HELPERS: readonly string[] = [
  // Same shape and precision (ms) as JavaScript's Date#toISOString().
  `create function eg_iso(p_at timestamptz) returns text language sql stable as $$
    select to_char(p_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  $$`,
  `create function eg_ms(p_ms jsonb) returns interval language sql immutable as $$
    select case when jsonb_typeof(p_ms) = 'number'
      then (p_ms::text)::double precision * interval '1 millisecond' end
  $$`,
  `create function eg_record_decision(p jsonb, p_verdict text, p_reason text, p_operation_id text,
    p_attempt_id text, p_key_hash text) returns jsonb language plpgsql as $$
  begin
    insert into decisions (id, run_id, step, tool_id, verdict, reason, operation_id, attempt_id, key_hash,
      tenant, area, agent, explain)
    values (p ->> 'decisionId', p ->> 'runId', p ->> 'step', p ->> 'toolId', p_verdict, p_reason, p_operation_id,
      p_attempt_id, p_key_hash, p -> 'scope' ->> 'tenant', p -> 'scope' ->> 'area', p -> 'scope' ->> 'agent',
      coalesce(p ->> 'explain', ''));
    return jsonb_build_object('type', 'decision.recorded', 'operationId', p_operation_id, 'payload',
      jsonb_build_object('decisionId', p ->> 'decisionId', 'verdict', p_verdict, 'reason', p_reason,
        'runId', p ->> 'runId', 'step', p ->> 'step', 'toolId', p ->> 'toolId',
        'tenant', p -> 'scope' ->> 'tenant', 'area', p -> 'scope' ->> 'area', 'agent', p -> 'scope' ->> 'agent',
        'operationId', p_operation_id, 'attemptId', p_attempt_id, 'keyHash', p_key_hash,
        'keyError', p ->> 'keyError', 'explain', p ->> 'explain'));
  end $$`,
  `create function eg_open_operation(p jsonb, p_key_hash text) returns jsonb language plpgsql as $$
  begin
    insert into operations (id, tool_id, tenant, area, agent, state, key_hash, key_values, idempotency_header,
      run_id, step, worker, agent_version)
    values (p ->> 'newOperationId', p ->> 'toolId', p -> 'scope' ->> 'tenant', p -> 'scope' ->> 'area',
      p -> 'scope' ->> 'agent', 'open', p_key_hash,
      case when p_key_hash is null then null else p -> 'key' -> 'values' end,
      p ->> 'idempotencyHeader', p ->> 'runId', p ->> 'step', p ->> 'worker', p ->> 'agentVersion');
    return jsonb_build_object('type', 'operation.opened', 'operationId', p ->> 'newOperationId', 'payload',
      jsonb_build_object('operationId', p ->> 'newOperationId', 'toolId', p ->> 'toolId',
        'tenant', p -> 'scope' ->> 'tenant', 'area', p -> 'scope' ->> 'area', 'agent', p -> 'scope' ->> 'agent',
        'keyHash', p_key_hash, 'keyValues', case when p_key_hash is null then null else p -> 'key' -> 'values' end,
        'idempotencyHeader', p ->> 'idempotencyHeader', 'runId', p ->> 'runId', 'step', p ->> 'step',
        'worker', p ->> 'worker', 'agentVersion', p ->> 'agentVersion'));
  end $$`,
  `create function eg_start_attempt(p jsonb, p_operation_id text, p_number int, p_retry_of text,
    p_retry_reason text, p_previous_fingerprint text) returns jsonb language plpgsql as $$
  begin
    insert into attempts (id, operation_id, number, decision_id, run_id, step, worker, retry_of_attempt_id,
      retry_reason, request)
    values (p ->> 'newAttemptId', p_operation_id, p_number, p ->> 'decisionId', p ->> 'runId', p ->> 'step',
      p ->> 'worker', p_retry_of, p_retry_reason, p -> 'request');
    return jsonb_build_object('type', 'attempt.started', 'operationId', p_operation_id, 'payload',
      jsonb_build_object('attemptId', p ->> 'newAttemptId', 'operationId', p_operation_id, 'number', p_number,
        'decisionId', p ->> 'decisionId', 'runId', p ->> 'runId', 'step', p ->> 'step', 'worker', p ->> 'worker',
        'retryOfAttemptId', p_retry_of, 'retryReason', p_retry_reason,
        'attemptBudget', (p ->> 'retryBudget')::int, 'remainingAttempts', (p ->> 'retryBudget')::int - p_number,
        'previousFingerprint', p_previous_fingerprint, 'request', p -> 'request'));
  end $$`,
  `create function eg_key_event(p_type text, p_key_hash text, p_operation_id text, p_attempt_id text,
    p_facts jsonb) returns jsonb language sql immutable as $$
    select jsonb_build_object('type', p_type, 'operationId', p_operation_id, 'payload',
      jsonb_build_object('keyHash', p_key_hash, 'operationId', p_operation_id, 'attemptId', p_attempt_id)
        || coalesce(p_facts, '{}'::jsonb))
  $$`,
  `create function eg_state_event(p_operation_id text, p_from text, p_to text, p_attempt_id text)
    returns jsonb language sql immutable as $$
    select jsonb_build_object('type', 'operation.state_changed', 'operationId', p_operation_id, 'payload',
      jsonb_build_object('operationId', p_operation_id, 'from', p_from, 'to', p_to, 'attemptId', p_attempt_id))
  $$`,
  `create function eg_allow(p_decision_id text, p_operation_id text, p_attempt_id text, p_number int,
    p_retry_of text, p_retry_reason text) returns jsonb language sql immutable as $$
    select jsonb_build_object('verdict', 'allow', 'decisionId', p_decision_id, 'operationId', p_operation_id,
      'attemptId', p_attempt_id, 'attemptNumber', p_number, 'retryOfAttemptId', p_retry_of,
      'retryReason', p_retry_reason)
  $$`,
];

const DECIDE = `create function eg_decide(p jsonb) returns jsonb language plpgsql as $$
declare
  v_run text := p ->> 'runId';
  v_decision text := p ->> 'decisionId';
  v_key jsonb := p -> 'key';
  v_new_op text := p ->> 'newOperationId';
  v_new_attempt text := p ->> 'newAttemptId';
  v_budget int := coalesce((p ->> 'retryBudget')::int, 1);
  v_skips int;
  v_hash text;
  v_window interval;
  v_ttl interval;
  v_op text;
  v_op_state text;
  v_row dedupe_keys%rowtype;
  v_prev attempts%rowtype;
  v_number int;
  v_reason text;
  v_used int;
  v_events jsonb := '[]'::jsonb;
begin
  -- (a) The run, and the loop breaker. Read first: the insert (a write) happens once per run.
  select duplicate_skips into v_skips from runs
    where tenant = p -> 'scope' ->> 'tenant' and area = p -> 'scope' ->> 'area' and agent = p -> 'scope' ->> 'agent'
      and id = v_run;
  if not found then
    insert into runs (id, tenant, area, agent)
    values (v_run, p -> 'scope' ->> 'tenant', p -> 'scope' ->> 'area', p -> 'scope' ->> 'agent')
    on conflict (tenant, area, agent, id) do nothing;
    select duplicate_skips into v_skips from runs
      where tenant = p -> 'scope' ->> 'tenant' and area = p -> 'scope' ->> 'area'
        and agent = p -> 'scope' ->> 'agent' and id = v_run;
  end if;
  if v_skips >= (p ->> 'maxDuplicateSkips')::int then
    perform eg_append_events(jsonb_build_array(eg_record_decision(p, 'halted',
      format('loop_breaker: run %s has %s duplicate skips (max %s)', v_run, v_skips, p ->> 'maxDuplicateSkips'),
      null, null, null)));
    return jsonb_build_object('verdict', 'halted', 'decisionId', v_decision, 'duplicateSkips', v_skips);
  end if;

  if p ->> 'kind' = 'block' then
    perform eg_append_events(jsonb_build_array(eg_record_decision(p, 'block', p ->> 'reason', null, null, null)));
    return jsonb_build_object('verdict', 'block', 'decisionId', v_decision, 'reason', p ->> 'reason',
      'operationId', null);
  end if;

  -- (b) No duplicate recognition: every proposal is a new operation.
  if jsonb_typeof(v_key) is distinct from 'object' then
    v_events := v_events || jsonb_build_array(eg_open_operation(p, null));
    v_events := v_events || jsonb_build_array(eg_start_attempt(p, v_new_op, 1, null, null, null));
    v_events := v_events || jsonb_build_array(
      eg_record_decision(p, 'allow', p ->> 'keyError', v_new_op, v_new_attempt, null));
    perform eg_append_events(v_events);
    return eg_allow(v_decision, v_new_op, v_new_attempt, 1, null, null);
  end if;

  -- (c) Reserve the key: one atomic upsert decides ownership, across processes.
  v_hash := v_key ->> 'hash';
  v_window := eg_ms(v_key -> 'windowMs');
  v_ttl := eg_ms(v_key -> 'pendingTtlMs');
  for v_try in 1..8 loop
    insert into dedupe_keys as k (key_hash, tenant, area, agent, tool_id, state, operation_id, run_id, step,
      attempt_id, created_at, expires_at)
    values (v_hash, p -> 'scope' ->> 'tenant', p -> 'scope' ->> 'area', p -> 'scope' ->> 'agent', p ->> 'toolId',
      'pending', v_new_op, v_run, p ->> 'step', v_new_attempt, now(), now() + v_ttl)
    on conflict (key_hash) do update set
      state = 'pending',
      -- A released or lost (expired pending) reservation of an operation still inside the window is
      -- a retry of THAT operation: same id, so the same Idempotency-Key goes out again.
      operation_id = case when k.state <> 'confirmed' and (v_window is null or k.created_at + v_window > now())
        then k.operation_id else excluded.operation_id end,
      created_at = case when k.state <> 'confirmed' and (v_window is null or k.created_at + v_window > now())
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
        or (v_window is not null and k.created_at + v_window <= now())
        or coalesce((select max(a.number) from attempts a where a.operation_id = k.operation_id), 0) < v_budget)
    returning k.operation_id into v_op;

    if found and v_op = v_new_op then
      v_events := v_events || jsonb_build_array(eg_open_operation(p, v_hash));
      v_events := v_events || jsonb_build_array(eg_key_event('key.reserved', v_hash, v_new_op, v_new_attempt,
        jsonb_build_object('runId', v_run, 'step', p ->> 'step', 'expiresAt', eg_iso(now() + v_ttl))));
      v_events := v_events || jsonb_build_array(eg_start_attempt(p, v_new_op, 1, null, null, null));
      v_events := v_events || jsonb_build_array(
        eg_record_decision(p, 'allow', p ->> 'keyError', v_new_op, v_new_attempt, v_hash));
      perform eg_append_events(v_events);
      return eg_allow(v_decision, v_new_op, v_new_attempt, 1, null, null);
    end if;

    if found then
      -- A retry of operation v_op: its parent is the latest attempt, the reason follows from how that ended.
      select state into v_op_state from operations where id = v_op for update;
      select * into v_prev from attempts where operation_id = v_op order by number desc limit 1;
      v_number := coalesce(v_prev.number, 0) + 1;
      v_reason := case
        when v_prev.id is null then null
        when v_prev.dispatch_state = 'not_sent' then 'connection_not_established'
        when v_prev.status = 429 then 'rate_limited'
        when v_prev.status between 500 and 599 then 'destination_5xx'
        when v_prev.dispatch_state is null or v_prev.dispatch_state = 'sent_no_response'
          then 'response_lost_after_dispatch'
        else null end;
      v_events := v_events || jsonb_build_array(eg_key_event('key.reserved', v_hash, v_op, v_new_attempt,
        jsonb_build_object('runId', v_run, 'step', p ->> 'step', 'expiresAt', eg_iso(now() + v_ttl),
          'retryOfAttemptId', v_prev.id)));
      if v_op_state is distinct from 'open' then
        update operations set state = 'open', updated_at = now() where id = v_op;
        v_events := v_events || jsonb_build_array(eg_state_event(v_op, v_op_state, 'open', v_new_attempt));
      end if;
      v_events := v_events || jsonb_build_array(
        eg_start_attempt(p, v_op, v_number, v_prev.id, v_reason, v_prev.request ->> 'fingerprint'));
      v_events := v_events || jsonb_build_array(
        eg_record_decision(p, 'allow', p ->> 'keyError', v_op, v_new_attempt, v_hash));
      perform eg_append_events(v_events);
      return eg_allow(v_decision, v_op, v_new_attempt, v_number, v_prev.id, v_reason);
    end if;

    -- (d) Not ours. The upsert locked the row, so this read sees what the upsert saw.
    select * into v_row from dedupe_keys where key_hash = v_hash;
    if not found then
      continue;
    end if;

    if v_row.state = 'confirmed' and (v_row.window_ends_at is null or v_row.window_ends_at >= now()) then
      update runs set duplicate_skips = duplicate_skips + 1
        where tenant = p -> 'scope' ->> 'tenant' and area = p -> 'scope' ->> 'area'
          and agent = p -> 'scope' ->> 'agent' and id = v_run
        returning duplicate_skips into v_skips;
      perform eg_append_events(jsonb_build_array(
        eg_record_decision(p, 'duplicate', null, v_row.operation_id, null, v_hash)));
      return jsonb_build_object('verdict', 'duplicate', 'decisionId', v_decision, 'operationId', v_row.operation_id,
        'duplicateSkips', v_skips, 'source', case when v_row.run_id is null then null else jsonb_build_object(
          'runId', v_row.run_id, 'step', v_row.step, 'operationId', v_row.operation_id,
          'attemptId', v_row.attempt_id, 'confirmedAt', eg_iso(v_row.confirmed_at),
          'destinationRef', v_row.destination_ref) end);
    end if;

    if v_row.state = 'unknown' or (v_row.state = 'pending' and v_row.expires_at >= now()) then
      select state into v_op_state from operations where id = v_row.operation_id;
      if coalesce((p ->> 'recordPending')::boolean, false) then
        perform eg_append_events(jsonb_build_array(eg_record_decision(p, 'pending',
          case when v_row.state = 'unknown' then 'outcome_unknown' else 'reserved_by_another_run' end,
          v_row.operation_id, null, v_hash)));
        return jsonb_build_object('verdict', 'pending', 'decisionId', v_decision,
          'operationId', v_row.operation_id, 'operationState', coalesce(v_op_state, 'open'));
      end if;
      return jsonb_build_object('verdict', 'pending', 'decisionId', null, 'operationId', v_row.operation_id,
        'operationState', coalesce(v_op_state, 'open'));
    end if;

    if v_row.state in ('released', 'pending')
        and (v_window is null or v_row.created_at + v_window > now()) then
      select coalesce(max(number), 0) into v_used from attempts where operation_id = v_row.operation_id;
      if v_used >= v_budget then
        perform eg_append_events(jsonb_build_array(eg_record_decision(p, 'block', 'retry_budget_exhausted',
          v_row.operation_id, null, v_hash)));
        return jsonb_build_object('verdict', 'block', 'decisionId', v_decision, 'reason', 'retry_budget_exhausted',
          'operationId', v_row.operation_id);
      end if;
    end if;
    -- The row changed between the upsert and the read: propose again.
  end loop;
  raise exception 'effectgate: dedupe key % kept changing under eg_decide', v_hash;
end $$`;

const RECORD_OUTCOME = `create function eg_record_outcome(p jsonb) returns jsonb language plpgsql as $$
declare
  v_op_id text := p ->> 'operationId';
  v_attempt_id text := p ->> 'attemptId';
  v_key_hash text := p ->> 'keyHash';
  v_state text := p ->> 'operationState';
  v_window interval := eg_ms(p -> 'windowMs');
  v_key dedupe_keys%rowtype;
  v_owned boolean := false;
  v_op_state text;
  v_number int;
  v_latest int;
  v_key_state text;
  v_events jsonb := '[]'::jsonb;
begin
  if v_state not in ('succeeded', 'failed', 'unknown') then
    raise exception 'effectgate: outcome state must be succeeded, failed or unknown, not %', v_state;
  end if;
  -- Same lock order as eg_decide: key, then operation, then attempt.
  if v_key_hash is not null then
    select * into v_key from dedupe_keys where key_hash = v_key_hash for update;
    v_owned := found and v_key.state = 'pending' and v_key.operation_id = v_op_id
      and v_key.attempt_id = v_attempt_id;
  end if;
  select state into v_op_state from operations where id = v_op_id for update;
  if not found then
    raise exception 'effectgate: no operation %', v_op_id;
  end if;

  update attempts set
    dispatch_state = p ->> 'dispatchState',
    status = (p ->> 'status')::int,
    response_fingerprint = p ->> 'responseFingerprint',
    destination_ref = p ->> 'destinationRef',
    replayed = (p ->> 'replayed')::boolean,
    duration_ms = (p ->> 'durationMs')::double precision,
    error = p ->> 'error',
    finished_at = now()
  where id = v_attempt_id and operation_id = v_op_id and dispatch_state is null
  returning number into v_number;
  if not found then
    raise exception 'effectgate: attempt % of operation % does not exist or already has an outcome',
      v_attempt_id, v_op_id;
  end if;
  select max(number) into v_latest from attempts where operation_id = v_op_id;

  v_events := v_events || jsonb_build_array(jsonb_build_object('type', 'attempt.finished', 'operationId', v_op_id,
    'payload', jsonb_build_object('attemptId', v_attempt_id, 'operationId', v_op_id, 'number', v_number,
      'decisionId', p ->> 'decisionId', 'dispatchState', p ->> 'dispatchState', 'outcome', v_state,
      'status', (p ->> 'status')::int, 'responseFingerprint', p ->> 'responseFingerprint',
      'destinationRef', p ->> 'destinationRef', 'replayed', (p ->> 'replayed')::boolean,
      'durationMs', (p ->> 'durationMs')::double precision, 'error', p ->> 'error',
      'superseded', v_number < v_latest)));

  -- A late outcome of an attempt that a retry already superseded is kept as evidence (above) but
  -- does not move the operation nor the key: the newer attempt owns them now.
  if v_number < v_latest then
    perform eg_append_events(v_events);
    return jsonb_build_object('operationState', v_op_state);
  end if;

  if v_op_state is distinct from v_state then
    update operations set state = v_state, updated_at = now() where id = v_op_id;
    v_events := v_events || jsonb_build_array(eg_state_event(v_op_id, v_op_state, v_state, v_attempt_id));
  end if;

  if v_owned then
    v_key_state := case v_state when 'succeeded' then 'confirmed' when 'failed' then 'released' else 'unknown' end;
    update dedupe_keys set
      state = v_key_state,
      confirmed_at = case when v_state = 'succeeded' then now() end,
      window_ends_at = case when v_state = 'succeeded' then now() + v_window end,
      destination_ref = case when v_state = 'succeeded' then p ->> 'destinationRef' end
    where key_hash = v_key_hash;
    v_events := v_events || jsonb_build_array(eg_key_event('key.' || v_key_state, v_key_hash, v_op_id,
      v_attempt_id, case when v_state = 'succeeded' then jsonb_build_object('confirmedAt', eg_iso(now()),
        'windowEndsAt', eg_iso(now() + v_window), 'destinationRef', p ->> 'destinationRef') end));
  end if;

  perform eg_append_events(v_events);
  return jsonb_build_object('operationState', v_state);
end $$`;

export const migration0001: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of [...TABLES, ...EVENT_LOG, ...HELPERS, DECIDE, RECORD_OUTCOME]) {
      await sql.raw(statement).execute(db);
    }
  },
};
