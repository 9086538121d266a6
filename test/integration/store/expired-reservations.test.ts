import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DedupeKeyInput, ReserveInput, Store } from '../../../src/store/index.js';
import { uuidv7, verifyStoreChain } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import {
  type Allow,
  expectVerdict,
  newKey,
  newRun,
  outcome,
  reconciliation,
  request,
  reserve,
  sleep,
} from './inputs.js';

/**
 * "An expired reservation is not a free key" (docs/design.md §2, §4.1 "Reservation TTL and unknown
 * operations"): a reservation whose outcome was never recorded within pending_ttl makes
 * its attempt sent_no_response (observation outcome_lost) and its operation unknown, and the
 * proposal that found it is answered by the tool's unknown rule. Only `on_expired: retry` lets a
 * new attempt out, recorded as curator_accepted_risk. Also: outcomes written twice (a commit lost
 * with its connection) and decides whose answer the gate never heard.
 */

type Overrides = Partial<Omit<ReserveInput, 'kind'>>;

/** A first attempt that took the key and then lost track of it: no outcome, reservation expired. */
async function lostReservation(store: Store, key: DedupeKeyInput, overrides: Overrides = {}): Promise<Allow> {
  const first = await store.decide(reserve(newRun(), key, overrides));
  expectVerdict(first, 'allow');
  await sleep(80); // past pendingTtlMs (50)
  return first;
}

const longTtl = (key: DedupeKeyInput): DedupeKeyInput => ({ ...key, pendingTtlMs: 60_000 });

