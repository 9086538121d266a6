import type { Selectable } from 'kysely';
import type {
  ApprovalsTable,
  AttemptsTable,
  DecisionsTable,
  EventsTable,
  GrantsTable,
  ObservationsTable,
  OperationsTable,
  RunKeySkipsTable,
  RunReleasesTable,
  RunsTable,
} from './schema.js';
import type {
  ApprovalRecord,
  ApprovalState,
  AttemptRecord,
  ChainedEvent,
  DecisionRecord,
  DispatchState,
  EventRecord,
  GrantRecord,
  ObservationRecord,
  OperationRecord,
  OperationState,
  RequestFacts,
  RetryDecision,
  RetryReason,
  RunRecord,
  Verdict,
} from './types.js';

/*
 * Row -> record mapping. The two drivers differ in how they hand back bigint (pg: string, PGlite:
 * number) and we want one shape, so numbers and timestamps are normalized here.
 */

export function iso(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}

function isoOrNull(value: Date | string | null): string | null {
  return value === null ? null : iso(value);
}

export function toAttempt(row: Selectable<AttemptsTable>): AttemptRecord {
  return {
    id: row.id,
    operationId: row.operation_id,
    number: row.number,
    decisionId: row.decision_id,
    runId: row.run_id,
    step: row.step,
    worker: row.worker,
    dispatchState: row.dispatch_state as DispatchState | null,
    retryOfAttemptId: row.retry_of_attempt_id,
    retryReason: row.retry_reason as RetryReason | null,
    retryDecision: row.retry_decision as RetryDecision | null,
    remainingAttempts: row.remaining_attempts,
    request: row.request as RequestFacts,
    status: row.status,
    responseFingerprint: row.response_fingerprint,
    destinationRef: row.destination_ref,
    replayed: row.replayed,
    idempotencyKey: row.idempotency_key,
    agentIdempotencyKey: row.agent_idempotency_key,
    gateIdempotencyKey: row.gate_idempotency_key,
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
    error: row.error,
    outcomeRule: row.outcome_rule ?? null,
    errorCode: row.error_code ?? null,
    startedAt: iso(row.started_at),
    finishedAt: isoOrNull(row.finished_at),
    recoveredAt: isoOrNull(row.recovered_at),
  };
}

export function toOperation(
  row: Selectable<OperationsTable>,
  attempts: readonly AttemptRecord[],
): OperationRecord {
  return {
    id: row.id,
    toolId: row.tool_id,
    scope: { tenant: row.tenant, area: row.area, agent: row.agent },
    state: row.state as OperationState,
    keyHash: row.key_hash,
    keyValues: row.key_values,
    idempotencyHeader: row.idempotency_header,
    runId: row.run_id,
    step: row.step,
    worker: row.worker,
    agentVersion: row.agent_version,
    supersedesOperationId: row.supersedes_operation_id,
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    attempts,
  };
}

/** A decision row with its shadow dispatch's columns (left-joined; all null when it has none). */
export type DecisionRow = Selectable<DecisionsTable> & {
  readonly shadow_dispatch_state: string | null;
  readonly shadow_status: number | null;
  readonly shadow_duration_ms: number | string | null;
  readonly shadow_error: string | null;
  readonly shadow_created_at: Date | string | null;
};

export function toDecision(row: DecisionRow): DecisionRecord {
  return {
    id: row.id,
    runId: row.run_id,
    step: row.step,
    toolId: row.tool_id,
    verdict: row.verdict as Verdict,
    reason: row.reason,
    operationId: row.operation_id,
    attemptId: row.attempt_id,
    keyHash: row.key_hash,
    scope: { tenant: row.tenant, area: row.area, agent: row.agent },
    explain: row.explain,
    createdAt: iso(row.created_at),
    shadowDispatch:
      row.shadow_dispatch_state === null || row.shadow_created_at === null
        ? null
        : {
            dispatchState: row.shadow_dispatch_state as DispatchState,
            status: row.shadow_status,
            durationMs: row.shadow_duration_ms === null ? null : Number(row.shadow_duration_ms),
            error: row.shadow_error,
            recordedAt: iso(row.shadow_created_at),
          },
  };
}

/** An event row as read (`pos` and `seq` as text or number, whichever the driver gives). */
export type EventRow = Omit<Selectable<EventsTable>, 'recorded_at' | 'tx'>;

/**
 * An event of the log, with its chain or without one: without one only when every chain field is
 * missing, as an append without a chain writes it. A row missing some of them was edited by hand
 * and is read as chained (toChainedEvent), so its chain check fails where it is.
 */
