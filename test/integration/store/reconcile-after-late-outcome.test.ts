/**
 * A reconciliation lookup is evidence whatever happened to the key while the gate looked:
 * when a late definite failure released the key meanwhile and the lookup found the item,
 * the operation is settled by the lookup and the proposal answered duplicate; no new attempt goes
 * out over an effect the gate has just seen, and the observation is recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reconciliation, reserve, sleep } from './inputs.js';

for (const target of storeTargets()) {
  describe(`reconciliation racing a late outcome, on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('a lookup that found the effect is recorded, and no new attempt goes out over it', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const opts = { unknownRule: 'reconcile' as const };
      const first = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(first, 'allow');
      await sleep(80);
      const run = newRun();
      const proposal = reserve(run, { ...key, pendingTtlMs: 60_000 }, opts);
      const look = await store.decide(proposal);
      expectVerdict(look, 'reconcile');
      // The first gate's outcome finally lands: 422.
      await store.recordOutcome(outcome(first, key, 'failed'));
      const again = await store.decide({
        ...proposal,
        reconciliation: reconciliation({ operationId: look.operationId, attemptId: look.attemptId }, 'match'),
      });
      const obs = await store.query<{ n: number }>(
        `select count(*)::int as n from observations where kind = 'reconciliation' and operation_id = '${first.operationId}'`,
      );
      expect({ verdict: again.verdict, observations: obs[0]!.n }).toEqual({
        verdict: 'duplicate',
        observations: 1,
      });
    });
  });
}
