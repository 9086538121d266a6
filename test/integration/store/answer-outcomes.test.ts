/**
 * An attempt records which rule of its tool's outcome contract decided its state and the
 * destination's error code (migration 0012, eg_record_outcome.sql): a `failed` attempt with status
 * 200 is explained in the trail, not a contradiction. The failure releases the key, so the
 * corrected request goes out; a success confirms it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

for (const target of storeTargets()) {
  describe(`outcome rule and error code, on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('writes them with the outcome and reads them back, and the failure frees the key', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const settled = await store.recordOutcome(
        outcome(first, key, 'failed', {
          status: 200,
          outcomeRule: 'failed_if $.ok == false',
          errorCode: 'not_in_channel',
        }),
      );
      expect(settled.operationState).toBe('failed');
      const op = await store.getOperation(first.operationId!);
      expect(op?.attempts[0]).toMatchObject({
        status: 200,
        dispatchState: 'response_received',
        outcomeRule: 'failed_if $.ok == false',
        errorCode: 'not_in_channel',
      });

      const second = await store.decide(reserve(newRun(), key));
      expectVerdict(second, 'allow');
      await store.recordOutcome(
        outcome(second, key, 'succeeded', { status: 200, outcomeRule: 'status 200' }),
      );
      const after = await store.getOperation(second.operationId!);
      const last = [...after!.attempts].sort((a, b) => b.number - a.number)[0];
      expect(last).toMatchObject({ outcomeRule: 'status 200', errorCode: null });
      expect(after?.state).toBe('succeeded');
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
    });

    it('leaves both null when an outcome names neither (older gates)', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const op = await store.getOperation(first.operationId!);
      expect(op?.attempts[0]).toMatchObject({ outcomeRule: null, errorCode: null });
    });
  });
}
