import type { ColumnType, Generated } from 'kysely';

/*
 * Kysely table types. Rows are written only by the store's SQL functions (src/store/functions/,
 * so the reservation protocol stays atomic in SQL); TypeScript reads them. Hence the read shapes only:
 * timestamps arrive as Date from both drivers, bigint as string (pg) or number (PGlite), jsonb
 * already parsed.
 */

type Timestamp = ColumnType<Date, never, never>;
type BigIntColumn = ColumnType<string | number, never, never>;
type Json<T> = ColumnType<T, never, never>;

export interface RunsTable {
  id: string;
  tenant: string;
  area: string;
  agent: string;
  duplicate_skips: number;
  created_at: Timestamp;
  /** Migration 0009: the loop breaker's halt, NULL when not halted. */
  halted_at: ColumnType<Date | null, never, never>;
  halt_decision_id: string | null;
  halted_key_hash: string | null;
  releases: number;
  /** The client address of a derived run; NULL for a run the client named. */
  client: string | null;
}

export interface RunKeySkipsTable {
  tenant: string;
  area: string;
  agent: string;
  run_id: string;
  key_hash: string;
  /** The operation whose duplicates `skips` counts: a new operation of the key counts from one again. */
  operation_id: string;
  skips: number;
  shadow_skips: number;
  /** The call of the last counted skip (migration 0014): `key:<the agent's idempotency key>`. */
  call_key: string | null;
  call_at: Date | null;
  call_repeats: number;
}

export interface RunReleasesTable {
  id: string;
  tenant: string;
  area: string;
  agent: string;
  run_id: string;
  halt_decision_id: string | null;
  halted_at: ColumnType<Date | null, never, never>;
  released_by: string;
  reason: string;
  released_at: Timestamp;
}

export interface OperationsTable {
  id: string;
  tool_id: string;
  tenant: string;
  area: string;
  agent: string;
  state: string;
  key_hash: string | null;
  key_values: Json<unknown[] | null>;
  idempotency_header: string | null;
  run_id: string;
  step: string | null;
  worker: string | null;
  agent_version: string | null;
  supersedes_operation_id: string | null;
  /** The tool's unknown-outcome rule when the operation was created (migration 0003); NULL before. */
  unknown_rule: string | null;
  /** The tool's dedupe window in ms when the operation was created; NULL = permanent, or older than 0007. */
  window_ms: ColumnType<string | null, never, never>;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** Migration 0025: the position of the newest event its rows hold (eg_project_rows.sql); null on older rows. */
  event_pos: ColumnType<string | null, never, never>;
}

export interface AttemptsTable {
  id: string;
  operation_id: string;
  number: number;
  decision_id: string;
  run_id: string;
  step: string | null;
  worker: string | null;
  dispatch_state: string | null;
  retry_of_attempt_id: string | null;
  retry_reason: string | null;
  retry_decision: string | null;
  remaining_attempts: number | null;
  gate_instance: string | null;
  deadline_at: ColumnType<Date | null, never, never>;
  recovered_at: ColumnType<Date | null, never, never>;
  request: Json<unknown>;
  status: number | null;
  response_fingerprint: string | null;
  destination_ref: string | null;
  replayed: boolean | null;
  idempotency_key: ColumnType<string | null, never, never>;
  agent_idempotency_key: ColumnType<string | null, never, never>;
  gate_idempotency_key: ColumnType<string | null, never, never>;
  duration_ms: number | null;
  error: string | null;
  /** Migration 0012: the rule that decided the outcome, and the destination's error code. */
  outcome_rule: string | null;
  error_code: string | null;
  /** Migration 0020: the state this attempt's outcome reported when its operation was kept unknown. */
  kept_state: ColumnType<string | null, never, never>;
  started_at: Timestamp;
  finished_at: ColumnType<Date | null, never, never>;
}

export interface DecisionsTable {
  id: string;
  run_id: string;
  step: string | null;
  tool_id: string;
  verdict: string;
  reason: string | null;
  operation_id: string | null;
  attempt_id: string | null;
  key_hash: string | null;
  tenant: string;
  area: string;
  agent: string;
  explain: string;
  created_at: Timestamp;
}

/** Migration 0010: a request shadow mode sent although its decision was would_<verdict>. */
export interface ShadowDispatchesTable {
  decision_id: string;
  operation_id: string | null;
  tool_id: string;
  run_id: string;
  tenant: string;
  area: string;
  agent: string;
  verdict: string;
  dispatch_state: string;
  status: number | null;
  duration_ms: number | null;
  error: string | null;
  created_at: Timestamp;
}

export interface DedupeKeysTable {
  key_hash: string;
  tenant: string;
  area: string;
  agent: string;
  tool_id: string;
  state: 'pending' | 'confirmed' | 'unknown' | 'released' | 'awaiting_input' | 'accepted';
  operation_id: string;
  run_id: string | null;
  step: string | null;
  attempt_id: string | null;
  attempt_number: number;
  /** Attempts of the key that continued an `input_required` answer (migration 0004); they spend no budget. */
  input_rounds: ColumnType<number, never, never>;
  created_at: Timestamp;
  expires_at: ColumnType<Date | null, never, never>;
  confirmed_at: ColumnType<Date | null, never, never>;
  window_ends_at: ColumnType<Date | null, never, never>;
  destination_ref: string | null;
  /** Migration 0021: the state of the operation the key names, written with it (eg_set_operation_state). */
  operation_state: ColumnType<string | null, never, never>;
  /** Migration 0022: the key's attempt was marked lost (by an expiry or a recovery) when this equals attempt_id. */
  lost_attempt_id: ColumnType<string | null, never, never>;
}

