/**
 * Unknown outcomes end to end (docs/design.md §3): the real `effectgate proxy` binary, a real
 * stateful loopback issue tracker that can commit an effect and then destroy the socket before
 * answering, real clients (undici through ProxyAgent in absolute form, curl -x), and a real store:
 * embedded PGlite always, PostgreSQL when DATABASE_URL is set. Every scenario checks the answer
 * the agent got, what the destination really saw, and the trail (admin API, CLI).
 *
 * Reconciliation is in reconciliation.test.ts; approvals, retry reasons and intent changes in
 * retry-lineage.test.ts; crash recovery (SIGKILL mid-request) in crash-recovery.test.ts.
 */
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, type Sent, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/unknown-policies/', import.meta.url).pathname;
const execFileP = promisify(execFile);
const UUID = /^[0-9a-f-]{36}$/;

/** Destinations that honor Idempotency-Key: the honored and budget tools' routes. */
const honorsKeys = (collection: string): boolean =>
  ['/honored/', '/budget/', '/slow/'].some((prefix) => collection.startsWith(prefix));

const keysSent = (tracker: IssueTracker, collection: string): unknown[] =>
  tracker.posts(collection).map((r) => r.headers['idempotency-key']);

/** `curl -i` output → status, lower-cased headers, JSON body. */
function parseCurl(stdout: string): Sent {
  const split = stdout.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = stdout.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  const body = stdout.slice(split + 4);
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine ?? '')?.[1]),
    headers,
    json: body ? (JSON.parse(body) as Record<string, unknown>) : {},
  };
}

