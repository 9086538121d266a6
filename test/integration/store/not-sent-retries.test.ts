/**
 * A retry made while the attempt before it had no outcome (its reservation expired), when that
 * attempt turns out never to have been sent: the retry's definite failure is the operation's. Found
 * by the store-flapping fault case: a decide whose answer was lost (the gate sent nothing, its
 * `not_sent` waited in the outbox) and a retry that was not sent either left the operation
 * `unknown`, a trail saying an effect may have happened when nothing was sent, and the next proposal
 * held for a person.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

const notSent = {
  dispatchState: 'not_sent',
  status: null,
  responseFingerprint: null,
  error: 'store away',
} as const;

for (const target of storeTargets()) {
  describe(`a retry of an attempt that was never sent (${target.name})`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    /** A first attempt whose reservation expires with no outcome, and the retry that follows. */
    async function retryAfterExpiry() {
      const key = newKey({ pendingTtlMs: 30 });
      const first = await store.decide(reserve(newRun(), key, { onExpired: 'retry' }));
      expectVerdict(first, 'allow');
      await sleep(60);
      const retry = await store.decide(
        reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { onExpired: 'retry' }),
      );
      expectVerdict(retry, 'allow');
      return { key, first, retry };
    }

    /** The operation failed with neither attempt sent, and its key is free: the next proposal goes out. */
    async function expectFailedNothingSent(
      operationId: string,
      key: ReturnType<typeof newKey>,
    ): Promise<void> {
      const op = await store.getOperation(operationId);
      expect(op?.state).toBe('failed');
      expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['not_sent', 'not_sent']);
      const next = await store.decide(
        reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { onExpired: 'retry' }),
      );
      expectVerdict(next, 'allow');
    }

    it("ends failed, not unknown, when the first attempt's not_sent is recorded before the retry's failure", async () => {
      const { key, first, retry } = await retryAfterExpiry();
      expect(retry.operationId).toBe(first.operationId);
      expect(retry.retryDecision).not.toBe('previous_attempt_failed');
      await store.recordOutcome(outcome(first, key, 'failed', notSent));
      const settled = await store.recordOutcome(outcome(retry, key, 'failed', notSent));
      expect(settled.operationState).toBe('failed');
      await expectFailedNothingSent(first.operationId, key);
    });

    it("ends failed when the retry's failure is recorded first and the first attempt's not_sent comes late", async () => {
      const { key, first, retry } = await retryAfterExpiry();
      const kept = await store.recordOutcome(outcome(retry, key, 'failed', notSent));
      expect(kept.operationState).toBe('unknown');
      const settled = await store.recordOutcome(outcome(first, key, 'failed', notSent));
      expect(settled.operationState).toBe('failed');
      await expectFailedNothingSent(first.operationId, key);
    });

    it("takes the retry's own answer (a 422) once the attempt before it proves never sent", async () => {
      const { key, first, retry } = await retryAfterExpiry();
      // The retry reached the destination and was refused: its failure is the operation's as soon
      // as nothing else can have done the effect.
      await store.recordOutcome(outcome(retry, key, 'failed'));
      const settled = await store.recordOutcome(outcome(first, key, 'failed', notSent));
      expect(settled.operationState).toBe('failed');
      const op = await store.getOperation(first.operationId);
      expect(op?.state).toBe('failed');
      expect(op?.attempts.map((a) => [a.dispatchState, a.status])).toEqual([
        ['not_sent', null],
        ['response_received', 422],
      ]);
    });

    it('settles only when the last earlier attempt proves never sent, in any order', async () => {
      // Three attempts: the first two' reservations expire with no outcome.
      const key = newKey({ pendingTtlMs: 30 });
      const first = await store.decide(reserve(newRun(), key, { onExpired: 'retry' }));
      await sleep(60);
      const second = await store.decide(reserve(newRun(), key, { onExpired: 'retry' }));
      await sleep(60);
      const third = await store.decide(
        reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { onExpired: 'retry' }),
      );
      expectVerdict(first, 'allow');
      expectVerdict(second, 'allow');
      expectVerdict(third, 'allow');
      expect(third.attemptNumber).toBe(3);
      await store.recordOutcome(outcome(third, key, 'failed', notSent));
      const afterFirst = await store.recordOutcome(outcome(first, key, 'failed', notSent));
      // The second attempt has no outcome yet: it may have been sent.
      expect(afterFirst.operationState).toBe('unknown');
      const afterSecond = await store.recordOutcome(outcome(second, key, 'failed', notSent));
      expect(afterSecond.operationState).toBe('failed');
      expect((await store.getOperation(first.operationId))?.state).toBe('failed');
    });

    it('stays unknown when an earlier attempt may have been sent (sent_no_response)', async () => {
      const { key, first, retry } = await retryAfterExpiry();
      await store.recordOutcome(outcome(first, key, 'unknown'));
      const kept = await store.recordOutcome(outcome(retry, key, 'failed', notSent));
      expect(kept.operationState).toBe('unknown');
      expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
    });
  });
}
