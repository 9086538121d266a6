import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0001: the tables and indexes of operations, attempts, decisions, dedupe keys and runs, and the
 * append-only hash-chained event log with its head rows.
 *
 * Schema only. The functions of the reservation protocol (eg_decide, eg_record_outcome and their
 * helpers) are not migrations: each has its current definition in src/store/functions/, applied
 * after the migrations (see README.md there, which also holds the lock order and event shapes).
 * The one function here is the trigger's: a trigger needs its function to exist, so it is part
 * of the schema, and the functions step leaves it alone.
 *
 * Never edit once applied (migrations.lock.json holds its checksum): add a new migration.
 *
 * Statements are listed one by one (no multi-statement strings): PGlite's extended-protocol query
 * runs one statement at a time.
 */

/**
 * Number of event chains (head rows 0..CHAINS-1). Must equal EVENT_CHAINS in audit-chain.ts and
 * the literal in src/store/functions/eg_chain_of.sql (a test checks the chain assignment), and
 * divide 256 (the chain is one hash byte mod CHAINS). Written here as a literal on purpose: this
 * migration's SQL must never change once applied; another number of chains would need a new
 * migration. Why 64: see eg_chain_of.sql.
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

// Append-only: no update, delete or truncate of an event, whoever asks (the hash chain makes a
// rewrite detectable; this makes it fail).
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
];

export const migration0001: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of [...TABLES, ...EVENT_LOG]) {
      await sql.raw(statement).execute(db);
    }
  },
};
