/**
 * MCP multi-round-trip calls in the store (docs/design.md §4.1 "MCP and other JSON-RPC tools"): a
 * call answered `input_required` did not run; its outcome is `open`, its key awaits the
 * call's continuation, and the same request again is the next attempt of the SAME operation (same
 * id, so the same Idempotency-Key; parent, reason input_required, decision input_continuation),
 * never a duplicate, never a free key, and without spending the retry budget. Everything that
 * could make the continuation a second effect is checked too: a continuation in flight holds the
 * key, and a retry over an unknown attempt that is asked for input stays unknown. Forks, windows
 * and faults around a waiting key are in input-continuation-faults.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, expectVerdict, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

for (const target of storeTargets()) {
  describe(`MCP input_required continuations on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    /** The destination answered input_required: HTTP 200, a response, and nothing ran. */
    const askedForInput = (allow: Allow, key: Parameters<typeof outcome>[1]) =>
      outcome(allow, key, 'open', {
        status: 200,
        error: 'MCP input_required: the tool asked for input; the call continues as the same operation',
      });

    const keyRow = async (hash: string) =>
      (
        await store.query<{ state: string; attempt_number: number; input_rounds: number }>(
          `select state, attempt_number, input_rounds from dedupe_keys where key_hash = '${hash}'`,
        )
      )[0];
    const opState = async (id: string) =>
      (await store.query<{ state: string }>(`select state from operations where id = '${id}'`))[0]?.state;

    it('keeps the operation open, continues it as attempt 2, and confirms the key only on the result', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const asked = await store.recordOutcome(askedForInput(first, key));
      expect(asked.operationState).toBe('open');
      expect(await keyRow(key.hash)).toMatchObject({ state: 'awaiting_input', attempt_number: 1 });
      expect(await opState(first.operationId)).toBe('open');

      // The agent answers the elicitation: same call, another run even (a restarted agent).
      const cont = await store.decide(reserve(newRun(), key));
      expectVerdict(cont, 'allow');
      expect(cont).toMatchObject({
        operationId: first.operationId,
        attemptNumber: 2,
        retryOfAttemptId: first.attemptId,
        retryReason: 'input_required',
        retryDecision: 'input_continuation',
        supersedesOperationId: null,
      });
      const [attempt2] = await store.query<{ remaining_attempts: number }>(
        `select remaining_attempts from attempts where id = '${cont.attemptId}'`,
      );
      expect(attempt2!.remaining_attempts, 'a continuation spends no budget').toBe(2);

      await store.recordOutcome(outcome(cont, key, 'succeeded', { status: 200 }));
      expect(await keyRow(key.hash)).toMatchObject({ state: 'confirmed', input_rounds: 1 });
      expect(await opState(first.operationId)).toBe('succeeded');
      const again = await store.decide(reserve(newRun(), key));
      expectVerdict(again, 'duplicate');
      expect(again.operationId).toBe(first.operationId);
      expect((await verifyStoreChain(store)).ok).toBe(true);
    });

    it('spends no retry budget on continuations, and still counts the failures', async () => {
      const key = newKey();
      const budget = { retryBudget: 2 };
      const first = await store.decide(reserve(newRun(), key, budget));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const second = await store.decide(reserve(newRun(), key, budget));
      expectVerdict(second, 'allow');
      await store.recordOutcome(askedForInput(second, key));
      const third = await store.decide(reserve(newRun(), key, budget));
      expectVerdict(third, 'allow');
      expect(third.attemptNumber).toBe(3);
      await store.recordOutcome(outcome(third, key, 'failed'));
      // One attempt of two spent (the continuations spent none): one retry is left.
      const fourth = await store.decide(reserve(newRun(), key, budget));
      expectVerdict(fourth, 'allow');
      expect(fourth).toMatchObject({ attemptNumber: 4, retryDecision: 'previous_attempt_failed' });
      await store.recordOutcome(outcome(fourth, key, 'failed'));
      const fifth = await store.decide(reserve(newRun(), key, budget));
      expectVerdict(fifth, 'block');
      expect(fifth.reason).toBe('retry_budget_exhausted');
    });

    it('holds the key while a continuation is in flight: another run waits, nothing goes out twice', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const cont = await store.decide(reserve(newRun(), key));
      expectVerdict(cont, 'allow');
      const other = await store.decide(reserve(newRun(), key));
      expectVerdict(other, 'pending');
      expect(other.operationId).toBe(first.operationId);
    });

    it('lets exactly one of two concurrent continuations go', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const both = await Promise.all([
        store.decide(reserve(newRun(), key)),
        store.decide(reserve(newRun(), key)),
      ]);
      expect(both.map((r) => r.verdict).sort()).toEqual(['allow', 'pending']);
      expect(await keyRow(key.hash)).toMatchObject({ state: 'pending', attempt_number: 2, input_rounds: 1 });
    });

    it('keeps an unknown operation unknown when a retry made over its lost attempt is asked for input', async () => {
      // Attempt 1 was sent without a response: it may have run. A retry under honored idempotency
      // that is asked for input proves nothing about attempt 1, so its continuation must not go
      // out as a clean continuation.
      const key = newKey();
      const honored = { unknownRule: 'honored' as const };
      const first = await store.decide(reserve(newRun(), key, honored));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'unknown'));
      const retry = await store.decide(reserve(newRun(), key, honored));
      expectVerdict(retry, 'allow');
      expect(retry.retryDecision).toBe('destination_idempotency_honored');
      const settled = await store.recordOutcome(askedForInput(retry, key));
      expect(settled.operationState).toBe('unknown');
      expect(await keyRow(key.hash)).toMatchObject({ state: 'unknown' });
      const held = await store.decide(reserve(newRun(), key));
      expectVerdict(held, 'hold');
    });

    it('takes a late input_required of an attempt whose reservation expired: the operation continues', async () => {
      const key = newKey({ pendingTtlMs: 40 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await sleep(80); // the gate lost track of attempt 1: its reservation expired without an outcome
      const held = await store.decide(reserve(newRun(), key));
      expectVerdict(held, 'hold');
      // The answer arrives after all: the tool asked for input, so it did not run.
      const late = await store.recordOutcome(askedForInput(first, key));
      expect(late.operationState).toBe('open');
      expect(await keyRow(key.hash)).toMatchObject({ state: 'awaiting_input' });
      const [approval] = await store.query<{ state: string }>(
        `select state from approvals where operation_id = '${first.operationId}'`,
      );
      expect(approval!.state, 'nothing is left to approve').toBe('withdrawn');
      const cont = await store.decide(reserve(newRun(), key));
      expectVerdict(cont, 'allow');
      expect(cont).toMatchObject({ operationId: first.operationId, retryDecision: 'input_continuation' });
    });

    it('records the continuation in the trail with its parent, reason and key state', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const cont = await store.decide(reserve(newRun(), key));
      expectVerdict(cont, 'allow');
      const events = await store.query<{ type: string; payload: string }>(
        `select type, payload from events where operation_id = '${first.operationId}' order by seq`,
      );
      const facts = events.map((e) => ({
        type: e.type,
        facts: (JSON.parse(e.payload) as { facts: unknown }).facts,
      }));
      expect(facts).toMatchObject([
        { type: 'decision.allow' },
        { type: 'attempt.outcome', facts: { stateChange: null, key: { state: 'awaiting_input' } } },
        {
          type: 'decision.allow',
          facts: {
            operation: { opened: false, stateChange: null },
            attempt: {
              number: 2,
              retryOfAttemptId: first.attemptId,
              retryReason: 'input_required',
              retryDecision: 'input_continuation',
              remainingAttempts: 2,
            },
          },
        },
      ]);
    });
  });
}
