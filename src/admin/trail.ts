import type {
  ApprovalRecord,
  AttemptRecord,
  DecisionRecord,
  ObservationRecord,
  OperationRecord,
  Store,
} from '../store/index.js';

/**
 * The investigation view of one operation (docs/design.md §3 "Investigation view": a timeline,
 * not a pile of requests): intent and current state on top, then every gate decision, attempt,
 * observation and approval step in the order they happened, each linked to what caused it. The
 * same JSON feeds `effectgate trail --json`, `GET /api/operations/:id` and the timeline page.
 */
export interface Trail {
  readonly operation: TrailOperation;
  readonly timeline: readonly TrailEntry[];
}

export interface TrailOperation {
  readonly id: string;
  readonly state: OperationRecord['state'];
  readonly tool: string;
  readonly scope: OperationRecord['scope'];
  readonly key_values: readonly unknown[] | null;
  readonly key_hash: string | null;
  /**
   * Where every attempt carried its key (a header, or a body member's JSONPath) and the operation's
   * own key (its id); `null` when none. What each attempt sent is on the attempt.
   */
  readonly idempotency: { readonly header: string; readonly key: string } | null;
  /** Who owns the operation: the run (and step, worker) that proposed it first. */
  readonly owner: {
    readonly run_id: string;
    readonly step: string | null;
    readonly worker: string | null;
    readonly agent_version: string | null;
  };
  readonly supersedes_operation_id: string | null;
  readonly superseded_by: readonly string[];
  readonly attempts: number;
  readonly created_at: string;
  readonly updated_at: string;
}

export type TrailEntry = DecisionEntry | AttemptEntry | ObservationEntry | ApprovalEntry;

export interface DecisionEntry {
  readonly at: string;
  readonly type: 'decision';
  readonly decision_id: string;
  readonly verdict: DecisionRecord['verdict'];
  readonly reason: string | null;
  readonly run_id: string;
  readonly step: string | null;
  /** Set on the allow that made an attempt. */
  readonly attempt_id: string | null;
  /** Why the request matched the tool. */
  readonly explain: string;
  /** A duplicate names the operation it duplicated (this one, for the duplicates listed here). */
  readonly source_operation_id: string | null;
  /**
   * Shadow mode (a `would_*` verdict): the request was sent anyway, and this is what came back;
   * `null` on a would_* decision whose answer was never recorded (the gate stopped mid-call, or
   * the store could not take it), and on every enforced verdict.
   */
  readonly shadow_dispatch: {
    readonly dispatch_state: AttemptRecord['dispatchState'];
    readonly status: number | null;
    readonly duration_ms: number | null;
    readonly error: string | null;
  } | null;
}

export interface AttemptEntry {
  readonly at: string;
  readonly type: 'attempt';
  readonly attempt_id: string;
  readonly number: number;
  readonly decision_id: string;
  readonly run_id: string;
  readonly step: string | null;
  readonly worker: string | null;
  readonly dispatch_state: AttemptRecord['dispatchState'];
  readonly retry_of_attempt_id: string | null;
  readonly retry_of_number: number | null;
  readonly retry_reason: AttemptRecord['retryReason'];
  readonly retry_decision: AttemptRecord['retryDecision'];
  readonly remaining_attempts: number | null;
  readonly authority_ref: string | null;
  readonly destination: {
    readonly method: string;
    readonly scheme: string;
    readonly host: string;
    readonly port: number;
    readonly route: string;
    readonly path: string;
  };
  readonly request_fingerprint: string;
  /** Against the parent attempt: `false` for a true retry of the same request. */
  readonly fingerprint_changed: boolean | null;
  readonly status: number | null;
  /** One line: status, destination reference, replay, or why there was no response. */
  readonly response_summary: string;
  readonly response_fingerprint: string | null;
  readonly destination_ref: string | null;
  /** Whether the destination said it replayed a stored result (`null`: it said nothing). */
  readonly replayed: boolean | null;
  /**
   * The idempotency key this attempt sent, the agent's own key and the gate's key for the
   * operation (migration 0013; all `null` on attempts recorded before it, which sent the
   * operation id when the operation has `idempotency`).
   */
  readonly idempotency_key: string | null;
  readonly agent_idempotency_key: string | null;
  readonly gate_idempotency_key: string | null;
  readonly duration_ms: number | null;
  readonly error: string | null;
  /** Which rule of the tool's outcome contract decided: `status 201`, `failed_if $.ok == false`. */
  readonly outcome_rule: string | null;
  /** The destination's error code (`outcome.error_code`), never its message. */
  readonly error_code: string | null;
  readonly finished_at: string | null;
  readonly recovered_at: string | null;
}

