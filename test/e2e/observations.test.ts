/**
 * Evidence from outside the gate, end to end (docs/design.md §3 "Observations", §4.4): the
 * real `effectgate proxy`, a real loopback issue tracker and a payment provider that accepts a
 * refund (202) and settles it later, real clients (undici through the proxy, curl for the
 * webhook), and a real store (PGlite always, PostgreSQL when DATABASE_URL is set).
 *
 * - An operator settles an unknown operation with `effectgate operations resolve` beside the
 *   running gate: the agent's repeat is a duplicate naming the reference, nothing is sent again.
 * - An operator resolves one as failed on the admin API: the next proposal is a retry of the SAME
 *   operation with the same Idempotency-Key, and the destination holds one issue.
 * - A webhook that knows only the refund's id, or the Idempotency-Key the gate sent, settles the
 *   refund; a repeated delivery is one observation; its payload's secrets never reach the store.
 */
import { execFile } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_TOKEN, type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { type IssueTracker, startIssueTracker } from '../helpers/issue-tracker.js';
import { storeTargets } from '../helpers/store.js';

const POLICIES = new URL('../fixtures/observation-policies/', import.meta.url).pathname;
const execFileP = promisify(execFile);
const WEBHOOK_SECRET = 'whsec_0b1c2d3e4f5a6b7c8d9e';

interface Provider {
  readonly url: string;
  /** Every refund POST, with the Idempotency-Key it carried. */
  readonly posts: { readonly headers: IncomingHttpHeaders; readonly body: unknown }[];
  close(): Promise<void>;
}