export interface EventsTable {
  /** Null for an event appended without a chain (migration 0027 allows it); so are its hashes. */
  chain: number | null;
  seq: ColumnType<string | number | null, never, never>;
  type: string;
  operation_id: string | null;
  recorded_at: Timestamp;
  recorded_at_us: BigIntColumn;
  payload: string;
  prev_hash: string | null;
  hash: string | null;
  /** Migration 0024: the writer's top-level transaction id (xid8, as text); null on older events. */
  tx: ColumnType<string | null, never, never>;
  /**
   * Migration 0024: the store's order of inserts (sequence events_pos); the primary key since
   * migration 0027, which numbered older events below every other.
   */
  pos: ColumnType<string, never, never>;
}

export interface ChainHeadTable {
  /** The chain. */
  id: number;
  last_seq: BigIntColumn;
  last_hash: string;
  /** The hash before last_hash: an output of eg_append_event's UPDATE only (migration 0005). */
  prev_hash: string | null;
  /** The last event's recorded_at_us, so time never goes backwards along a chain (0005). */
  last_us: Generated<BigIntColumn>;
  /** The last event removed by retention (0 while none was): the chain is verified from here (0006). */
  base_seq: Generated<BigIntColumn>;
  base_hash: Generated<string>;
}

/** Per chain, the last seq eg_project has read (migration 0019): decisions are projected up to it. */
export interface EventProjectionTable {
  chain: number;
  seq: BigIntColumn;
}

/** Migration 0025: the projection's place in the log, by snapshot (eg_project.sql). */
export interface LogProjectionTable {
  id: boolean;
  after_snapshot: string | null;
  target_snapshot: string | null;
  through_pos: BigIntColumn;
}

export interface ObservationsTable {
  id: string;
  operation_id: string;
  attempt_id: string | null;
  kind: string;
  result: string;
  facts: Json<Record<string, unknown>>;
  decision_id: string | null;
  created_at: Timestamp;
}

export interface ApprovalsTable {
  id: string;
  operation_id: string;
  state: string;
  intent: Json<Record<string, unknown>>;
  previous_attempt_id: string | null;
  previous_dispatch_state: string | null;
  previous_status: number | null;
  planned_recovery: string;
  requested_at: Timestamp;
  requested_by: string;
  decided_by: string | null;
  decided_at: ColumnType<Date | null, never, never>;
  reason: string | null;
  expires_at: ColumnType<Date | null, never, never>;
  revoked_by: string | null;
  revoked_at: ColumnType<Date | null, never, never>;
  used_by_attempt_id: string | null;
  used_at: ColumnType<Date | null, never, never>;
  /** The session grant this card was used under (migration 0008), else null. */
  grant_id: string | null;
  /** The fingerprint of the request the card is about (migration 0011); null: not recorded. */
  request_fingerprint: string | null;
}

export interface GrantsTable {
  id: string;
  tenant: string;
  area: string;
  agent: string;
  run_id: string;
  tool_id: string | null;
  granted_by: string;
  reason: string;
  granted_at: Timestamp;
  expires_at: Timestamp;
  revoked_by: string | null;
  revoked_at: ColumnType<Date | null, never, never>;
  revoke_reason: string | null;
}

/** Gate processes; written with plain statements (register, heartbeat, stop). */
export interface GateInstancesTable {
  id: string;
  started_at: ColumnType<Date, never, never>;
  heartbeat_at: ColumnType<Date, never, never>;
  stopped_at: ColumnType<Date | null, never, never>;
}

/** Checkpoints of the sealed log (migration 0018); append-only, written by eg_append_checkpoint. */
export interface AuditCheckpointsTable {
  size: ColumnType<string, never, never>;
  heads: ColumnType<unknown, never, never>;
  root: string;
  frontier: string;
  sealed_at: ColumnType<Date, never, never>;
  note: string;
}

export interface SettingsTable {
  name: string;
  value: string;
}

export interface Database {
  runs: RunsTable;
  run_key_skips: RunKeySkipsTable;
  run_releases: RunReleasesTable;
  operations: OperationsTable;
  attempts: AttemptsTable;
  decisions: DecisionsTable;
  shadow_dispatches: ShadowDispatchesTable;
  dedupe_keys: DedupeKeysTable;
  events: EventsTable;
  chain_head: ChainHeadTable;
  observations: ObservationsTable;
  approvals: ApprovalsTable;
  grants: GrantsTable;
  gate_instances: GateInstancesTable;
  settings: SettingsTable;
  audit_checkpoints: AuditCheckpointsTable;
  event_projection: EventProjectionTable;
  row_projection: EventProjectionTable;
  log_projection: LogProjectionTable;
}
