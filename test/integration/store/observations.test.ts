import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DedupeKeyInput, ObservationInput } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, sleep, unknownOperation } from './inputs.js';

/**
 * Evidence from outside the gate (docs/design.md §3 "Observations", eg_add_observation.sql):
 * an operator's decision settles an unknown operation and moves its key as an outcome would; a
 * callback found by the destination's reference settles one; neither ever edits an attempt, and
 * the trail verifies.
 */

function decision(
  operationId: string,
  settles: ObservationInput['settles'],
  extra: Partial<ObservationInput> = {},
): ObservationInput {
  return {
    operationId,
    kind: 'operator_decision',
    by: 'alice@example.com',
    reason: 'checked the destination',
    settles,
    status: null,
    destinationRef: null,
    refs: [],
    payloadFingerprint: null,
    source: 'cli',
    ...extra,
  };
}

function callback(operationId: string, extra: Partial<ObservationInput> = {}): ObservationInput {
  return {
    operationId,
    kind: 'callback',
    by: 'payments-webhook',
    reason: null,
    settles: 'succeeded',
    status: 200,
    destinationRef: null,
    refs: [],
    payloadFingerprint: 'sha256:aa01',
    source: 'api',
    ...extra,
  };
}

for (const target of storeTargets()) {
  describe(`observations from outside on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    async function keyRow(key: DedupeKeyInput): Promise<Record<string, unknown> | undefined> {
      const rows = await store.query<Record<string, unknown>>(
        `select state, operation_id, destination_ref,
           extract(epoch from window_ends_at - confirmed_at)::int as window_s
         from dedupe_keys where key_hash = '${key.hash}'`,
      );
      return rows[0];
    }

    async function attemptsOf(operationId: string): Promise<Record<string, unknown>[]> {
      return store.query(
        `select number, dispatch_state, status, destination_ref, finished_at is not null as finished
         from attempts where operation_id = '${operationId}' order by number`,
      );
    }

    it('resolved succeeded: the operation settles, its key is confirmed for the window, the hold is withdrawn, a repeat is a duplicate naming the reference', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const hold = await store.decide(reserve(newRun(), key));
      expectVerdict(hold, 'hold');
      const attemptsBefore = await attemptsOf(first.operationId);

      const result = await store.addObservation(
        decision(first.operationId, 'succeeded', { destinationRef: 'https://github.com/acme/app/issues/7' }),
      );
      expect(result).toMatchObject({
        operationId: first.operationId,
        kind: 'operator_decision',
        result: 'succeeded',
        operationState: 'succeeded',
        stateChange: { from: 'unknown', to: 'succeeded' },
        key: { state: 'confirmed' },
        approvalsWithdrawn: 1,
        alreadyRecorded: false,
      });
      // The attempt is evidence of what the gate saw: never edited.
      expect(await attemptsOf(first.operationId)).toEqual(attemptsBefore);
      expect(await keyRow(key)).toEqual({
        state: 'confirmed',
        operation_id: first.operationId,
        destination_ref: 'https://github.com/acme/app/issues/7',
        window_s: 60,
      });
      const approvals = await store.listApprovals({ operationId: first.operationId });
      expect(approvals.map((a) => a.state)).toEqual(['withdrawn']);

      const repeat = await store.decide(reserve(newRun(), key));
      expectVerdict(repeat, 'duplicate');
      expect(repeat).toMatchObject({
        operationId: first.operationId,
        operationState: 'succeeded',
        source: { operationId: first.operationId, destinationRef: 'https://github.com/acme/app/issues/7' },
      });

      const observations = await store.listObservations(first.operationId);
      const mine = observations.filter((o) => o.kind === 'operator_decision');
      expect(mine).toHaveLength(1);
      expect(mine[0]).toMatchObject({
        id: result.observationId,
        result: 'succeeded',
        attemptId: first.attemptId,
        facts: {
          by: 'alice@example.com',
          reason: 'checked the destination',
          settles: 'succeeded',
          destinationRef: 'https://github.com/acme/app/issues/7',
          source: 'cli',
          stateAtObservation: 'unknown',
        },
      });
      const events = await store.query<{ type: string; payload: string }>(
        `select type, payload from events where operation_id = '${first.operationId}' order by chain, seq`,
      );
      const resolved = events.filter((e) => e.type === 'observation.operator_decision');
      expect(resolved).toHaveLength(1);
      expect(JSON.parse(resolved[0]!.payload)).toMatchObject({
        input: { by: 'alice@example.com', settles: 'succeeded' },
        facts: { observationId: result.observationId, stateChange: { from: 'unknown', to: 'succeeded' } },
      });
      expect((await verifyStoreChain(store)).ok).toBe(true);
    });

    it('resolving twice is refused naming the state the first left, and writes nothing', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      await store.addObservation(decision(first.operationId, 'failed'));
      const count = async (): Promise<number> =>
        Number(
          (
            await store.query<{ n: number }>(
              `select count(*)::int as n from observations where operation_id = '${first.operationId}'`,
            )
          )[0]!.n,
        );
      const before = await count();
      await expect(store.addObservation(decision(first.operationId, 'succeeded'))).rejects.toMatchObject({
        code: 'EG_ERR_OPERATION_STATE',
        message: expect.stringMatching(/is failed: its outcome is already settled/),
      });
      expect(await count()).toBe(before);
      expect((await store.getOperation(first.operationId))?.state).toBe('failed');
    });

    it('resolved failed: the key is released and the next proposal is attempt 2 of the same operation', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const result = await store.addObservation(decision(first.operationId, 'failed'));
      expect(result).toMatchObject({ operationState: 'failed', key: { state: 'released' } });
      expect((await keyRow(key))?.['state']).toBe('released');

      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: first.operationId,
        attemptNumber: 2,
        retryOfAttemptId: first.attemptId,
      });
      expect((await store.getOperation(first.operationId))?.state).toBe('open');
    });

    it('duplicate_effect_confirmed keeps the key and records every reference', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const refs = ['https://github.com/acme/app/issues/8', 'https://github.com/acme/app/issues/9'];
      const result = await store.addObservation(
        decision(first.operationId, 'duplicate_effect_confirmed', { refs }),
      );
      expect(result).toMatchObject({
        operationState: 'duplicate_effect_confirmed',
        key: { state: 'confirmed' },
      });
      expect(await keyRow(key)).toMatchObject({ state: 'confirmed', destination_ref: refs[0] });
      const [obs] = (await store.listObservations(first.operationId)).filter(
        (o) => o.kind === 'operator_decision',
      );
      expect(obs?.facts).toMatchObject({ refs, destinationRef: refs[0] });
      const repeat = await store.decide(reserve(newRun(), key));
      expectVerdict(repeat, 'duplicate');
      expect(repeat.operationState).toBe('duplicate_effect_confirmed');
    });

    it('an open operation is resolvable only once its attempt is past its deadline without an outcome', async () => {
      const key = newKey();
      const inFlight = await store.decide(reserve(newRun(), key, { deadlineMs: 60_000 }));
      expectVerdict(inFlight, 'allow');
      await expect(store.addObservation(decision(inFlight.operationId, 'failed'))).rejects.toMatchObject({
        code: 'EG_ERR_OPERATION_STATE',
        message: expect.stringMatching(/is open: its attempt 1 is still in flight/),
      });

      const key2 = newKey();
      const lost = await store.decide(reserve(newRun(), key2, { deadlineMs: 1 }));
      expectVerdict(lost, 'allow');
      await sleep(20);
      const result = await store.addObservation(decision(lost.operationId, 'succeeded'));
      expect(result.stateChange).toEqual({ from: 'open', to: 'succeeded' });
      // Its attempt still has no outcome: the decision sits beside it.
      expect(await attemptsOf(lost.operationId)).toMatchObject([{ dispatch_state: null, finished: false }]);
      expect((await keyRow(key2))?.['state']).toBe('confirmed');
      // The attempt's real outcome may still come (the gate that lost it writes it again): a
      // definite failure settles nothing the operator already settled.
      const late = await store.recordOutcome(outcome(lost, key2, 'failed'));
      expect(late.operationState).toBe('succeeded');
    });

    it('an operation that does not exist is EG_ERR_NOT_FOUND; an operation still open is refused', async () => {
      await expect(store.addObservation(decision('no-such-operation', 'failed'))).rejects.toMatchObject({
        code: 'EG_ERR_NOT_FOUND',
      });
    });

    it('of two resolutions at once exactly one settles; the other is refused naming its state', async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const results = await Promise.allSettled([
        store.addObservation(decision(first.operationId, 'succeeded', { by: 'alice' })),
        store.addObservation(decision(first.operationId, 'failed', { by: 'bob' })),
      ]);
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r) => r.status === 'rejected');
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect((lost[0] as PromiseRejectedResult).reason).toMatchObject({ code: 'EG_ERR_OPERATION_STATE' });
      const state = (await store.getOperation(first.operationId))?.state;
      expect(state).toBe((won[0] as PromiseFulfilledResult<{ operationState: string }>).value.operationState);
      expect((await keyRow(key))?.['state']).toBe(state === 'succeeded' ? 'confirmed' : 'released');
    });

    it("a callback found by the destination's reference settles an accepted-but-unknown operation; a repeat delivery is the same observation", async () => {
      const key = newKey();
      const ref = `re_${key.hash.slice(0, 12)}`;
      // The destination accepted the request (202) and named it; the tool says 202 is unknown.
      const first = await unknownOperation(
        store,
        key,
        {},
        {
          dispatchState: 'response_received',
          status: 202,
          destinationRef: ref,
          error: null,
        },
      );
      const found = await store.findOperations({ destinationRef: ref });
      expect(found.map((o) => o.id)).toEqual([first.operationId]);

      const result = await store.addObservation(callback(first.operationId, { destinationRef: ref }));
      expect(result).toMatchObject({ kind: 'callback', result: 'succeeded', operationState: 'succeeded' });
      const again = await store.addObservation(callback(first.operationId, { destinationRef: ref }));
      expect(again).toMatchObject({ observationId: result.observationId, alreadyRecorded: true });
      const callbacks = (await store.listObservations(first.operationId)).filter(
        (o) => o.kind === 'callback',
      );
      expect(callbacks).toHaveLength(1);
      expect(callbacks[0]?.facts).toMatchObject({
        by: 'payments-webhook',
        status: 200,
        payloadFingerprint: 'sha256:aa01',
      });
    });

    it('a callback that cannot settle (the gate already saw the outcome) is kept as not_settled evidence', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const result = await store.addObservation(
        callback(first.operationId, { settles: 'failed', payloadFingerprint: 'sha256:bb02' }),
      );
      expect(result).toMatchObject({
        result: 'not_settled',
        operationState: 'succeeded',
        stateChange: null,
        key: null,
      });
      const [obs] = (await store.listObservations(first.operationId)).filter((o) => o.kind === 'callback');
      expect(obs).toMatchObject({
        result: 'not_settled',
        facts: { settles: 'failed', stateAtObservation: 'succeeded' },
      });
      expect((await keyRow(key))?.['state']).toBe('confirmed');
    });

    it("an operator note never settles, and its reference does not route a webhook; a settling callback's does when no response carried it", async () => {
      const key = newKey();
      const first = await unknownOperation(store, key);
      const ticket = `ticket-${key.hash.slice(0, 8)}`;
      const note = await store.addObservation({
        ...decision(first.operationId, null),
        kind: 'operator_note',
        reason: 'asked the customer; waiting for an answer',
        destinationRef: ticket,
      });
      expect(note).toMatchObject({ result: 'noted', operationState: 'unknown', stateChange: null });
      expect(await store.findOperations({ destinationRef: ticket })).toEqual([]);

      const ref = `re_${key.hash.slice(0, 10)}`;
      await store.addObservation(
        callback(first.operationId, { destinationRef: ref, payloadFingerprint: 'sha256:cc03' }),
      );
      expect((await store.findOperations({ destinationRef: ref })).map((o) => o.id)).toEqual([
        first.operationId,
      ]);
      // A reference an attempt's response carried wins over one only evidence brought.
      const other = await unknownOperation(
        store,
        newKey(),
        {},
        { dispatchState: 'response_received', status: 202, destinationRef: ref, error: null },
      );
      expect((await store.findOperations({ destinationRef: ref })).map((o) => o.id)).toEqual([
        other.operationId,
      ]);
    });

    it('a webhook that beat the response is not_settled; the same delivery again, once the operation is unknown, settles it', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key, { deadlineMs: 60_000 }));
      expectVerdict(first, 'allow');
      const early = await store.addObservation(
        callback(first.operationId, { payloadFingerprint: 'sha256:dd04' }),
      );
      expect(early.result).toBe('not_settled');
      await store.recordOutcome(outcome(first, key, 'unknown'));
      const again = await store.addObservation(
        callback(first.operationId, { payloadFingerprint: 'sha256:dd04' }),
      );
      expect(again).toMatchObject({
        alreadyRecorded: false,
        result: 'succeeded',
        operationState: 'succeeded',
      });
      const third = await store.addObservation(
        callback(first.operationId, { payloadFingerprint: 'sha256:dd04' }),
      );
      expect(third).toMatchObject({ alreadyRecorded: true, observationId: again.observationId });
    });

    it('an attempt with no outcome at all is never resolved as failed: the gate that sent it may still say it went out', async () => {
      const key = newKey();
      const lost = await store.decide(reserve(newRun(), key, { deadlineMs: 1 }));
      expectVerdict(lost, 'allow');
      await sleep(20);
      await expect(store.addObservation(decision(lost.operationId, 'failed'))).rejects.toMatchObject({
        code: 'EG_ERR_OPERATION_STATE',
        message: expect.stringMatching(/attempt 1 has no outcome yet/),
      });
      const cb = await store.addObservation(
        callback(lost.operationId, { settles: 'failed', payloadFingerprint: 'sha256:ee05' }),
      );
      expect(cb).toMatchObject({ result: 'not_settled', operationState: 'open' });
      // The gate records what it saw: sent, no response. Now failed can be decided, and the key
      // is released only then; a proposal before that is held, never a plain retry.
      await store.recordOutcome(outcome(lost, key, 'unknown'));
      const held = await store.decide(reserve(newRun(), key));
      expectVerdict(held, 'hold');
      const resolved = await store.addObservation(decision(lost.operationId, 'failed'));
      expect(resolved).toMatchObject({
        stateChange: { from: 'unknown', to: 'failed' },
        key: { state: 'released' },
      });
    });

    it('finds an operation by the idempotency key it sent, and only one that sent one', async () => {
      const key = newKey();
      const withHeader = await store.decide(reserve(newRun(), key));
      expectVerdict(withHeader, 'allow');
      const without = await store.decide(reserve(newRun(), newKey(), { idempotencyHeader: null }));
      expectVerdict(without, 'allow');
      expect(
        (await store.findOperations({ idempotencyKey: withHeader.operationId })).map((o) => o.id),
      ).toEqual([withHeader.operationId]);
      expect(await store.findOperations({ idempotencyKey: without.operationId })).toEqual([]);
      expect(await store.findOperations({ destinationRef: 'nothing-has-this-ref' })).toEqual([]);
    });
  });
}
