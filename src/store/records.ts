import type { Selectable } from 'kysely';
import type { AttemptsTable, DecisionsTable, EventsTable, OperationsTable } from './schema.js';
import type {
  AttemptRecord,
  DecisionRecord,
  DispatchState,
  EventRecord,
  OperationRecord,
  OperationState,
  RequestFacts,
  RetryReason,
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
    request: row.request as RequestFacts,
    status: row.status,
    responseFingerprint: row.response_fingerprint,
    destinationRef: row.destination_ref,
    replayed: row.replayed,
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
    error: row.error,
    startedAt: iso(row.started_at),
    finishedAt: isoOrNull(row.finished_at),
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
    createdAt: iso(row.created_at),
    updatedAt: iso(row.updated_at),
    attempts,
  };
}

export function toDecision(row: Selectable<DecisionsTable>): DecisionRecord {
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
  };
}

export function toEvent(row: Omit<Selectable<EventsTable>, 'recorded_at'>): EventRecord {
  return {
    chain: Number(row.chain),
    seq: Number(row.seq),
    type: row.type,
    operationId: row.operation_id,
    // Microseconds since 1970 stay below 2^53 until the year 2255, so String(number) is exact too.
    recordedAtUs: String(row.recorded_at_us),
    payload: row.payload,
    prevHash: row.prev_hash,
    hash: row.hash,
  };
}
