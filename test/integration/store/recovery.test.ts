import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DedupeKeyInput, ReserveInput } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import {
  type Allow,
  expectVerdict,
  newKey,
  newRun,
  outcome,
  recoverInput,
  reserve,
  sleep,
} from './inputs.js';

/**
 * Crash recovery (docs/design.md §3 "Persist before dispatch"): which attempts without an
 * outcome are orphaned, and what recovery makes of them. Recovery sweeps the whole store, so after
 * every test an exclusive recovery (as the CLI would run it) leaves no attempt without an outcome:
 * each test starts from a store where only its own attempts can be recovered.
 */

type Overrides = Partial<Omit<ReserveInput, 'kind'>>;

for (const target of storeTargets()) {
  describe(`crash recovery on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterEach(async () => {
      await store?.recover(recoverInput({ instanceId: null, exclusive: true }));
    });

    afterAll(async () => {
      await store?.close();
    });

    /** An allowed attempt that never gets an outcome (the gate is mid-dispatch, or died). */
    async function inFlight(
      gateInstance: string | null,
      overrides: Overrides = {},
      key: DedupeKeyInput | null = newKey(),
    ): Promise<Allow> {
      const allow = await store.decide(
        reserve(newRun(), key, { gateInstance, deadlineMs: 60_000, ...overrides }),
      );
      expectVerdict(allow, 'allow');
      return allow;
    }

    function attemptIds(list: readonly { attemptId: string }[]): string[] {
      return list.map((r) => r.attemptId).sort();
    }

    async function dispatchState(attemptId: string): Promise<string | null | undefined> {
      const rows = await store.query<{ dispatch_state: string | null }>(
        `select dispatch_state from attempts where id = '${attemptId}'`,
      );
      return rows[0]?.dispatch_state;
    }

    it("a live gate's in-flight attempts are left alone; once it stopped they are recovered", async () => {
      await store.registerInstance('gate-a');
      const allow = await inFlight('gate-a');

      expect(await store.recover(recoverInput())).toEqual([]);
      expect(await store.recover(recoverInput({ instanceId: null }))).toEqual([]);
      expect(await dispatchState(allow.attemptId)).toBeNull();
      expect((await store.getOperation(allow.operationId))?.state).toBe('open');

      await store.stopInstance('gate-a');
      const recovered = await store.recover(recoverInput());
      expect(recovered).toEqual([
        {
          operationId: allow.operationId,
          attemptId: allow.attemptId,
          toolId: 'github.create_issue',
          approvalId: expect.any(String),
          rule: 'hold',
        },
      ]);
      expect(await dispatchState(allow.attemptId)).toBe('sent_no_response');
    });

    it('a stale heartbeat means the gate is gone; a fresh one keeps its attempts', async () => {
      await store.registerInstance('gate-c');
      const allow = await inFlight('gate-c');
      await store.query(
        `update gate_instances set heartbeat_at = now() - interval '5 minutes' where id = 'gate-c'`,
      );
      // A heartbeat makes it live again.
      await store.heartbeat('gate-c');
      expect(await store.recover(recoverInput())).toEqual([]);

      await store.query(
        `update gate_instances set heartbeat_at = now() - interval '5 minutes' where id = 'gate-c'`,
      );
      // Older than 5 minutes is not stale for a 10-minute threshold.
      expect(await store.recover(recoverInput({ staleAfterMs: 600_000 }))).toEqual([]);
      expect(attemptIds(await store.recover(recoverInput({ staleAfterMs: 60_000 })))).toEqual([
        allow.attemptId,
      ]);
    });

    it("the caller's own attempts are never recovered, whatever their state", async () => {
      await store.registerInstance('gate-me');
      const mine = await inFlight('gate-me', { deadlineMs: 1 });
      await store.stopInstance('gate-me');
      await store.query(
        `update gate_instances set heartbeat_at = now() - interval '1 hour' where id = 'gate-me'`,
      );
      await sleep(30);
      expect(await store.recover(recoverInput({ instanceId: 'gate-me', staleAfterMs: 0 }))).toEqual([]);
      expect(
        await store.recover(recoverInput({ instanceId: 'gate-me', exclusive: true, staleAfterMs: 0 })),
      ).toEqual([]);
      expect(await dispatchState(mine.attemptId)).toBeNull();
      // Another process (here: the CLI) does recover them.
      expect(attemptIds(await store.recover(recoverInput({ instanceId: null, staleAfterMs: 0 })))).toEqual([
        mine.attemptId,
      ]);
    });

    it("exclusive recovers every attempt without an outcome except the caller's own", async () => {
      await store.registerInstance('gate-live');
      await store.registerInstance('gate-self');
      const live = await inFlight('gate-live');
      const anonymous = await inFlight(null, { deadlineMs: null });
      const keyless = await inFlight(null, {}, null);
      const mine = await inFlight('gate-self');
      const done = await inFlight('gate-live', {}, null);
      const doneKey = newKey();
      const failed = await inFlight('gate-live', {}, doneKey);
      await store.recordOutcome(outcome(failed, doneKey, 'failed'));
      await store.recordOutcome(outcome(done, null, 'succeeded'));

      // Without exclusivity all of them belong to live gates or are still in time.
      expect(await store.recover(recoverInput({ instanceId: 'gate-self' }))).toEqual([]);

      const recovered = await store.recover(recoverInput({ instanceId: 'gate-self', exclusive: true }));
      expect(attemptIds(recovered)).toEqual([live.attemptId, anonymous.attemptId, keyless.attemptId].sort());
      expect(await dispatchState(mine.attemptId)).toBeNull();
      expect(await dispatchState(failed.attemptId)).toBe('response_received');
      expect((await store.getOperation(failed.operationId))?.state).toBe('failed');
      expect((await store.getOperation(keyless.operationId))?.state).toBe('unknown');
    });

    it('an attempt without a gate instance is recovered once its deadline passed more than staleAfterMs ago', async () => {
      const overdue = await inFlight(null, { deadlineMs: 10 });
      const inTime = await inFlight(null, { deadlineMs: 60_000 });
      const noDeadline = await inFlight(null, { deadlineMs: null });
      await sleep(120);
      // The deadline passed, but not yet staleAfterMs ago.
      expect(await store.recover(recoverInput({ staleAfterMs: 60_000 }))).toEqual([]);
      const recovered = await store.recover(recoverInput({ staleAfterMs: 50 }));
      expect(attemptIds(recovered)).toEqual([overdue.attemptId]);
      expect(await dispatchState(inTime.attemptId)).toBeNull();
      expect(await dispatchState(noDeadline.attemptId)).toBeNull();
      const rows = await store.query<{ deadline_at: unknown }>(
        `select deadline_at from attempts where id = '${noDeadline.attemptId}'`,
      );
      expect(rows[0]?.deadline_at).toBeNull();
    });

    it('a recovered attempt is sent_no_response, its operation and key unknown, with evidence and an approval request', async () => {
      const key = newKey();
      await store.registerInstance('gate-dead');
      const allow = await inFlight('gate-dead', {}, key);
      await store.stopInstance('gate-dead');

      const [recovered, ...rest] = await store.recover(recoverInput({ rules: { other: 'honored' } }));
      expect(rest).toEqual([]);
      expect(recovered).toMatchObject({ operationId: allow.operationId, attemptId: allow.attemptId });
      const approvalId = recovered!.approvalId;
      expect(approvalId).toEqual(expect.any(String));

      const op = await store.getOperation(allow.operationId);
      expect(op?.state).toBe('unknown');
      expect(op?.attempts).toHaveLength(1);
      const attempt = op!.attempts[0]!;
      expect(attempt.dispatchState).toBe('sent_no_response');
      expect(attempt.recoveredAt).not.toBeNull();
      expect(attempt.error).toContain('gate_restarted');
      const keys = await store.query(
        `select state, attempt_id from dedupe_keys where key_hash = '${key.hash}'`,
      );
      expect(keys).toEqual([{ state: 'unknown', attempt_id: allow.attemptId }]);

      expect(await store.listObservations(allow.operationId)).toMatchObject([
        {
          kind: 'gate_restarted',
          result: 'marked_unknown',
          attemptId: allow.attemptId,
          facts: { gateInstance: 'gate-dead', recoveredBy: 'gate-recovering' },
        },
      ]);
      const approval = await store.getApproval(approvalId!);
      expect(approval).toMatchObject({
        operationId: allow.operationId,
        state: 'requested',
        previousAttemptId: allow.attemptId,
        previousDispatchState: 'sent_no_response',
        intent: { toolId: 'github.create_issue', idempotencyHeader: 'Idempotency-Key' },
      });
      expect(approval?.requestedBy).toMatch(/^recovery:/);

      // The key is unknown: the next proposal is held on that very request, whatever the TTL.
      const held = await store.decide(reserve(newRun(), key, { unknownRule: 'hold' }));
      expectVerdict(held, 'hold');
      expect(held).toMatchObject({
        operationId: allow.operationId,
        approvalId,
        previousAttemptId: allow.attemptId,
        previousDispatchState: 'sent_no_response',
      });
      expect(await store.listApprovals({ operationId: allow.operationId })).toHaveLength(1);

      const events = await store.query<{ type: string; payload: string }>(
        `select type, payload from events where operation_id = '${allow.operationId}' order by chain, seq`,
      );
      const recoveredEvents = events.filter((e) => e.type === 'attempt.recovered');
      expect(recoveredEvents).toHaveLength(1);
      expect(JSON.parse(recoveredEvents[0]!.payload)).toMatchObject({
        input: { attemptId: allow.attemptId, operationId: allow.operationId, gateInstance: 'gate-dead' },
        facts: {
          observation: { kind: 'gate_restarted', result: 'marked_unknown' },
          stateChange: { from: 'open', to: 'unknown' },
          key: { state: 'unknown' },
          approvalId,
        },
      });

      // Nothing is left to recover.
      expect(await store.recover(recoverInput({ exclusive: true }))).toEqual([]);
      expect(await store.listObservations(allow.operationId)).toHaveLength(1);
      const report = await verifyStoreChain(store);
      expect(report.firstBad).toBeUndefined();
      expect(report.ok).toBe(true);
    });

    it('an approval request is created only for operations whose unknown rule is hold (or that nobody knows)', async () => {
      const keys = { hold: newKey(), missing: newKey(), honored: newKey(), reconcile: newKey() };
      // The rule is recorded on the operation when it is created (0003): recovery needs no policies.
      const attempts = {
        hold: await inFlight('gate-x', { toolId: 'tool.hold', unknownRule: 'hold' }, keys.hold),
        missing: await inFlight('gate-x', { toolId: 'tool.missing', unknownRule: undefined }, keys.missing),
        honored: await inFlight('gate-x', { toolId: 'tool.honored', unknownRule: 'honored' }, keys.honored),
        reconcile: await inFlight(
          'gate-x',
          { toolId: 'tool.reconcile', unknownRule: undefined },
          keys.reconcile,
        ),
      };
      // Operations recorded before 0003 have no rule (a proposal without one stands for them, so
      // that their events lack it too): the caller's rules apply, else hold.
      const ruleless = await store.query<{ unknown_rule: string | null }>(
        `select unknown_rule from operations
          where id in ('${attempts.missing.operationId}', '${attempts.reconcile.operationId}')`,
      );
      expect(ruleless).toEqual([{ unknown_rule: null }, { unknown_rule: null }]);
      const recovered = await store.recover(
        recoverInput({ exclusive: true, rules: { 'tool.reconcile': 'reconcile', 'tool.honored': 'hold' } }),
      );
      expect(recovered).toHaveLength(4);
      const byTool = new Map(recovered.map((r) => [r.toolId, r]));
      for (const [rule, allow] of Object.entries(attempts)) {
        expect(byTool.get(`tool.${rule}`)).toMatchObject({
          operationId: allow.operationId,
          attemptId: allow.attemptId,
        });
      }
      expect(byTool.get('tool.hold')?.approvalId).toEqual(expect.any(String));
      expect(byTool.get('tool.missing')?.approvalId).toEqual(expect.any(String));
      expect(byTool.get('tool.honored')?.approvalId).toBeNull();
      expect(byTool.get('tool.reconcile')?.approvalId).toBeNull();
      const ops = Object.values(attempts).map((a) => `'${a.operationId}'`);
      const approvals = await store.query<{ operation_id: string }>(
        `select operation_id from approvals where operation_id in (${ops.join(', ')})`,
      );
      expect(approvals.map((a) => a.operation_id).sort()).toEqual(
        [attempts.hold.operationId, attempts.missing.operationId].sort(),
      );

      // One attempt.recovered event per attempt.
      const events = await store.query<{ operation_id: string }>(
        `select operation_id from events where type = 'attempt.recovered' and operation_id in (${ops.join(', ')})`,
      );
      expect(events.map((e) => e.operation_id).sort()).toEqual(
        Object.values(attempts)
          .map((a) => a.operationId)
          .sort(),
      );

      // What the rules promise for the next proposal.
      const honored = await store.decide(
        reserve(newRun(), keys.honored, { toolId: 'tool.honored', unknownRule: 'honored' }),
      );
      expectVerdict(honored, 'allow');
      expect(honored).toMatchObject({
        operationId: attempts.honored.operationId,
        attemptNumber: 2,
        retryOfAttemptId: attempts.honored.attemptId,
        retryReason: 'response_lost_after_dispatch',
        retryDecision: 'destination_idempotency_honored',
      });
      const reconcile = await store.decide(
        reserve(newRun(), keys.reconcile, { toolId: 'tool.reconcile', unknownRule: 'reconcile' }),
      );
      expect(reconcile).toEqual({
        verdict: 'reconcile',
        decisionId: null,
        operationId: attempts.reconcile.operationId,
        attemptId: attempts.reconcile.attemptId,
      });

      const report = await verifyStoreChain(store);
      expect(report.ok).toBe(true);
      expect(await store.recover(recoverInput({ exclusive: true }))).toHaveLength(1); // the honored retry
      expect(await store.recover(recoverInput({ exclusive: true }))).toEqual([]);
    });

    it('storedAuthorityKey: the 64-hex key migration 0002 made, unkeyed until an operation exists; dropped only if still the same', async () => {
      const a = await store.storedAuthorityKey();
      expect(a?.key).toMatch(/^[0-9a-f]{64}$/);
      const other = await openTestStore(target);
      try {
        const b = await other.storedAuthorityKey();
        expect(b?.key).toMatch(/^[0-9a-f]{64}$/);
        expect(b?.key).not.toBe(a?.key);
        expect(b?.keyed).toBe(false);
        await other.dropStoredAuthorityKey('not-the-key');
        expect(await other.storedAuthorityKey()).toEqual(b);
        await other.dropStoredAuthorityKey(b!.key);
        expect(await other.storedAuthorityKey()).toBeNull();
        const rows = await other.query<{ n: number }>(
          "select count(*)::int as n from settings where name = 'authority_key'",
        );
        expect(rows[0]?.n).toBe(0);
      } finally {
        await other.close();
      }
      // Keyed once the store has an operation (this suite's earlier tests made some).
      const [ops] = await store.query<{ any: boolean }>('select exists (select 1 from operations) as any');
      expect(await store.storedAuthorityKey()).toEqual({ key: a!.key, keyed: ops?.any === true });
      // A second store opened and migrated: over 30 s on a loaded 2-core machine.
    }, 90_000);
  });
}
