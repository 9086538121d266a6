import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import type { DecideResult, Store } from '../../../src/store/types.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

/*
 * Many contenders for one key at the same time. On PostgreSQL the contenders are split over two
 * separately opened stores (two pools, as two gate processes would have), so this proves the
 * protocol is correct across processes, not only inside one.
 */
for (const target of storeTargets()) {
  describe(`concurrent proposals on ${target.name}`, () => {
    let store: TestStore;
    let stores: Store[];

    beforeAll(async () => {
      store = await openTestStore(target);
      stores = target.kind === 'postgres' ? [store, await store.openSibling()] : [store];
    });

    afterAll(async () => {
      for (const s of stores?.slice(1) ?? []) await s.close();
      await store?.close();
    });

    function contend(key: ReturnType<typeof newKey>, n: number): Promise<DecideResult[]> {
      return Promise.all(
        Array.from({ length: n }, (_, i) =>
          stores[i % stores.length]!.decide(reserve(newRun(), key, { recordPending: i % 2 === 0 })),
        ),
      );
    }

    it('50 concurrent proposals of a fresh key: exactly one allow', async () => {
      const key = newKey();
      const results = await contend(key, 50);
      const allows = results.filter((r) => r.verdict === 'allow');
      expect(allows).toHaveLength(1);
      expect(results.filter((r) => r.verdict === 'pending')).toHaveLength(49);
      const owner = allows[0]!;
      expectVerdict(owner, 'allow');
      for (const r of results) if (r.verdict === 'pending') expect(r.operationId).toBe(owner.operationId);
      const op = await store.getOperation(owner.operationId);
      expect(op?.attempts).toHaveLength(1);
    });

    it('50 concurrent retries of a released key: exactly one takes it over, as attempt #2', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed', { status: 503 }));

      const results = await contend(key, 50);
      const allows = results.filter((r) => r.verdict === 'allow');
      expect(allows).toHaveLength(1);
      expect(allows[0]).toMatchObject({ operationId: first.operationId, attemptNumber: 2 });
      expect((await store.getOperation(first.operationId))?.attempts).toHaveLength(2);
    });

    it('50 concurrent proposals of a confirmed key: all duplicates, none reserved', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const results = await contend(key, 50);
      expect(results.every((r) => r.verdict === 'duplicate')).toBe(true);
    });

    it('the chain did not fork under concurrency', async () => {
      const report = await verifyStoreChain(store);
      expect(report).toMatchObject({ ok: true });
      expect(report.lastSeq).toBe((await store.chainHead()).lastSeq);
    });
  });
}
