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
 * One event per call. `eg_decide` appends exactly one `decision.<verdict>` event and
 * `eg_record_outcome` exactly one `attempt.outcome` event, each carrying every fact of its call
 * (shapes below, at EVENT_LOG). Each event costs a payload, a sha256, an insert and a head row
 * update, so one per call instead of one per fact is most of the per-call CPU saved.
 *
 * Both take their input as JSON text (`select eg_decide($1)`): parsed once into jsonb for the
 * logic, and kept as text for the event payload.
 *
 * Sharded chain. The log is CHAINS independent hash chains, each with its own head row. An event's
 * chain is eg_chain_of(its operation id, or its decision id when it belongs to no operation), so
 * one operation's events stay on one chain, in order, while unrelated writers lock different head
 * rows: a head row lock is held through COMMIT (WAL flush included), and with ONE head every
 * governed write in every process waited for the previous one's flush, so commits could not be
 * grouped. The verifier (audit-chain.ts) checks every chain and the head rows.
 *
 * Lock order, the same in every function, so concurrent calls cannot deadlock:
 * dedupe_keys row -> operations row -> attempts row -> runs row (a duplicate's skip count, the
 * only write to runs) -> chain_head row (always last: each function appends its one event at its
 * very end, so the head row is held as briefly as possible).
 *
 * All timestamps come from the database clock (now() = transaction start; clock_timestamp() for
 * events), never from the gate's.
 *
 * Helpers used inside expressions are `language sql stable` (not immutable: json_build_object,
 * to_char and convert_to are stable), so the planner inlines them instead of running them as
 * separate, re-planned SQL functions. Results are `json` (built as text), not `jsonb`.
 *
 * Statements are listed one by one (no multi-statement strings): PGlite's extended-protocol query
 * runs one statement at a time.
 */

/**
 * Number of event chains (head rows 0..CHAINS-1). Must equal EVENT_CHAINS in audit-chain.ts (a
 * test checks both and the chain assignment) and divide 256 (the chain is one hash byte mod
 * CHAINS). Why 64: with a gate's 16 pooled connections, two commits in flight share a head row
 * about once in 64; with 16 chains, lock waits on head rows were still measurable at 32 clients.
 * Written here as a literal on purpose: this migration's SQL must never change once applied;
 * another number of chains would need a new migration.
 */
const CHAINS = 64;

