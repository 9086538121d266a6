import { expect } from 'vitest';
import type {
  BlockInput,
  DecideResult,
  DedupeKeyInput,
  GrantInput,
  OutcomeInput,
  ReconciliationInput,
  ReconciliationResult,
  RecoverInput,
  RequestFacts,
  ReserveInput,
  Scope,
  Store,
} from '../../../src/store/index.js';
import { uuidv7 } from '../../../src/store/index.js';

/** Builders for store inputs, with fresh ids and keys so tests sharing one store never interfere. */

export const scope: Scope = { tenant: 'acme', area: 'support', agent: 'triage-bot' };

export const request: RequestFacts = {
  scheme: 'https',
  method: 'POST',
  host: 'api.github.com',
  port: 443,
  path: '/repos/acme/app/issues',
  route: 'POST api.github.com /repos/{owner}/{repo}/issues',
  fingerprint: 'sha256:0f1e2d3c',
  authorityRef: 'github-token-label',
};

export function newKey(overrides: Partial<DedupeKeyInput> = {}): DedupeKeyInput {
  return {
    hash: `sha256:${uuidv7()}`,
    values: ['acme', 'app', 'title'],
    windowMs: 60_000,
    pendingTtlMs: 120_000,
    ...overrides,
  };
}

export function newRun(): string {
  return `run-${uuidv7()}`;
}

export function reserve(
  runId: string,
  key: DedupeKeyInput | null,
  overrides: Partial<Omit<ReserveInput, 'kind'>> = {},
): ReserveInput {
  return {
    kind: 'reserve',
    decisionId: uuidv7(),
    runId,
    step: 'step-1',
    worker: null,
    agentVersion: '1.2.3',
    scope,
    toolId: 'github.create_issue',
    explain: 'POST api.github.com /repos/{owner}/{repo}/issues',
    maxDuplicateSkips: 3,
    request,
    key,
    keyError: null,
    newOperationId: uuidv7(),
    newAttemptId: uuidv7(),
    idempotencyHeader: 'Idempotency-Key',
    retryBudget: 3,
    unknownRule: 'hold',
    onExpired: 'unknown',
    claimedOperationId: null,
    clientRetryReason: null,
    reconciliation: null,
    gateInstance: null,
    deadlineMs: null,
    recordPending: true,
    ...overrides,
  };
}

export function block(
  runId: string,
  reason: string,
  overrides: Partial<Omit<BlockInput, 'kind'>> = {},
): BlockInput {
  return {
    kind: 'block',
    decisionId: uuidv7(),
    runId,
    step: 'step-1',
    worker: null,
    agentVersion: null,
    scope,
    toolId: 'github.create_issue',
    explain: 'POST api.github.com /repos/{owner}/{repo}/issues',
    maxDuplicateSkips: 3,
    request,
    reason,
    ...overrides,
  };
}

export type Allow = Extract<DecideResult, { verdict: 'allow' }>;

export function outcome(
  allow: Allow,
  key: DedupeKeyInput | null,
  operationState: OutcomeInput['operationState'],
  overrides: Partial<OutcomeInput> = {},
): OutcomeInput {
  const succeeded = operationState === 'succeeded';
  return {
    operationId: allow.operationId,
    attemptId: allow.attemptId,
    decisionId: allow.decisionId,
    keyHash: key?.hash ?? null,
    windowMs: key?.windowMs ?? null,
    dispatchState: operationState === 'unknown' ? 'sent_no_response' : 'response_received',
    operationState,
    status: operationState === 'unknown' ? null : succeeded ? 201 : 422,
    responseFingerprint: operationState === 'unknown' ? null : 'sha256:feedbeef',
    destinationRef: succeeded ? `https://github.com/acme/app/issues/${allow.attemptNumber}` : null,
    replayed: null,
    durationMs: 12.5,
    error: operationState === 'unknown' ? 'timeout' : null,
    ...overrides,
  };
}

/**
 * A reconciliation lookup's result for `target` (an operation and its latest attempt): `match`
 * finds one remote item, `multiple` two, `none` and `inconclusive` nothing.
 */
export function reconciliation(
  target: { readonly operationId: string; readonly attemptId: string | null },
  result: ReconciliationResult,
  overrides: Partial<ReconciliationInput> = {},
): ReconciliationInput {
  const matches = result === 'match' ? 1 : result === 'multiple' ? 2 : 0;
  return {
    operationId: target.operationId,
    attemptId: target.attemptId,
    endpoint: 'GET https://api.github.com/repos/acme/app/issues?state=all',
    queryFingerprint: 'sha256:10c4f00d',
    result,
    matches,
    remoteRefs: Array.from({ length: matches }, (_, i) => `https://github.com/acme/app/issues/${101 + i}`),
    status: result === 'inconclusive' ? 503 : 200,
    error: result === 'inconclusive' ? 'status 503' : null,
    durationMs: 7.5,
    startedAt: new Date().toISOString(),
    ...overrides,
  };
}

/** A recovery sweep by another gate (`gate-recovering`), not exclusive, with a one-minute stale window. */
export function recoverInput(overrides: Partial<RecoverInput> = {}): RecoverInput {
  return { instanceId: 'gate-recovering', exclusive: false, staleAfterMs: 60_000, rules: {}, ...overrides };
}

export function expectVerdict<V extends DecideResult['verdict']>(
  result: DecideResult,
  verdict: V,
): asserts result is Extract<DecideResult, { verdict: V }> {
  expect(result.verdict, JSON.stringify(result)).toBe(verdict);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Allows a new operation and records an `unknown` outcome for it (by default `sent_no_response`). */
export async function unknownOperation(
  store: Store,
  key: DedupeKeyInput,
  overrides: Partial<Omit<ReserveInput, 'kind'>> = {},
  outcomeOverrides: Partial<OutcomeInput> = {},
): Promise<Allow> {
  const first = await store.decide(reserve(newRun(), key, overrides));
  expectVerdict(first, 'allow');
  const res = await store.recordOutcome(outcome(first, key, 'unknown', outcomeOverrides));
  expect(res.operationState).toBe('unknown');
  return first;
}

/** A session grant of `runId` for github.create_issue in `scope`, for 30 minutes. */
export function grantInput(runId: string, extra: Partial<GrantInput> = {}): GrantInput {
  return {
    runId,
    toolId: 'github.create_issue',
    scope,
    by: 'ops@acme.test',
    reason: 'batch recovery of the 03:00 outage',
    ttlMs: 30 * 60_000,
    ...extra,
  };
}
