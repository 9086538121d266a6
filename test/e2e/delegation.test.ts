/**
 * Delegated workers end to end (docs/design.md §3 "Delegation"): the real
 * `effectgate proxy`, a real loopback issue tracker, undici through the proxy, a real store
 * (PGlite always, PostgreSQL when DATABASE_URL is set). A worker carrying `Effectgate-Operation`
 * and `Effectgate-Worker` makes an attempt of the owner's operation, with the same
 * Idempotency-Key, and the trail says which worker made it; a claim that cannot be an attempt of
 * that operation is refused (422) with nothing sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;

for (const target of storeTargets()) {
  describe(`delegated workers through the proxy (${target.name})`, { timeout: 60_000 }, () => {
    let tracker: IssueTracker;
    let gate: GateUnderTest;

    beforeAll(async () => {
      tracker = await startIssueTracker();
      gate = await startGateUnderTest(target, POLICIES);
    }, 120_000);

    afterAll(async () => {
      await gate?.close();
      await tracker?.close();
    });

    it("a worker retries the owner's failed operation as its next attempt; refused claims send nothing; the trail names the worker", async () => {
      const c = '/held/acme/deleg/issues';
      const issue = { title: 'Renew the domain', body: 'expires in 3 days' };
      tracker.plan(c, 'reject-422');
      const owner = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'planner-1' });
      expect(owner.status).toBe(422);
      const op = owner.headers['effectgate-operation'] as string;
      expect(op).toBeTruthy();

      const bogus = await gate.send(`${tracker.url}${c}`, issue, {
        'effectgate-run': 'worker-run-1',
        'effectgate-operation': '0190aaaa-0000-7000-8000-000000000000',
        'effectgate-worker': 'executor-1',
      });
      expect(bogus.status).toBe(422);
      expect(bogus.headers['content-type']).toBe('application/problem+json');
      expect(bogus.json).toMatchObject({ verdict: 'block', reason: 'delegation_unknown_operation' });
      expect(String(bogus.json['detail'])).toContain('names no operation of this scope');

      // A claim the gate cannot read is refused, never dropped (which would make a new operation).
      const unreadable = await gate.send(`${tracker.url}${c}`, issue, {
        'effectgate-run': 'worker-run-1',
        'effectgate-operation': `${op}${'-x'.repeat(100)}`,
      });
      expect(unreadable.status).toBe(422);
      expect(unreadable.json).toMatchObject({ verdict: 'block', reason: 'delegation_unreadable_header' });

      const changed = await gate.send(
        `${tracker.url}${c}`,
        { ...issue, title: 'Renew the domain NOW' },
        { 'effectgate-run': 'worker-run-1', 'effectgate-operation': op, 'effectgate-worker': 'executor-1' },
      );
      expect(changed.status).toBe(422);
      expect(changed.json).toMatchObject({ reason: 'delegation_request_changed' });
      expect(tracker.posts(c)).toHaveLength(1);

      const w = await gate.send(`${tracker.url}${c}`, issue, {
        'effectgate-run': 'worker-run-1',
        'effectgate-operation': op,
        'effectgate-worker': 'executor-1',
      });
      expect(w.status).toBe(201);
      expect(w.headers['effectgate-operation']).toBe(op);
      // Same operation, same key; the context headers never reach the destination.
      const posts = tracker.posts(c);
      expect(posts.map((r) => r.headers['idempotency-key'])).toEqual([op, op]);
      expect(posts.at(-1)!.headers['effectgate-operation']).toBeUndefined();
      expect(posts.at(-1)!.headers['effectgate-worker']).toBeUndefined();

      const again = await gate.send(`${tracker.url}${c}`, issue, {
        'effectgate-run': 'worker-run-2',
        'effectgate-operation': op,
        'effectgate-worker': 'executor-2',
      });
      expect(again.status).toBe(409);
      expect(again.json).toMatchObject({ verdict: 'duplicate', operation_id: op });
      expect(tracker.issues(c)).toHaveLength(1);

      const trail = await gate.trail(op);
      expect(trail.operation.attempts.map((a) => [a.number, a.worker, a.runId])).toEqual([
        [1, null, 'planner-1'],
        [2, 'executor-1', 'worker-run-1'],
      ]);
      const text = await gate.cli(['trail', op]);
      expect(text.stdout).toContain('executor-1');
    });
  });
}