const TABLES: readonly string[] = [
  // A run id comes from a client header, so it is only unique inside one scope: keyed by scope,
  // one tenant's duplicates can never trip another tenant's loop breaker. The row is the loop
  // breaker's counter: written on a run's first duplicate skip, so allows never write it.
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
  // Only the indexes a read uses (listOperations with and without a state); each one more is
  // written twice per allow (insert, then the state update, which cannot be HOT).
  'create index operations_state_created_idx on operations (state, created_at desc)',
  'create index operations_created_idx on operations (created_at desc)',
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
  // attempt_id/attempt_number name the operation's latest attempt (every attempt of a keyed
  // operation is made through this row), so the retry budget is read here, not counted in attempts.
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
    attempt_number int not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz,
    confirmed_at timestamptz,
    window_ends_at timestamptz,
    destination_ref text
  )`,
  // No index beyond the primary key: the store reads events chain by chain, in seq order.
  `create table events (
    chain int not null,
    seq bigint not null,
    type text not null,
    operation_id text,
    recorded_at timestamptz not null,
    recorded_at_us bigint not null,
    payload text not null,
    prev_hash text not null,
    hash text not null,
    primary key (chain, seq)
  )`,
  `create table chain_head (
    id int primary key check (id >= 0 and id < ${CHAINS}),
    last_seq bigint not null,
    last_hash text not null
  )`,
  `insert into chain_head (id, last_seq, last_hash)
    select g, 0, repeat('0', 64) from generate_series(0, ${CHAINS - 1}) as g`,
];

/*
 * Event types and payloads. The payload is JSON text, hashed exactly as stored. It is built by
 * concatenation, not by jsonb: the call's input goes in as the very text the gate sent (already
 * parsed once, so known to be valid JSON), and only what the database decided is built, with
 * json_build_object. Building the whole payload as jsonb and printing it again was a third of the
 * cost of an event.
 *
 * decision.<verdict> (one per eg_decide call that records a decision):
 *   { "input":    the DecideInput exactly as sent (decisionId, runId, step, worker, agentVersion,
 *                 scope, toolId, explain, maxDuplicateSkips, request, key, keyError, newOperationId,
 *                 newAttemptId, idempotencyHeader, retryBudget, recordPending; or kind block + reason),
 *     "decision": { verdict, reason, operationId, attemptId, keyHash },
 *     "facts":    by verdict:
 *       allow      { operation: { opened: true } | { opened: false, stateChange: { from, to } | null },
 *                    attempt: { number, retryOfAttemptId, retryReason, attemptBudget, remainingAttempts,
 *                               previousFingerprint },
 *                    key: { expiresAt } | null }          (the reservation taken, none without a key)
 *       duplicate  { duplicateSkips, windowEndsAt,
 *                    source: { runId, step, operationId, attemptId, confirmedAt, destinationRef } | null }
 *       pending    { operationState, heldBy: { runId, step, attemptId, expiresAt, keyState } }
 *       halted     { duplicateSkips, maxDuplicateSkips }
 *       block      {} | { attemptsUsed, attemptBudget }    (the latter: retry_budget_exhausted) }
 * attempt.outcome (one per eg_record_outcome call):
 *   { "input":    the OutcomeInput exactly as sent (operationId, attemptId, decisionId, keyHash,
 *                 windowMs, dispatchState, operationState, status, responseFingerprint,
 *                 destinationRef, replayed, durationMs, error),
 *     "facts":    { number, superseded, stateChange: { from, to } | null,
 *                   key: { state: confirmed|released|unknown, confirmedAt, windowEndsAt } | null } }
 *
 * The events.operation_id column is the operation whose lifecycle the event belongs to (and picks
 * its chain): set on decision.allow and attempt.outcome. A duplicate, pending or budget block is
 * a decision of another run ABOUT an operation: its decision.operationId names it (and so does
 * the decisions row), its chain follows its own decision id, so a hot key's duplicates spread over
 * all chains instead of queueing on one head row.
 */
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
  // chainOf() in audit-chain.ts computes the same: first byte of sha256(UTF-8 id), mod CHAINS.
  `create function eg_chain_of(p_id text) returns int language sql stable as $$
    select get_byte(sha256(convert_to(p_id, 'UTF8')), 0) % ${CHAINS}
  $$`,
  // Appends one event to the chain of p_chain_of. The head row lock is taken last and held only
  // for the hash, one insert and one update (then COMMIT). The hash input is reproduced byte for
  // byte by computeEventHash() in audit-chain.ts. The time is read after the lock, so it never
  // goes backwards along a chain.
  `create function eg_append_event(p_chain_of text, p_type text, p_operation_id text, p_payload text)
    returns void language plpgsql as $$
  declare
    v_chain int := eg_chain_of(p_chain_of);
    v_seq bigint;
    v_prev text;
    v_hash text;
    v_at timestamptz;
    v_us bigint;
  begin
    select last_seq + 1, last_hash into v_seq, v_prev from chain_head where id = v_chain for update;
    v_at := clock_timestamp();
    -- extract(epoch) is numeric (exact) since PostgreSQL 14: no float rounding of microseconds.
    v_us := (extract(epoch from v_at) * 1000000)::bigint;
    v_hash := encode(sha256(convert_to(
      v_prev || E'\\n' || v_chain::text || E'\\n' || v_seq::text || E'\\n' || p_type || E'\\n' ||
      coalesce(p_operation_id, '') || E'\\n' || v_us::text || E'\\n' || p_payload, 'UTF8')), 'hex');
    with appended as (
      insert into events (chain, seq, type, operation_id, recorded_at, recorded_at_us, payload, prev_hash, hash)
      values (v_chain, v_seq, p_type, p_operation_id, v_at, v_us, p_payload, v_prev, v_hash)
    )
    update chain_head set last_seq = v_seq, last_hash = v_hash where id = v_chain;
  end $$`,
];

// Shared by eg_decide and eg_record_outcome. p is the parsed input, p_input its text as sent.
const HELPERS: readonly string[] = [
  // Same shape and precision (ms) as JavaScript's Date#toISOString().
  `create function eg_iso(p_at timestamptz) returns text language sql stable as $$
    select to_char(p_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  $$`,
  `create function eg_ms(p_ms jsonb) returns interval language sql immutable as $$
    select case when jsonb_typeof(p_ms) = 'number'
      then (p_ms::text)::double precision * interval '1 millisecond' end
  $$`,
  `create function eg_allow(p_decision_id text, p_operation_id text, p_attempt_id text, p_number int,
    p_retry_of text, p_retry_reason text) returns json language sql stable as $$
    select json_build_object('verdict', 'allow', 'decisionId', p_decision_id, 'operationId', p_operation_id,
      'attemptId', p_attempt_id, 'attemptNumber', p_number, 'retryOfAttemptId', p_retry_of,
      'retryReason', p_retry_reason)
  $$`,
  `create function eg_attempt_facts(p jsonb, p_number int, p_retry_of text, p_retry_reason text,
    p_previous_fingerprint text) returns json language sql stable as $$
    select json_build_object('number', p_number, 'retryOfAttemptId', p_retry_of, 'retryReason', p_retry_reason,
      'attemptBudget', (p ->> 'retryBudget')::int, 'remainingAttempts', (p ->> 'retryBudget')::int - p_number,
      'previousFingerprint', p_previous_fingerprint)
  $$`,
  // Records the decision row and its one event (last: it takes the head row lock). p_owner is the
  // operation the event belongs to (allow only, see EVENT_LOG); p_facts are the verdict's own facts.
  `create function eg_decided(p jsonb, p_input text, p_verdict text, p_reason text, p_operation_id text,
    p_attempt_id text, p_key_hash text, p_owner text, p_facts json) returns void language plpgsql as $$
  declare
    v_scope jsonb := p -> 'scope';
  begin
    insert into decisions (id, run_id, step, tool_id, verdict, reason, operation_id, attempt_id, key_hash,
      tenant, area, agent, explain)
    values (p ->> 'decisionId', p ->> 'runId', p ->> 'step', p ->> 'toolId', p_verdict, p_reason, p_operation_id,
      p_attempt_id, p_key_hash, v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent',
      coalesce(p ->> 'explain', ''));
    perform eg_append_event(coalesce(p_owner, p ->> 'decisionId'), 'decision.' || p_verdict, p_owner,
      '{"input":' || p_input || ',"decision":' || json_build_object('verdict', p_verdict, 'reason', p_reason,
        'operationId', p_operation_id, 'attemptId', p_attempt_id, 'keyHash', p_key_hash)::text ||
      ',"facts":' || p_facts::text || '}');
  end $$`,
  // A new operation with its first attempt (the key, if any, is already reserved for it).
  `create function eg_allow_new(p jsonb, p_input text, p_key_hash text, p_expires_at timestamptz) returns json
    language plpgsql as $$
  declare
    v_op text := p ->> 'newOperationId';
    v_attempt text := p ->> 'newAttemptId';
    v_scope jsonb := p -> 'scope';
  begin
    insert into operations (id, tool_id, tenant, area, agent, state, key_hash, key_values, idempotency_header,
      run_id, step, worker, agent_version)
    values (v_op, p ->> 'toolId', v_scope ->> 'tenant', v_scope ->> 'area', v_scope ->> 'agent', 'open',
      p_key_hash, case when p_key_hash is null then null else p -> 'key' -> 'values' end,
      p ->> 'idempotencyHeader', p ->> 'runId', p ->> 'step', p ->> 'worker', p ->> 'agentVersion');
    insert into attempts (id, operation_id, number, decision_id, run_id, step, worker, request)
    values (v_attempt, v_op, 1, p ->> 'decisionId', p ->> 'runId', p ->> 'step', p ->> 'worker', p -> 'request');
    perform eg_decided(p, p_input, 'allow', p ->> 'keyError', v_op, v_attempt, p_key_hash, v_op, json_build_object(
      'operation', json_build_object('opened', true),
      'attempt', eg_attempt_facts(p, 1, null, null, null),
      'key', case when p_key_hash is not null then json_build_object('expiresAt', eg_iso(p_expires_at)) end));
    return eg_allow(p ->> 'decisionId', v_op, v_attempt, 1, null, null);
  end $$`,
  // Another run holds the key (pending) or its outcome is unknown: recorded only when asked.
  `create function eg_pending(p jsonb, p_input text, p_key dedupe_keys, p_reason text) returns json
    language plpgsql as $$
  declare
    v_op_state text;
  begin
    select state into v_op_state from operations where id = p_key.operation_id;
    v_op_state := coalesce(v_op_state, 'open');
    if not coalesce((p ->> 'recordPending')::boolean, false) then
      return json_build_object('verdict', 'pending', 'decisionId', null, 'operationId', p_key.operation_id,
        'operationState', v_op_state);
    end if;
    perform eg_decided(p, p_input, 'pending', p_reason, p_key.operation_id, null, p_key.key_hash, null,
      json_build_object('operationState', v_op_state, 'heldBy', json_build_object('runId', p_key.run_id,
        'step', p_key.step, 'attemptId', p_key.attempt_id, 'expiresAt', eg_iso(p_key.expires_at),
        'keyState', p_key.state)));
    return json_build_object('verdict', 'pending', 'decisionId', p ->> 'decisionId',
      'operationId', p_key.operation_id, 'operationState', v_op_state);
  end $$`,
];

const DECIDE = `create function eg_decide(p_input text) returns json language plpgsql as $$
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
  v_new_attempt text := p ->> 'newAttemptId';
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
  v_reason text;
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
    return eg_allow_new(p, p_input, null, null);
  end if;

  v_hash := v_key ->> 'hash';
  v_window := eg_ms(v_key -> 'windowMs');
  v_expires := now() + eg_ms(v_key -> 'pendingTtlMs');
  -- (c) Read before locking. A key confirmed inside its window, or whose outcome is unknown, is in
  -- a state no eg_decide can change (DESIGN 4.1), so the committed row is the answer: no upsert, no
  -- row lock, and concurrent duplicates of one key do not queue behind each other.
  select * into v_row from dedupe_keys where key_hash = v_hash;
  for v_try in 1..8 loop
    if v_row.state = 'confirmed' and (v_row.window_ends_at is null or v_row.window_ends_at >= now()) then
      insert into runs as r (tenant, area, agent, id, duplicate_skips) values (v_tenant, v_area, v_agent, v_run, 1)
      on conflict (tenant, area, agent, id) do update set duplicate_skips = r.duplicate_skips + 1
      returning duplicate_skips into v_skips;
      v_source := case when v_row.run_id is not null then json_build_object(
        'runId', v_row.run_id, 'step', v_row.step, 'operationId', v_row.operation_id,
        'attemptId', v_row.attempt_id, 'confirmedAt', eg_iso(v_row.confirmed_at),
        'destinationRef', v_row.destination_ref) end;
      perform eg_decided(p, p_input, 'duplicate', null, v_row.operation_id, null, v_hash, null, json_build_object(
        'duplicateSkips', v_skips, 'windowEndsAt', eg_iso(v_row.window_ends_at), 'source', v_source));
      return json_build_object('verdict', 'duplicate', 'decisionId', v_decision, 'operationId', v_row.operation_id,
        'duplicateSkips', v_skips, 'source', v_source);
    end if;
    if v_row.state = 'unknown' then
      return eg_pending(p, p_input, v_row, 'outcome_unknown');
    end if;

    -- (d) Reserve the key: one atomic upsert decides ownership, across processes.
    insert into dedupe_keys as k (key_hash, tenant, area, agent, tool_id, state, operation_id, run_id, step,
      attempt_id, attempt_number, created_at, expires_at)
    values (v_hash, v_tenant, v_area, v_agent, p ->> 'toolId', 'pending', v_new_op, v_run, p ->> 'step',
      v_new_attempt, 1, now(), v_expires)
    on conflict (key_hash) do update set
      state = 'pending',
      -- A released or lost (expired pending) reservation of an operation still inside the window is
      -- a retry of THAT operation: same id, so the same Idempotency-Key goes out again.
      operation_id = case when k.state <> 'confirmed' and (v_window is null or k.created_at + v_window > now())
        then k.operation_id else excluded.operation_id end,
      attempt_number = case when k.state <> 'confirmed' and (v_window is null or k.created_at + v_window > now())
        then k.attempt_number + 1 else 1 end,
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
        or k.attempt_number < v_budget)
    returning k.operation_id, k.attempt_number into v_op, v_number;

    if found and v_op = v_new_op then
      return eg_allow_new(p, p_input, v_hash, v_expires);
    end if;

    if found then
      -- A retry of operation v_op: its parent is the previous attempt, the reason follows from how it ended.
      select state into v_op_state from operations where id = v_op for update;
      select * into v_prev from attempts where operation_id = v_op and number = v_number - 1;
      v_reason := case
        when v_prev.id is null then null
        when v_prev.dispatch_state = 'not_sent' then 'connection_not_established'
        when v_prev.status = 429 then 'rate_limited'
        when v_prev.status between 500 and 599 then 'destination_5xx'
        when v_prev.dispatch_state is null or v_prev.dispatch_state = 'sent_no_response'
          then 'response_lost_after_dispatch'
        else null end;
      if v_op_state is distinct from 'open' then
        update operations set state = 'open', updated_at = now() where id = v_op;
      end if;
      insert into attempts (id, operation_id, number, decision_id, run_id, step, worker, retry_of_attempt_id,
        retry_reason, request)
      values (v_new_attempt, v_op, v_number, v_decision, v_run, p ->> 'step', p ->> 'worker', v_prev.id, v_reason,
        p -> 'request');
      perform eg_decided(p, p_input, 'allow', p ->> 'keyError', v_op, v_new_attempt, v_hash, v_op,
        json_build_object(
          'operation', json_build_object('opened', false, 'stateChange',
            case when v_op_state is distinct from 'open' then json_build_object('from', v_op_state, 'to', 'open') end),
          'attempt', eg_attempt_facts(p, v_number, v_prev.id, v_reason, v_prev.request ->> 'fingerprint'),
          'key', json_build_object('expiresAt', eg_iso(v_expires))));
      return eg_allow(v_decision, v_op, v_new_attempt, v_number, v_prev.id, v_reason);
    end if;

    -- (e) Not ours. The upsert locked the row, so this read sees what the upsert saw.
    select * into v_row from dedupe_keys where key_hash = v_hash;
    if v_row.state = 'pending' and v_row.expires_at >= now() then
      return eg_pending(p, p_input, v_row, 'reserved_by_another_run');
    end if;
    if v_row.state in ('released', 'pending') and (v_window is null or v_row.created_at + v_window > now())
        and v_row.attempt_number >= v_budget then
      perform eg_decided(p, p_input, 'block', 'retry_budget_exhausted', v_row.operation_id, null, v_hash, null,
        json_build_object('attemptsUsed', v_row.attempt_number, 'attemptBudget', v_budget));
      return json_build_object('verdict', 'block', 'decisionId', v_decision, 'reason', 'retry_budget_exhausted',
        'operationId', v_row.operation_id);
    end if;
    -- Confirmed or unknown: answered at the top of the loop. Anything else changed under us: again.
  end loop;
  raise exception 'effectgate: dedupe key % kept changing under eg_decide', v_hash;
