/**
 * Crash recovery end to end (docs/design.md §3 "Persist before dispatch": a restart never forgets
 * uncertainty): the real `effectgate proxy` is SIGKILLed while requests are at the
 * destination, restarted on the same store, and must find every attempt it persisted but never
 * settled: `sent_no_response`, a `gate_restarted` observation, the operation `unknown`, and then
 * each follows its tool's unknown-outcome rule. On PGlite the directory lock proves the old gate
 * dead, so recovery runs at start; on PostgreSQL the dead gate's heartbeat goes stale
 * (`--heartbeat 200ms --stale-after 1s`) and the survivor's sweep recovers it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest, type Trail } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;
const HELD = '/held/acme/crash/issues';
const HONORED = '/honored/acme/crash/issues';
const RECONCILED = '/repos/acme/crash/issues';

/** Polls the trail until the operation is unknown (PostgreSQL: the survivor's sweep runs every 1.2 s). */
async function untilUnknown(gate: GateUnderTest, operationId: string, timeoutMs = 15_000): Promise<Trail> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const trail = await gate.trail(operationId);
    if (trail.operation.state === 'unknown') return trail;
    if (Date.now() > until) throw new Error(`operation ${operationId} is still ${trail.operation.state}`);
    await sleep(100);
  }
}

const opOf = (tracker: IssueTracker, collection: string): string =>
  tracker.posts(collection)[0]!.headers['idempotency-key'] as string;

