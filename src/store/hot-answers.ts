import { StoreAnswerError } from '../errors.js';
import type { StoreFunction } from './hot-call.js';
import type { DecideResult, OperationState } from './types.js';

/*
 * The hot path's wire contract, checked where the answer enters the process: what eg_decide,
 * eg_record_outcome and eg_batch return is JSON the store's SQL builds, and the engine reads it
 * as DecideResult. A value of another shape (a function of another version, a hand-edited one)
 * is refused here, naming the field, instead of failing deeper in the engine or being trusted.
 * Fields this version does not read are let through: a newer store may answer more.
 */

/** What a field must be. */
type Kind = 'string' | 'string|null' | 'number' | 'boolean' | 'object|null' | 'null';

/** Per verdict, the fields the engine reads and their kinds (types.ts, DecideResult). */
const DECIDE_FIELDS: Readonly<Record<DecideResult['verdict'], Readonly<Record<string, Kind>>>> =
  Object.freeze({
    allow: {
      decisionId: 'string',
      operationId: 'string',
      attemptId: 'string',
      attemptNumber: 'number',
      retryOfAttemptId: 'string|null',
      retryReason: 'string|null',
      retryDecision: 'string|null',
      supersedesOperationId: 'string|null',
    },
    duplicate: {
      decisionId: 'string',
      operationId: 'string',
      source: 'object|null',
      duplicateSkips: 'number',
      operationState: 'string',
    },
    reconcile: { decisionId: 'null', operationId: 'string', attemptId: 'string|null' },
    hold: {
      decisionId: 'string',
      operationId: 'string',
      // null in a shadow-mode hold (would_hold): it makes no approval card (eg_decided.sql). The
      // engine reads approvalId only to answer an enforced hold.
      approvalId: 'string|null',
      previousAttemptId: 'string|null',
      previousDispatchState: 'string|null',
      requestChanged: 'boolean',
      approvedRequest: 'object|null',
      lastApproval: 'object|null',
    },
    pending: { decisionId: 'string|null', operationId: 'string', operationState: 'string' },
    halted: {
      decisionId: 'string',
      runId: 'string',
      duplicateSkips: 'number',
      haltedAt: 'string',
      haltDecisionId: 'string',
      operationId: 'string|null',
    },
    block: { decisionId: 'string', reason: 'string', operationId: 'string|null' },
  });

/** Optional fields: absent is fine, present must be of the kind. */
const DECIDE_OPTIONAL: Readonly<Record<string, Kind>> = Object.freeze({
  idempotencyKey: 'string|null',
  destinationRef: 'string|null',
  reconciliation: 'string|null',
});

function isKind(value: unknown, kind: Kind): boolean {
  switch (kind) {
    case 'string':
      return typeof value === 'string';
    case 'string|null':
      return value === null || typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'object|null':
      return value === null || (typeof value === 'object' && !Array.isArray(value));
    case 'null':
      return value === null;
  }
}

function describe(value: unknown): string {
  if (value === undefined) return 'is missing';
  const shown = JSON.stringify(value) ?? String(value);
  return `is ${shown.length > 60 ? `${shown.slice(0, 57)}...` : shown}`;
}

function record(fn: StoreFunction, value: unknown, at: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new StoreAnswerError(fn, at, `is not an object (it ${describe(value)})`);
  }
  return value as Record<string, unknown>;
}

/** eg_decide's answer, checked and frozen. */
export function decideAnswer(value: unknown): DecideResult {
  const answer = record('eg_decide', value, 'the answer');
  const verdict = answer['verdict'];
  if (typeof verdict !== 'string' || !Object.hasOwn(DECIDE_FIELDS, verdict)) {
    throw new StoreAnswerError(
      'eg_decide',
      'verdict',
      `${describe(verdict)}, not a verdict this effectgate knows`,
    );
  }
  const fields = DECIDE_FIELDS[verdict as DecideResult['verdict']];
  for (const field in fields) {
    const kind = fields[field]!;
    if (!isKind(answer[field], kind)) {
      throw new StoreAnswerError(
        'eg_decide',
        field,
        `${describe(answer[field])} in a ${verdict} answer, not ${kind}`,
      );
    }
  }
  for (const field in DECIDE_OPTIONAL) {
    const kind = DECIDE_OPTIONAL[field]!;
    if (answer[field] !== undefined && !isKind(answer[field], kind)) {
      throw new StoreAnswerError('eg_decide', field, `${describe(answer[field])}, not ${kind}`);
    }
  }
  return Object.freeze(answer) as unknown as DecideResult;
}

/** What eg_record_outcome answers that the engine reads. */
export interface OutcomeAnswer {
  readonly operationState: OperationState | null;
}

/** eg_record_outcome's answer, checked and frozen. */
export function outcomeAnswer(value: unknown): OutcomeAnswer {
  const answer = record('eg_record_outcome', value, 'the answer');
  if (!isKind(answer['operationState'], 'string|null')) {
    throw new StoreAnswerError(
      'eg_record_outcome',
      'operationState',
      `${describe(answer['operationState'])}, not string|null`,
    );
  }
  return Object.freeze(answer) as unknown as OutcomeAnswer;
}

/** eg_batch's answer: one result per call, in call order; each is checked by its function's check. */
export function batchAnswers(value: unknown, calls: number): readonly unknown[] {
  if (!Array.isArray(value) || value.length !== calls) {
    throw new StoreAnswerError(
      'eg_batch',
      'the answer',
      `${Array.isArray(value) ? `has ${value.length} results` : `is not an array (it ${describe(value)})`} for ${calls} calls`,
    );
  }
  return value;
}
