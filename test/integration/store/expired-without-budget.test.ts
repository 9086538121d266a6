/**
 * A lost reservation with no attempt budget left under `on_expired: retry`: the
 * proposal is answered `block retry_budget_exhausted`, and so is every later one. eg_expire finds
 * the attempt it already marked and does not mark it again, and eg_decide checks an expiry once
 * per call (it used to go round the loop until "dedupe key kept changing" raised).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, reserve, sleep } from './inputs.js';

for (const target of storeTargets()) {
  describe(`budget spent after a lost reservation under on_expired: retry, on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('later proposals of the key are answered, not raised', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const opts = { onExpired: 'retry' as const, retryBudget: 1 };
      const first = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(first, 'allow');
      await sleep(80); // lost: no outcome, reservation expired
      const second = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(second, 'block'); // retry_budget_exhausted, recorded with outcomeLost
      const third = store.decide(reserve(newRun(), key, opts));
      await expect(third).resolves.toMatchObject({ verdict: 'block' });
      // The curator switches the tool back to on_expired: unknown: still raised.
      await expect(store.decide(reserve(newRun(), key, { retryBudget: 1 }))).resolves.toHaveProperty(
        'verdict',
      );
    });
  });
}
