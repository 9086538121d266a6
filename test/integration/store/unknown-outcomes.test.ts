import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DedupeKeyInput, OutcomeInput, ReserveInput, Store } from '../../../src/store/index.js';
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
  scope,
  sleep,
} from './inputs.js';

/**
 * The unknown-outcome protocol of migration 0002 (docs/design.md §3, §4.1): honored retries,
 * reconciliation, approvals, retry lineage, forks, late outcomes and the operations listing.
 */

type Overrides = Partial<Omit<ReserveInput, 'kind'>>;

interface EventRow {
  readonly type: string;
  readonly operationId: string | null;
  // biome-ignore lint/suspicious/noExplicitAny: event payloads are free-form JSON
  readonly payload: any;
}

/** Allow a new operation and record an `unknown` outcome for it (by default `sent_no_response`). */
async function unknownOperation(
  store: Store,
  key: DedupeKeyInput,
  overrides: Overrides = {},
  outcomeOverrides: Partial<OutcomeInput> = {},
): Promise<Allow> {
  const first = await store.decide(reserve(newRun(), key, overrides));
  expectVerdict(first, 'allow');
  const res = await store.recordOutcome(outcome(first, key, 'unknown', outcomeOverrides));
  expect(res.operationState).toBe('unknown');
  return first;
}

/** Every event of one operation's lifecycle, in order (they share one chain). */
async function eventsOf(store: TestStore, operationId: string): Promise<EventRow[]> {
  const rows = await store.query<{ type: string; operation_id: string | null; payload: string }>(
    `select type, operation_id, payload from events where operation_id = '${operationId}' order by chain, seq`,
  );
  return rows.map((r) => ({ type: r.type, operationId: r.operation_id, payload: JSON.parse(r.payload) }));
}

/** The one event a decision appended (found by the decision id in its input). */
async function eventOfDecision(store: TestStore, decisionId: string): Promise<EventRow[]> {
  const rows = await store.query<{ type: string; operation_id: string | null; payload: string }>(
    `select type, operation_id, payload from events
      where type like 'decision.%' and (payload::jsonb -> 'input' ->> 'decisionId') = '${decisionId}'`,
  );
  return rows.map((r) => ({ type: r.type, operationId: r.operation_id, payload: JSON.parse(r.payload) }));
}

async function countRows(store: TestStore, table: string, where = 'true'): Promise<number> {
  // Decisions are projected from the events off the hot path: count them once projected.
  if (table === 'decisions') await store.projectEvents({ wait: true, limit: 1_000_000 });
  const rows = await store.query<{ n: number }>(`select count(*)::int as n from ${table} where ${where}`);
  return Number(rows[0]?.n);
}

async function keyRow(
  store: TestStore,
  key: DedupeKeyInput,
): Promise<{ state: string; operation_id: string; attempt_id: string; attempt_number: number } | undefined> {
  const rows = await store.query<{
    state: string;
    operation_id: string;
    attempt_id: string;
    attempt_number: number;
  }>(
    `select state, operation_id, attempt_id, attempt_number from dedupe_keys where key_hash = '${key.hash}'`,
  );
  return rows[0];
}

