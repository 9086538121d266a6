/**
 * The check every test store makes on close (test/helpers/trail-check.ts): that the state changes
 * the trail states for an operation chain to the state its row holds, and that the operation and
 * attempt rows its events make equal the rows the store wrote. Here it is shown to catch a row
 * changed behind the trail's back (an operation's state, an attempt's status, a time, the key an
 * attempt sent), a change told on another operation's chain, and to pass the lifecycle of a
 * retried operation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { trailMismatches } from '../../helpers/trail-check.js';
import { stateMismatches, toldStateChanges } from '../../helpers/trail-states.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

describe("a change told by an event that is not the operation's own", () => {
  it('is found, though the states chain: a projection reading one chain at a time would miss it', () => {
    const allow = {
      type: 'decision.allow',
      operationId: 'op-1',
      payload: { decision: { decidedAt: '2026-12-06T10:00:00.000001Z' }, facts: {} },
    };
    // A hold of another run found op-1's reservation expired, on the hold's own chain.
    const hold = {
      type: 'decision.hold',
      operationId: null,
      payload: {
        decision: { operationId: 'op-1', decidedAt: '2026-12-06T10:00:01.000001Z' },
        facts: { outcomeLost: { operationId: 'op-1', stateChange: { from: 'open', to: 'unknown' } } },
      },
    };
    const told = toldStateChanges([allow, hold]);
    expect(stateMismatches([{ id: 'op-1', state: 'unknown' }], told)).toEqual([
      expect.objectContaining({
        operationId: 'op-1',
        problem:
          "decision.hold.outcomeLost.stateChange: told by an event that is not the operation's own (another chain)",
      }),
    ]);
    // The same hold as op-1's own event is in order.
    const own = toldStateChanges([allow, { ...hold, operationId: 'op-1' }]);
    expect(stateMismatches([{ id: 'op-1', state: 'unknown' }], own)).toEqual([]);
  });
});

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
      expect(await trailMismatches(store.db)).toEqual([]);
    });

    it("finds an attempt's outcome that no event told", async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'failed'));
      await store.query(`update attempts set status = 500 where id = '${allow.attemptId}'`);
      // Told twice: by the rows the test rebuilds from the events, and by the store's own projection.
      expect(await trailMismatches(store.db)).toEqual([
        expect.objectContaining({
          operationId: allow.operationId,
          problem: expect.stringMatching(/^attempt 1\.status: the row says 500, the events say \d+$/),
        }),
        expect.objectContaining({
          operationId: allow.operationId,
          problem: expect.stringMatching(/^attempt \S+\.status: the row says 500, the projection \d+$/),
        }),
      ]);
      await store.query(`update attempts set status = null where id = '${allow.attemptId}'`);
    });

    it('finds a time and an idempotency key no event told', async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'succeeded'));
      await store.query(
        `update attempts set finished_at = finished_at + interval '1 microsecond', idempotency_key = 'other'
          where id = '${allow.attemptId}'`,
      );
      expect((await trailMismatches(store.db)).map((m) => m.problem.split(':')[0])).toEqual(
        expect.arrayContaining(['attempt 1.finished_at', 'attempt 1.idempotency_key']),
      );
    });

    it('finds a state the row holds that no event stated', async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'succeeded'));
      await store.query(`update operations set state = 'failed' where id = '${allow.operationId}'`);
      expect(await trailMismatches(store.db)).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            operationId: allow.operationId,
            problem: 'the trail ends at succeeded, the row says failed',
          }),
        ]),
      );
    });
  });
}
