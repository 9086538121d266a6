import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OutcomeInput } from '../../../src/store/index.js';
import { callCountingProbes } from '../../helpers/index-probes.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

/*
 * The answers made from the key row alone, which is what lets the operation and attempt rows become
 * a projection of the events off the hot path (src/store/README.md, "Next"):
 * - a duplicate and a pending read the key's copy of the operation's state, not the operation's row
 *   (a pending still reads the holder's attempt, to tell a changed request from a retry);
 * - the common outcome, a first attempt's answer while it holds its pending key, is written from
 *   the key row alone (eg_first_outcome.sql): the attempt's and the operation's rows are each probed
 *   once, by the statement that writes them, where the general path reads each first.
 * What must hold besides: the answers and the rows are what the general path makes (every test
 * store checks on close that the rows are what the events say, test/helpers/trail-check.ts), and
 * every other outcome still takes the general path (probes counted by test/helpers/index-probes.ts).
 */
for (const target of storeTargets()) {
  describe(`answers from the key row on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    async function recordCounting(
      input: OutcomeInput,
    ): Promise<{ answer: Record<string, unknown>; attempts: number; operations: number }> {
      const { answer, probes } = await callCountingProbes<Record<string, unknown>>(
        store.db,
        'eg_record_outcome',
        input,
        ['attempts', 'operations'],
      );
      return { answer, attempts: probes['attempts']!, operations: probes['operations']! };
    }

    for (const state of ['succeeded', 'failed', 'unknown', 'open', 'accepted'] as const) {
      it(`${state}: answered and written with one probe of the attempt and at most one of the operation`, async () => {
        const key = newKey();
        const allow = await store.decide(reserve(newRun(), key));
        expectVerdict(allow, 'allow');
        const recorded = await recordCounting(outcome(allow, key, state));
        expect(recorded.answer).toEqual({ operationState: state });
        expect(recorded.attempts).toBe(1);
        // An input_required answer leaves the operation open: its row is not written at all.
        expect(recorded.operations).toBe(state === 'open' ? 0 : 1);
        const op = await store.getOperation(allow.operationId);
        expect(op?.state).toBe(state);
        const [keyRow] = await store.query<{ state: string; operation_state: string }>(
          `select state, operation_state from dedupe_keys where key_hash = '${key.hash}'`,
        );
        const keyStates = {
          succeeded: 'confirmed',
          failed: 'released',
          unknown: 'unknown',
          open: 'awaiting_input',
          accepted: 'accepted',
        };
        expect(keyRow).toEqual({ state: keyStates[state], operation_state: state });
      });
    }

    it('a duplicate reads neither the operation’s row nor an attempt’s, a pending not the operation’s', async () => {
      const key = newKey();
      const holder = await store.decide(reserve(newRun(), key));
      expectVerdict(holder, 'allow');
      const decideCounting = (input: ReturnType<typeof reserve>) =>
        callCountingProbes<{ verdict: string; operationState: string }>(store.db, 'eg_decide', input, [
          'attempts',
          'operations',
        ]);
      const pending = await decideCounting(reserve(newRun(), key));
      expect(pending.answer).toMatchObject({ verdict: 'pending', operationState: 'open' });
      // The one attempt probe is the fork check (eg_decide (d)): a changed request must fork even
      // when the holder's outcome releases the key between that read and the upsert.
      expect(pending.probes).toEqual({ attempts: 1, operations: 0 });

      await store.recordOutcome(outcome(holder, key, 'succeeded'));
      const duplicate = await decideCounting(reserve(newRun(), key));
      expect(duplicate.answer).toMatchObject({ verdict: 'duplicate', operationState: 'succeeded' });
      expect(duplicate.probes).toEqual({ attempts: 0, operations: 0 });
    });

    it('a retry’s outcome and an outcome written again take the general path, which reads first', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed'));
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry.attemptNumber).toBe(2);
      const recorded = await recordCounting(outcome(retry, key, 'succeeded'));
      expect(recorded.answer).toEqual({ operationState: 'succeeded' });
      expect(recorded.attempts).toBeGreaterThan(1);
      expect(recorded.operations).toBeGreaterThan(1);

      const again = await recordCounting(outcome(retry, key, 'succeeded'));
      expect(again.answer).toEqual({ operationState: 'succeeded', alreadyRecorded: true });
    });
  });
}
