/**
 * An approval is for that very request (its request fingerprint), end to end: the real
 * `effectgate proxy` and CLI beside it, a real loopback issue tracker that keeps what it created,
 * undici through the proxy, a real store (PGlite always, PostgreSQL when DATABASE_URL is set).
 *
 * After an unknown outcome the retry is held for a person. Once she approves it, an agent sending
 * the same key values (owner, repo, title) with another body (another payee, a field the key does
 * not hold) must not go out under that approval: it is held again, on its own card that says the
 * request changed and shows both fingerprints. The request she approved still goes out, once,
 * with the operation's Idempotency-Key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApprovalRecord } from '../../src/store/types.js';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;

for (const target of storeTargets()) {
  describe(`an approval binds to the request it was asked for (${target.name})`, { timeout: 60_000 }, () => {
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

    it('a changed request after an approval is held as a change; the approved request goes out once', async () => {
      const c = '/held/acme/payments/issues';
      const approvedBody = { title: 'Pay invoice 7', body: 'payee: acme-supplies, amount: 120' };
      const changedBody = { title: 'Pay invoice 7', body: 'payee: mallory, amount: 120' };
      tracker.plan(c, 'destroy-before-commit');
      const lost = await gate.send(`${tracker.url}${c}`, approvedBody, { 'effectgate-run': 'run-1' });
      expect(lost.status).toBe(502);
      const op = lost.headers['effectgate-operation'] as string;

      const held = await gate.send(`${tracker.url}${c}`, approvedBody, { 'effectgate-run': 'run-2' });
      expect(held.status).toBe(428);
      const approvalId = held.json['approval_id'] as string;
      const approved = await gate.approve(approvalId, 'alice@acme.test', 'checked: invoice 7 was not paid');
      expect(approved.state).toBe('approved');
      const approvedFingerprint = approved.intent.fingerprint;
      expect(approved.intent.requestFingerprint).toBe(approvedFingerprint);

      // Same key values, another payee: not the request she approved.
      const changed = await gate.send(`${tracker.url}${c}`, changedBody, { 'effectgate-run': 'run-3' });
      expect(changed.status, JSON.stringify(changed.json)).toBe(428);
      expect(changed.headers['effectgate-operation']).toBe(op);
      const changedCardId = changed.json['approval_id'] as string;
      expect(changedCardId).not.toBe(approvalId);
      expect(changed.json['request_changed']).toBe(true);
      expect(changed.json['approved_request_id']).toBe(approvalId);
      expect(String(changed.json['detail'])).toContain(
        `Approval ${approvalId} was given for another request`,
      );
      expect(tracker.posts(c)).toHaveLength(1);

      // The operator sees it as a change, with both fingerprints: the list, the API, the card text.
      const listed = await gate.cli(['approvals', 'list', '--json']);
      expect(listed.code, listed.stderr).toBe(0);
      const cards = (JSON.parse(listed.stdout) as { approvals: ApprovalRecord[] }).approvals;
      const card = cards.find((a) => a.id === changedCardId);
      expect(card).toMatchObject({
        state: 'requested',
        operationId: op,
        intent: { fingerprint: approvedFingerprint },
      });
      expect(card?.intent.requestFingerprint).toMatch(/^sha256:/);
      expect(card?.intent.requestFingerprint).not.toBe(approvedFingerprint);
      expect(card?.plannedRecovery).toContain('CHANGED');
      expect(cards.find((a) => a.id === approvalId)).toMatchObject({ state: 'approved' });
      const api = await gate.api(`/api/approvals/${changedCardId}`);
      expect(api.json).toMatchObject({ intent: { requestFingerprint: card?.intent.requestFingerprint } });
      const text = await gate.cli(['approvals', 'list', '--state', 'requested']);
      expect(text.stdout).toContain('CHANGED');
      expect(text.stdout).toContain(approvedFingerprint.slice(0, 20));
      expect(text.stdout).toContain(String(card?.intent.requestFingerprint).slice(0, 20));

      // Asking again changes nothing: still held, still on its own card, nothing sent.
      const again = await gate.send(`${tracker.url}${c}`, changedBody, { 'effectgate-run': 'run-3' });
      expect(again.status).toBe(428);
      expect(again.json['approval_id']).toBe(changedCardId);
      expect(tracker.posts(c)).toHaveLength(1);

      // The request she approved goes out, once, as the operation's next attempt, with its key.
      const retry = await gate.send(`${tracker.url}${c}`, approvedBody, { 'effectgate-run': 'run-2' });
      expect(retry.status).toBe(201);
      expect(retry.headers['effectgate-operation']).toBe(op);

      // The destination's own ledger against the trail: two posts, both the approved body, both
      // with the operation's key; one issue; the trail's two attempts, the second operator_approved.
      const posts = tracker.posts(c);
      expect(posts.map((r) => r.headers['idempotency-key'])).toEqual([op, op]);
      expect(posts.map((r) => JSON.parse(r.body.toString()).body)).toEqual([
        approvedBody.body,
        approvedBody.body,
      ]);
      expect(tracker.issues(c)).toHaveLength(1);
      const trail = await gate.trail(op);
      expect(trail.operation.attempts).toHaveLength(2);
      expect(trail.operation.attempts.map((a) => a.request.fingerprint)).toEqual([
        approvedFingerprint,
        approvedFingerprint,
      ]);
      expect(trail.operation.attempts[1]).toMatchObject({ retryDecision: 'operator_approved' });
      expect(trail.approvals.find((a) => a.id === approvalId)).toMatchObject({
        state: 'used',
        usedByAttemptId: trail.operation.attempts[1]?.id,
      });
      expect(trail.approvals.find((a) => a.id === changedCardId)?.state).not.toBe('used');

      const verify = await gate.cli(['audit', 'verify']);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    });
  });
}
