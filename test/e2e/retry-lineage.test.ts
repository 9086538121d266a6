/**
 * Retry lineage end to end (docs/design.md §3): the real `effectgate proxy`
 * binary, a real stateful loopback issue tracker, real clients, and a real store (PGlite always,
 * PostgreSQL when DATABASE_URL is set). A retry of an unknown outcome without a destination
 * guarantee is held until a person approves that very retry; every later attempt has a parent and
 * a reason from the closed set; a materially changed request is a new operation, never a retry.
 *
 * The seed's forced-failure test, reconciliation and the retry budget are in
 * unknown-outcomes.test.ts; crash recovery is in crash-recovery.test.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;
const UUID = /^[0-9a-f-]{36}$/;

/** Destinations that honor Idempotency-Key: the honored, budget and slow tools' routes. */
const honorsKeys = (collection: string): boolean =>
  ['/honored/', '/budget/', '/slow/'].some((prefix) => collection.startsWith(prefix));

const keysSent = (tracker: IssueTracker, collection: string): unknown[] =>
  tracker.posts(collection).map((r) => r.headers['idempotency-key']);

for (const target of storeTargets()) {
  describe(`retry lineage through the proxy (${target.name})`, () => {
    let tracker: IssueTracker;
    let gate: GateUnderTest;
    const url = (collection: string): string => `${tracker.url}${collection}`;

    beforeAll(async () => {
      tracker = await startIssueTracker({ honorsKeys });
      gate = await startGateUnderTest(target, POLICIES);
    }, 120_000);

    afterAll(async () => {
      await gate?.close();
      await tracker?.close();
    });

    it('hold until approved: a non-honored retry is held (428), one approval allows exactly one retry, a second loss asks again', async () => {
      const c = '/held/acme/ops/issues';
      tracker.plan(c, 'commit-then-destroy', 'commit-then-destroy');
      const body = { title: 'Page the on-call' };
      const first = await gate.send(url(c), body, { 'effectgate-run': 'held-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      const a1 = first.headers['effectgate-attempt'] as string;

      const held = await gate.send(url(c), body, { 'effectgate-run': 'held-2' });
      expect(held.status).toBe(428);
      expect(held.headers['content-type']).toBe('application/problem+json');
      expect(held.headers['effectgate-verdict']).toBe('hold');
      expect(held.headers['effectgate-operation']).toBe(op);
      expect(held.headers['effectgate-attempt']).toBeUndefined();
      const ap1 = held.json['approval_id'] as string;
      expect(held.json).toMatchObject({
        type: 'urn:effectgate:verdict:hold',
        status: 428,
        verdict: 'hold',
        tool: 'test.held_issue',
        operation_id: op,
        operation_state: 'unknown',
        previous_attempt_id: a1,
        previous_dispatch_state: 'sent_no_response',
      });
      expect(ap1).toMatch(UUID);
      expect(held.json['message']).toBe(held.json['detail']);
      expect(tracker.posts(c)).toHaveLength(1);
      // Asking again does not open a second request: one open approval per operation.
      const stillHeld = await gate.send(url(c), body, { 'effectgate-run': 'held-2' });
      expect(stillHeld.status).toBe(428);
      expect(stillHeld.json['approval_id']).toBe(ap1);
      expect(tracker.posts(c)).toHaveLength(1);

      const card = (await gate.api(`/api/approvals/${ap1}`)).json;
      expect(card).toMatchObject({
        operationId: op,
        state: 'requested',
        previousAttemptId: a1,
        previousDispatchState: 'sent_no_response',
        intent: { toolId: 'test.held_issue', method: 'POST', idempotencyHeader: 'Idempotency-Key' },
      });
      expect(String(card['plannedRecovery'])).toContain(op);

      const approved = await gate.approve(ap1, 'alice', 'checked');
      expect(approved).toMatchObject({ id: ap1, state: 'approved', decidedBy: 'alice', reason: 'checked' });

      // The approved retry goes out (same operation, same key) and is lost again.
      const retry = await gate.send(url(c), body, { 'effectgate-run': 'held-3' });
      expect(retry.status).toBe(502);
      expect(retry.headers['effectgate-verdict']).toBe('allow');
      expect(retry.headers['effectgate-operation']).toBe(op);
      const a2 = retry.headers['effectgate-attempt'] as string;
      expect(a2).not.toBe(a1);
      expect(retry.json).toMatchObject({ dispatch_state: 'sent_no_response', operation_state: 'unknown' });
      expect(keysSent(tracker, c)).toEqual([op, op]);

      let trail = await gate.trail(op);
      expect(trail.operation.attempts[1]).toMatchObject({
        id: a2,
        retryOfAttemptId: a1,
        retryReason: 'response_lost_after_dispatch',
        retryDecision: 'operator_approved',
      });
      expect(trail.approvals.find((a) => a.id === ap1)).toMatchObject({
        state: 'used',
        usedByAttemptId: a2,
        decidedBy: 'alice',
      });

      // The approval was for one retry only: the next proposal is held again, with a new request.
      const heldAgain = await gate.send(url(c), body, { 'effectgate-run': 'held-4' });
      expect(heldAgain.status).toBe(428);
      const ap2 = heldAgain.json['approval_id'] as string;
      expect(ap2).toMatch(UUID);
      expect(ap2).not.toBe(ap1);
      expect(heldAgain.json).toMatchObject({ previous_attempt_id: a2, operation_id: op });
      expect(tracker.posts(c)).toHaveLength(2);

      await gate.approve(ap2, 'bob', 'looked at the tracker, nothing there');
      const last = await gate.send(url(c), body, { 'effectgate-run': 'held-5' });
      expect(last.status).toBe(201);
      expect(last.headers['effectgate-operation']).toBe(op);
      // This destination does not dedupe: the trail must show "sent three times", not "deduped".
      expect(tracker.issues(c)).toHaveLength(3);
      trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.operation.attempts.map((a) => [a.number, a.retryDecision, a.replayed])).toEqual([
        [1, null, null],
        [2, 'operator_approved', null],
        // Answered, without a replay marker: the destination says this one was not a replay.
        [3, 'operator_approved', false],
      ]);
      expect(trail.decisions.map((d) => d.verdict)).toEqual([
        'allow',
        'hold',
        'hold',
        'allow',
        'hold',
        'allow',
      ]);
    });

    it('a denied, a revoked and an expired approval each leave the retry held, and the next card says why', async () => {
      const c = '/held/acme/deny/issues';
      tracker.plan(c, 'commit-then-destroy');
      const body = { title: 'Restart the primary' };
      const first = await gate.send(url(c), body, { 'effectgate-run': 'deny-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;

      const held1 = await gate.send(url(c), body, { 'effectgate-run': 'deny-2' });
      expect(held1.status).toBe(428);
      const ap1 = held1.json['approval_id'] as string;
      const denied = await gate.api(`/api/approvals/${ap1}/deny`, {
        method: 'POST',
        body: { by: 'carol', reason: 'primary is healthy, do not restart' },
      });
      expect(denied.status).toBe(200);
      expect(denied.json).toMatchObject({ id: ap1, state: 'denied', decidedBy: 'carol' });

      const held2 = await gate.send(url(c), body, { 'effectgate-run': 'deny-3' });
      expect(held2.status).toBe(428);
      const ap2 = held2.json['approval_id'] as string;
      expect(ap2).not.toBe(ap1);
      expect(String(held2.json['detail'])).toContain('denied by carol');
      // A decided card cannot be decided again.
      const twice = await gate.api(`/api/approvals/${ap1}/approve`, {
        method: 'POST',
        body: { by: 'mallory', reason: 'let it through' },
      });
      expect(twice.status).toBe(409);

      await gate.approve(ap2, 'alice', 'checked');
      const revoked = await gate.api(`/api/approvals/${ap2}/revoke`, {
        method: 'POST',
        body: { by: 'dave', reason: 'wrong operation' },
      });
      expect(revoked.status).toBe(200);
      expect(revoked.json).toMatchObject({ state: 'revoked', revokedBy: 'dave' });
      const held3 = await gate.send(url(c), body, { 'effectgate-run': 'deny-4' });
      expect(held3.status).toBe(428);
      const ap3 = held3.json['approval_id'] as string;
      expect(String(held3.json['detail'])).toContain('revoked by dave');

      const shortLived = await gate.api(`/api/approvals/${ap3}/approve`, {
        method: 'POST',
        body: { by: 'alice', reason: 'quick check', ttl: '300ms' },
      });
      expect(shortLived.status).toBe(200);
      expect(shortLived.json['expiresAt']).toEqual(expect.any(String));
      await sleep(600);
      const held4 = await gate.send(url(c), body, { 'effectgate-run': 'deny-5' });
      expect(held4.status).toBe(428);
      expect(String(held4.json['detail'])).toContain('expired');
      expect(held4.json['approval_id']).not.toBe(ap3);

      // None of them let anything out.
      expect(tracker.posts(c)).toHaveLength(1);
      const trail = await gate.trail(op);
      expect(trail.operation).toMatchObject({ state: 'unknown', attempts: [{ number: 1 }] });
      expect(trail.decisions.map((d) => d.verdict)).toEqual(['allow', 'hold', 'hold', 'hold', 'hold']);
    });

    it('a refreshed credential is a retry of the same operation with reason credential_refreshed; no credential reaches the trail', async () => {
      const c = '/honored/acme/creds/issues';
      tracker.plan(c, 'commit-then-destroy');
      const body = { title: 'Token expired mid-call' };
      const first = await gate.send(url(c), body, { authorization: 'Bearer old-token-123' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      const retry = await gate.send(url(c), body, { authorization: 'Bearer new-token-456' });
      expect(retry.status).toBe(201);
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(tracker.posts(c).map((r) => r.headers['authorization'])).toEqual([
        'Bearer old-token-123',
        'Bearer new-token-456',
      ]);
      expect(keysSent(tracker, c)).toEqual([op, op]);

      const trail = await gate.trail(op);
      const [a1, a2] = trail.operation.attempts;
      expect(a2).toMatchObject({
        retryOfAttemptId: a1!.id,
        retryReason: 'credential_refreshed',
        retryDecision: 'destination_idempotency_honored',
      });
      expect(a1!.request.authorityRef).toMatch(/^authorization:/);
      expect(a2!.request.authorityRef).not.toBe(a1!.request.authorityRef);
      const text = JSON.stringify(trail);
      expect(text).not.toContain('old-token-123');
      expect(text).not.toContain('new-token-456');
    });

    it('Effectgate-Retry-Reason: operator_requested is recorded; any other claimed reason is refused (400) and nothing is sent', async () => {
      const c = '/honored/acme/operator/issues';
      tracker.plan(c, 'commit-then-destroy');
      const body = { title: 'Operator says go' };
      const first = await gate.send(url(c), body);
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;

      const claimed = await gate.send(url(c), body, { 'effectgate-retry-reason': 'because I said so' });
      expect(claimed.status).toBe(400);
      expect(tracker.posts(c)).toHaveLength(1);

      const retry = await gate.send(url(c), body, { 'effectgate-retry-reason': 'operator_requested' });
      expect(retry.status).toBe(201);
      expect(tracker.posts(c)).toHaveLength(2);
      expect(tracker.posts(c)[1]!.headers['effectgate-retry-reason']).toBeUndefined();
      const trail = await gate.trail(op);
      expect(trail.operation.attempts[1]).toMatchObject({
        retryReason: 'operator_requested',
        retryDecision: 'destination_idempotency_honored',
      });
    });

    it('intent change: a materially changed request after a failure forks a new operation; a volatile-only change is attempt 2', async () => {
      const c = '/honored/acme/intent/issues';
      tracker.plan(c, 'reject-422', 'reject-422');
      const first = await gate.send(url(c), { title: 'Rotate keys', labels: ['ops'], trace_id: 'x1' });
      expect(first.status).toBe(422);
      expect(first.headers['effectgate-verdict']).toBe('allow');
      const op1 = first.headers['effectgate-operation'] as string;
      const a1 = first.headers['effectgate-attempt'] as string;

      // Only an ignored (volatile) field changed: the same request, a retry of the same operation.
      const same = await gate.send(url(c), { title: 'Rotate keys', labels: ['ops'], trace_id: 'x2' });
      expect(same.status).toBe(422);
      expect(same.headers['effectgate-operation']).toBe(op1);
      const a2 = same.headers['effectgate-attempt'] as string;
      expect(a2).not.toBe(a1);

      // The agent changes its intent (a field outside fingerprint.ignore), same key fields.
      const changed = await gate.send(url(c), { title: 'Rotate keys', labels: ['security'], trace_id: 'x3' });
      expect(changed.status).toBe(201);
      expect(changed.headers['effectgate-verdict']).toBe('allow');
      const op2 = changed.headers['effectgate-operation'] as string;
      expect(op2).toMatch(UUID);
      expect(op2).not.toBe(op1);
      expect(keysSent(tracker, c)).toEqual([op1, op1, op2]);

      const old = await gate.trail(op1);
      expect(old.operation.state).toBe('failed');
      expect(old.operation.attempts).toMatchObject([
        { id: a1, number: 1, status: 422 },
        { id: a2, number: 2, status: 422, retryOfAttemptId: a1, retryDecision: 'previous_attempt_failed' },
      ]);
      expect(old.operation.attempts[1]!.request.fingerprint).toBe(
        old.operation.attempts[0]!.request.fingerprint,
      );
      const fork = await gate.trail(op2);
      expect(fork.operation).toMatchObject({ state: 'succeeded', supersedesOperationId: op1 });
      expect(fork.operation.attempts).toMatchObject([{ number: 1, retryOfAttemptId: null }]);
      expect(fork.operation.attempts[0]!.request.fingerprint).not.toBe(
        old.operation.attempts[0]!.request.fingerprint,
      );
    });

    it('a changed request after an unknown outcome is never an honored retry: held, and once approved it forks a new operation', async () => {
      const c = '/honored/acme/changed/issues';
      tracker.plan(c, 'commit-then-destroy');
      const first = await gate.send(url(c), { title: 'Grant access', role: 'reader' });
      expect(first.status).toBe(502);
      const op1 = first.headers['effectgate-operation'] as string;

      // Same key (title), another role: the honored key would be reused with another body.
      const changed = await gate.send(url(c), { title: 'Grant access', role: 'admin' });
      expect(changed.status).toBe(428);
      expect(changed.json).toMatchObject({ verdict: 'hold', operation_id: op1 });
      expect(tracker.posts(c)).toHaveLength(1);

      await gate.approve(changed.json['approval_id'] as string, 'erin', 'the admin grant is what we want');
      const forked = await gate.send(url(c), { title: 'Grant access', role: 'admin' });
      expect(forked.status).toBe(201);
      const op2 = forked.headers['effectgate-operation'] as string;
      expect(op2).toMatch(UUID);
      expect(op2).not.toBe(op1);
      // A new operation carries its own key: the destination treats it as a new request.
      expect(keysSent(tracker, c)).toEqual([op1, op2]);

      const fork = await gate.trail(op2);
      expect(fork.operation).toMatchObject({ state: 'succeeded', supersedesOperationId: op1 });
      // The first operation keeps its unknown outcome: the fork does not settle it.
      expect((await gate.trail(op1)).operation.state).toBe('unknown');
    });

    it('a definite failure of the approved retry does not settle the earlier unknown attempt: the next retry is held again', async () => {
      // The destination refuses attempt 2 (as APIs do when the thing attempt 1 created already
      // exists). That says nothing about attempt 1, whose outcome nobody knows: the operation must
      // stay unknown and a further retry must need a person again (docs/design.md §3 "Unknown is
      // dangerous"; and `operations --state unknown` lists exactly the operations whose outcome
      // nobody knows).
      const c = '/held/acme/refused/issues';
      tracker.plan(c, 'commit-then-destroy', 'reject-422');
      const body = { title: 'Open the incident' };
      const first = await gate.send(url(c), body, { 'effectgate-run': 'refused-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      const held = await gate.send(url(c), body, { 'effectgate-run': 'refused-2' });
      expect(held.status).toBe(428);
      await gate.approve(held.json['approval_id'] as string, 'alice', 'one more try');
      const refused = await gate.send(url(c), body, { 'effectgate-run': 'refused-3' });
      expect(refused.status).toBe(422);
      expect(refused.headers['effectgate-verdict']).toBe('allow');
      expect(tracker.posts(c)).toHaveLength(2);
      // Attempt 1 created the issue; nobody has evidence either way from the gate's point of view.
      expect(tracker.issues(c)).toHaveLength(1);

      const afterRefusal = (await gate.trail(op)).operation.state;
      const next = await gate.send(url(c), body, { 'effectgate-run': 'refused-4' });
      const trail = await gate.trail(op);
      expect(
        {
          stateAfterRefusal: afterRefusal,
          next: next.status,
          posts: tracker.posts(c).length,
          issuesCreated: tracker.issues(c).length,
        },
        `attempts: ${JSON.stringify(trail.operation.attempts.map((a) => [a.number, a.dispatchState, a.status, a.retryDecision]))}`,
      ).toEqual({ stateAfterRefusal: 'unknown', next: 428, posts: 2, issuesCreated: 1 });
    });

    it('leaves an audit chain that verifies after holds, approvals, denials, revocations and forks', {
      timeout: 90_000,
    }, async () => {
      const audit = await gate.whileStopped(() => gate.cli(['audit', 'verify', '--json']));
      expect(audit.code, audit.stdout + audit.stderr).toBe(0);
      expect(JSON.parse(audit.stdout)).toMatchObject({ ok: true });
    });
  });
}