export interface ObservationEntry {
  readonly at: string;
  readonly type: 'observation';
  readonly observation_id: string;
  readonly kind: ObservationRecord['kind'];
  readonly result: string;
  readonly attempt_id: string | null;
  readonly decision_id: string | null;
  readonly facts: Readonly<Record<string, unknown>>;
}

export interface ApprovalEntry {
  readonly at: string;
  readonly type: 'approval';
  readonly approval_id: string;
  readonly event: 'requested' | 'approved' | 'denied' | 'revoked' | 'used' | 'withdrawn' | 'expired';
  readonly by: string | null;
  readonly reason: string | null;
  readonly attempt_id: string | null;
  readonly planned_recovery: string | null;
  /** The session grant the card was used under (`approvals grant`), else `null`. */
  readonly grant_id: string | null;
}

/**
 * Everything recorded about one operation: the records as stored and the trail built from them.
 * This is the body of `GET /api/operations/:id` and of `effectgate trail --json`.
 */
export interface OperationReport {
  readonly operation: OperationRecord;
  readonly decisions: readonly DecisionRecord[];
  readonly observations: readonly ObservationRecord[];
  readonly approvals: readonly ApprovalRecord[];
  readonly trail: Trail;
}

/** Loads the report of one operation, or `null` when the store has no such operation. */
export async function loadOperationReport(
  store: Store,
  operationId: string,
): Promise<OperationReport | null> {
  const operation = await store.getOperation(operationId);
  if (operation === null) return null;
  const [decisions, observations, approvals, successors] = await Promise.all([
    store.listDecisions({ operationId }),
    store.listObservations(operationId),
    store.listApprovals({ operationId, limit: 1000 }),
    store.listOperations({ supersedesOperationId: operationId, limit: 1000 }),
  ]);
  return {
    operation,
    decisions,
    observations,
    approvals,
    trail: buildTrail(
      operation,
      decisions,
      observations,
      approvals,
      successors.map((s) => s.id),
    ),
  };
}

/** The trail of one operation from its records (pure). */
export function buildTrail(
  operation: OperationRecord,
  decisions: readonly DecisionRecord[],
  observations: readonly ObservationRecord[],
  approvals: readonly ApprovalRecord[],
  supersededBy: readonly string[],
): Trail {
  const timeline: TrailEntry[] = [
    ...decisions.map(decisionEntry),
    ...attemptEntries(operation.attempts),
    ...observations.map(observationEntry),
    ...approvals.flatMap(approvalEntries),
  ];
  timeline.sort(byTime);
  return {
    operation: {
      id: operation.id,
      state: operation.state,
      tool: operation.toolId,
      scope: operation.scope,
      key_values: operation.keyValues,
      key_hash: operation.keyHash,
      idempotency:
        operation.idempotencyHeader === null
          ? null
          : { header: operation.idempotencyHeader, key: operation.id },
      owner: {
        run_id: operation.runId,
        step: operation.step,
        worker: operation.worker,
        agent_version: operation.agentVersion,
      },
      supersedes_operation_id: operation.supersedesOperationId,
      superseded_by: [...supersededBy].sort(),
      attempts: operation.attempts.length,
      created_at: operation.createdAt,
      updated_at: operation.updatedAt,
    },
    timeline,
  };
}

/**
 * Entries of one instant (one transaction): the evidence a decision was made on (a lookup) first,
 * then the decision, then what it caused (an attempt, an approval request or its use).
 */
const RANK: Readonly<Record<TrailEntry['type'], number>> = {
  observation: 0,
  decision: 1,
  attempt: 2,
  approval: 3,
};

function byTime(a: TrailEntry, b: TrailEntry): number {
  if (a.at !== b.at) return a.at < b.at ? -1 : 1;
  return RANK[a.type] - RANK[b.type];
}

