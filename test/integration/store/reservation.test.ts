import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { block, expectVerdict, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

for (const target of storeTargets()) {
  describe(`reservation protocol on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    it('allow, then a succeeded outcome: the next proposal is a duplicate pointing at its source', async () => {
      const key = newKey();
      const runA = newRun();
      const first = await store.decide(reserve(runA, key, { step: 'create' }));
      expectVerdict(first, 'allow');
      expect(first).toMatchObject({ attemptNumber: 1, retryOfAttemptId: null, retryReason: null });

      const op = await store.getOperation(first.operationId);
      expect(op).toMatchObject({
        state: 'open',
        keyHash: key.hash,
        runId: runA,
        idempotencyHeader: 'Idempotency-Key',
      });
      expect(op?.attempts).toHaveLength(1);
      expect(op?.attempts[0]).toMatchObject({ id: first.attemptId, number: 1, dispatchState: null });

      const done = await store.recordOutcome(outcome(first, key, 'succeeded', { replayed: false }));
      expect(done.operationState).toBe('succeeded');

      const runB = newRun();
      const second = await store.decide(reserve(runB, key));
      expectVerdict(second, 'duplicate');
      expect(second.operationId).toBe(first.operationId);
      expect(second.duplicateSkips).toBe(1);
      expect(second.source).toMatchObject({
        runId: runA,
        step: 'create',
        operationId: first.operationId,
        attemptId: first.attemptId,
        destinationRef: 'https://github.com/acme/app/issues/1',
      });
      expect(second.source?.confirmedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

      const after = await store.getOperation(first.operationId);
      expect(after?.state).toBe('succeeded');
      expect(after?.attempts[0]).toMatchObject({
        dispatchState: 'response_received',
        status: 201,
        responseFingerprint: 'sha256:feedbeef',
        replayed: false,
        durationMs: 12.5,
      });
      expect(after?.attempts[0]?.finishedAt).not.toBeNull();

      const decision = await store.getDecision(second.decisionId);
      expect(decision).toMatchObject({ verdict: 'duplicate', runId: runB, operationId: first.operationId });
    });

    it('failed releases the key: the next proposal retries the same operation (attempt #2, parent, reason)', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed', { status: 503 }));
      expect((await store.getOperation(first.operationId))?.state).toBe('failed');

      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: first.operationId,
        attemptNumber: 2,
        retryOfAttemptId: first.attemptId,
        retryReason: 'destination_5xx',
      });
      const op = await store.getOperation(first.operationId);
      expect(op?.state).toBe('open');
      expect(op?.attempts.map((a) => [a.number, a.retryOfAttemptId, a.retryReason])).toEqual([
        [1, null, null],
        [2, first.attemptId, 'destination_5xx'],
      ]);
    });

    it.each([
      ['not_sent', null, 'connection_not_established'],
      ['response_received', 429, 'rate_limited'],
      ['response_received', 502, 'destination_5xx'],
      ['sent_no_response', null, 'response_lost_after_dispatch'],
      ['response_received', 422, null],
    ] as const)('retry reason after dispatch %s status %s is %s', async (dispatchState, status, reason) => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed', { dispatchState, status }));
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry.retryReason).toBe(reason);
      expect(retry.retryOfAttemptId).toBe(first.attemptId);
    });

    it('unknown keeps the key held whatever the TTL: later proposals are held with one open approval request', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const res = await store.recordOutcome(outcome(first, key, 'unknown'));
      expect(res.operationState).toBe('unknown');
      await sleep(80); // past the pending TTL: an unknown outcome is never taken over by TTL

      const runA = newRun();
      const a = await store.decide(reserve(runA, key, { recordPending: false }));
      expectVerdict(a, 'hold');
      expect(a).toMatchObject({
        operationId: first.operationId,
        previousAttemptId: first.attemptId,
        previousDispatchState: 'sent_no_response',
        lastApproval: null,
      });
      const b = await store.decide(reserve(newRun(), key));
      expectVerdict(b, 'hold');
      expect(b.approvalId).toBe(a.approvalId);
      expect((await store.listDecisions({ runId: runA })).map((d) => [d.verdict, d.operationId])).toEqual([
        ['hold', first.operationId],
      ]);
      expect(await store.listApprovals({ operationId: first.operationId })).toMatchObject([
        { id: a.approvalId, state: 'requested', previousDispatchState: 'sent_no_response' },
      ]);
      expect((await store.getOperation(first.operationId))?.attempts).toHaveLength(1);
    });

    it('a reservation held by another run is pending until its TTL', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const other = await store.decide(reserve(newRun(), key, { recordPending: false }));
      expectVerdict(other, 'pending');
      expect(other).toMatchObject({
        operationId: first.operationId,
        operationState: 'open',
        decisionId: null,
      });
    });

    it('an expired pending reservation is not taken over: its attempt becomes unknown and the proposal is held', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await sleep(80); // the owner lost track: no outcome recorded

      const next = await store.decide(reserve(newRun(), { ...key, pendingTtlMs: 60_000 }));
      expectVerdict(next, 'hold');
      expect(next).toMatchObject({
        operationId: first.operationId,
        previousDispatchState: 'sent_no_response',
      });

      // The late outcome of the lost attempt still settles it, and the key with it.
      const late = await store.recordOutcome(outcome(first, key, 'succeeded'));
      expect(late.operationState).toBe('succeeded');
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
      const op = await store.getOperation(first.operationId);
      expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['response_received']);
    });

    it('a confirmed key whose window ended gives a new operation', async () => {
      const key = newKey({ windowMs: 300 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
      await sleep(350);

      const again = await store.decide(reserve(newRun(), key));
      expectVerdict(again, 'allow');
      expect(again.operationId).not.toBe(first.operationId);
      expect(again).toMatchObject({ attemptNumber: 1, retryOfAttemptId: null });
    });

    it('a released key whose operation is older than the window gives a new operation', async () => {
      const key = newKey({ windowMs: 300 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed'));
      await sleep(350);
      const again = await store.decide(reserve(newRun(), key));
      expectVerdict(again, 'allow');
      expect(again.operationId).not.toBe(first.operationId);
      expect(again).toMatchObject({ attemptNumber: 1, retryOfAttemptId: null, retryReason: null });
      expect((await store.getOperation(first.operationId))?.state).toBe('failed');
    });

    it('a permanent window never expires', async () => {
      const key = newKey({ windowMs: null, pendingTtlMs: 50 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      await sleep(80);
      const later = await store.decide(reserve(newRun(), key));
      expectVerdict(later, 'duplicate');
      expect(later.source?.operationId).toBe(first.operationId);
    });

    it('block records a decision and reserves nothing', async () => {
      const run = newRun();
      const res = await store.decide(block(run, 'key path $.body.title is missing'));
      expectVerdict(res, 'block');
      expect(res).toMatchObject({ reason: 'key path $.body.title is missing', operationId: null });
      const decision = await store.getDecision(res.decisionId);
      expect(decision).toMatchObject({
        verdict: 'block',
        reason: 'key path $.body.title is missing',
        runId: run,
        operationId: null,
        scope: { tenant: 'acme', area: 'support', agent: 'triage-bot' },
      });
    });

    it('exhausting the retry budget blocks and leaves the key released', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key, { retryBudget: 2 }));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed', { status: 500 }));
      const second = await store.decide(reserve(newRun(), key, { retryBudget: 2 }));
      expectVerdict(second, 'allow');
      expect(second.attemptNumber).toBe(2);
      await store.recordOutcome(outcome(second, key, 'failed', { status: 500 }));

      const third = await store.decide(reserve(newRun(), key, { retryBudget: 2 }));
      expectVerdict(third, 'block');
      expect(third).toMatchObject({ reason: 'retry_budget_exhausted', operationId: first.operationId });
      expect((await store.getDecision(third.decisionId))?.verdict).toBe('block');
      const op = await store.getOperation(first.operationId);
      expect(op?.state).toBe('failed');
      expect(op?.attempts).toHaveLength(2);

      // Nothing was reserved: with more budget the same operation is retried.
      const fourth = await store.decide(reserve(newRun(), key, { retryBudget: 3 }));
      expectVerdict(fourth, 'allow');
      expect(fourth).toMatchObject({ operationId: first.operationId, attemptNumber: 3 });
    });

    it('the chain verifies after all of that', async () => {
      const report = await verifyStoreChain(store);
      expect(report.firstBad).toBeUndefined();
      expect(report.ok).toBe(true);
      const heads = await store.chainHeads();
      expect(report.checked).toBe(heads.reduce((n, h) => n + h.lastSeq, 0));
      expect(report.checked).toBeGreaterThan(30);
    });
  });
}
