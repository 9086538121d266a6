import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreError } from '../../../src/errors.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { block, expectVerdict, newKey, newRun, outcome, request, reserve } from './inputs.js';

/** The store's calls as the gate sees them: round trips, inputs kept exactly, listings, errors. */
for (const target of storeTargets()) {
  describe(`store calls on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    it('a tool without a key always gets a new operation', async () => {
      const run = newRun();
      const a = await store.decide(reserve(run, null, { idempotencyHeader: null }));
      const b = await store.decide(
        reserve(run, null, { idempotencyHeader: null, keyError: 'missing $.body.title' }),
      );
      expectVerdict(a, 'allow');
      expectVerdict(b, 'allow');
      expect(a.operationId).not.toBe(b.operationId);
      await store.recordOutcome(outcome(a, null, 'succeeded'));
      expect((await store.getOperation(a.operationId))?.state).toBe('succeeded');
      expect((await store.getOperation(b.operationId))?.keyHash).toBeNull();
      expect((await store.getDecision(b.decisionId))?.reason).toBe('missing $.body.title');
    });

    it('decide and recordOutcome are one round trip each', async () => {
      const key = newKey();
      let before = store.stats.roundTrips;
      const allow = await store.decide(reserve(newRun(), key));
      expect(store.stats.roundTrips - before).toBe(1);
      expectVerdict(allow, 'allow');

      before = store.stats.roundTrips;
      await store.recordOutcome(outcome(allow, key, 'succeeded'));
      expect(store.stats.roundTrips - before).toBe(1);

      before = store.stats.roundTrips;
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
      expect(store.stats.roundTrips - before).toBe(1);

      before = store.stats.roundTrips;
      expectVerdict(await store.decide(block(newRun(), 'policy')), 'block');
      expect(store.stats.roundTrips - before).toBe(1);
    });

    it('keeps quotes, backslashes and SQL-looking text in the input exactly as given', async () => {
      const hostile = "it's \\' \"q\" '); drop table events; -- é 𝄞";
      const key = newKey({ values: [hostile] });
      const run = `run ${hostile}`;
      const allow = await store.decide(
        reserve(run, key, { step: hostile, request: { ...request, path: `/${hostile}` } }),
      );
      expectVerdict(allow, 'allow');
      const op = await store.getOperation(allow.operationId);
      expect(op).toMatchObject({ keyValues: [hostile], runId: run, step: hostile });
      expect(op?.attempts[0]?.request.path).toBe(`/${hostile}`);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
    });

    it('listOperations filters by state, newest first', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'unknown'));
      const unknown = await store.listOperations({ state: 'unknown' });
      expect(unknown.every((o) => o.state === 'unknown')).toBe(true);
      expect(unknown[0]?.id).toBe(first.operationId);
      expect(unknown[0]?.attempts[0]?.dispatchState).toBe('sent_no_response');
      expect(await store.listOperations({ limit: 2 })).toHaveLength(2);
      expect(await store.getOperation('no-such-operation')).toBeNull();
      expect(await store.getDecision('no-such-decision')).toBeNull();
    });

    it('countDuplicates counts the duplicate decisions of each operation in one round trip', async () => {
      const key = newKey();
      const done = await store.decide(reserve(newRun(), key));
      expectVerdict(done, 'allow');
      await store.recordOutcome(outcome(done, key, 'succeeded'));
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
      const other = newKey();
      const none = await store.decide(reserve(newRun(), other));
      expectVerdict(none, 'allow');
      const before = store.stats.roundTrips;
      const counts = await store.countDuplicates([done.operationId, none.operationId, 'no-such-operation']);
      // The projection's catch-up (store/event-projection-sql.ts) and one read, however many ids.
      expect(store.stats.roundTrips - before).toBe(2);
      // Only operations that absorbed a duplicate are named; the allow of `none` is not one.
      expect(counts).toEqual({ [done.operationId]: 2 });
      expect(await store.countDuplicates([])).toEqual({});
    });

    it('driver errors surface as StoreError with the cause kept', async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'failed'));
      const twice = store.recordOutcome(outcome(allow, key, 'succeeded'));
      await expect(twice).rejects.toBeInstanceOf(StoreError);
      await expect(twice).rejects.toMatchObject({
        code: 'EG_ERR_STORE_UNAVAILABLE',
        cause: expect.any(Error),
      });
      // The failed call changed nothing.
      expect((await store.getOperation(allow.operationId))?.state).toBe('failed');
    });
  });
}
