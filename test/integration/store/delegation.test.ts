import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNREADABLE_OPERATION_CLAIM } from '../../../src/engine/normalize-head.js';
import type { DecideResult } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, request, reserve, scope, sleep } from './inputs.js';

/**
 * Delegation (docs/design.md §3 "Delegation", eg_delegated.sql): a proposal carrying
 * Effectgate-Operation is an attempt of the operation it names, never a new one; a claim that
 * cannot be one is refused and recorded.
 */

const worker = (claimedOperationId: string, name = 'worker-7') => ({ claimedOperationId, worker: name });

function reasonOf(r: DecideResult): string {
  expectVerdict(r, 'block');
  return r.reason;
}

for (const target of storeTargets()) {
  describe(`delegated workers on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    it("while the owner's attempt is in flight a worker naming the operation is told pending, not given a second attempt", async () => {
      const key = newKey();
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      const w = await store.decide(reserve(newRun(), key, worker(owner.operationId)));
      expectVerdict(w, 'pending');
      expect(w.operationId).toBe(owner.operationId);
      expect((await store.getOperation(owner.operationId))?.attempts).toHaveLength(1);
    });

    it('after a definite failure the worker makes the next attempt of the same operation, recorded with its identity', async () => {
      const key = newKey();
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      await store.recordOutcome(outcome(owner, key, 'failed'));
      const w = await store.decide(reserve(newRun(), key, worker(owner.operationId)));
      expectVerdict(w, 'allow');
      expect(w).toMatchObject({
        operationId: owner.operationId,
        attemptNumber: 2,
        retryOfAttemptId: owner.attemptId,
      });
      const op = await store.getOperation(owner.operationId);
      expect(op?.attempts.map((a) => [a.number, a.worker])).toEqual([
        [1, null],
        [2, 'worker-7'],
      ]);
    });

    it("a worker cannot retry the operation's unknown write: it is held like anyone else", async () => {
      const key = newKey();
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      await store.recordOutcome(outcome(owner, key, 'unknown'));
      const w = await store.decide(reserve(newRun(), key, worker(owner.operationId)));
      expectVerdict(w, 'hold');
      expect(w.operationId).toBe(owner.operationId);
    });

    it('a worker naming an operation that succeeded gets a duplicate of it even after its window, where a proposal without the header would be a new operation', async () => {
      const key = newKey({ windowMs: 40 });
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      await store.recordOutcome(outcome(owner, key, 'succeeded'));
      await sleep(80);
      const w = await store.decide(reserve(newRun(), key, worker(owner.operationId)));
      expectVerdict(w, 'duplicate');
      expect(w).toMatchObject({
        operationId: owner.operationId,
        operationState: 'succeeded',
        source: { operationId: owner.operationId, attemptId: owner.attemptId },
      });
      const decision = await store.getDecision(w.decisionId);
      expect(decision).toMatchObject({ verdict: 'duplicate', reason: 'delegated_operation_done' });
      const fresh = await store.decide(reserve(newRun(), key));
      expectVerdict(fresh, 'allow');
      expect(fresh.operationId).not.toBe(owner.operationId);
    });

    it('refuses a claim on no operation, on another scope, on another tool, or with another request, and records each', async () => {
      const key = newKey();
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      await store.recordOutcome(outcome(owner, key, 'failed'));

      const none = await store.decide(reserve(newRun(), key, worker('0190aaaa-0000-7000-8000-000000000000')));
      expect(reasonOf(none)).toMatch(/^delegation_unknown_operation: /);
      expect(await store.getDecision(none.decisionId!)).toMatchObject({ verdict: 'block' });

      // Another scope's operation reads exactly as none: nothing about it is told.
      const elsewhere = await store.decide(
        reserve(newRun(), newKey(), { ...worker(owner.operationId), scope: { ...scope, tenant: 'globex' } }),
      );
      expect(reasonOf(elsewhere)).toBe(
        `delegation_unknown_operation: Effectgate-Operation ${owner.operationId} names no operation of this scope`,
      );

      const otherTool = await store.decide(
        reserve(newRun(), newKey(), { ...worker(owner.operationId), toolId: 'github.close_issue' }),
      );
      expect(reasonOf(otherTool)).toMatch(/^delegation_other_tool: /);

      const otherValues = await store.decide(reserve(newRun(), newKey(), worker(owner.operationId)));
      expect(reasonOf(otherValues)).toMatch(/^delegation_request_changed: the request's key values differ/);

      // Same key, materially changed request: without the header this would fork a new operation.
      const changed = await store.decide(
        reserve(newRun(), key, {
          ...worker(owner.operationId),
          request: { ...request, fingerprint: 'sha256:0ther' },
        }),
      );
      expect(reasonOf(changed)).toMatch(/^delegation_request_changed: the request differs materially/);
      // Nothing of it reached the operation.
      expect((await store.getOperation(owner.operationId))?.attempts).toHaveLength(1);
      expect(await store.listOperations({ supersedesOperationId: owner.operationId })).toEqual([]);
    });

    it('refuses a claim on an operation whose window is over, or whose key a later operation holds', async () => {
      const key = newKey({ windowMs: 40 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed'));
      await sleep(80);
      const late = await store.decide(reserve(newRun(), key, worker(first.operationId)));
      expect(reasonOf(late)).toMatch(/^delegation_window_over: /);

      const second = await store.decide(reserve(newRun(), key));
      expectVerdict(second, 'allow');
      expect(second.operationId).not.toBe(first.operationId);
      const superseded = await store.decide(reserve(newRun(), key, worker(first.operationId)));
      expect(reasonOf(superseded)).toBe(
        `delegation_operation_superseded: operation ${first.operationId} no longer holds its key; operation ${second.operationId} does`,
      );
    });

    it('a worker naming an operation that awaits input past its window is refused, never made a new operation', async () => {
      const key = newKey({ windowMs: 40 });
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(
        outcome(first, key, 'open', { status: 200, error: 'MCP input_required: the tool asked for input' }),
      );
      await sleep(80);
      const w = await store.decide(reserve(newRun(), key, worker(first.operationId)));
      expect(reasonOf(w)).toMatch(/^delegation_window_over: /);
      const ops = await store.query<{ id: string }>(
        `select id from operations where key_hash = '${key.hash}'`,
      );
      expect(ops.map((o) => o.id)).toEqual([first.operationId]);
    });

    it('an unreadable claim names no operation: refused, never dropped into a new operation', async () => {
      const key = newKey({ windowMs: 40 });
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      await store.recordOutcome(outcome(owner, key, 'succeeded'));
      await sleep(80);
      const w = await store.decide(reserve(newRun(), key, worker(UNREADABLE_OPERATION_CLAIM)));
      expect(reasonOf(w)).toMatch(/^delegation_unknown_operation: /);
    });

    it('a delegated duplicate after the window names the reference an operator settled the operation with', async () => {
      const key = newKey({ windowMs: 200 });
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      await store.recordOutcome(outcome(owner, key, 'unknown'));
      const ref = 'https://github.com/acme/app/issues/77';
      await store.addObservation({
        operationId: owner.operationId,
        kind: 'operator_decision',
        by: 'alice',
        reason: 'found it',
        settles: 'succeeded',
        status: null,
        destinationRef: ref,
        refs: [],
        payloadFingerprint: null,
        source: 'cli',
      });
      const inside = await store.decide(reserve(newRun(), key, worker(owner.operationId)));
      expectVerdict(inside, 'duplicate');
      expect(inside.source?.destinationRef).toBe(ref);
      await sleep(300);
      // A new operation takes the key past the window; the worker still names the old one.
      expectVerdict(await store.decide(reserve(newRun(), key)), 'allow');
      const after = await store.decide(reserve(newRun(), key, worker(owner.operationId)));
      expectVerdict(after, 'duplicate');
      expect(after.source).toMatchObject({ operationId: owner.operationId, destinationRef: ref });
    });

    it('refuses a claim for a tool that keeps no duplicate key', async () => {
      const owner = await store.decide(reserve(newRun(), null));
      expectVerdict(owner, 'allow');
      const w = await store.decide(reserve(newRun(), null, worker(owner.operationId)));
      expect(reasonOf(w)).toMatch(/^delegation_without_key: /);
    });

    it('of an owner and two workers retrying a failed operation at once, exactly one gets the next attempt', async () => {
      const key = newKey();
      const owner = await store.decide(reserve(newRun(), key));
      expectVerdict(owner, 'allow');
      await store.recordOutcome(outcome(owner, key, 'failed'));
      const results = await Promise.all([
        store.decide(reserve(newRun(), key)),
        store.decide(reserve(newRun(), key, worker(owner.operationId, 'worker-a'))),
        store.decide(reserve(newRun(), key, worker(owner.operationId, 'worker-b'))),
      ]);
      const allowed = results.filter((r) => r.verdict === 'allow');
      expect(allowed).toHaveLength(1);
      expect(results.filter((r) => r.verdict === 'pending')).toHaveLength(2);
      expect((await store.getOperation(owner.operationId))?.attempts).toHaveLength(2);
    });
  });
}