for (const target of storeTargets()) {
  describe(`unknown outcomes on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    describe('honored idempotency', () => {
      const honored = { unknownRule: 'honored' } as const;

      it('after sent_no_response the next proposal retries the same operation at once', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key, honored);
        const retry = await store.decide(reserve(newRun(), key, honored));
        expectVerdict(retry, 'allow');
        expect(retry).toMatchObject({
          operationId: first.operationId,
          attemptNumber: 2,
          retryOfAttemptId: first.attemptId,
          retryReason: 'response_lost_after_dispatch',
          retryDecision: 'destination_idempotency_honored',
          supersedesOperationId: null,
        });
        expect(retry.attemptId).not.toBe(first.attemptId);

        const attempts = await store.query(
          `select id, number, remaining_attempts, retry_decision, retry_reason, retry_of_attempt_id
            from attempts where operation_id = '${first.operationId}' order by number`,
        );
        expect(attempts).toEqual([
          {
            id: first.attemptId,
            number: 1,
            remaining_attempts: 2,
            retry_decision: null,
            retry_reason: null,
            retry_of_attempt_id: null,
          },
          {
            id: retry.attemptId,
            number: 2,
            remaining_attempts: 1,
            retry_decision: 'destination_idempotency_honored',
            retry_reason: 'response_lost_after_dispatch',
            retry_of_attempt_id: first.attemptId,
          },
        ]);
        const op = await store.getOperation(first.operationId);
        expect(op?.state).toBe('open');
        expect(op?.attempts[1]).toMatchObject({
          retryDecision: 'destination_idempotency_honored',
          remainingAttempts: 1,
        });
        expect(await keyRow(store, key)).toMatchObject({
          state: 'pending',
          operation_id: first.operationId,
          attempt_id: retry.attemptId,
          attempt_number: 2,
        });

        const allows = (await eventsOf(store, first.operationId)).filter((e) => e.type === 'decision.allow');
        expect(allows).toHaveLength(2);
        expect(allows[0]?.payload.facts.attempt).toMatchObject({
          number: 1,
          fingerprint: request.fingerprint,
          previousFingerprint: null,
        });
        expect(allows[1]?.payload.input.decisionId).toBe(retry.decisionId);
        expect(allows[1]?.payload.facts.attempt).toMatchObject({
          number: 2,
          retryOfAttemptId: first.attemptId,
          retryReason: 'response_lost_after_dispatch',
          retryDecision: 'destination_idempotency_honored',
          attemptBudget: 3,
          remainingAttempts: 1,
          fingerprint: request.fingerprint,
          previousFingerprint: request.fingerprint,
        });
        expect(allows[1]?.payload.facts.operation).toMatchObject({
          opened: false,
          stateChange: { from: 'unknown', to: 'open' },
        });
      });

      it('after a 503 whose outcome is unknown the reason is destination_5xx', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key, honored, {
          dispatchState: 'response_received',
          status: 503,
          error: null,
        });
        const retry = await store.decide(reserve(newRun(), key, honored));
        expectVerdict(retry, 'allow');
        expect(retry).toMatchObject({
          operationId: first.operationId,
          attemptNumber: 2,
          retryOfAttemptId: first.attemptId,
          retryReason: 'destination_5xx',
          retryDecision: 'destination_idempotency_honored',
        });
      });

      it('an exhausted budget blocks and adds no attempt', async () => {
        const key = newKey();
        const opts = { ...honored, retryBudget: 2 };
        const first = await unknownOperation(store, key, opts);
        const second = await store.decide(reserve(newRun(), key, opts));
        expectVerdict(second, 'allow');
        expect(second.attemptNumber).toBe(2);
        await store.recordOutcome(outcome(second, key, 'unknown'));

        const third = await store.decide(reserve(newRun(), key, opts));
        expectVerdict(third, 'block');
        expect(third).toMatchObject({ reason: 'retry_budget_exhausted', operationId: first.operationId });
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(2);
        expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
        expect(await keyRow(store, key)).toMatchObject({ state: 'unknown', attempt_id: second.attemptId });
        expect(await store.getDecision(third.decisionId)).toMatchObject({
          verdict: 'block',
          reason: 'retry_budget_exhausted',
          operationId: first.operationId,
        });
      });

      it('a definite failure of the retry settles nothing: the earlier unknown attempt keeps the operation unknown', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key, honored);
        const retry = await store.decide(reserve(newRun(), key, honored));
        expectVerdict(retry, 'allow');
        // The destination refuses the retry (e.g. the key was reused with another body): 422.
        const res = await store.recordOutcome(outcome(retry, key, 'failed'));
        expect(res.operationState).toBe('unknown');
        expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
        expect(await keyRow(store, key)).toMatchObject({ state: 'unknown', attempt_id: retry.attemptId });
        const events = await store.query<{ payload: string }>(
          `select payload from events where type = 'attempt.outcome' and operation_id = '${first.operationId}' order by recorded_at_us`,
        );
        expect(JSON.parse(events.at(-1)!.payload)).toMatchObject({
          facts: { keptUnknown: true, stateChange: { from: 'open', to: 'unknown' } },
        });
        // The next proposal follows the unknown rules again (honored: attempt 3), never a plain retry.
        const third = await store.decide(reserve(newRun(), key, honored));
        expectVerdict(third, 'allow');
        expect(third).toMatchObject({ attemptNumber: 3, retryDecision: 'destination_idempotency_honored' });
      });
    });

    describe('reconciliation', () => {
      const rec = { unknownRule: 'reconcile' } as const;

      it('the first proposal asks for a lookup and records nothing', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key, rec);
        const events = await countRows(store, 'events');
        const decisions = await countRows(store, 'decisions');
        const input = reserve(newRun(), key, rec);
        const res = await store.decide(input);
        expect(res).toEqual({
          verdict: 'reconcile',
          decisionId: null,
          operationId: first.operationId,
          attemptId: first.attemptId,
        });
        expect(await store.getDecision(input.decisionId)).toBeNull();
        expect(await countRows(store, 'events')).toBe(events);
        expect(await countRows(store, 'decisions')).toBe(decisions);
        expect(await store.listObservations(first.operationId)).toEqual([]);
        expect(await store.listApprovals({ operationId: first.operationId })).toEqual([]);
        expect(await keyRow(store, key)).toMatchObject({ state: 'unknown', attempt_id: first.attemptId });
        expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
      });

      it('one match settles the operation as succeeded and answers duplicate', async () => {
        const key = newKey();
        const firstRun = newRun();
        const first = await store.decide(reserve(firstRun, key, { ...rec, step: 'create' }));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'unknown'));

        const asked = await store.decide(reserve(newRun(), key, rec));
        expectVerdict(asked, 'reconcile');
        const lookup = reconciliation(asked, 'match');
        const run = newRun();
        const settled = await store.decide(reserve(run, key, { ...rec, reconciliation: lookup }));
        expectVerdict(settled, 'duplicate');
        expect(settled).toMatchObject({
          operationId: first.operationId,
          operationState: 'succeeded',
          reconciliation: 'match',
          duplicateSkips: 1,
          source: {
            runId: firstRun,
            step: 'create',
            operationId: first.operationId,
            attemptId: first.attemptId,
            destinationRef: lookup.remoteRefs[0],
          },
        });
        expect(await store.getDecision(settled.decisionId)).toMatchObject({
          verdict: 'duplicate',
          runId: run,
          operationId: first.operationId,
        });

        const op = await store.getOperation(first.operationId);
        expect(op?.state).toBe('succeeded');
        // Reconciliation appends, never rewrites: the attempt keeps its recorded outcome.
        expect(op?.attempts).toHaveLength(1);
        expect(op?.attempts[0]).toMatchObject({ dispatchState: 'sent_no_response', status: null });
        expect(await keyRow(store, key)).toMatchObject({
          state: 'confirmed',
          operation_id: first.operationId,
        });

        const observations = await store.listObservations(first.operationId);
        expect(observations).toHaveLength(1);
        expect(observations[0]).toMatchObject({
          operationId: first.operationId,
          attemptId: first.attemptId,
          kind: 'reconciliation',
          result: 'match',
          decisionId: settled.decisionId,
          facts: {
            endpoint: lookup.endpoint,
            queryFingerprint: lookup.queryFingerprint,
            remoteRefs: lookup.remoteRefs,
            matches: 1,
            status: 200,
          },
        });
        const rows = await store.query(
          `select kind, result from observations where operation_id = '${first.operationId}'`,
        );
        expect(rows).toEqual([{ kind: 'reconciliation', result: 'match' }]);

        const [event] = await eventOfDecision(store, settled.decisionId);
        expect(event?.type).toBe('decision.duplicate');
        expect(event?.payload.facts).toMatchObject({
          observation: { kind: 'reconciliation', result: 'match' },
          operation: { stateChange: { from: 'unknown', to: 'succeeded' } },
        });

        // The key is confirmed: a plain proposal is a duplicate straight away, no lookup.
        const again = await store.decide(reserve(newRun(), key, rec));
        expectVerdict(again, 'duplicate');
        expect(again).toMatchObject({
          operationId: first.operationId,
          operationState: 'succeeded',
          reconciliation: null,
          source: { operationId: first.operationId, destinationRef: lookup.remoteRefs[0] },
        });
      });

      it('two or more matches confirm a duplicate effect and keep every remote reference', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key, rec);
        const lookup = reconciliation(first, 'multiple');
        expect(lookup.remoteRefs).toHaveLength(2);
        const settled = await store.decide(reserve(newRun(), key, { ...rec, reconciliation: lookup }));
        expectVerdict(settled, 'duplicate');
        expect(settled).toMatchObject({
          operationId: first.operationId,
          operationState: 'duplicate_effect_confirmed',
          reconciliation: 'multiple',
          source: { operationId: first.operationId, destinationRef: lookup.remoteRefs[0] },
        });
        expect((await store.getOperation(first.operationId))?.state).toBe('duplicate_effect_confirmed');
        const observations = await store.listObservations(first.operationId);
        expect(observations).toHaveLength(1);
        expect(observations[0]).toMatchObject({
          kind: 'reconciliation',
          result: 'multiple',
          facts: { matches: 2, remoteRefs: lookup.remoteRefs },
        });
        const again = await store.decide(reserve(newRun(), key, rec));
        expectVerdict(again, 'duplicate');
        expect(again.operationState).toBe('duplicate_effect_confirmed');
      });

      it.each(['none', 'inconclusive'] as const)(
        'a %s lookup records a negative observation and holds',
        async (result) => {
          const key = newKey();
          const first = await unknownOperation(store, key, rec);
          const lookup = reconciliation(first, result);
          const held = await store.decide(reserve(newRun(), key, { ...rec, reconciliation: lookup }));
          expectVerdict(held, 'hold');
          expect(held).toMatchObject({
            operationId: first.operationId,
            previousAttemptId: first.attemptId,
            previousDispatchState: 'sent_no_response',
            reconciliation: result,
            lastApproval: null,
          });
          expect((await store.getOperation(first.operationId))?.state).toBe('unknown');
          expect(await keyRow(store, key)).toMatchObject({ state: 'unknown', attempt_id: first.attemptId });
          expect(await store.listObservations(first.operationId)).toMatchObject([
            {
              kind: 'reconciliation',
              result,
              decisionId: held.decisionId,
              facts: { matches: 0, remoteRefs: [], endpoint: lookup.endpoint },
            },
          ]);
          expect(await store.listApprovals({ operationId: first.operationId })).toMatchObject([
            { id: held.approvalId, state: 'requested', previousDispatchState: 'sent_no_response' },
          ]);
          expect(await store.getDecision(held.decisionId)).toMatchObject({
            verdict: 'hold',
            operationId: first.operationId,
          });
          expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(1);
        },
      );
    });

    describe('approvals', () => {
      it('concurrent holds share exactly one requested approval with a full card', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const held = await Promise.all(
          Array.from({ length: 10 }, () => store.decide(reserve(newRun(), key, { unknownRule: 'hold' }))),
        );
        const ids = new Set<string>();
        for (const h of held) {
          expectVerdict(h, 'hold');
          expect(h.operationId).toBe(first.operationId);
          ids.add(h.approvalId);
        }
        expect(ids.size).toBe(1);
        const [approvalId] = [...ids];
        expect(
          await store.query(`select id, state from approvals where operation_id = '${first.operationId}'`),
        ).toEqual([{ id: approvalId, state: 'requested' }]);
        expect(await countRows(store, 'decisions', `operation_id = '${first.operationId}'`)).toBe(11);

        const card = await store.getApproval(approvalId!);
        expect(card).toMatchObject({
          id: approvalId,
          operationId: first.operationId,
          state: 'requested',
          intent: {
            toolId: 'github.create_issue',
            scope,
            keyValues: key.values,
            method: request.method,
            host: request.host,
            path: request.path,
            route: request.route,
            fingerprint: request.fingerprint,
            idempotencyHeader: 'Idempotency-Key',
          },
          previousAttemptId: first.attemptId,
          previousDispatchState: 'sent_no_response',
          previousStatus: null,
          decidedBy: null,
          expiresAt: null,
          usedByAttemptId: null,
        });
        expect(card?.plannedRecovery).toContain(first.operationId);
        expect(card?.plannedRecovery).toContain('#2');
        expect(card?.plannedRecovery).toContain('sent_no_response');
        expect(card?.plannedRecovery).toContain('Idempotency-Key');
        expect(card?.requestedBy).toMatch(/^decision:/);
        expect(
          await store.listApprovals({ state: 'requested', operationId: first.operationId }),
        ).toHaveLength(1);
      });

      it('approve allows exactly one retry; the next unknown outcome needs a new approval', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const held = await store.decide(reserve(newRun(), key));
        expectVerdict(held, 'hold');

        const approved = await store.decideApproval({
          approvalId: held.approvalId,
          action: 'approve',
          by: 'alice@acme.test',
          reason: 'checked: the issue was not created',
          ttlMs: 60_000,
        });
        expect(approved).toMatchObject({
          id: held.approvalId,
          state: 'approved',
          decidedBy: 'alice@acme.test',
          reason: 'checked: the issue was not created',
          usedByAttemptId: null,
        });
        expect(approved.decidedAt).not.toBeNull();
        expect(Date.parse(approved.expiresAt!) - Date.parse(approved.decidedAt!)).toBe(60_000);

        const retry = await store.decide(reserve(newRun(), key));
        expectVerdict(retry, 'allow');
        expect(retry).toMatchObject({
          operationId: first.operationId,
          attemptNumber: 2,
          retryOfAttemptId: first.attemptId,
          retryReason: 'response_lost_after_dispatch',
          retryDecision: 'operator_approved',
          supersedesOperationId: null,
        });
        const used = await store.getApproval(held.approvalId);
        expect(used).toMatchObject({ state: 'used', usedByAttemptId: retry.attemptId });
        expect(used?.usedAt).not.toBeNull();
        const [allowEvent] = await eventOfDecision(store, retry.decisionId);
        expect(allowEvent?.payload.facts.approval).toMatchObject({ id: held.approvalId, state: 'used' });

        // The approval was for ONE retry: while it is in flight, others wait.
        const meanwhile = await store.decide(reserve(newRun(), key));
        expectVerdict(meanwhile, 'pending');
        expect(meanwhile.operationId).toBe(first.operationId);

        await store.recordOutcome(outcome(retry, key, 'unknown'));
        const heldAgain = await store.decide(reserve(newRun(), key));
        expectVerdict(heldAgain, 'hold');
        expect(heldAgain.approvalId).not.toBe(held.approvalId);
        expect(heldAgain).toMatchObject({
          previousAttemptId: retry.attemptId,
          previousDispatchState: 'sent_no_response',
          lastApproval: null,
        });
        expect(await store.listApprovals({ operationId: first.operationId })).toMatchObject(
          expect.arrayContaining([
            expect.objectContaining({ id: held.approvalId, state: 'used' }),
            expect.objectContaining({
              id: heldAgain.approvalId,
              state: 'requested',
              previousAttemptId: retry.attemptId,
            }),
          ]),
        );
        expect(await store.listApprovals({ operationId: first.operationId })).toHaveLength(2);
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(2);
        const card = await store.getApproval(heldAgain.approvalId);
        expect(card?.plannedRecovery).toContain('#3');
      });

      it('deny: the next proposal holds again, naming the denial, with a new request', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const held = await store.decide(reserve(newRun(), key));
        expectVerdict(held, 'hold');
        const denied = await store.decideApproval({
          approvalId: held.approvalId,
          action: 'deny',
          by: 'bob',
          reason: 'the issue exists already',
        });
        expect(denied).toMatchObject({
          state: 'denied',
          decidedBy: 'bob',
          reason: 'the issue exists already',
        });

        const again = await store.decide(reserve(newRun(), key));
        expectVerdict(again, 'hold');
        expect(again.approvalId).not.toBe(held.approvalId);
        expect(again.lastApproval).toEqual({
          id: held.approvalId,
          state: 'denied',
          by: 'bob',
          reason: 'the issue exists already',
        });
        expect(await store.getApproval(again.approvalId)).toMatchObject({ state: 'requested' });
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(1);
      });

      it('revoke: a revoked approval allows nothing', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const held = await store.decide(reserve(newRun(), key));
        expectVerdict(held, 'hold');
        await store.decideApproval({
          approvalId: held.approvalId,
          action: 'approve',
          by: 'alice',
          reason: 'ok',
        });
        const revoked = await store.decideApproval({
          approvalId: held.approvalId,
          action: 'revoke',
          by: 'carol',
          reason: 'changed my mind',
        });
        expect(revoked).toMatchObject({ state: 'revoked', revokedBy: 'carol', decidedBy: 'alice' });
        expect(revoked.revokedAt).not.toBeNull();

        const again = await store.decide(reserve(newRun(), key));
        expectVerdict(again, 'hold');
        expect(again.lastApproval).toMatchObject({ id: held.approvalId, state: 'revoked', by: 'carol' });
        expect(again.approvalId).not.toBe(held.approvalId);
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(1);
      });

      it('an approval past its time reads as expired and allows nothing', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const held = await store.decide(reserve(newRun(), key));
        expectVerdict(held, 'hold');
        await store.decideApproval({
          approvalId: held.approvalId,
          action: 'approve',
          by: 'alice',
          reason: 'quick',
          ttlMs: 1,
        });
        await sleep(20);
        expect(await store.getApproval(held.approvalId)).toMatchObject({ state: 'expired' });
        const expired = await store.listApprovals({ state: 'expired' });
        expect(expired.map((a) => a.id)).toContain(held.approvalId);
        expect((await store.listApprovals({ state: 'approved' })).map((a) => a.id)).not.toContain(
          held.approvalId,
        );

        const again = await store.decide(reserve(newRun(), key));
        expectVerdict(again, 'hold');
        expect(again.lastApproval).toMatchObject({ id: held.approvalId, state: 'expired', by: 'alice' });
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(1);
        await expect(
          store.decideApproval({ approvalId: held.approvalId, action: 'revoke', by: 'x', reason: 'late' }),
        ).rejects.toMatchObject({ code: 'EG_ERR_APPROVAL_STATE' });
      });

      it('refuses unknown ids and actions that do not apply to the state', async () => {
        await expect(
          store.decideApproval({ approvalId: uuidv7(), action: 'approve', by: 'a', reason: 'r' }),
        ).rejects.toMatchObject({ name: 'EffectgateError', code: 'EG_ERR_NOT_FOUND' });

        const key = newKey();
        await unknownOperation(store, key);
        const held = await store.decide(reserve(newRun(), key));
        expectVerdict(held, 'hold');
        await expect(
          store.decideApproval({ approvalId: held.approvalId, action: 'revoke', by: 'a', reason: 'r' }),
        ).rejects.toMatchObject({ code: 'EG_ERR_APPROVAL_STATE' });
        await store.decideApproval({ approvalId: held.approvalId, action: 'approve', by: 'a', reason: 'r' });
        await expect(
          store.decideApproval({ approvalId: held.approvalId, action: 'approve', by: 'a', reason: 'again' }),
        ).rejects.toMatchObject({ code: 'EG_ERR_APPROVAL_STATE' });
        const retry = await store.decide(reserve(newRun(), key));
        expectVerdict(retry, 'allow');
        expect(await store.getApproval(held.approvalId)).toMatchObject({ state: 'used' });
        await expect(
          store.decideApproval({ approvalId: held.approvalId, action: 'deny', by: 'a', reason: 'r' }),
        ).rejects.toMatchObject({ code: 'EG_ERR_APPROVAL_STATE' });
        await expect(
          store.decideApproval({ approvalId: held.approvalId, action: 'revoke', by: 'a', reason: 'r' }),
        ).rejects.toMatchObject({ code: 'EG_ERR_APPROVAL_STATE' });
        // Refused actions change nothing.
        expect(await store.getApproval(held.approvalId)).toMatchObject({
          state: 'used',
          usedByAttemptId: retry.attemptId,
          reason: 'r',
        });
      });

      it('every approval action appends one approval.<to> event and the chain verifies', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const a = await store.decide(reserve(newRun(), key));
        expectVerdict(a, 'hold');
        await store.decideApproval({ approvalId: a.approvalId, action: 'deny', by: 'u1', reason: 'no' });
        const b = await store.decide(reserve(newRun(), key));
        expectVerdict(b, 'hold');
        await store.decideApproval({ approvalId: b.approvalId, action: 'approve', by: 'u2', reason: 'yes' });
        await store.decideApproval({ approvalId: b.approvalId, action: 'revoke', by: 'u3', reason: 'stop' });
        const c = await store.decide(reserve(newRun(), key));
        expectVerdict(c, 'hold');
        await store.decideApproval({ approvalId: c.approvalId, action: 'approve', by: 'u4', reason: 'go' });

        const approvalEvents = (await eventsOf(store, first.operationId)).filter((e) =>
          e.type.startsWith('approval.'),
        );
        expect(approvalEvents.map((e) => [e.type, e.payload.facts.approvalId, e.payload.input.by])).toEqual([
          ['approval.denied', a.approvalId, 'u1'],
          ['approval.approved', b.approvalId, 'u2'],
          ['approval.revoked', b.approvalId, 'u3'],
          ['approval.approved', c.approvalId, 'u4'],
        ]);
        expect(approvalEvents.map((e) => [e.payload.facts.from, e.payload.facts.to])).toEqual([
          ['requested', 'denied'],
          ['requested', 'approved'],
          ['approved', 'revoked'],
          ['requested', 'approved'],
        ]);
        const report = await verifyStoreChain(store);
        expect(report.firstBad).toBeUndefined();
        expect(report.ok).toBe(true);
      });
    });

    describe('concurrent proposals for one unknown operation', () => {
      it('honored: exactly one proposal retries, the others wait', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key, { unknownRule: 'honored' });
        const results = await Promise.all(
          Array.from({ length: 10 }, () =>
            store.decide(reserve(newRun(), key, { unknownRule: 'honored', recordPending: false })),
          ),
        );
        const allows = results.filter((r) => r.verdict === 'allow');
        expect(allows, JSON.stringify(results)).toHaveLength(1);
        expect(allows[0]).toMatchObject({ operationId: first.operationId, attemptNumber: 2 });
        expect(results.filter((r) => r.verdict === 'pending')).toHaveLength(9);
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(2);
      });

      it('approved: the approval is used by exactly one retry, the others wait', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const held = await store.decide(reserve(newRun(), key));
        expectVerdict(held, 'hold');
        await store.decideApproval({
          approvalId: held.approvalId,
          action: 'approve',
          by: 'alice',
          reason: 'ok',
        });
        const results = await Promise.all(
          Array.from({ length: 10 }, () => store.decide(reserve(newRun(), key, { recordPending: false }))),
        );
        const allows = results.filter((r) => r.verdict === 'allow');
        expect(allows, JSON.stringify(results)).toHaveLength(1);
        expect(allows[0]).toMatchObject({ retryDecision: 'operator_approved', attemptNumber: 2 });
        expect(results.filter((r) => r.verdict === 'pending')).toHaveLength(9);
        expect(await store.getApproval(held.approvalId)).toMatchObject({
          state: 'used',
          usedByAttemptId: (allows[0] as Allow).attemptId,
        });
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(2);
      });

      it('concurrent holds: exactly one hold event says it created the approval request', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key);
        const held = await Promise.all(
          Array.from({ length: 10 }, () => store.decide(reserve(newRun(), key))),
        );
        const created: boolean[] = [];
        for (const h of held) {
          expectVerdict(h, 'hold');
          const [event] = await eventOfDecision(store, h.decisionId);
          expect(event?.type).toBe('decision.hold');
          expect(event?.payload.facts.approval.id).toBe(h.approvalId);
          expect(event?.payload.facts.previousAttempt).toMatchObject({
            id: first.attemptId,
            dispatchState: 'sent_no_response',
          });
          created.push(event?.payload.facts.approval.created);
        }
        expect(created.filter(Boolean)).toHaveLength(1);
      });
    });

    it('lastApproval names the last decided approval only while that one was denied, revoked or expired', async () => {
      // types.ts: "The last decided approval of this operation when it was denied, revoked or
      // expired; else null." A denial followed by an approval that was used is not the last word.
      const key = newKey();
      const first = await unknownOperation(store, key);
      const a = await store.decide(reserve(newRun(), key));
      expectVerdict(a, 'hold');
      await store.decideApproval({ approvalId: a.approvalId, action: 'deny', by: 'bob', reason: 'not yet' });
      const b = await store.decide(reserve(newRun(), key));
      expectVerdict(b, 'hold');
      expect(b.lastApproval).toMatchObject({ id: a.approvalId, state: 'denied' });
      await store.decideApproval({ approvalId: b.approvalId, action: 'approve', by: 'alice', reason: 'now' });
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry.retryDecision).toBe('operator_approved');
      await store.recordOutcome(outcome(retry, key, 'unknown'));

      const c = await store.decide(reserve(newRun(), key));
      expectVerdict(c, 'hold');
      expect(c.operationId).toBe(first.operationId);
      expect(c.approvalId).not.toBe(b.approvalId);
      expect(c.lastApproval).toBeNull();
    });

    describe('retry lineage', () => {
      it('a client-claimed operator_requested retry after a failure', async () => {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'failed', { status: 503 }));
        const retry = await store.decide(reserve(newRun(), key, { clientRetryReason: 'operator_requested' }));
        expectVerdict(retry, 'allow');
        expect(retry).toMatchObject({
          operationId: first.operationId,
          attemptNumber: 2,
          retryOfAttemptId: first.attemptId,
          retryReason: 'operator_requested',
          retryDecision: 'previous_attempt_failed',
        });
      });

      it('a changed authority reference is credential_refreshed', async () => {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'failed', { status: 401 }));
        const retry = await store.decide(
          reserve(newRun(), key, { request: { ...request, authorityRef: 'hmac:rotated-token' } }),
        );
        expectVerdict(retry, 'allow');
        expect(retry).toMatchObject({
          operationId: first.operationId,
          retryReason: 'credential_refreshed',
          retryDecision: 'previous_attempt_failed',
          supersedesOperationId: null,
        });
        const op = await store.getOperation(first.operationId);
        expect(op?.attempts.map((a) => a.request.authorityRef)).toEqual([
          'github-token-label',
          'hmac:rotated-token',
        ]);
      });

      it.each([
        ['response_received', 429, 'rate_limited'],
        ['not_sent', null, 'connection_not_established'],
      ] as const)('after a failed %s (status %s) the reason is %s', async (dispatchState, status, reason) => {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'failed', { dispatchState, status }));
        const retry = await store.decide(reserve(newRun(), key));
        expectVerdict(retry, 'allow');
        expect(retry).toMatchObject({
          retryOfAttemptId: first.attemptId,
          retryReason: reason,
          retryDecision: 'previous_attempt_failed',
        });
        const rows = await store.query(
          `select retry_reason, retry_decision, remaining_attempts from attempts where id = '${retry.attemptId}'`,
        );
        expect(rows).toEqual([
          { retry_reason: reason, retry_decision: 'previous_attempt_failed', remaining_attempts: 1 },
        ]);
      });

      it('a lost reservation (pending past its TTL) is no free key: the retry follows the unknown rule', async () => {
        // The whole contract is in expired-reservations.test.ts; here, its place in the lineage.
        const key = newKey({ pendingTtlMs: 50 });
        const first = await store.decide(reserve(newRun(), key, { unknownRule: 'honored' }));
        expectVerdict(first, 'allow');
        await sleep(80);
        const retry = await store.decide(
          reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { unknownRule: 'honored' }),
        );
        expectVerdict(retry, 'allow');
        expect(retry).toMatchObject({
          operationId: first.operationId,
          attemptNumber: 2,
          retryOfAttemptId: first.attemptId,
          retryReason: 'response_lost_after_dispatch',
          retryDecision: 'destination_idempotency_honored',
        });
      });
    });

    describe('forks: a materially changed request is a new operation', () => {
      const changed = { ...request, fingerprint: 'sha256:c4a11ed0' };

      it('a released key with a changed request forks a new operation that supersedes the old one', async () => {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'failed', { status: 500 }));
        const fork = await store.decide(reserve(newRun(), key, { request: changed }));
        expectVerdict(fork, 'allow');
        expect(fork.operationId).not.toBe(first.operationId);
        expect(fork).toMatchObject({
          attemptNumber: 1,
          retryOfAttemptId: null,
          retryReason: null,
          retryDecision: null,
          supersedesOperationId: first.operationId,
        });
        const op = await store.getOperation(fork.operationId);
        expect(op).toMatchObject({
          state: 'open',
          supersedesOperationId: first.operationId,
          keyHash: key.hash,
        });
        expect(op?.attempts.map((a) => [a.number, a.request.fingerprint])).toEqual([
          [1, changed.fingerprint],
        ]);
        const old = await store.getOperation(first.operationId);
        expect(old).toMatchObject({ state: 'failed', supersedesOperationId: null });
        expect(old?.attempts).toHaveLength(1);
        expect(await keyRow(store, key)).toMatchObject({
          state: 'pending',
          operation_id: fork.operationId,
          attempt_number: 1,
        });
        const [event] = await eventOfDecision(store, fork.decisionId);
        expect(event?.payload.facts.operation).toMatchObject({
          opened: true,
          supersedesOperationId: first.operationId,
        });
      });

      it("a fork is not blocked by the old operation's spent budget", async () => {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key, { retryBudget: 1 }));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, key, 'failed'));
        const same = await store.decide(reserve(newRun(), key, { retryBudget: 1 }));
        expectVerdict(same, 'block');
        expect(same.reason).toBe('retry_budget_exhausted');
        const fork = await store.decide(reserve(newRun(), key, { retryBudget: 1, request: changed }));
        expectVerdict(fork, 'allow');
        expect(fork).toMatchObject({ attemptNumber: 1, supersedesOperationId: first.operationId });
        expect(fork.operationId).not.toBe(first.operationId);
      });

      it('an unknown key with a changed request is never an honored retry: hold, then a fork once approved', async () => {
        const key = newKey();
        const first = await unknownOperation(store, key, { unknownRule: 'honored' });
        const held = await store.decide(reserve(newRun(), key, { unknownRule: 'honored', request: changed }));
        expectVerdict(held, 'hold');
        expect(held).toMatchObject({ operationId: first.operationId, previousAttemptId: first.attemptId });
        expect(await countRows(store, 'attempts', `operation_id = '${first.operationId}'`)).toBe(1);

        await store.decideApproval({
          approvalId: held.approvalId,
          action: 'approve',
          by: 'alice',
          reason: 'ok',
        });
        const fork = await store.decide(reserve(newRun(), key, { unknownRule: 'honored', request: changed }));
        expectVerdict(fork, 'allow');
        expect(fork.operationId).not.toBe(first.operationId);
        expect(fork).toMatchObject({ attemptNumber: 1, supersedesOperationId: first.operationId });
        expect(await store.getOperation(fork.operationId)).toMatchObject({
          state: 'open',
          supersedesOperationId: first.operationId,
        });
        const old = await store.getOperation(first.operationId);
        expect(old?.state).toBe('unknown');
        expect(old?.attempts).toHaveLength(1);
        expect(await store.getApproval(held.approvalId)).toMatchObject({
          state: 'used',
          usedByAttemptId: fork.attemptId,
        });
      });
    });

    it('a late outcome of an attempt marked by recovery is accepted and a success confirms the key', async () => {
      const instance = `gate-late-${uuidv7()}`;
      await store.registerInstance(instance);
      const key = newKey();
      const run = newRun();
      const allow = await store.decide(
        reserve(run, key, { gateInstance: instance, deadlineMs: 60_000, unknownRule: 'honored' }),
      );
      expectVerdict(allow, 'allow');
      await store.stopInstance(instance);
      const recovered = await store.recover({
        instanceId: null,
        exclusive: false,
        staleAfterMs: 60_000,
        rules: {},
      });
      expect(recovered).toEqual([
        {
          operationId: allow.operationId,
          attemptId: allow.attemptId,
          toolId: 'github.create_issue',
          approvalId: null,
          rule: 'honored',
        },
      ]);
      expect((await store.getOperation(allow.operationId))?.state).toBe('unknown');

      const late = await store.recordOutcome(outcome(allow, key, 'succeeded'));
      expect(late.operationState).toBe('succeeded');
      const op = await store.getOperation(allow.operationId);
      expect(op?.state).toBe('succeeded');
      expect(op?.attempts[0]).toMatchObject({ dispatchState: 'response_received', status: 201 });
      expect(op?.attempts[0]?.recoveredAt).not.toBeNull();
      expect(op?.attempts[0]?.finishedAt).not.toBeNull();
      const outcomes = (await eventsOf(store, allow.operationId)).filter((e) => e.type === 'attempt.outcome');
      expect(outcomes).toHaveLength(1);
      expect(outcomes[0]?.payload.facts).toMatchObject({
        late: true,
        stateChange: { from: 'unknown', to: 'succeeded' },
        key: { state: 'confirmed' },
      });

      const dup = await store.decide(reserve(newRun(), key));
      expectVerdict(dup, 'duplicate');
      expect(dup.source).toMatchObject({
        runId: run,
        operationId: allow.operationId,
        attemptId: allow.attemptId,
        destinationRef: 'https://github.com/acme/app/issues/1',
      });
      // Only one late outcome: the attempt now has one.
      await expect(store.recordOutcome(outcome(allow, key, 'failed'))).rejects.toThrow(
        /already has an outcome/,
      );
    });

    it('a late unknown outcome does not undo what reconciliation settled', async () => {
      const instance = `gate-slow-${uuidv7()}`;
      await store.registerInstance(instance);
      const key = newKey();
      const rec = { unknownRule: 'reconcile' } as const;
      const allow = await store.decide(reserve(newRun(), key, { ...rec, gateInstance: instance }));
      expectVerdict(allow, 'allow');
      await store.stopInstance(instance);
      const recovered = await store.recover({
        instanceId: null,
        exclusive: false,
        staleAfterMs: 60_000,
        rules: { 'github.create_issue': 'reconcile' },
      });
      expect(recovered.map((r) => r.attemptId)).toEqual([allow.attemptId]);
      const asked = await store.decide(reserve(newRun(), key, rec));
      expectVerdict(asked, 'reconcile');
      const settled = await store.decide(
        reserve(newRun(), key, { ...rec, reconciliation: reconciliation(asked, 'match') }),
      );
      expectVerdict(settled, 'duplicate');
      expect((await store.getOperation(allow.operationId))?.state).toBe('succeeded');

      // The slow gate's dispatch finally timed out: no new evidence about the effect.
      const late = await store.recordOutcome(outcome(allow, key, 'unknown'));
      expect(late.operationState).toBe('succeeded');
      expect((await store.getOperation(allow.operationId))?.state).toBe('succeeded');
      expect(await keyRow(store, key)).toMatchObject({ state: 'confirmed' });
      const dup = await store.decide(reserve(newRun(), key, rec));
      expectVerdict(dup, 'duplicate');
      expect(dup.operationState).toBe('succeeded');
    });

    it('an ordinary outcome is not late', async () => {
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'succeeded'));
      const [event] = (await eventsOf(store, allow.operationId)).filter((e) => e.type === 'attempt.outcome');
      expect(event?.payload.facts.late).toBe(false);
    });

    it('the chain verifies after all of that', async () => {
      const report = await verifyStoreChain(store);
      expect(report.firstBad).toBeUndefined();
      expect(report.ok).toBe(true);
    });
  });

  describe(`listing operations on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    async function make(
      state: 'open' | 'succeeded' | 'failed' | 'unknown',
      overrides: Overrides = {},
      keyed = true,
    ): Promise<string> {
      const key = keyed ? newKey() : null;
      const allow = await store.decide(reserve(newRun(), key, overrides));
      expectVerdict(allow, 'allow');
      if (state !== 'open') await store.recordOutcome(outcome(allow, key, state));
      await sleep(5); // distinct creation times for the `since` filter
      return allow.operationId;
    }

    it('lists exactly the unknown operations, counts per state, and filters', async () => {
      const other = 'jira.create_ticket';
      const globex = { ...scope, tenant: 'globex' };
      const succeeded = await make('succeeded');
      const failed = await make('failed');
      const unknownA = await make('unknown');
      const open = await make('open');
      const unknownB = await make('unknown', { toolId: other });
      const unknownC = await make('unknown', { scope: globex });
      const unknownD = await make('unknown', {}, false);
      const late = await make('succeeded', { toolId: other });

      const unknown = await store.listOperations({ state: 'unknown' });
      expect(unknown.map((o) => o.id).sort()).toEqual([unknownA, unknownB, unknownC, unknownD].sort());
      expect(unknown.every((o) => o.state === 'unknown')).toBe(true);
      // Newest first.
      expect(unknown.map((o) => o.id)).toEqual([unknownD, unknownC, unknownB, unknownA]);
      expect(unknown[0]?.attempts).toHaveLength(1);

      expect(await store.countOperations()).toEqual({ succeeded: 2, failed: 1, unknown: 4, open: 1 });
      expect(await store.countOperations({ toolId: other })).toEqual({ unknown: 1, succeeded: 1 });
      expect(await store.countOperations({ tenant: 'globex' })).toEqual({ unknown: 1 });

      expect((await store.listOperations({ state: 'unknown', toolId: other })).map((o) => o.id)).toEqual([
        unknownB,
      ]);
      expect((await store.listOperations({ state: 'unknown', tenant: 'globex' })).map((o) => o.id)).toEqual([
        unknownC,
      ]);
      expect(
        (await store.listOperations({ state: 'unknown', tenant: 'acme' })).map((o) => o.id).sort(),
      ).toEqual([unknownA, unknownB, unknownD].sort());
      expect((await store.listOperations({ toolId: other })).map((o) => o.id)).toEqual([late, unknownB]);

      const since = (await store.getOperation(unknownB))!.createdAt;
      expect((await store.listOperations({ since })).map((o) => o.id)).toEqual([
        late,
        unknownD,
        unknownC,
        unknownB,
      ]);
      expect((await store.listOperations({ state: 'unknown', since })).map((o) => o.id)).toEqual([
        unknownD,
        unknownC,
        unknownB,
      ]);
      expect(await store.countOperations({ since })).toEqual({ unknown: 3, succeeded: 1 });
      expect(
        await store.listOperations({ state: 'unknown', since: new Date(Date.now() + 60_000).toISOString() }),
      ).toEqual([]);
      expect(await store.listOperations({ state: 'cancelled' })).toEqual([]);
      expect((await store.listOperations()).map((o) => o.id)).toEqual([
        late,
        unknownD,
        unknownC,
        unknownB,
        open,
        unknownA,
        failed,
        succeeded,
      ]);
    });
  });
}