end $$`;

const RECORD_OUTCOME = `create function eg_record_outcome(p_input text) returns json language plpgsql as $$
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
begin
  if v_state not in ('succeeded', 'failed', 'unknown') then
    raise exception 'effectgate: outcome state must be succeeded, failed or unknown, not %', v_state;
  end if;
  v_key_state := case v_state when 'succeeded' then 'confirmed' when 'failed' then 'released' else 'unknown' end;
  -- Same lock order as eg_decide: key, then operation, then attempt. Only the reservation this
  -- attempt still owns moves (a takeover gave it to a newer attempt otherwise); one statement both
  -- tests ownership and moves it. Any error below rolls it back with the rest.
  if v_key_hash is not null then
    update dedupe_keys set
      state = v_key_state,
      confirmed_at = case when v_succeeded then now() end,
      window_ends_at = case when v_succeeded then now() + v_window end,
      destination_ref = case when v_succeeded then p ->> 'destinationRef' end
    where key_hash = v_key_hash and state = 'pending' and operation_id = v_op_id and attempt_id = v_attempt_id;
    v_owned := found;
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
  -- The key row names its operation's latest attempt, so the owner is the latest; otherwise count.
  if v_owned then
    v_latest := v_number;
  else
    select max(number) into v_latest from attempts where operation_id = v_op_id;
  end if;

  -- A late outcome of an attempt that a retry already superseded is kept as evidence but does not
  -- move the operation nor the key: the newer attempt owns them now.
  if v_number = v_latest and v_op_state is distinct from v_state then
    update operations set state = v_state, updated_at = now() where id = v_op_id;
    v_change := json_build_object('from', v_op_state, 'to', v_state);
  end if;

  perform eg_append_event(v_op_id, 'attempt.outcome', v_op_id, '{"input":' || p_input || ',"facts":' ||
    json_build_object('number', v_number, 'superseded', v_number < v_latest, 'stateChange', v_change,
      'key', case when v_owned then json_build_object('state', v_key_state,
        'confirmedAt', case when v_succeeded then eg_iso(now()) end,
        'windowEndsAt', case when v_succeeded then eg_iso(now() + v_window) end) end)::text || '}');
  return json_build_object('operationState', case when v_number < v_latest then v_op_state else v_state end);
end $$`;

export const migration0001: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of [...TABLES, ...EVENT_LOG, ...HELPERS, DECIDE, RECORD_OUTCOME]) {
      await sql.raw(statement).execute(db);
    }
  },
};