for (const target of storeTargets()) {
  describe(`expired reservations on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    async function attemptsOf(operationId: string): Promise<Record<string, unknown>[]> {
      return store.query(
        `select number, dispatch_state, retry_decision, retry_reason, recovered_at is not null as marked
          from attempts where operation_id = '${operationId}' order by number`,
      );
    }

    async function observationsOf(operationId: string): Promise<Record<string, unknown>[]> {
      return store.query(
        `select kind, result, attempt_id from observations where operation_id = '${operationId}' order by created_at`,
      );
    }

    it('hold rule: the lost attempt is sent_no_response, the operation unknown, the proposal held', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const first = await lostReservation(store, key);
      const next = await store.decide(reserve(newRun(), longTtl(key)));
      expectVerdict(next, 'hold');
      expect(next).toMatchObject({
        operationId: first.operationId,
        previousAttemptId: first.attemptId,
        previousDispatchState: 'sent_no_response',
      });
      expect(await attemptsOf(first.operationId)).toEqual([
        {
          number: 1,
          dispatch_state: 'sent_no_response',
          retry_decision: null,
          retry_reason: null,
          marked: true,
        },
      ]);
      expect(await observationsOf(first.operationId)).toEqual([
        { kind: 'outcome_lost', result: 'marked_unknown', attempt_id: first.attemptId },
      ]);
      expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
      // The hold event carries the expiry as a fact: the trail says why the attempt became unknown.
      // It changed the operation, so it is the operation's own event, on its chain.
      const [event] = await store.query<{ payload: string; operation_id: string }>(
        `select payload, operation_id from events where type = 'decision.hold'
          and (payload::jsonb -> 'input' ->> 'decisionId') = '${next.decisionId}'`,
      );
      expect(event!.operation_id).toBe(first.operationId);
      expect(JSON.parse(event!.payload).facts.outcomeLost).toMatchObject({
        marked: true,
        attemptId: first.attemptId,
        stateChange: { from: 'open', to: 'unknown' },
      });
      // Every later proposal is held too: never a second attempt without an approval.
      expectVerdict(await store.decide(reserve(newRun(), longTtl(key))), 'hold');
      expect(await observationsOf(first.operationId)).toHaveLength(1);
    });

    it('honored rule: the next proposal retries the same operation (same idempotency key)', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const honored = { unknownRule: 'honored' } as const;
      const first = await lostReservation(store, key, honored);
      const retry = await store.decide(reserve(newRun(), longTtl(key), honored));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: first.operationId,
        attemptNumber: 2,
        retryOfAttemptId: first.attemptId,
        retryReason: 'response_lost_after_dispatch',
        retryDecision: 'destination_idempotency_honored',
      });
      expect(await attemptsOf(first.operationId)).toMatchObject([
        { number: 1, dispatch_state: 'sent_no_response', marked: true },
        { number: 2, dispatch_state: null, retry_decision: 'destination_idempotency_honored' },
      ]);
    });

    it('reconcile rule: the gate is asked to look first, and nothing is recorded until it does', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const rule = { unknownRule: 'reconcile' } as const;
      const first = await lostReservation(store, key, rule);
      const ask = await store.decide(reserve(newRun(), longTtl(key), rule));
      expect(ask).toMatchObject({
        verdict: 'reconcile',
        operationId: first.operationId,
        attemptId: first.attemptId,
      });
      expect(await attemptsOf(first.operationId)).toMatchObject([{ dispatch_state: null, marked: false }]);

      const found = await store.decide(
        reserve(newRun(), longTtl(key), { ...rule, reconciliation: reconciliation(first, 'match') }),
      );
      expectVerdict(found, 'duplicate');
      expect(found).toMatchObject({ operationId: first.operationId, operationState: 'succeeded' });
      expect(await observationsOf(first.operationId)).toMatchObject([
        { kind: 'outcome_lost' },
        { kind: 'reconciliation', result: 'match' },
      ]);
    });

    it('reconcile rule with nothing found: held for an approval', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const rule = { unknownRule: 'reconcile' } as const;
      const first = await lostReservation(store, key, rule);
      const held = await store.decide(
        reserve(newRun(), longTtl(key), { ...rule, reconciliation: reconciliation(first, 'none') }),
      );
      expectVerdict(held, 'hold');
      expect(held.reconciliation).toBe('none');
      expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
    });

    it('on_expired: retry goes out again, recorded as curator_accepted_risk', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const first = await lostReservation(store, key);
      const retry = await store.decide(reserve(newRun(), longTtl(key), { onExpired: 'retry' }));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: first.operationId,
        attemptNumber: 2,
        retryOfAttemptId: first.attemptId,
        retryReason: 'response_lost_after_dispatch',
        retryDecision: 'curator_accepted_risk',
      });
      expect(await attemptsOf(first.operationId)).toMatchObject([
        { number: 1, dispatch_state: 'sent_no_response', marked: true },
        { number: 2, dispatch_state: null, retry_decision: 'curator_accepted_risk' },
      ]);
      expect(await observationsOf(first.operationId)).toMatchObject([{ kind: 'outcome_lost' }]);
    });

    it('a late real outcome still settles the operation, and the key follows it', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const first = await lostReservation(store, key);
      expectVerdict(await store.decide(reserve(newRun(), longTtl(key))), 'hold');
      const late = await store.recordOutcome(outcome(first, key, 'succeeded'));
      expect(late.operationState).toBe('succeeded');
      const again = await store.decide(reserve(newRun(), longTtl(key)));
      expectVerdict(again, 'duplicate');
      expect(again.source?.operationId).toBe(first.operationId);
      expect(await store.listApprovals({ operationId: first.operationId })).toMatchObject([
        { state: 'withdrawn' },
      ]);
    });

    it('a late success of a superseded attempt settles the operation: the effect is there', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const honored = { unknownRule: 'honored' } as const;
      const first = await lostReservation(store, key, honored);
      const retry = await store.decide(reserve(newRun(), longTtl(key), honored));
      expectVerdict(retry, 'allow');
      // The honored retry is refused (the destination still holds the first call's key in flight)…
      const refused = await store.recordOutcome(outcome(retry, key, 'failed', { status: 409 }));
      expect(refused.operationState).toBe('unknown');
      // …then the first attempt's real outcome arrives: it succeeded.
      const late = await store.recordOutcome(outcome(first, key, 'succeeded'));
      expect(late.operationState).toBe('succeeded');
      const next = await store.decide(reserve(newRun(), longTtl(key), honored));
      expectVerdict(next, 'duplicate');
      expect(next.source?.operationId).toBe(first.operationId);
    });

    it('a late success while the retry is still in flight confirms the key at once', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const honored = { unknownRule: 'honored' } as const;
      const first = await lostReservation(store, key, honored);
      const retry = await store.decide(reserve(newRun(), longTtl(key), honored));
      expectVerdict(retry, 'allow');
      expect((await store.recordOutcome(outcome(first, key, 'succeeded'))).operationState).toBe('succeeded');
      expectVerdict(await store.decide(reserve(newRun(), longTtl(key), honored)), 'duplicate');
      // The retry's own answer (a replay, or a refusal) changes nothing any more.
      expect((await store.recordOutcome(outcome(retry, key, 'failed', { status: 409 }))).operationState).toBe(
        'succeeded',
      );
      expectVerdict(await store.decide(reserve(newRun(), longTtl(key), honored)), 'duplicate');
    });

    it('past the window the lost attempt is still marked, and the proposal is a new operation', async () => {
      const key = newKey({ pendingTtlMs: 50, windowMs: 60 });
      const first = await lostReservation(store, key);
      await sleep(30);
      const fresh = await store.decide(reserve(newRun(), longTtl(key)));
      expectVerdict(fresh, 'allow');
      expect(fresh.operationId).not.toBe(first.operationId);
      expect(await attemptsOf(first.operationId)).toMatchObject([{ dispatch_state: 'sent_no_response' }]);
      expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
      // The new operation's allow names the change; the old operation's own event states it, on
      // its chain, so a projection reading one chain at a time sees it in that operation's order.
      const events = await store.query<{ type: string; operation_id: string; payload: string }>(
        `select type, operation_id, payload from events where operation_id in ('${first.operationId}', '${fresh.operationId}')
          and type in ('decision.allow', 'operation.key_taken') order by recorded_at_us`,
      );
      const byType = new Map(events.map((e) => [`${e.type} ${e.operation_id}`, JSON.parse(e.payload)]));
      expect(byType.get(`decision.allow ${fresh.operationId}`).facts.outcomeLost).toEqual({
        operationId: first.operationId,
        attemptId: first.attemptId,
        statedBy: 'operation.key_taken',
      });
      expect(byType.get(`operation.key_taken ${first.operationId}`)).toMatchObject({
        input: { operationId: first.operationId, takenBy: fresh.operationId, decisionId: fresh.decisionId },
        facts: {
          outcomeLost: {
            marked: true,
            attemptId: first.attemptId,
            stateChange: { from: 'open', to: 'unknown' },
          },
          stateChange: null,
        },
      });
      expect((await verifyStoreChain(store)).ok).toBe(true);
    });

    it('a changed request after a lost reservation is held, never let out as an honored retry', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const honored = { unknownRule: 'honored' } as const;
      const first = await lostReservation(store, key, honored);
      const changed = await store.decide(
        reserve(newRun(), longTtl(key), {
          ...honored,
          request: { ...request, fingerprint: 'sha256:c4a11ed0' },
        }),
      );
      expectVerdict(changed, 'hold');
      expect(changed.operationId).toBe(first.operationId);
    });

    it('an outcome written twice (its first commit lost with the connection) is recorded once', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const input = outcome(first, key, 'succeeded');
      expect((await store.recordOutcome(input)).operationState).toBe('succeeded');
      expect((await store.recordOutcome(input)).operationState).toBe('succeeded');
      const events = await store.query(
        `select type from events where operation_id = '${first.operationId}' and type = 'attempt.outcome'`,
      );
      expect(events).toHaveLength(1);
    });

    it("a decide whose answer was lost is settled as not_sent by the attempt's id", async () => {
      const key = newKey();
      const input = reserve(newRun(), key);
      const first = await store.decide(input);
      expectVerdict(first, 'allow');
      // The gate never heard this allow and sent nothing: it writes the abandonment by attempt id.
      const abandoned = await store.recordOutcome({
        ...outcome(first, key, 'failed'),
        operationId: null,
        dispatchState: 'not_sent',
        status: null,
        responseFingerprint: null,
        error: 'store_lost_at_decide',
      });
      expect(abandoned.operationState).toBe('failed');
      // The key is free again: nothing was sent, so a retry is safe.
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry).toMatchObject({
        operationId: first.operationId,
        retryReason: 'connection_not_established',
      });
    });

    it('an abandoned decide that never committed is a no-op', async () => {
      const res = await store.recordOutcome({
        operationId: null,
        attemptId: uuidv7(),
        decisionId: uuidv7(),
        keyHash: newKey().hash,
        windowMs: 60_000,
        dispatchState: 'not_sent',
        operationState: 'failed',
        status: null,
        responseFingerprint: null,
        destinationRef: null,
        replayed: null,
        durationMs: 0,
        error: 'store_lost_at_decide',
      });
      expect(res.operationState).toBeNull();
    });

    it('recovery reads the unknown rule recorded on the operation (no policies needed)', async () => {
      const key = newKey();
      const instance = `gone-${uuidv7()}`;
      await store.registerInstance(instance);
      const first = await store.decide(
        reserve(newRun(), key, { unknownRule: 'honored', gateInstance: instance }),
      );
      expectVerdict(first, 'allow');
      await store.stopInstance(instance);
      const recovered = await store.recover({
        instanceId: null,
        exclusive: false,
        staleAfterMs: 30_000,
        rules: {},
      });
      const mine = recovered.find((r) => r.attemptId === first.attemptId);
      // honored: no approval request; the next proposal retries with the same key.
      expect(mine).toMatchObject({ operationId: first.operationId, approvalId: null });
      const rows = await store.query(`select unknown_rule from operations where id = '${first.operationId}'`);
      expect(rows).toEqual([{ unknown_rule: 'honored' }]);
    });

    it('a gate that registers again recovers its previous life at once, and only that', async () => {
      const instance = `restarted-${uuidv7()}`;
      const other = `live-${uuidv7()}`;
      await store.registerInstance(instance);
      await store.registerInstance(other);
      const key = newKey();
      const otherKey = newKey();
      const mine = await store.decide(reserve(newRun(), key, { gateInstance: instance }));
      const theirs = await store.decide(reserve(newRun(), otherKey, { gateInstance: other }));
      expectVerdict(mine, 'allow');
      expectVerdict(theirs, 'allow');
      await sleep(5);
      const { previous } = await store.registerInstance(instance);
      expect(previous?.stoppedAt).toBeNull();
      // This life's own attempt, made after the registration, is never touched.
      const now = await store.decide(reserve(newRun(), newKey(), { gateInstance: instance }));
      expectVerdict(now, 'allow');
      const recovered = await store.recover({
        instanceId: instance,
        exclusive: false,
        staleAfterMs: 60_000,
        rules: {},
      });
      expect(recovered.map((r) => r.attemptId)).toEqual([mine.attemptId]);
      expect((await store.getOperation(mine.operationId))?.state).toBe('unknown');
      expect((await store.getOperation(theirs.operationId))?.state).toBe('open');
      expect((await store.getOperation(now.operationId))?.state).toBe('open');
    });

    it('the chain verifies after all of it', async () => {
      const report = await verifyStoreChain(store);
      expect(report.ok, JSON.stringify(report)).toBe(true);
    });
  });
}
