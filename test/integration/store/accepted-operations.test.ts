/**
 * Asynchronous acceptance (migration 0015, eg_accepted.sql): a destination that answered 202 took
 * the work and has not done it. The operation is `accepted` with the destination's reference; its
 * key stays reserved (never confirmed nor released by the acceptance, never taken over when its
 * pending_ttl runs out); a proposal meanwhile is `pending` naming the operation and reference. It
 * is settled by the tool's reconcile lookup, by a destination's callback, or by an operator.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reconciliation, reserve, sleep } from './inputs.js';

const JOB = 'https://api.example.test/jobs/7';

for (const target of storeTargets()) {
  describe(`accepted operations, on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    const keyState = async (hash: string) =>
      (
        await store.query<{ state: string; destination_ref: string | null }>(
          `select state, destination_ref from dedupe_keys where key_hash = '${hash}'`,
        )
      )[0];

    async function accepted(key = newKey({ pendingTtlMs: 50 })) {
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const settled = await store.recordOutcome(
        outcome(first, key, 'accepted', { status: 202, destinationRef: JOB, outcomeRule: 'accepted 202' }),
      );
      expect(settled.operationState).toBe('accepted');
      return { key, first };
    }

    it('keeps the key reserved with the reference; a proposal meanwhile is pending, even past pending_ttl', async () => {
      const { key, first } = await accepted();
      expect(await keyState(key.hash)).toEqual({ state: 'accepted', destination_ref: JOB });
      expect((await store.getOperation(first.operationId!))?.state).toBe('accepted');
      await sleep(80); // past the 50 ms pending_ttl: an accepted key is never taken over
      const again = await store.decide(reserve(newRun(), key));
      expectVerdict(again, 'pending');
      expect(again).toMatchObject({
        operationId: first.operationId,
        operationState: 'accepted',
        destinationRef: JOB,
      });
      // Recorded at once (the gate does not wait on work that may take hours).
      expect(again.decisionId).not.toBeNull();
      expect((await keyState(key.hash))?.state).toBe('accepted');
    });

    it("a destination's callback that it is done settles it succeeded; the next proposal is a duplicate", async () => {
      const { key, first } = await accepted();
      const obs = await store.addObservation({
        operationId: first.operationId!,
        kind: 'callback',
        by: 'jobs-webhook',
        reason: null,
        settles: 'succeeded',
        status: 200,
        destinationRef: JOB,
        refs: [],
        payloadFingerprint: 'sha256:cb1',
        source: 'api',
      });
      expect(obs).toMatchObject({ result: 'succeeded', operationState: 'succeeded' });
      expect((await keyState(key.hash))?.state).toBe('confirmed');
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
    });

    it("an operator's resolve as failed releases the key: the next proposal retries the operation", async () => {
      const { key, first } = await accepted();
      await store.addObservation({
        operationId: first.operationId!,
        kind: 'operator_decision',
        by: 'alice',
        reason: 'the job failed at the destination',
        settles: 'failed',
        status: null,
        destinationRef: null,
        refs: [],
        payloadFingerprint: null,
        source: 'cli',
      });
      expect((await store.getOperation(first.operationId!))?.state).toBe('failed');
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry.operationId).toBe(first.operationId);
    });

    it('a tool with a reconcile lookup looks first: nothing found stays pending, the item found is a duplicate', async () => {
      const { key, first } = await accepted();
      const ask = await store.decide(reserve(newRun(), key, { unknownRule: 'reconcile' }));
      expect(ask).toMatchObject({ verdict: 'reconcile', operationId: first.operationId });
      const target = { operationId: first.operationId!, attemptId: first.attemptId };
      const none = await store.decide(
        reserve(newRun(), key, { unknownRule: 'reconcile', reconciliation: reconciliation(target, 'none') }),
      );
      expectVerdict(none, 'pending');
      expect((await store.getOperation(first.operationId!))?.state).toBe('accepted');
      const found = await store.decide(
        reserve(newRun(), key, { unknownRule: 'reconcile', reconciliation: reconciliation(target, 'match') }),
      );
      expectVerdict(found, 'duplicate');
      expect((await store.getOperation(first.operationId!))?.state).toBe('succeeded');
      expect((await keyState(key.hash))?.state).toBe('confirmed');
    });

    it('a tool whose destination honors idempotency keys still looks up an accepted operation when it has a lookup', async () => {
      const { key, first } = await accepted();
      // Without the lookup flag the honored rule never looks: the proposal is pending at once.
      expectVerdict(await store.decide(reserve(newRun(), key, { unknownRule: 'honored' })), 'pending');
      const ask = await store.decide(reserve(newRun(), key, { unknownRule: 'honored', hasLookup: true }));
      expect(ask).toMatchObject({ verdict: 'reconcile', operationId: first.operationId });
      const target = { operationId: first.operationId!, attemptId: first.attemptId };
      const found = await store.decide(
        reserve(newRun(), key, {
          unknownRule: 'honored',
          hasLookup: true,
          reconciliation: reconciliation(target, 'match'),
        }),
      );
      expectVerdict(found, 'duplicate');
      expect((await store.getOperation(first.operationId!))?.state).toBe('succeeded');
      expect((await keyState(key.hash))?.state).toBe('confirmed');
    });

    it("an agent's read-back that shows the work done settles it", async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'accepted', { status: 202, destinationRef: JOB }));
      const observed = await store.addObservation({
        operationId: first.operationId!,
        kind: 'read_back',
        by: 'agent',
        reason: null,
        settles: 'succeeded',
        status: 200,
        destinationRef: JOB,
        refs: [],
        payloadFingerprint: 'sha256:rb1',
        source: 'gate',
      });
      expect(observed.result).toBe('succeeded');
    });
  });
}
