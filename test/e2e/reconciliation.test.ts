/**
 * Reconciliation end to end (docs/design.md §3 "Reconciliation appends, never rewrites"):
 * the real `effectgate proxy`, a real stateful loopback issue tracker whose list endpoint the gate
 * looks up after an unknown outcome (tool `reconcile`, destination that does not honor keys), with
 * the agent's own credentials. One match settles the operation as succeeded, none keeps it unknown
 * and holds the retry, two or more confirm a duplicate effect; an unusable answer settles nothing.
 * PGlite always, PostgreSQL when DATABASE_URL is set.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, type Sent, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;
const UUID = /^[0-9a-f-]{36}$/;

const keysSent = (tracker: IssueTracker, collection: string): unknown[] =>
  tracker.posts(collection).map((r) => r.headers['idempotency-key']);

for (const target of storeTargets()) {
  describe(`reconciliation through the proxy (${target.name})`, () => {
    let tracker: IssueTracker;
    let gate: GateUnderTest;
    const url = (collection: string): string => `${tracker.url}${collection}`;

    beforeAll(async () => {
      tracker = await startIssueTracker();
      gate = await startGateUnderTest(target, POLICIES);
    }, 120_000);

    afterAll(async () => {
      await gate?.close();
      await tracker?.close();
    });

    /** First POST dies without an answer (`behaviour`), then the same proposal from another run. */
    async function unknownThenRetry(
      c: string,
      title: string,
      behaviour: 'commit-then-destroy' | 'destroy-before-commit',
      token: string,
    ): Promise<{ first: Sent; retry: Sent; op: string; a1: string }> {
      tracker.plan(c, behaviour);
      const first = await gate.send(
        url(c),
        { title },
        { authorization: `Bearer ${token}`, 'effectgate-run': `${title}-1` },
      );
      expect(first.status).toBe(502);
      expect(first.json).toMatchObject({ dispatch_state: 'sent_no_response', operation_state: 'unknown' });
      const op = first.headers['effectgate-operation'] as string;
      const a1 = first.headers['effectgate-attempt'] as string;
      const retry = await gate.send(
        url(c),
        { title },
        { authorization: `Bearer ${token}`, 'effectgate-run': `${title}-2` },
      );
      return { first, retry, op, a1 };
    }

    it('one match: 409 duplicate pointing to the original operation, which is settled succeeded by the observation', async () => {
      const c = '/repos/acme/rec-one/issues';
      tracker.seed(c, 'Some other issue');
      const { retry, op, a1 } = await unknownThenRetry(c, 'Reconcile me', 'commit-then-destroy', 'tok-one');
      const created = tracker.issues(c).find((i) => i.title === 'Reconcile me')!;

      expect(retry.status).toBe(409);
      expect(retry.headers['content-type']).toBe('application/problem+json');
      expect(retry.headers['effectgate-verdict']).toBe('duplicate');
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(retry.headers['effectgate-attempt']).toBeUndefined();
      expect(retry.json).toMatchObject({
        verdict: 'duplicate',
        operation_id: op,
        operation_state: 'succeeded',
        reconciliation: 'match',
        source: {
          run_id: 'Reconcile me-1',
          operation_id: op,
          attempt_id: a1,
          destination_ref: created.html_url,
        },
      });

      // One POST, then one lookup made with the agent's own credentials and no idempotency key.
      expect(tracker.posts(c)).toHaveLength(1);
      const gets = tracker.gets(c);
      expect(gets).toHaveLength(1);
      expect(gets[0]!.url).toBe('/repos/acme/rec-one/issues?state=all');
      expect(gets[0]!.headers['authorization']).toBe('Bearer tok-one');
      expect(gets[0]!.headers['idempotency-key']).toBeUndefined();
      expect(tracker.issues(c).filter((i) => i.title === 'Reconcile me')).toHaveLength(1);

      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.operation.attempts).toMatchObject([{ id: a1, dispatchState: 'sent_no_response' }]);
      expect(trail.observations).toHaveLength(1);
      expect(trail.observations[0]).toMatchObject({
        kind: 'reconciliation',
        result: 'match',
        attemptId: a1,
        facts: {
          endpoint: `GET ${tracker.url}/repos/acme/rec-one/issues?state=all`,
          matches: 1,
          remoteRefs: [created.html_url],
          status: 200,
        },
      });
      expect(String(trail.observations[0]!.facts['queryFingerprint'])).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(trail.decisions.map((d) => d.verdict)).toEqual(['allow', 'duplicate']);
      expect(JSON.stringify(trail)).not.toContain('tok-one');

      // Settled for good: the next proposal is a plain duplicate, no lookup.
      const again = await gate.send(url(c), { title: 'Reconcile me' }, { 'effectgate-run': 'rec-one-3' });
      expect(again.status).toBe(409);
      expect(again.json).toMatchObject({ verdict: 'duplicate', operation_id: op });
      expect(tracker.gets(c)).toHaveLength(1);
      expect(tracker.posts(c)).toHaveLength(1);
    });

    it('zero matches: a negative observation, the operation stays unknown, the retry is held (428) for approval', async () => {
      const c = '/repos/acme/rec-none/issues';
      tracker.seed(c, 'Unrelated');
      const { retry, op, a1 } = await unknownThenRetry(
        c,
        'Never landed',
        'destroy-before-commit',
        'tok-none',
      );

      expect(retry.status).toBe(428);
      expect(retry.headers['effectgate-verdict']).toBe('hold');
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(retry.headers['effectgate-attempt']).toBeUndefined();
      expect(retry.json).toMatchObject({
        verdict: 'hold',
        operation_id: op,
        operation_state: 'unknown',
        reconciliation: 'none',
        previous_attempt_id: a1,
        previous_dispatch_state: 'sent_no_response',
        approval_id: expect.stringMatching(UUID),
      });
      expect(tracker.posts(c)).toHaveLength(1);
      expect(tracker.gets(c)).toHaveLength(1);
      expect(tracker.gets(c)[0]!.headers['authorization']).toBe('Bearer tok-none');

      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('unknown');
      expect(trail.observations).toMatchObject([
        { kind: 'reconciliation', result: 'none', facts: { matches: 0, remoteRefs: [] } },
      ]);
      expect(trail.approvals).toMatchObject([
        { id: retry.json['approval_id'], state: 'requested', previousAttemptId: a1 },
      ]);
      const listed = await gate.api('/api/approvals?state=requested');
      expect((listed.json['approvals'] as { id: string }[]).map((a) => a.id)).toContain(
        retry.json['approval_id'],
      );

      // Approved: the next proposal looks again (still nothing), then makes the approved attempt.
      await gate.approve(retry.json['approval_id'] as string, 'alice', 'not in the tracker, send it');
      const approved = await gate.send(
        url(c),
        { title: 'Never landed' },
        { authorization: 'Bearer tok-none', 'effectgate-run': 'Never landed-3' },
      );
      expect(approved.status).toBe(201);
      expect(approved.headers['effectgate-operation']).toBe(op);
      expect(tracker.gets(c)).toHaveLength(2);
      expect(keysSent(tracker, c)).toEqual([op, op]);
      expect(tracker.issues(c).filter((i) => i.title === 'Never landed')).toHaveLength(1);
      const after = await gate.trail(op);
      expect(after.operation.state).toBe('succeeded');
      expect(after.operation.attempts[1]).toMatchObject({
        retryOfAttemptId: a1,
        retryReason: 'response_lost_after_dispatch',
        retryDecision: 'operator_approved',
      });
      expect(after.observations.map((o) => o.result)).toEqual(['none', 'none']);
    });

    it('an inconclusive lookup (503, not JSON) settles nothing: the retry is held', async () => {
      const c = '/repos/acme/rec-broken/issues';
      tracker.planList(c, 'fail-503', 'not-json');
      const { retry, op } = await unknownThenRetry(c, 'Cannot tell', 'commit-then-destroy', 'tok-broken');
      expect(retry.status).toBe(428);
      expect(retry.json).toMatchObject({
        verdict: 'hold',
        operation_state: 'unknown',
        reconciliation: 'inconclusive',
      });
      const again = await gate.send(url(c), { title: 'Cannot tell' }, { authorization: 'Bearer tok-broken' });
      expect(again.status).toBe(428);
      expect(again.json).toMatchObject({
        reconciliation: 'inconclusive',
        approval_id: retry.json['approval_id'],
      });
      expect(tracker.posts(c)).toHaveLength(1);
      expect(tracker.gets(c)).toHaveLength(2);
      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('unknown');
      expect(trail.observations).toMatchObject([
        { kind: 'reconciliation', result: 'inconclusive', facts: { status: 503, matches: 0 } },
        { kind: 'reconciliation', result: 'inconclusive', facts: { status: 200, matches: 0 } },
      ]);
    });

    it('two matches: 409 duplicate with operation_state duplicate_effect_confirmed, every remote reference kept', async () => {
      const c = '/repos/acme/rec-two/issues';
      // Someone already filed it by hand; the gate's attempt then filed it again.
      const earlier = tracker.seed(c, 'Filed twice');
      const { retry, op } = await unknownThenRetry(c, 'Filed twice', 'commit-then-destroy', 'tok-two');
      const both = tracker.issues(c).filter((i) => i.title === 'Filed twice');
      expect(both).toHaveLength(2);

      expect(retry.status).toBe(409);
      expect(retry.headers['effectgate-verdict']).toBe('duplicate');
      expect(retry.json).toMatchObject({
        verdict: 'duplicate',
        operation_id: op,
        operation_state: 'duplicate_effect_confirmed',
        reconciliation: 'multiple',
        source: { operation_id: op, destination_ref: earlier.html_url },
      });
      expect(String(retry.json['detail'])).toContain('MORE THAN ONCE');
      expect(tracker.posts(c)).toHaveLength(1);
      expect(tracker.gets(c)).toHaveLength(1);

      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('duplicate_effect_confirmed');
      expect(trail.observations).toMatchObject([
        {
          kind: 'reconciliation',
          result: 'multiple',
          facts: { matches: 2, remoteRefs: both.map((i) => i.html_url) },
        },
      ]);
    });
  });
}