export function toEvent(row: EventRow): EventRecord {
  if (row.seq === null && row.chain === null && row.prev_hash === null && row.hash === null) {
    return {
      pos: Number(row.pos),
      chain: null,
      seq: null,
      type: row.type,
      operationId: row.operation_id,
      recordedAtUs: String(row.recorded_at_us),
      payload: row.payload,
      prevHash: null,
      hash: null,
    };
  }
  return toChainedEvent(row);
}

/**
 * An event read as chained. A row with some chain field missing was edited by hand: it is read
 * with that field empty (chain -1, seq 0, no hash), so the chain checks report it where it is,
 * rather than the reader failing or the event passing for one without a chain.
 */
export function toChainedEvent(row: EventRow): ChainedEvent {
  return {
    pos: Number(row.pos),
    chain: row.chain === null ? -1 : Number(row.chain),
    seq: row.seq === null ? 0 : Number(row.seq),
    type: row.type,
    operationId: row.operation_id,
    // Microseconds since 1970 stay below 2^53 until the year 2255, so String(number) is exact too.
    recordedAtUs: String(row.recorded_at_us),
    payload: row.payload,
    prevHash: row.prev_hash ?? '',
    hash: row.hash ?? '',
  };
}

export function toObservation(row: Selectable<ObservationsTable>): ObservationRecord {
  return {
    id: row.id,
    operationId: row.operation_id,
    attemptId: row.attempt_id,
    kind: row.kind as ObservationRecord['kind'],
    result: row.result,
    facts: row.facts,
    decisionId: row.decision_id,
    createdAt: iso(row.created_at),
  };
}

/** `expired` (computed by the database clock): an approved card whose time is up reads as `expired`. */
export function toApproval(row: Selectable<ApprovalsTable> & { readonly expired: boolean }): ApprovalRecord {
  const expired = row.state === 'approved' && row.expired;
  return {
    id: row.id,
    operationId: row.operation_id,
    state: (expired ? 'expired' : row.state) as ApprovalState,
    intent: {
      ...(row.intent as unknown as Omit<ApprovalRecord['intent'], 'requestFingerprint'>),
      requestFingerprint: row.request_fingerprint ?? null,
    },
    previousAttemptId: row.previous_attempt_id,
    previousDispatchState: row.previous_dispatch_state as DispatchState | null,
    previousStatus: row.previous_status,
    plannedRecovery: row.planned_recovery,
    requestedAt: iso(row.requested_at),
    requestedBy: row.requested_by,
    decidedBy: row.decided_by,
    decidedAt: isoOrNull(row.decided_at),
    reason: row.reason,
    expiresAt: isoOrNull(row.expires_at),
    revokedBy: row.revoked_by,
    revokedAt: isoOrNull(row.revoked_at),
    usedByAttemptId: row.used_by_attempt_id,
    usedAt: isoOrNull(row.used_at),
    grantId: row.grant_id ?? null,
  };
}

/** `expired` and `revoked` computed against the database clock (`expired` column). */
export function toGrant(row: Selectable<GrantsTable> & { readonly expired: boolean }): GrantRecord {
  return {
    id: row.id,
    scope: { tenant: row.tenant, area: row.area, agent: row.agent },
    runId: row.run_id,
    toolId: row.tool_id,
    grantedBy: row.granted_by,
    reason: row.reason,
    grantedAt: iso(row.granted_at),
    expiresAt: iso(row.expires_at),
    revokedBy: row.revoked_by,
    revokedAt: isoOrNull(row.revoked_at),
    revokeReason: row.revoke_reason,
    state: row.revoked_at !== null ? 'revoked' : row.expired ? 'expired' : 'active',
  };
}

/** A runs row with its per-key counts and its releases (migration 0009). */
export function toRun(
  row: Selectable<RunsTable>,
  keys: readonly Selectable<RunKeySkipsTable>[],
  releases: readonly Selectable<RunReleasesTable>[],
): RunRecord {
  return {
    id: row.id,
    scope: { tenant: row.tenant, area: row.area, agent: row.agent },
    duplicateSkips: row.duplicate_skips,
    haltedAt: isoOrNull(row.halted_at),
    haltDecisionId: row.halt_decision_id,
    keys: keys.map((k) => ({ keyHash: k.key_hash, skips: k.skips })),
    releases: releases.map((r) => ({
      id: r.id,
      haltDecisionId: r.halt_decision_id,
      haltedAt: isoOrNull(r.halted_at),
      releasedBy: r.released_by,
      reason: r.reason,
      releasedAt: iso(r.released_at),
    })),
    firstSkipAt: iso(row.created_at),
  };
}