/** A payment provider: each new refund is accepted (202, `re_N`) and settled later, out of band. */
async function startProvider(): Promise<Provider> {
  const posts: Provider['posts'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') as unknown;
      posts.push({ headers: req.headers, body });
      const text = JSON.stringify({ id: `re_${posts.length}`, status: 'pending' });
      res.writeHead(202, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    posts,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The webhook as a provider would send it: curl, JSON, the admin token. */
async function webhook(
  gate: GateUnderTest,
  body: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const { stdout } = await execFileP('curl', [
    '-sS',
    '-w',
    '\n%{http_code}',
    '-H',
    `authorization: Bearer ${ADMIN_TOKEN}`,
    '-H',
    'content-type: application/json',
    '--data-binary',
    JSON.stringify(body),
    `${gate.proxy.adminUrl}/api/observations`,
  ]);
  const cut = stdout.lastIndexOf('\n');
  return {
    status: Number(stdout.slice(cut + 1)),
    json: JSON.parse(stdout.slice(0, cut)) as Record<string, unknown>,
  };
}

for (const target of storeTargets()) {
  describe(`observations from outside through the proxy (${target.name})`, { timeout: 60_000 }, () => {
    let tracker: IssueTracker;
    let provider: Provider;
    let gate: GateUnderTest;

    beforeAll(async () => {
      tracker = await startIssueTracker();
      provider = await startProvider();
      gate = await startGateUnderTest(target, POLICIES);
    }, 120_000);

    afterAll(async () => {
      await gate?.close();
      await provider?.close();
      await tracker?.close();
    });

    it('an operator resolves an unknown operation as succeeded beside the running gate; the repeat is a duplicate naming the reference, nothing is sent again', async () => {
      const c = '/held/acme/resolve/issues';
      tracker.plan(c, 'commit-then-destroy');
      const issue = { title: 'Disk full on db-3', body: 'paged at 03:00' };
      const first = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'run-resolve-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      expect(first.json).toMatchObject({ operation_state: 'unknown', operation_id: op });
      const held = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'run-resolve-2' });
      expect(held.status).toBe(428);
      const ref = tracker.issues(c)[0]!.html_url;

      const resolved = await gate.cli([
        'operations',
        'resolve',
        op,
        '--as',
        'succeeded',
        '--by',
        'alice@acme.test',
        '--reason',
        'the issue is on the tracker, created 03:00',
        '--ref',
        ref,
      ]);
      expect(resolved.code, resolved.stderr).toBe(0);
      expect(resolved.stdout).toContain(`resolved ${op}: unknown -> succeeded`);
      expect(resolved.stdout).toContain('key confirmed until');
      expect(resolved.stdout).toContain('1 approval(s) withdrawn');

      const repeat = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'run-resolve-3' });
      expect(repeat.status).toBe(409);
      expect(repeat.json).toMatchObject({
        verdict: 'duplicate',
        operation_id: op,
        operation_state: 'succeeded',
        source: { operation_id: op, destination_ref: ref },
      });
      // The destination's own ledger: one POST, one issue.
      expect(tracker.posts(c)).toHaveLength(1);
      expect(tracker.issues(c)).toHaveLength(1);

      const again = await gate.cli([
        'operations',
        'resolve',
        op,
        '--as',
        'failed',
        '--by',
        'bob',
        '--reason',
        'second look',
      ]);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('EG_ERR_OPERATION_STATE');
      expect(again.stderr).toContain('is succeeded');

      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.observations.filter((o) => o.kind === 'operator_decision')).toMatchObject([
        { result: 'succeeded', facts: { by: 'alice@acme.test', destinationRef: ref, source: 'cli' } },
      ]);
      expect(trail.approvals.map((a) => a.state)).toEqual(['withdrawn']);
      const text = await gate.cli(['trail', op]);
      expect(text.stdout).toContain('operator_decision');
      expect(text.stdout).toContain('settled the operation as succeeded (it was unknown)');
    });

    it('resolved as failed on the admin API, the next proposal is a retry of the same operation with the same Idempotency-Key', async () => {
      const c = '/held/acme/failed/issues';
      tracker.plan(c, 'destroy-before-commit');
      const issue = { title: 'Rotate the TLS cert', body: 'expires Friday' };
      const first = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'run-failed-1' });
      expect(first.status).toBe(502);
      const op = first.headers['effectgate-operation'] as string;
      expect(tracker.issues(c)).toHaveLength(0);

      const refused = await gate.api(`/api/operations/${op}/resolve`, {
        method: 'POST',
        body: { as: 'failed', by: 'alice', reason: 'nothing on the tracker', ref: 'https://x.test/1' },
      });
      expect(refused.status).toBe(400);
      expect(String(refused.json['detail'])).toContain('an operation resolved as failed had none');

      const resolved = await gate.api(`/api/operations/${op}/resolve`, {
        method: 'POST',
        body: { as: 'failed', by: 'alice', reason: 'nothing on the tracker' },
      });
      expect(resolved.status, JSON.stringify(resolved.json)).toBe(200);
      expect(resolved.json).toMatchObject({ operationState: 'failed', key: { state: 'released' } });

      const retry = await gate.send(`${tracker.url}${c}`, issue, { 'effectgate-run': 'run-failed-2' });
      expect(retry.status).toBe(201);
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(tracker.posts(c).map((r) => r.headers['idempotency-key'])).toEqual([op, op]);
      expect(tracker.issues(c)).toHaveLength(1);
      const trail = await gate.trail(op);
      expect(trail.operation.state).toBe('succeeded');
      expect(trail.operation.attempts).toMatchObject([
        { number: 1, dispatchState: 'sent_no_response' },
        { number: 2, dispatchState: 'response_received', retryOfAttemptId: trail.operation.attempts[0]!.id },
      ]);
    });

    it("a webhook that knows only the refund's id settles it; a repeated delivery is one observation; the payload's secret never reaches the store", async () => {
      const refund = { charge: 'ch_1001', amount: 2500 };
      const first = await gate.send(`${provider.url}/v1/refunds`, refund, {
        'effectgate-run': 'run-refund-1',
      });
      expect(first.status).toBe(202);
      const op = first.headers['effectgate-operation'] as string;
      const accepted = await gate.trail(op);
      expect(accepted.operation.state).toBe('unknown');
      const refId = (first.json as { id: string }).id;
      expect(accepted.operation.attempts[0]).toMatchObject({ destinationRef: refId, status: 202 });

      const delivery = {
        operation: { destination_ref: refId },
        kind: 'callback',
        by: 'payments-webhook',
        settles: 'succeeded',
        status: 200,
        payload: { type: 'refund.succeeded', data: { id: refId }, signing_secret: WEBHOOK_SECRET },
      };
      const settled = await webhook(gate, delivery);
      expect(settled.status, JSON.stringify(settled.json)).toBe(200);
      expect(settled.json).toMatchObject({
        operationId: op,
        result: 'succeeded',
        stateChange: { from: 'unknown', to: 'succeeded' },
        alreadyRecorded: false,
      });
      const redelivered = await webhook(gate, delivery);
      expect(redelivered.json).toMatchObject({
        observationId: settled.json['observationId'],
        alreadyRecorded: true,
      });

      const repeat = await gate.send(`${provider.url}/v1/refunds`, refund, {
        'effectgate-run': 'run-refund-2',
      });
      expect(repeat.status).toBe(409);
      expect(repeat.json).toMatchObject({
        verdict: 'duplicate',
        operation_id: op,
        operation_state: 'succeeded',
      });
      expect(provider.posts).toHaveLength(1);

      const trail = await gate.trail(op);
      expect(trail.observations.filter((o) => o.kind === 'callback')).toHaveLength(1);
      expect(JSON.stringify(trail)).not.toContain(WEBHOOK_SECRET);
      // Every event, as exported beside the running gate.
      const events = await gate.cli(['audit', 'export']);
      expect(events.code, events.stderr).toBe(0);
      expect(events.stdout).toContain('observation.callback');
      expect(events.stdout).not.toContain(WEBHOOK_SECRET);
      const verify = await gate.cli(['audit', 'verify']);
      expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    });

    it('a webhook naming the Idempotency-Key the gate sent settles a refund as failed; the agent may then retry it as the same operation', async () => {
      const refund = { charge: 'ch_2002', amount: 900 };
      const first = await gate.send(`${provider.url}/v1/refunds`, refund, {
        'effectgate-run': 'run-refund-3',
      });
      expect(first.status).toBe(202);
      const op = first.headers['effectgate-operation'] as string;
      const sentKey = provider.posts.at(-1)!.headers['idempotency-key'];
      expect(sentKey).toBe(op);

      const failed = await webhook(gate, {
        operation: { idempotency_key: sentKey },
        kind: 'callback',
        by: 'payments-webhook',
        settles: 'failed',
        status: 402,
        payload_fingerprint: 'sha256:0123456789abcdef0123',
      });
      expect(failed.json).toMatchObject({ operationId: op, result: 'failed', key: { state: 'released' } });
      const retry = await gate.send(`${provider.url}/v1/refunds`, refund, {
        'effectgate-run': 'run-refund-4',
      });
      expect(retry.status).toBe(202);
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(provider.posts.slice(-2).map((p) => p.headers['idempotency-key'])).toEqual([op, op]);

      const unknownRef = await webhook(gate, {
        operation: { destination_ref: 're_nobody' },
        kind: 'callback',
        by: 'x',
      });
      expect(unknownRef.status).toBe(404);
      expect(unknownRef.json).toMatchObject({ code: 'EG_ERR_NOT_FOUND' });
      const note = await webhook(gate, {
        operation: { id: op },
        kind: 'operator_note',
        by: 'alice',
        settles: 'succeeded',
      });
      expect(note.status).toBe(400);
    });
  });
}