for (const target of storeTargets()) {
  describe(`crash recovery (${target.name})`, () => {
    let tracker: IssueTracker;
    const url = (collection: string): string => `${tracker.url}${collection}`;

    beforeAll(async () => {
      tracker = await startIssueTracker({ honorsKeys: (c) => c.startsWith('/honored/') });
    });

    afterAll(async () => {
      await tracker?.close();
    });

    /**
     * Sends one proposal per tool, each committed by the destination and never answered, waits until
     * the destination has all three, then SIGKILLs the gate. Returns the operation ids (the
     * Idempotency-Key the destination saw is the operation id).
     */
    async function killMidRequest(
      gate: GateUnderTest,
    ): Promise<{ held: string; honored: string; reconciled: string }> {
      const inflight = [HELD, HONORED, RECONCILED].map((c) => {
        tracker.plan(c, 'commit-then-hang');
        return gate
          .send(
            url(c),
            { title: 'In flight at the crash' },
            { authorization: 'Bearer crash-token', 'effectgate-run': 'doomed' },
          )
          .then(
            (r) => r.status,
            (err: unknown) => err,
          );
      });
      for (const c of [HELD, HONORED, RECONCILED]) await tracker.waitForPosts(c, 1);
      await gate.kill();
      // The agent never got an answer: its connection to the gate died with it.
      for (const result of await Promise.all(inflight)) expect(result).toBeInstanceOf(Error);
      return {
        held: opOf(tracker, HELD),
        honored: opOf(tracker, HONORED),
        reconciled: opOf(tracker, RECONCILED),
      };
    }

    it('SIGKILL mid-request, restart, recovery: every in-flight attempt is sent_no_response, its operation unknown, then settled by its rule', async () => {
      const gate = await startGateUnderTest(target, POLICIES);
      try {
        const ops = await killMidRequest(gate);
        // Persisted before dispatch: the destination saw the operation ids the trail must know.
        for (const id of Object.values(ops)) expect(id).toMatch(/^[0-9a-f-]{36}$/);

        await gate.start();
        const trails: Record<string, Trail> = {};
        for (const [name, id] of Object.entries(ops)) trails[name] = await untilUnknown(gate, id);
        for (const [name, trail] of Object.entries(trails)) {
          const [attempt] = trail.operation.attempts;
          expect(trail.operation.attempts, name).toHaveLength(1);
          expect(attempt, name).toMatchObject({
            number: 1,
            runId: 'doomed',
            dispatchState: 'sent_no_response',
            recoveredAt: expect.any(String),
            error: expect.stringContaining('gate_restarted'),
          });
          expect(trail.observations, name).toMatchObject([
            { kind: 'gate_restarted', result: 'marked_unknown', attemptId: attempt!.id },
          ]);
          expect(JSON.stringify(trail), name).not.toContain('crash-token');
        }
        // Only the tool that needs a person gets an approval request from recovery.
        expect(trails['held']!.approvals).toMatchObject([
          { state: 'requested', requestedBy: expect.stringMatching(/^recovery:/) },
        ]);
        expect(trails['honored']!.approvals).toEqual([]);
        expect(trails['reconciled']!.approvals).toEqual([]);
        const recoveredLog = gate.proxy.stderr();
        for (const id of Object.values(ops)) expect(recoveredLog).toContain(id);

        // Beside the running gate (on PGlite through its store socket).
        const r = await gate.cli(['operations', '--state', 'unknown', '--json']);
        expect(r.code, r.stderr).toBe(0);
        const unknownNow = (JSON.parse(r.stdout) as { operations: { id: string }[] }).operations.map(
          (o) => o.id,
        );
        expect(unknownNow.sort()).toEqual(Object.values(ops).sort());

        // The next proposals follow each tool's rule. Honored: retried at once with the same key,
        // and the destination replays what it did before the crash.
        const honored = await gate.send(
          url(HONORED),
          { title: 'In flight at the crash' },
          { 'effectgate-run': 'after' },
        );
        expect(honored.status).toBe(201);
        expect(honored.headers['effectgate-operation']).toBe(ops.honored);
        expect(honored.headers['idempotent-replayed']).toBe('true');
        expect(tracker.posts(HONORED).map((r) => r.headers['idempotency-key'])).toEqual([
          ops.honored,
          ops.honored,
        ]);
        expect(tracker.issues(HONORED)).toHaveLength(1);
        const honoredTrail = await gate.trail(ops.honored);
        expect(honoredTrail.operation.state).toBe('succeeded');
        expect(honoredTrail.operation.attempts[1]).toMatchObject({
          retryOfAttemptId: trails['honored']!.operation.attempts[0]!.id,
          retryReason: 'response_lost_after_dispatch',
          retryDecision: 'destination_idempotency_honored',
          replayed: true,
        });

        // Reconcile: looked up with this proposal's credentials, found once, settled, nothing re-sent.
        const reconciled = await gate.send(
          url(RECONCILED),
          { title: 'In flight at the crash' },
          { authorization: 'Bearer after-token', 'effectgate-run': 'after' },
        );
        expect(reconciled.status).toBe(409);
        expect(reconciled.json).toMatchObject({
          verdict: 'duplicate',
          operation_id: ops.reconciled,
          operation_state: 'succeeded',
          reconciliation: 'match',
        });
        expect(tracker.posts(RECONCILED)).toHaveLength(1);
        expect(tracker.gets(RECONCILED).map((r) => r.headers['authorization'])).toEqual([
          'Bearer after-token',
        ]);
        expect((await gate.trail(ops.reconciled)).observations.map((o) => [o.kind, o.result])).toEqual([
          ['gate_restarted', 'marked_unknown'],
          ['reconciliation', 'match'],
        ]);

        // Hold: the approval request recovery opened is the one the agent is pointed to.
        const held = await gate.send(
          url(HELD),
          { title: 'In flight at the crash' },
          { 'effectgate-run': 'after' },
        );
        expect(held.status).toBe(428);
        expect(held.json).toMatchObject({
          verdict: 'hold',
          operation_id: ops.held,
          approval_id: trails['held']!.approvals[0]!.id,
          previous_dispatch_state: 'sent_no_response',
        });
        expect(tracker.posts(HELD)).toHaveLength(1);

        // Exactly the operation whose outcome nobody knows is left, and the chain still verifies.
        const api = await gate.api('/api/operations?state=unknown');
        expect((api.json['operations'] as { id: string }[]).map((o) => o.id)).toEqual([ops.held]);
        await gate.whileStopped(async () => {
          const r = await gate.cli(['operations', '--state', 'unknown', '--json']);
          expect(r.code, r.stderr).toBe(0);
          const listed = JSON.parse(r.stdout) as {
            operations: { id: string }[];
            counts: Record<string, number>;
          };
          expect(listed.operations.map((o) => o.id)).toEqual([ops.held]);
          expect(listed.counts).toMatchObject({ unknown: 1, succeeded: 2, open: 0 });
          const audit = await gate.cli(['audit', 'verify']);
          expect(audit.code, audit.stdout + audit.stderr).toBe(0);
        });
      } finally {
        await gate.close();
      }
    }, 180_000);

    // Replicas share a database: only PostgreSQL can (the embedded store is single-process).
    if (target.kind === 'postgres')
      it('two replicas on one PostgreSQL: one is SIGKILLed mid-request, the survivor recovers its attempt and serves the retry', async () => {
        const a = await startGateUnderTest(target, POLICIES);
        const b = await startGateUnderTest(target, POLICIES, { storeUrl: a.storeUrl });
        try {
          const c = '/honored/acme/replicas/issues';
          tracker.plan(c, 'commit-then-hang');
          const inflight = a
            .send(url(c), { title: 'Replica died' }, { 'effectgate-run': 'doomed' })
            .catch((err: unknown) => err);
          await tracker.waitForPosts(c, 1);
          // The survivor must leave a live peer's in-flight attempt alone.
          await sleep(1_500);
          const op = opOf(tracker, c);
          expect((await b.trail(op)).operation).toMatchObject({
            state: 'open',
            attempts: [{ dispatchState: null }],
          });

          await a.kill();
          expect(await inflight).toBeInstanceOf(Error);
          const trail = await untilUnknown(b, op);
          expect(trail.operation.attempts[0]).toMatchObject({ dispatchState: 'sent_no_response' });
          expect(trail.observations).toMatchObject([{ kind: 'gate_restarted', result: 'marked_unknown' }]);
          expect(b.proxy.stderr()).toContain(op);

          const retry = await b.send(url(c), { title: 'Replica died' }, { 'effectgate-run': 'after' });
          expect(retry.status).toBe(201);
          expect(retry.headers['effectgate-operation']).toBe(op);
          expect(retry.headers['idempotent-replayed']).toBe('true');
          expect(tracker.issues(c)).toHaveLength(1);
          const r = await b.cli(['operations', '--state', 'unknown', '--json']);
          expect((JSON.parse(r.stdout) as { operations: unknown[] }).operations).toEqual([]);
        } finally {
          await b.close();
          await a.close();
        }
      }, 120_000);

    it("`effectgate recover` with the gate down, and no policies, marks the orphans once by each operation's own rule", async () => {
      const gate = await startGateUnderTest(target, POLICIES);
      try {
        const c = '/held/acme/recover-cli/issues';
        const h = '/honored/acme/recover-cli/issues';
        tracker.plan(c, 'commit-then-hang');
        tracker.plan(h, 'commit-then-hang');
        const inflight = [c, h].map((col) =>
          gate
            .send(url(col), { title: 'Orphaned' }, { 'effectgate-run': 'doomed' })
            .catch((err: unknown) => err),
        );
        await tracker.waitForPosts(c, 1);
        await tracker.waitForPosts(h, 1);
        await gate.kill();
        for (const result of await Promise.all(inflight)) expect(result).toBeInstanceOf(Error);
        const op = opOf(tracker, c);
        const honoredOp = opOf(tracker, h);

        // PostgreSQL: the dead gate is recognised by its stale heartbeat. No --policies: every
        // operation carries its tool's unknown rule (an unknown tool would fall back to hold).
        if (target.kind === 'postgres') await sleep(1_500);
        const r = await gate.cli(['recover', '--stale-after', '1s', '--json']);
        expect(r.code, r.stderr).toBe(0);
        const out = JSON.parse(r.stdout) as {
          count: number;
          recovered: { operationId: string; toolId: string; approvalId: string | null; rule: string }[];
        };
        expect(out.count).toBe(2);
        const byOp = new Map(out.recovered.map((x) => [x.operationId, x]));
        expect(byOp.get(op)).toMatchObject({
          toolId: 'test.held_issue',
          rule: 'hold',
          approvalId: expect.any(String),
        });
        expect(byOp.get(honoredOp)).toMatchObject({ rule: 'honored', approvalId: null });
        const again = await gate.cli(['recover', '--stale-after', '1s', '--json']);
        expect(JSON.parse(again.stdout)).toMatchObject({ count: 0, recovered: [] });

        await gate.start();
        const trail = await gate.trail(op);
        expect(trail.operation.state).toBe('unknown');
        expect(trail.observations).toMatchObject([{ kind: 'gate_restarted', result: 'marked_unknown' }]);
        expect(trail.approvals).toMatchObject([{ id: byOp.get(op)!.approvalId, state: 'requested' }]);
        expect(gate.proxy.stderr()).not.toContain(op);

        await gate.whileStopped(async () => {
          const audit = await gate.cli(['audit', 'verify']);
          expect(audit.code, audit.stdout + audit.stderr).toBe(0);
        });
      } finally {
        await gate.close();
      }
    }, 180_000);
  });
}
