import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OutcomeInput } from '../../../src/store/index.js';
import { callCountingProbes } from '../../helpers/index-probes.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

/*
 * The hot path writes no operation or attempt row: a fresh operation's allow, its first attempt's
 * outcome, a duplicate and a pending are answered from the key row and told by their events, and
 * the rows are made from the events off the hot path (eg_project_rows.sql), by the projector, a
 * reader, or a rare path, each of which brings the rows up to date first (eg_project_operation.sql).
 * What must hold besides: the answers and the rows are what the general path makes (every test
 * store checks on close that the rows are what the events say, test/helpers/trail-check.ts), and
 * every other outcome still takes the general path, which reads the rows after projecting them
 * (probes counted by test/helpers/index-probes.ts).
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

    /** The rows of an operation as they stand, the projection left where it is. */
    const rowsNow = async (operationId: string): Promise<{ operations: number; attempts: number }> => {
      const [r] = await store.rawQuery<{ operations: number; attempts: number }>(
        `select (select count(*)::int from operations where id = '${operationId}') as operations,
                (select count(*)::int from attempts where operation_id = '${operationId}') as attempts`,
      );
      return r!;
    };

    for (const state of ['succeeded', 'failed', 'unknown', 'open', 'accepted'] as const) {
      it(`${state}: the allow and the outcome touch neither row, and the projection makes both`, async () => {
        const key = newKey();
        await store.catchUp();
        const decided = await callCountingProbes<Record<string, unknown>>(
          store.db,
          'eg_decide',
          reserve(newRun(), key),
          ['attempts', 'operations'],
        );
        const allow = decided.answer as unknown as Awaited<ReturnType<typeof store.decide>>;
        expectVerdict(allow, 'allow');
        expect(decided.probes).toEqual({ attempts: 0, operations: 0 });
        const recorded = await recordCounting(outcome(allow, key, state));
        expect(recorded.answer).toEqual({ operationState: state });
        expect(recorded).toMatchObject({ attempts: 0, operations: 0 });
        // Nothing written yet (no projector runs in this test): the events alone tell it.
        expect(await rowsNow(allow.operationId)).toEqual({ operations: 0, attempts: 0 });
        // A reader brings the rows up to date before it reads.
        const op = await store.getOperation(allow.operationId);
        expect(op?.state).toBe(state);
        expect(op?.attempts).toHaveLength(1);
        expect(await rowsNow(allow.operationId)).toEqual({ operations: 1, attempts: 1 });
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

    it('an input the rows would refuse is refused on the call, before its event: the projection never meets it', async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      const events = async (): Promise<number> =>
        Number((await store.rawQuery<{ n: number }>('select count(*)::int as n from events'))[0]?.n);
      const before = await events();
      for (const bad of [
        { dispatchState: 'sent_twice' },
        { status: 'two hundred' },
        { durationMs: 'slow' },
      ]) {
        await expect(
          store.recordOutcome({ ...outcome(allow, key, 'succeeded'), ...bad } as never),
        ).rejects.toThrow();
      }
      const proposal = reserve(newRun(), newKey());
      await expect(store.decide({ ...proposal, unknownRule: 'guess' } as never)).rejects.toThrow();
      await expect(store.decide({ ...proposal, toolId: null } as never)).rejects.toThrow();
      expect(await events()).toBe(before);
      // The key is still pending on the attempt, which takes its real outcome, and the projection goes on.
      expect(await store.recordOutcome(outcome(allow, key, 'succeeded'))).toEqual({
        operationState: 'succeeded',
      });
      expect((await store.getOperation(allow.operationId))?.state).toBe('succeeded');
      expectVerdict(await store.decide(proposal), 'allow');
    });

    it('a duplicate and a pending read neither the operation’s row nor an attempt’s', async () => {
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
      // No fork check for a key still inside its pending_ttl (eg_decide (d)): the upsert cannot take it.
      expect(pending.probes).toEqual({ attempts: 0, operations: 0 });

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
