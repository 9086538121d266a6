/**
 * The check every test store makes on close (test/helpers/trail-states.ts): that the state changes
 * the trail states for an operation chain to the state its row holds. Here it is shown to catch a
 * row changed behind the trail's back (an operation's state, an attempt's status), and to pass the
 * lifecycle of a retried operation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { trailAttemptMismatches, trailStateMismatches } from '../../helpers/trail-states.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

for (const target of storeTargets()) {
  describe(`the trail's state changes against the operations table (${target.name})`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      store.exemptFromTrailCheck('a row is changed behind the trail on purpose');
      await store?.close();
    });

    it('agrees for an operation that failed, was retried and succeeded', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed'));
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      await store.recordOutcome(outcome(retry, key, 'succeeded'));
      expect(await trailStateMismatches(store.db)).toEqual([]);
      expect(await trailAttemptMismatches(store.db)).toEqual([]);
    });

    it("finds an attempt's outcome that no event told", async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'failed'));
      await store.query(`update attempts set status = 500 where id = '${allow.attemptId}'`);
      expect(await trailAttemptMismatches(store.db)).toEqual([
        expect.objectContaining({ operationId: allow.operationId, rowState: 'response_received 500' }),
      ]);
    });

    it('finds a state the row holds that no event stated', async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'succeeded'));
      await store.query(`update operations set state = 'failed' where id = '${allow.operationId}'`);
      expect(await trailStateMismatches(store.db)).toEqual([
        expect.objectContaining({ operationId: allow.operationId, rowState: 'failed' }),
      ]);
    });
  });
}
