/**
 * Session grants end to end (docs/design.md §3 "Approvals"):
 * the real `effectgate proxy` and CLI beside it, a real loopback issue tracker, undici through the
 * proxy, a real store (PGlite always, PostgreSQL when DATABASE_URL is set). An operator lets a
 * recovery run retry unknown operations of a tool for 30 minutes; its retries go out without a
 * card per call, each card records the grant; once revoked, the run is held again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;

for (const target of storeTargets()) {
  describe(`session grants through the proxy (${target.name})`, { timeout: 60_000 }, () => {
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

    it('a granted recovery run retries an unknown operation without a card per call; after revoke it is held', async () => {
      const c = '/held/acme/grant/issues';
      const issue = { title: 'Page the on-call', body: 'disk 97%' };
      tracker.plan(c, 'destroy-before-commit');
      const first = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'agent-run-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;

      const grantArgs = ['approvals', 'grant', '--run', 'recovery-7', '--tool', 'test.held_issue'];
      const who = ['--by', 'ops@acme.test', '--reason', 'replaying the 03:00 batch', '--ttl', '30m'];
      const unscoped = await gate.cli([...grantArgs, ...who]);
      expect(unscoped.code).toBe(1);
      expect(unscoped.stderr).toContain('EG_ERR_CONFIG_INVALID');
      expect(unscoped.stderr).toContain('has decided nothing yet');
      const granted = await gate.cli([
        ...grantArgs,
        '--tenant',
        'acme',
        '--area',
        'support',
        '--agent',
        'triage-bot',
        ...who,
        '--json',
      ]);
      expect(granted.code, granted.stderr).toBe(0);
      const grant = JSON.parse(granted.stdout) as { id: string; state: string; expiresAt: string };
      expect(grant.state).toBe('active');

      // Another run is still held; the recovery run goes out, with the operation's key.
      const other = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'agent-run-2' });
      expect(other.status).toBe(428);
      const retry = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'recovery-7' });
      expect(retry.status).toBe(201);
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(tracker.posts(c).map((r) => r.headers['idempotency-key'])).toEqual([op, op]);
      expect(tracker.issues(c)).toHaveLength(1);

      const trail = await gate.trail(op);
      expect(trail.approvals).toMatchObject([
        { state: 'used', grantId: grant.id, decidedBy: 'ops@acme.test' },
      ]);
      expect(trail.operation.attempts.at(-1)).toMatchObject({
        retryDecision: 'operator_approved',
        runId: 'recovery-7',
      });
      const text = await gate.cli(['trail', op]);
      expect(text.stdout).toContain(`under session grant ${grant.id}`);

      const listed = await gate.cli(['approvals', 'grants', '--run', 'recovery-7', '--json']);
      expect(JSON.parse(listed.stdout)).toMatchObject({ grants: [{ id: grant.id, state: 'active' }] });
      const revoked = await gate.cli([
        'approvals',
        'revoke',
        grant.id,
        '--by',
        'lead@acme.test',
        '--reason',
        'batch done',
      ]);
      expect(revoked.code, revoked.stderr).toBe(0);
      expect(revoked.stdout).toContain(`revoked grant ${grant.id}`);

      const c2 = '/held/acme/grant2/issues';
      tracker.plan(c2, 'destroy-before-commit');
      const lost = await gate.send(`${tracker.url}${c2}`, issue, { 'effectgate-run': 'agent-run-3' });
      expect(lost.status).toBe(502);
      const held = await gate.send(`${tracker.url}${c2}`, issue, { 'effectgate-run': 'recovery-7' });
      expect(held.status).toBe(428);
      expect(tracker.posts(c2)).toHaveLength(1);

      const api = await gate.api('/api/grants?run=recovery-7');
      expect(api.json).toMatchObject({
        grants: [{ id: grant.id, state: 'revoked', revokedBy: 'lead@acme.test' }],
      });
      const verify = await gate.cli(['audit', 'verify']);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    });
  });
}
