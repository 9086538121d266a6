/**
 * The outcome outbox on real stores: an abandoned decide that commits only after
 * the gate wrote its `not_sent` (the client gave up on a decide the server was still running) is
 * looked for again and settled, and a graceful drain reports what it could not write. Store
 * outages themselves are cut with a TCP relay in test/fault/store-outage.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OUTBOX_DEFAULTS, OutcomeOutbox } from '../../../src/engine/outcome-outbox.js';
import { uuidv7 } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, reserve, sleep } from '../store/inputs.js';

const silent = { info() {}, warn() {}, error() {} };

for (const target of storeTargets()) {
  describe(`outcome outbox on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    it('an abandoned decide that commits after its not_sent was written is still settled', async () => {
      const outbox = new OutcomeOutbox(store, silent, { ...OUTBOX_DEFAULTS, maxDelayMs: 100 });
      const key = newKey();
      const input = reserve(newRun(), key);
      // The gate lost this decide's answer and queued the abandonment at once…
      outbox.enqueue(
        {
          operationId: null,
          attemptId: input.newAttemptId,
          decisionId: input.decisionId,
          keyHash: key.hash,
          windowMs: key.windowMs,
          dispatchState: 'not_sent',
          operationState: 'failed',
          status: null,
          responseFingerprint: null,
          destinationRef: null,
          replayed: null,
          durationMs: 0,
          error: 'store_lost_at_decide',
        },
        new Error('Query read timeout'),
      );
      await sleep(150); // the outbox wrote it: no such attempt yet
      // …while the server was still running the decide, which commits only now.
      const late = await store.decide(input);
      expectVerdict(late, 'allow');
      const deadline = Date.now() + 5_000;
      let state: string | undefined;
      while (Date.now() < deadline) {
        state = (await store.getOperation(late.operationId))?.state;
        if (state === 'failed') break;
        await sleep(50);
      }
      expect(state).toBe('failed');
      const op = await store.getOperation(late.operationId);
      expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['not_sent']);
      // Nothing was sent, so the key is free for the agent's retry.
      expectVerdict(await store.decide(reserve(newRun(), key)), 'allow');
      expect(await outbox.drain(1_000)).toBe(0);
    });

    it('drain gives up on an abandonment the store never had: a decide that never committed', async () => {
      const outbox = new OutcomeOutbox(store, silent, { ...OUTBOX_DEFAULTS, maxDelayMs: 100 });
      outbox.enqueue(
        {
          operationId: null,
          attemptId: uuidv7(),
          decisionId: uuidv7(),
          keyHash: null,
          windowMs: null,
          dispatchState: 'not_sent',
          operationState: 'failed',
          status: null,
          responseFingerprint: null,
          destinationRef: null,
          replayed: null,
          durationMs: 0,
          error: 'store_lost_at_decide',
        },
        new Error('Connection terminated unexpectedly'),
      );
      const started = Date.now();
      expect(await outbox.drain(5_000)).toBe(0);
      expect(Date.now() - started).toBeLessThan(2_000);
    });
  });
}