for (const target of storeTargets()) {
  describe(`unknown outcomes through the proxy (${target.name})`, () => {
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

    it('forced failure: the lost response is unknown, the next run retries the SAME operation with the same key, the destination replays, the trail closes it with evidence', async () => {
      const c = '/honored/acme/seed/issues';
      tracker.plan(c, 'commit-then-destroy');
      const auth = { authorization: 'Bearer agent-secret-seed' };

      const first = await gate.send(
        url(c),
        { title: 'Forced failure', body: 'Smoke test of the retry path' },
        { ...auth, 'effectgate-run': 'seed-run-1', 'effectgate-step': 'open-issue' },
      );
      expect(first.status).toBe(502);
      expect(first.headers['content-type']).toBe('application/problem+json');
      expect(first.headers['effectgate-verdict']).toBe('allow');
      const op = first.headers['effectgate-operation'] as string;
      const a1 = first.headers['effectgate-attempt'] as string;
      expect(op).toMatch(UUID);
      expect(a1).toMatch(UUID);
      expect(first.json).toMatchObject({
        verdict: 'allow',
        dispatch_state: 'sent_no_response',
        operation_state: 'unknown',
        operation_id: op,
      });
      // The effect happened; nobody told the agent.
      expect(tracker.issues(c)).toHaveLength(1);
      expect(keysSent(tracker, c)).toEqual([op]);
      const before = await gate.trail(op);
      expect(before.operation.state).toBe('unknown');
      expect(before.operation.attempts).toMatchObject([
        { id: a1, number: 1, dispatchState: 'sent_no_response' },
      ]);

      // The agent's next run proposes the same effect. (Same body: a destination that honors keys
      // refuses a reused key with another body, whatever the gate considers volatile.)
      const second = await gate.send(
        url(c),
        { title: 'Forced failure', body: 'Smoke test of the retry path' },
        { ...auth, 'effectgate-run': 'seed-run-2', 'effectgate-step': 'open-issue' },
      );
      expect(second.status).toBe(201);
      expect(second.headers['effectgate-verdict']).toBe('allow');
      expect(second.headers['effectgate-operation']).toBe(op);
      const a2 = second.headers['effectgate-attempt'] as string;
      expect(a2).toMatch(UUID);
      expect(a2).not.toBe(a1);
      expect(second.headers['idempotent-replayed']).toBe('true');
      expect(second.json).toEqual(tracker.issues(c)[0]);
      // Same key both times; the destination created the issue once.
      expect(keysSent(tracker, c)).toEqual([op, op]);
      expect(tracker.issues(c)).toHaveLength(1);

      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.operation.idempotencyHeader).toBe('Idempotency-Key');
      const [t1, t2] = trail.operation.attempts;
      expect(t1).toMatchObject({
        id: a1,
        number: 1,
        dispatchState: 'sent_no_response',
        retryOfAttemptId: null,
      });
      expect(t2).toMatchObject({
        id: a2,
        number: 2,
        runId: 'seed-run-2',
        dispatchState: 'response_received',
        status: 201,
        retryOfAttemptId: a1,
        retryReason: 'response_lost_after_dispatch',
        retryDecision: 'destination_idempotency_honored',
        remainingAttempts: 1,
        replayed: true,
        destinationRef: tracker.issues(c)[0]!.html_url,
      });
      // Both request fingerprints are on the trail: the same request both times.
      expect(t2!.request.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(t2!.request.fingerprint).toBe(t1!.request.fingerprint);
      expect(trail.decisions.map((d) => d.verdict)).toEqual(['allow', 'allow']);
      expect(JSON.stringify(trail)).not.toContain('agent-secret-seed');

      // Settled: a third proposal is a duplicate of attempt 2's result; nothing is sent.
      const third = await gate.send(url(c), { title: 'Forced failure' }, { 'effectgate-run': 'seed-run-3' });
      expect(third.status).toBe(409);
      expect(third.json).toMatchObject({
        verdict: 'duplicate',
        operation_id: op,
        source: { run_id: 'seed-run-2', operation_id: op, attempt_id: a2 },
      });
      expect(tracker.posts(c)).toHaveLength(2);
    });

    it('a timeout is unknown, never failed: 504 after the dispatch deadline, then an honored retry with the same key', async () => {
      const c = '/slow/acme/etl/issues';
      tracker.plan(c, 'commit-then-hang');
      const started = Date.now();
      const first = await gate.send(url(c), { title: 'Slow effect' }, { 'effectgate-run': 'slow-1' });
      // pending_ttl 1s: the gate gives up after 0.9 s, before the reservation could expire.
      expect(Date.now() - started).toBeGreaterThanOrEqual(850);
      expect(first.status).toBe(504);
      expect(first.headers['content-type']).toBe('application/problem+json');
      expect(first.headers['effectgate-verdict']).toBe('allow');
      const op = first.headers['effectgate-operation'] as string;
      const a1 = first.headers['effectgate-attempt'] as string;
      expect(first.json).toMatchObject({
        verdict: 'allow',
        dispatch_state: 'sent_no_response',
        operation_state: 'unknown',
        operation_id: op,
      });
      expect((await gate.trail(op)).operation).toMatchObject({
        state: 'unknown',
        attempts: [{ id: a1, dispatchState: 'sent_no_response', status: null }],
      });

      // Past pending_ttl: an unknown outcome is not an expired reservation, the rule still applies.
      await sleep(1_200);
      const retry = await gate.send(url(c), { title: 'Slow effect' }, { 'effectgate-run': 'slow-2' });
      expect(retry.status).toBe(201);
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(keysSent(tracker, c)).toEqual([op, op]);
      expect(tracker.issues(c)).toHaveLength(1);
      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.operation.attempts[1]).toMatchObject({
        retryOfAttemptId: a1,
        retryReason: 'response_lost_after_dispatch',
        retryDecision: 'destination_idempotency_honored',
        replayed: true,
      });
    });

    it('a 5xx is unknown by the outcome contract: relayed as is, then an honored retry (reason destination_5xx) is replayed', async () => {
      const c = '/honored/acme/five/issues';
      tracker.plan(c, 'commit-then-503');
      const first = await gate.send(url(c), { title: 'Behind a flaky front' }, { 'effectgate-run': '5xx-1' });
      expect(first.status).toBe(503);
      expect(first.headers['effectgate-verdict']).toBe('allow');
      expect(first.json).toEqual({ message: 'Service Unavailable' });
      const op = first.headers['effectgate-operation'] as string;
      const a1 = first.headers['effectgate-attempt'] as string;
      expect((await gate.trail(op)).operation).toMatchObject({
        state: 'unknown',
        attempts: [{ id: a1, dispatchState: 'response_received', status: 503 }],
      });

      const retry = await gate.send(url(c), { title: 'Behind a flaky front' }, { 'effectgate-run': '5xx-2' });
      expect(retry.status).toBe(201);
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(retry.headers['idempotent-replayed']).toBe('true');
      expect(keysSent(tracker, c)).toEqual([op, op]);
      expect(tracker.issues(c)).toHaveLength(1);
      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.operation.attempts[1]).toMatchObject({
        retryOfAttemptId: a1,
        retryReason: 'destination_5xx',
        retryDecision: 'destination_idempotency_honored',
        replayed: true,
      });
    });

    it('an unknown outcome without a guarantee stays held after pending_ttl: never taken over as an expired reservation', async () => {
      const c = '/quick/acme/ttl/issues';
      tracker.plan(c, 'commit-then-destroy');
      const first = await gate.send(url(c), { title: 'Past the TTL' }, { 'effectgate-run': 'ttl-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      await sleep(1_200);
      const later = await gate.send(url(c), { title: 'Past the TTL' }, { 'effectgate-run': 'ttl-2' });
      expect(later.status).toBe(428);
      expect(later.json).toMatchObject({ verdict: 'hold', operation_id: op, operation_state: 'unknown' });
      expect(tracker.posts(c)).toHaveLength(1);
      expect((await gate.trail(op)).operation.state).toBe('unknown');
    });

    it('concurrent honored retries of one unknown operation: exactly one goes out, the other waits and is told pending', async () => {
      const c = '/honored/acme/race/issues';
      tracker.plan(c, 'commit-then-destroy', 'slow-ok');
      const first = await gate.send(url(c), { title: 'Raced retry' }, { 'effectgate-run': 'race-0' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      const [a, b] = await Promise.all([
        gate.send(url(c), { title: 'Raced retry' }, { 'effectgate-run': 'race-a' }),
        sleep(100).then(() => gate.send(url(c), { title: 'Raced retry' }, { 'effectgate-run': 'race-b' })),
      ]);
      const [won, waited] = a.status === 201 ? [a, b] : [b, a];
      expect([won.status, waited.status]).toEqual([201, 409]);
      expect(won.headers['effectgate-operation']).toBe(op);
      expect(waited.json).toMatchObject({ verdict: 'pending', operation_id: op });
      expect(waited.headers['retry-after']).toEqual(expect.any(String));
      expect(keysSent(tracker, c)).toEqual([op, op]);
      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.operation.attempts).toHaveLength(2);
    });

    it('retry budget (curl -x): with budget 2, two lost attempts exhaust it and the third proposal is blocked (403)', async () => {
      const c = '/budget/acme/jobs/issues';
      tracker.plan(c, 'commit-then-destroy', 'commit-then-destroy');
      const curl = async (run: string): Promise<Sent> => {
        const { stdout } = await execFileP('curl', [
          '-s',
          '-i',
          '-x',
          gate.proxy.url,
          '-X',
          'POST',
          '-H',
          'content-type: application/json',
          '-H',
          `effectgate-run: ${run}`,
          '-d',
          '{"title":"Nightly export"}',
          url(c),
        ]);
        return parseCurl(stdout);
      };
      const one = await curl('budget-1');
      expect(one.status).toBe(502);
      const op = one.headers['effectgate-operation'] as string;
      expect(op).toMatch(UUID);
      const two = await curl('budget-2');
      expect(two.status).toBe(502);
      expect(two.headers['effectgate-verdict']).toBe('allow');
      expect(two.headers['effectgate-operation']).toBe(op);
      expect(two.json).toMatchObject({ dispatch_state: 'sent_no_response', operation_state: 'unknown' });

      const three = await curl('budget-3');
      expect(three.status).toBe(403);
      expect(three.headers['content-type']).toBe('application/problem+json');
      expect(three.headers['effectgate-verdict']).toBe('block');
      expect(three.json).toMatchObject({
        verdict: 'block',
        reason: 'retry_budget_exhausted',
        tool: 'test.budget_issue',
      });
      expect(keysSent(tracker, c)).toEqual([op, op]);

      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('unknown');
      expect(trail.operation.attempts.map((a) => [a.number, a.remainingAttempts, a.dispatchState])).toEqual([
        [1, 1, 'sent_no_response'],
        [2, 0, 'sent_no_response'],
      ]);
      expect(trail.decisions.at(-1)).toMatchObject({ verdict: 'block', reason: 'retry_budget_exhausted' });
    });
  });

  describe(`operations --state unknown lists exactly the unknown operations (${target.name})`, () => {
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

    it('after a mix of succeeded, failed, settled-by-reconciliation and unknown operations', {
      timeout: 120_000,
    }, async () => {
      const op = (r: Sent): string => r.headers['effectgate-operation'] as string;
      const ok = await gate.send(url('/honored/acme/mix/issues'), { title: 'fine' });
      expect(ok.status).toBe(201);
      tracker.plan('/honored/acme/mix/issues', 'reject-422');
      const failed = await gate.send(url('/honored/acme/mix/issues'), { title: 'refused' });
      expect(failed.status).toBe(422);
      tracker.plan('/held/acme/mix/issues', 'commit-then-destroy');
      const held = await gate.send(url('/held/acme/mix/issues'), { title: 'lost' });
      expect(held.status).toBe(502);
      tracker.plan('/repos/acme/mix/issues', 'destroy-before-commit', 'commit-then-destroy');
      const looked = await gate.send(url('/repos/acme/mix/issues'), { title: 'not found later' });
      expect(looked.status).toBe(502);
      // Looked up, not found: still unknown.
      expect((await gate.send(url('/repos/acme/mix/issues'), { title: 'not found later' })).status).toBe(428);
      const settled = await gate.send(url('/repos/acme/mix/issues'), { title: 'found later' });
      expect(settled.status).toBe(502);
      // Looked up, found: settled, no longer unknown.
      expect((await gate.send(url('/repos/acme/mix/issues'), { title: 'found later' })).status).toBe(409);

      const unknown = [op(held), op(looked)].sort();
      const api = await gate.api('/api/operations?state=unknown');
      expect(api.status).toBe(200);
      expect((api.json['operations'] as { id: string }[]).map((o) => o.id).sort()).toEqual(unknown);

      // While the gate runs (docs/design.md §4.4: on the embedded store, through the gate's store socket).
      const alongside = await gate.cli(['operations', '--state', 'unknown', '--json']);
      expect(alongside.code, alongside.stderr).toBe(0);
      const running = JSON.parse(alongside.stdout) as { operations: { id: string }[] };
      expect(running.operations.map((o) => o.id).sort()).toEqual(unknown);
      const t = await gate.cli(['operations', '--state', 'unknown']);
      expect(t.code, t.stderr).toBe(0);
      const text = t.stdout;

      // And with the gate stopped (the embedded store opened directly).
      const json = await gate.whileStopped(async () => {
        const r = await gate.cli(['operations', '--state', 'unknown', '--json']);
        expect(r.code, r.stderr).toBe(0);
        return JSON.parse(r.stdout) as Record<string, unknown>;
      });
      const listed = json['operations'] as { id: string; state: string }[];
      expect(listed.map((o) => o.id).sort()).toEqual(unknown);
      expect(listed.every((o) => o.state === 'unknown')).toBe(true);
      expect(json['counts']).toMatchObject({ succeeded: 2, failed: 1, unknown: 2, open: 0 });
      for (const id of unknown) expect(text).toContain(id);
      for (const id of [op(ok), op(failed), op(settled)]) expect(text).not.toContain(id);
    });
  });
}
