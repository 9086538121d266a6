/**
 * MCP input_required continuations when things go wrong (docs/design.md §2, §3, §4.1): late
 * answers, lost reservations, dead gates, lookups, approvals, races, forks and windows around an
 * awaiting_input key. Each case is one sequence of store calls that could let a continuation go
 * out while an attempt that may have run has no outcome, or make the trail say something false.
 * Written by a hostile review of the change; the first five cases failed before their fixes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DedupeKeyInput, OutcomeInput } from '../../../src/store/index.js';
import { uuidv7 } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import {
  type Allow,
  expectVerdict,
  newKey,
  newRun,
  outcome,
  reconciliation,
  recoverInput,
  request,
  reserve,
  sleep,
} from './inputs.js';

for (const target of storeTargets()) {
  describe(`input_required continuations under attack on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    const askedForInput = (allow: Allow, key: DedupeKeyInput | null, overrides: Partial<OutcomeInput> = {}) =>
      outcome(allow, key, 'open', {
        status: 200,
        error: 'MCP input_required: the tool asked for input; the call continues as the same operation',
        ...overrides,
      });

    const keyRow = async (hash: string) =>
      (
        await store.query<{
          state: string;
          attempt_number: number;
          input_rounds: number;
          operation_id: string;
        }>(
          `select state, attempt_number, input_rounds, operation_id from dedupe_keys where key_hash = '${hash}'`,
        )
      )[0];
    const opState = async (id: string) =>
      (await store.query<{ state: string }>(`select state from operations where id = '${id}'`))[0]?.state;
    const attemptRow = async (id: string) =>
      (
        await store.query<{
          number: number;
          retry_reason: string | null;
          retry_decision: string | null;
          remaining_attempts: number;
          retry_of_attempt_id: string | null;
        }>(
          `select number, retry_reason, retry_decision, remaining_attempts, retry_of_attempt_id
           from attempts where id = '${id}'`,
        )
      )[0];
    const allowFacts = async (decisionId: string) => {
      const [row] = await store.query<{ payload: string }>(
        `select payload from events where type = 'decision.allow'
           and payload like '%"decisionId":"${decisionId}"%'`,
      );
      return (JSON.parse(row!.payload) as { facts: { attempt: Record<string, unknown> } }).facts;
    };

    it('answers duplicate when a lookup found the effect, even if a late input_required made the key awaiting_input meanwhile', async () => {
      // The gate lost track of attempt 1 (its reservation expired). The next proposal is answered
      // `reconcile`; while the gate looks, attempt 1's late answer (input_required) arrives and
      // moves the key to awaiting_input. The lookup FOUND the item. eg_decide (c3) promises "never
      // an allow right after the gate saw the item exists" for a key a late outcome released; an
      // awaiting_input key skips (c3) and eg_continue allows a continuation that may create it again.
      const key = newKey({ pendingTtlMs: 40 });
      const rules = { unknownRule: 'reconcile' as const };
      const first = await store.decide(reserve(newRun(), key, rules));
      expectVerdict(first, 'allow');
      await sleep(80);
      const look = await store.decide(reserve(newRun(), key, rules));
      expectVerdict(look, 'reconcile');
      const late = await store.recordOutcome(askedForInput(first, key));
      expect(late.operationState).toBe('open');
      expect((await keyRow(key.hash))!.state).toBe('awaiting_input');

      const after = await store.decide(
        reserve(newRun(), key, {
          ...rules,
          reconciliation: reconciliation(
            { operationId: first.operationId, attemptId: first.attemptId },
            'match',
          ),
        }),
      );
      expectVerdict(after, 'duplicate');
      expect(after).toMatchObject({ operationId: first.operationId, reconciliation: 'match' });
      expect(await opState(first.operationId)).toBe('succeeded');
    });

    it('answers duplicate on a lookup match after the recovered attempt of a dead gate answered input_required late', async () => {
      const key = newKey();
      const rules = { unknownRule: 'reconcile' as const };
      const gate = `gate-dead-${uuidv7()}`;
      await store.registerInstance(gate);
      const first = await store.decide(
        reserve(newRun(), key, { ...rules, gateInstance: gate, deadlineMs: 60_000 }),
      );
      expectVerdict(first, 'allow');
      await store.stopInstance(gate);
      const recovered = await store.recover(recoverInput({ rules: { 'github.create_issue': 'reconcile' } }));
      expect(recovered.map((r) => r.attemptId)).toContain(first.attemptId);
      expect((await keyRow(key.hash))!.state).toBe('unknown');

      const look = await store.decide(reserve(newRun(), key, rules));
      expectVerdict(look, 'reconcile');
      await store.recordOutcome(askedForInput(first, key)); // the dead gate was only slow
      expect((await keyRow(key.hash))!.state).toBe('awaiting_input');
      const after = await store.decide(
        reserve(newRun(), key, {
          ...rules,
          reconciliation: reconciliation(
            { operationId: first.operationId, attemptId: first.attemptId },
            'match',
          ),
        }),
      );
      expectVerdict(after, 'duplicate');
      expect(after.operationId).toBe(first.operationId);
    });

    it('withdraws an approval once a late input_required showed its attempt did not run: a later unknown attempt is held again', async () => {
      // Attempt 1 is lost (pending_ttl), held, and an operator approves a retry of IT. Before the
      // agent comes back, attempt 1's late answer (input_required) arrives: the operation is open
      // again. eg_withdraw_approvals withdraws only `requested` cards, so the approved card stays.
      // The continuation (attempt 2) is then sent without a response: it may have done the effect.
      // The next proposal must be held for a person who knows about attempt 2; instead the stale
      // card (previous_attempt_id = attempt 1) lets attempt 3 go at once as operator_approved.
      const key = newKey({ pendingTtlMs: 40 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await sleep(80);
      const held = await store.decide(reserve(newRun(), key, { key: { ...key, pendingTtlMs: 120_000 } }));
      expectVerdict(held, 'hold');
      await store.decideApproval({
        approvalId: held.approvalId,
        action: 'approve',
        by: 'alice',
        reason: 'checked: attempt 1 created nothing',
        ttlMs: 600_000,
      });
      await store.recordOutcome(askedForInput(first, key));
      expect((await keyRow(key.hash))!.state).toBe('awaiting_input');
      const longKey = { ...key, pendingTtlMs: 120_000 };
      const cont = await store.decide(reserve(newRun(), longKey));
      expectVerdict(cont, 'allow');
      expect(cont.retryDecision).toBe('input_continuation');
      await store.recordOutcome(outcome(cont, longKey, 'unknown')); // the continuation timed out

      const next = await store.decide(reserve(newRun(), longKey));
      expectVerdict(next, 'hold');
      expect(next.previousAttemptId).toBe(cont.attemptId);
      const [card] = await store.query<{ state: string }>(
        `select state from approvals where id = '${held.approvalId}'`,
      );
      expect(card!.state, 'the card approved a retry of attempt 1, which turned out not to have run').toBe(
        'withdrawn',
      );
    });

    it('cancels the operation that awaited input when a changed request forks from it', async () => {
      // Nothing can continue or settle the old operation once its key belongs to the fork, and none
      // of its attempts ran the tool: open (in flight, in the unresolved gauge) would be a lie.
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const changed = await store.decide(
        reserve(newRun(), key, { request: { ...request, fingerprint: 'sha256:another-body' } }),
      );
      expectVerdict(changed, 'allow');
      expect(changed).toMatchObject({ attemptNumber: 1, supersedesOperationId: first.operationId });
      expect(changed.operationId).not.toBe(first.operationId);
      expect(await keyRow(key.hash)).toMatchObject({ state: 'pending', input_rounds: 0 });
      expect(await opState(first.operationId)).toBe('cancelled');
      const [event] = await store.query<{ payload: string }>(
        `select payload from events where type = 'decision.allow' and operation_id = '${changed.operationId}'`,
      );
      expect(JSON.parse(event!.payload)).toMatchObject({
        facts: {
          operation: { opened: true, supersedesOperationId: first.operationId },
          closedOperation: { id: first.operationId, statedBy: 'operation.key_taken' },
        },
      });
      // The cancellation itself is told by the old operation's own event, on its chain.
      const [taken] = await store.query<{ payload: string }>(
        `select payload from events where type = 'operation.key_taken' and operation_id = '${first.operationId}'`,
      );
      expect(JSON.parse(taken!.payload)).toMatchObject({
        input: { operationId: first.operationId, takenBy: changed.operationId, keyHash: key.hash },
        facts: { stateChange: { from: 'open', to: 'cancelled' }, outcomeLost: null },
      });
      expect((await verifyStoreChain(store)).ok).toBe(true);
    });

    it('cancels an input_required operation of a tool without a key: nothing can continue it', async () => {
      const first = await store.decide(reserve(newRun(), null));
      expectVerdict(first, 'allow');
      const settled = await store.recordOutcome(askedForInput(first, null));
      expect(settled.operationState).toBe('cancelled');
      expect(await opState(first.operationId)).toBe('cancelled');
    });

    it('cancels the operation that awaited input when a new window starts a new one', async () => {
      const key = newKey({ windowMs: 40 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      await sleep(80);
      const later = await store.decide(reserve(newRun(), key));
      expectVerdict(later, 'allow');
      expect(later.operationId).not.toBe(first.operationId);
      expect(later.supersedesOperationId).toBeNull();
      expect(await opState(first.operationId)).toBe('cancelled');
    });

    it('a continuation whose reservation expires is lost, not free; its late input_required lets the call go on', async () => {
      const key = newKey({ pendingTtlMs: 40 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const cont = await store.decide(reserve(newRun(), key));
      expectVerdict(cont, 'allow');
      await sleep(80);
      const held = await store.decide(reserve(newRun(), key));
      expectVerdict(held, 'hold');
      expect(await opState(first.operationId)).toBe('unknown');
      expect((await keyRow(key.hash))!.state).toBe('unknown');
      // The late answer of the continuation: input_required again (no effect).
      await store.recordOutcome(askedForInput(cont, key));
      expect((await keyRow(key.hash))!.state).toBe('awaiting_input');
      expect(await opState(first.operationId)).toBe('open');
      const cont2 = await store.decide(reserve(newRun(), key));
      expectVerdict(cont2, 'allow');
      expect(cont2).toMatchObject({
        attemptNumber: 3,
        retryOfAttemptId: cont.attemptId,
        retryDecision: 'input_continuation',
      });
      expect((await verifyStoreChain(store)).ok).toBe(true);
    });

    it('a continuation whose reservation expires under on_expired: retry is an accepted risk, and its input_required then stays unknown', async () => {
      const key = newKey({ pendingTtlMs: 40 });
      const opts = { onExpired: 'retry' as const };
      const first = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const cont = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(cont, 'allow');
      await sleep(80);
      const risky = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(risky, 'allow');
      expect(risky).toMatchObject({
        attemptNumber: 3,
        retryDecision: 'curator_accepted_risk',
        retryOfAttemptId: cont.attemptId,
      });
      // attempt 1 asked (spent 1), attempt 2 continued (spent 0), attempt 3 spent 1: 3 - 2 = 1 left.
      expect((await attemptRow(risky.attemptId))!.remaining_attempts).toBe(1);
      expect((await allowFacts(risky.decisionId)).attempt['remainingAttempts']).toBe(1);
      const settled = await store.recordOutcome(askedForInput(risky, key));
      expect(settled.operationState).toBe('unknown');
      expect((await keyRow(key.hash))!.state).toBe('unknown');
      const again = await store.decide(reserve(newRun(), key, opts));
      expect(['hold', 'block']).toContain(again.verdict);
    });

    it('an approved retry answered input_required keeps the key unknown (no clean continuation over a lost attempt)', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'unknown'));
      const held = await store.decide(reserve(newRun(), key));
      expectVerdict(held, 'hold');
      await store.decideApproval({
        approvalId: held.approvalId,
        action: 'approve',
        by: 'a',
        reason: 'ok',
        ttlMs: 600_000,
      });
      const retry = await store.decide(reserve(newRun(), key));
      expectVerdict(retry, 'allow');
      expect(retry.retryDecision).toBe('operator_approved');
      const r = await store.recordOutcome(askedForInput(retry, key));
      expect(r.operationState).toBe('unknown');
      expect((await keyRow(key.hash))!.state).toBe('unknown');
      expectVerdict(await store.decide(reserve(newRun(), key)), 'hold');
    });

    it('a continuation recovered after its gate died is unknown and held; a late success still confirms it', async () => {
      const key = newKey();
      const gate = `gate-dead-${uuidv7()}`;
      await store.registerInstance(gate);
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const cont = await store.decide(reserve(newRun(), key, { gateInstance: gate, deadlineMs: 60_000 }));
      expectVerdict(cont, 'allow');
      await store.stopInstance(gate);
      const recovered = await store.recover(recoverInput({ rules: { 'github.create_issue': 'hold' } }));
      expect(recovered.map((x) => x.attemptId)).toContain(cont.attemptId);
      expect((await keyRow(key.hash))!.state).toBe('unknown');
      expectVerdict(await store.decide(reserve(newRun(), key)), 'hold');
      await store.recordOutcome(outcome(cont, key, 'succeeded', { status: 200 }));
      expect((await keyRow(key.hash))!.state).toBe('confirmed');
      expect(await opState(first.operationId)).toBe('succeeded');
      expectVerdict(await store.decide(reserve(newRun(), key)), 'duplicate');
    });

    it('a continuation racing a changed request: exactly one goes, the key has one owner', async () => {
      for (let i = 0; i < 5; i++) {
        const key = newKey();
        const first = await store.decide(reserve(newRun(), key));
        expectVerdict(first, 'allow');
        await store.recordOutcome(askedForInput(first, key));
        const results = await Promise.all([
          store.decide(reserve(newRun(), key)),
          store.decide(reserve(newRun(), key, { request: { ...request, fingerprint: 'sha256:changed' } })),
          store.decide(reserve(newRun(), key)),
        ]);
        const allows = results.filter((x) => x.verdict === 'allow');
        expect(allows, JSON.stringify(results)).toHaveLength(1);
        const row = await keyRow(key.hash);
        expect(row!.state).toBe('pending');
        expect(row!.operation_id).toBe((allows[0] as Allow).operationId);
      }
    });

    it('a continuation racing the repeated (idempotent) write of the outcome that asked for input', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const asked = askedForInput(first, key);
      await store.recordOutcome(asked);
      const [cont, again] = await Promise.all([
        store.decide(reserve(newRun(), key)),
        store.recordOutcome(asked),
      ]);
      expectVerdict(cont, 'allow');
      expect(again).toMatchObject({ alreadyRecorded: true });
      expect((await keyRow(key.hash))!.state).toBe('pending');
    });

    it('refuses a second, different outcome for the attempt that asked for input (same status, another answer)', async () => {
      // eg_record_outcome's idempotency check compares only dispatch_state and status. input_required,
      // a success, a JSON-RPC error and a 2xx without this id's response are all (response_received, 200)
      // for an MCP tool, so a second, different outcome for one attempt is answered alreadyRecorded
      // (operationState open) instead of being refused: the success is dropped without an error or event.
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      await expect(store.recordOutcome(outcome(first, key, 'succeeded', { status: 200 }))).rejects.toThrow();
    });

    it('the late outcome of the attempt that asked, arriving during its continuation, moves nothing', async () => {
      const key = newKey({ pendingTtlMs: 40 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await sleep(80);
      expectVerdict(
        await store.decide(reserve(newRun(), key, { key: { ...key, pendingTtlMs: 120_000 } })),
        'hold',
      );
      await store.recordOutcome(askedForInput(first, key));
      const longKey = { ...key, pendingTtlMs: 120_000 };
      const cont = await store.decide(reserve(newRun(), longKey));
      expectVerdict(cont, 'allow');
      // Another late write for attempt 1 (its outbox replaying) moves nothing: the key stays with the continuation.
      const again = await store.recordOutcome(askedForInput(first, key));
      expect(again).toMatchObject({ alreadyRecorded: true });
      expect((await keyRow(key.hash))!).toMatchObject({
        state: 'pending',
        attempt_number: 2,
        input_rounds: 1,
      });
    });

    it('budget and trail after continuations then an honored retry over a lost continuation', async () => {
      const key = newKey();
      const opts = { unknownRule: 'honored' as const, retryBudget: 2 };
      const first = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const cont = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(cont, 'allow');
      expect((await attemptRow(cont.attemptId))!.remaining_attempts).toBe(1);
      await store.recordOutcome(outcome(cont, key, 'unknown'));
      const honored = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(honored, 'allow');
      expect(honored).toMatchObject({ attemptNumber: 3, retryDecision: 'destination_idempotency_honored' });
      const row = (await attemptRow(honored.attemptId))!;
      expect(row).toMatchObject({ retry_of_attempt_id: cont.attemptId, remaining_attempts: 0 });
      expect((await allowFacts(honored.decisionId)).attempt).toMatchObject({
        remainingAttempts: 0,
        attemptBudget: 2,
      });
      await store.recordOutcome(outcome(honored, key, 'unknown'));
      const blocked = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(blocked, 'block');
      expect(blocked.reason).toBe('retry_budget_exhausted');
    });

    it('without a window (windowMs null) a continuation continues and a changed request forks; decide never loops', async () => {
      const key = newKey({ windowMs: null });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(askedForInput(first, key));
      const cont = await store.decide(reserve(newRun(), key));
      expectVerdict(cont, 'allow');
      expect(cont.retryDecision).toBe('input_continuation');
      await store.recordOutcome(askedForInput(cont, key));
      const fork = await store.decide(
        reserve(newRun(), key, { request: { ...request, fingerprint: 'sha256:x' } }),
      );
      expectVerdict(fork, 'allow');
      expect(fork.supersedesOperationId).toBe(first.operationId);
      expect((await keyRow(key.hash))!).toMatchObject({
        state: 'pending',
        attempt_number: 1,
        input_rounds: 0,
      });
    });
  });
}