function decisionEntry(d: DecisionRecord): DecisionEntry {
  return {
    at: d.createdAt,
    type: 'decision',
    decision_id: d.id,
    verdict: d.verdict,
    reason: d.reason,
    run_id: d.runId,
    step: d.step,
    attempt_id: d.attemptId,
    explain: d.explain,
    source_operation_id: d.verdict === 'duplicate' || d.verdict === 'would_duplicate' ? d.operationId : null,
    shadow_dispatch: shadowDispatchEntry(d),
  };
}

function attemptEntries(attempts: readonly AttemptRecord[]): AttemptEntry[] {
  const byId = new Map(attempts.map((a) => [a.id, a]));
  return attempts.map((a) => {
    const parent = a.retryOfAttemptId === null ? undefined : byId.get(a.retryOfAttemptId);
    return {
      at: a.startedAt,
      type: 'attempt',
      attempt_id: a.id,
      number: a.number,
      decision_id: a.decisionId,
      run_id: a.runId,
      step: a.step,
      worker: a.worker,
      dispatch_state: a.dispatchState,
      retry_of_attempt_id: a.retryOfAttemptId,
      retry_of_number: parent?.number ?? null,
      retry_reason: a.retryReason,
      retry_decision: a.retryDecision,
      remaining_attempts: a.remainingAttempts,
      authority_ref: a.request.authorityRef,
      destination: {
        method: a.request.method,
        scheme: a.request.scheme,
        host: a.request.host,
        port: a.request.port,
        route: a.request.route,
        path: a.request.path,
      },
      request_fingerprint: a.request.fingerprint,
      fingerprint_changed: parent === undefined ? null : parent.request.fingerprint !== a.request.fingerprint,
      status: a.status,
      response_summary: responseSummary(a),
      response_fingerprint: a.responseFingerprint,
      destination_ref: a.destinationRef,
      replayed: a.replayed,
      idempotency_key: a.idempotencyKey,
      agent_idempotency_key: a.agentIdempotencyKey,
      gate_idempotency_key: a.gateIdempotencyKey,
      duration_ms: a.durationMs,
      error: a.error,
      outcome_rule: a.outcomeRule,
      error_code: a.errorCode,
      finished_at: a.finishedAt,
      recovered_at: a.recoveredAt,
    };
  });
}

/**
 * What the attempt got back, in one line. The replay flag is what lets an investigator tell
 * "retried and the destination deduplicated" from "sent twice and got lucky" (docs/design.md §3).
 */
export function responseSummary(a: AttemptRecord): string {
  switch (a.dispatchState) {
    case null:
      return 'no outcome recorded yet (in flight, or the gate stopped mid-dispatch)';
    case 'not_sent':
      return `not sent: ${a.error ?? 'nothing left the gate'}`;
    case 'sent_no_response':
      return a.recoveredAt !== null
        ? 'sent, no response: the gate stopped mid-dispatch (recovered after restart)'
        : `sent, no usable response: ${a.error ?? 'unknown error'}`;
    case 'execution_error':
      return `execution error: ${a.error ?? 'unknown'}`;
    case 'response_received': {
      const parts = [`HTTP ${a.status ?? '?'}`];
      if (a.destinationRef !== null) parts.push(`ref ${a.destinationRef}`);
      if (a.replayed === true) parts.push('replayed by the destination (it deduplicated this retry)');
      else if (a.replayed === false) parts.push('not a replay');
      // The rule only when the status alone does not say it (a 200 the answer called failed).
      if (a.outcomeRule !== null && a.outcomeRule !== `status ${a.status}`)
        parts.push(`decided by ${a.outcomeRule}`);
      if (a.errorCode !== null) parts.push(`error code ${a.errorCode}`);
      return parts.join(', ');
    }
  }
}

function observationEntry(o: ObservationRecord): ObservationEntry {
  return {
    at: o.createdAt,
    type: 'observation',
    observation_id: o.id,
    kind: o.kind,
    result: o.result,
    attempt_id: o.attemptId,
    decision_id: o.decisionId,
    facts: o.facts,
  };
}

