/**
 * The investigation view of one operation (docs/design.md §3), built from a real store: intent and
 * state on top, then decisions, attempts, observations and approval steps in the order they
 * happened, with parents, reasons and the destination's replay signal.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOperationReport, type OperationReport } from '../../../src/admin/index.js';
import { renderReport } from '../../../src/cli/trail-command.js';
import type { ReconciliationInput } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, expectVerdict, newKey, newRun, outcome, request, reserve } from '../store/inputs.js';

for (const target of storeTargets()) {
  describe(`trail of an operation (${target.name})`, () => {
    let store: TestStore;
    let first: Allow;
    let retry: Allow;
    let fork: Allow;
    let report: OperationReport;
    const runs = { owner: newRun(), retrier: newRun(), late: newRun() };

    beforeAll(async () => {
      store = await openTestStore(target);
      const key = newKey();
      const a = await store.decide(reserve(runs.owner, key, { step: 'open-ticket' }));
      expectVerdict(a, 'allow');
      first = a;
      await store.recordOutcome(outcome(a, key, 'unknown'));
      const look = await store.decide(reserve(runs.retrier, key, { unknownRule: 'reconcile' }));
      expectVerdict(look, 'reconcile');
      const none: ReconciliationInput = {
        operationId: a.operationId,
        attemptId: a.attemptId,
        endpoint: 'GET https://api.github.com/repos/acme/app/issues?state=all',
        queryFingerprint: 'sha256:abc',
        result: 'none',
        matches: 0,
        remoteRefs: [],
        status: 200,
        error: null,
        durationMs: 3,
        startedAt: new Date().toISOString(),
      };
      const held = await store.decide(
        reserve(runs.retrier, key, { unknownRule: 'reconcile', reconciliation: none }),
      );
      expectVerdict(held, 'hold');
      await store.decideApproval({
        approvalId: held.approvalId,
        action: 'approve',
        by: 'alice',
        reason: 'checked',
      });
      const r = await store.decide(reserve(runs.retrier, key));
      expectVerdict(r, 'allow');
      retry = r;
      await store.recordOutcome({ ...outcome(r, key, 'succeeded'), replayed: true });
      expectVerdict(await store.decide(reserve(runs.late, key)), 'duplicate');
      // Another key whose first attempt failed, then a changed request: a fork, linked both ways.
      const key2 = newKey();
      const b = await store.decide(reserve(runs.owner, key2));
      expectVerdict(b, 'allow');
      await store.recordOutcome(outcome(b, key2, 'failed'));
      const f = await store.decide(
        reserve(runs.owner, key2, { request: { ...request, fingerprint: 'sha256:changed' } }),
      );
      expectVerdict(f, 'allow');
      fork = f;
      report = (await loadOperationReport(store, a.operationId))!;
    });

    afterAll(async () => {
      await store?.close();
    });

    it('puts intent and current state on top', () => {
      expect(report.trail.operation).toMatchObject({
        id: first.operationId,
        state: 'succeeded',
        tool: 'github.create_issue',
        scope: { tenant: 'acme', area: 'support', agent: 'triage-bot' },
        key_values: ['acme', 'app', 'title'],
        idempotency: { header: 'Idempotency-Key', key: first.operationId },
        owner: { run_id: runs.owner, step: 'open-ticket' },
        supersedes_operation_id: null,
        superseded_by: [],
        attempts: 2,
      });
    });

    it('orders the timeline and tells why each later attempt happened', () => {
      const kinds = report.trail.timeline.map((e) =>
        e.type === 'decision'
          ? `decision:${e.verdict}`
          : e.type === 'approval'
            ? `approval:${e.event}`
            : e.type === 'attempt'
              ? `attempt:${e.number}`
              : `observation:${e.result}`,
      );
      expect(kinds).toEqual([
        'decision:allow',
        'attempt:1',
        'observation:none',
        'decision:hold',
        'approval:requested',
        'approval:approved',
        'decision:allow',
        'attempt:2',
        'approval:used',
        'decision:duplicate',
      ]);
      const second = report.trail.timeline.find((e) => e.type === 'attempt' && e.number === 2);
      expect(second).toMatchObject({
        attempt_id: retry.attemptId,
        retry_of_attempt_id: first.attemptId,
        retry_of_number: 1,
        retry_reason: 'response_lost_after_dispatch',
        retry_decision: 'operator_approved',
        fingerprint_changed: false,
        replayed: true,
        dispatch_state: 'response_received',
      });
      expect(second?.type === 'attempt' && second.response_summary).toContain('replayed by the destination');
      const dup = report.trail.timeline.at(-1);
      expect(dup).toMatchObject({
        type: 'decision',
        verdict: 'duplicate',
        run_id: runs.late,
        source_operation_id: first.operationId,
      });
    });

    it('links a fork both ways', async () => {
      const forked = (await loadOperationReport(store, fork.operationId))!;
      const old = forked.trail.operation.supersedes_operation_id!;
      expect(old).not.toBe(fork.operationId);
      expect((await loadOperationReport(store, old))!.trail.operation.superseded_by).toEqual([
        fork.operationId,
      ]);
    });

    it('reads at 100 columns without colour', () => {
      const lines = renderReport(report);
      for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
      // Continuation lines are indented under their entry: read them as one line.
      const text = lines.join('\n').replace(/\n {26}/g, ' ');
      expect(text).not.toContain('\u001b[');
      expect(text).toContain(`operation ${first.operationId}  SUCCEEDED`);
      expect(text).toContain('retry of #1: reason response_lost_after_dispatch, decision operator_approved');
      expect(text).toContain('absence proves little');
      expect(text).toContain('skipped as a duplicate of this operation');
    });

    it('is null for an operation the store does not hold', async () => {
      expect(await loadOperationReport(store, 'no-such-operation')).toBeNull();
    });
  });
}