function approvalEntries(a: ApprovalRecord): ApprovalEntry[] {
  const entry = (
    at: string,
    event: ApprovalEntry['event'],
    by: string | null,
    reason: string | null,
    attemptId: string | null = null,
  ): ApprovalEntry => ({
    at,
    type: 'approval',
    approval_id: a.id,
    event,
    by,
    reason,
    attempt_id: attemptId,
    planned_recovery: event === 'requested' ? a.plannedRecovery : null,
    grant_id: event === 'approved' || event === 'used' ? a.grantId : null,
  });
  const out = [entry(a.requestedAt, 'requested', a.requestedBy, null)];
  if (a.decidedAt !== null) {
    const decided =
      a.state === 'denied' || a.state === 'withdrawn' ? a.state : ('approved' as ApprovalEntry['event']);
    out.push(entry(a.decidedAt, decided, a.state === 'withdrawn' ? null : a.decidedBy, a.reason));
  }
  if (a.revokedAt !== null) out.push(entry(a.revokedAt, 'revoked', a.revokedBy, a.reason));
  if (a.usedAt !== null) out.push(entry(a.usedAt, 'used', null, null, a.usedByAttemptId));
  if (a.state === 'expired' && a.expiresAt !== null) out.push(entry(a.expiresAt, 'expired', null, null));
  return out;
}

/** A decision's shadow dispatch as the trail shows it (`null` when it has none). */
export function shadowDispatchEntry(d: DecisionRecord): DecisionEntry['shadow_dispatch'] {
  const sd = d.shadowDispatch;
  if (sd === null) return null;
  return { dispatch_state: sd.dispatchState, status: sd.status, duration_ms: sd.durationMs, error: sd.error };
}

/**
 * A shadow-mode decision in one line: what enforce mode would have done, and what the request sent
 * anyway got back (the timeline page and `effectgate trail` say the same).
 */
export function shadowSummary(e: Pick<DecisionEntry, 'verdict' | 'shadow_dispatch'>): string | null {
  if (!e.verdict.startsWith('would_')) return null;
  const would = WOULD[e.verdict] ?? `answered ${e.verdict.slice('would_'.length)}`;
  const d = e.shadow_dispatch;
  // No row: the gate stopped between this decision and its record (it may have stopped before the
  // send itself), or the store never took it: say what is known, no more.
  if (d === null)
    return `shadow mode: enforce mode would have ${would}; to be sent anyway, but no record of what came back (the gate stopped before recording it, possibly before sending it, or the store could not take it)`;
  const sent =
    d.dispatch_state === 'response_received'
      ? `HTTP ${d.status ?? '?'}${d.duration_ms === null ? '' : ` in ${Math.round(d.duration_ms)} ms`}`
      : `${d.dispatch_state}${d.error === null ? '' : `: ${d.error}`}`;
  return `shadow mode: enforce mode would have ${would}; sent anyway, ${sent}`;
}

const WOULD: Readonly<Record<string, string>> = {
  would_duplicate: 'skipped it as a duplicate',
  would_pending: 'answered pending (another attempt held the key)',
  would_hold: 'held it for an approval (the earlier outcome is unknown)',
  would_halted: 'halted the run (the loop breaker)',
  would_block: 'blocked it',
};

/**
 * What idempotency key an attempt sent and whose it was (migration 0013), in one line for the
 * CLI trail and the timeline page; `null` when it recorded none.
 */
export function idempotencySummary(e: AttemptEntry): string | null {
  if (e.idempotency_key === null && e.agent_idempotency_key === null) return null;
  const whose =
    e.idempotency_key === null
      ? 'no key sent'
      : e.agent_idempotency_key !== null && e.idempotency_key === e.agent_idempotency_key
        ? "the agent's own"
        : e.idempotency_key === e.gate_idempotency_key
          ? "the gate's"
          : 'the key of the attempt before';
  const agent =
    e.agent_idempotency_key !== null && e.agent_idempotency_key !== e.idempotency_key
      ? `; the agent sent ${e.agent_idempotency_key}`
      : '';
  const gate =
    e.gate_idempotency_key !== null && e.gate_idempotency_key !== e.idempotency_key
      ? `; the gate's key ${e.gate_idempotency_key}`
      : '';
  return `idempotency key ${e.idempotency_key ?? '-'} (${whose})${agent}${gate}${e.replayed === true ? '; REPLAYED by the destination' : ''}`;
}
