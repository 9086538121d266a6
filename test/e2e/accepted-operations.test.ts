/**
 * Asynchronous acceptance end to end: the real `effectgate proxy`, a job service stand-in that
 * answers `202 Accepted` with a Location and finishes or fails jobs later (its own ledger), and a
 * real store (PGlite always, PostgreSQL when DATABASE_URL is set). The operation is accepted and
 * its repeat pending while the job runs; the service's webhook, posted to the admin API by the
 * job's reference, settles it: done makes the repeat a duplicate, failed lets the retry out once.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { storeTargets } from '../helpers/store.js';
import { startUpstream, type Upstream } from '../helpers/upstream.js';

const POLICY = `
version: 1
tools:
  - id: jobs.start_export
    match: { hosts: [127.0.0.1], method: POST, path: /exports }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, pending_ttl: 2s }
    outcome: { accepted: [202] }
`;

interface Job {
  readonly id: number;
  readonly name: string;
  status: 'queued' | 'done' | 'failed';
}

for (const target of storeTargets()) {
  describe(`202 Accepted through the proxy (${target.name})`, { timeout: 60_000 }, () => {
    let service: Upstream;
    let gate: GateUnderTest;
    let policies: string;
    const ledger: Job[] = [];

    beforeAll(async () => {
      service = await startUpstream((req, res) => {
        const { name } = JSON.parse(req.body.toString('utf8')) as { name: string };
        const job: Job = { id: ledger.length + 1, name, status: 'queued' };
        ledger.push(job);
        const body = JSON.stringify({ id: job.id, status: 'queued' });
        res.writeHead(202, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          location: `/exports/${job.id}`,
        });
        res.end(body);
      });
      policies = mkdtempSync(join(tmpdir(), 'effectgate-accepted-'));
      writeFileSync(join(policies, 'jobs.yaml'), POLICY);
      gate = await startGateUnderTest(target, policies);
    }, 120_000);

    afterAll(async () => {
      await gate?.close();
      await service?.close();
      if (policies !== undefined) rmSync(policies, { recursive: true, force: true });
    });

    const start = (run: string, name: string) =>
      gate.send(`${service.url}/exports`, { name }, { 'effectgate-run': run });
    const webhook = (ref: string, settles: 'succeeded' | 'failed', status: string) =>
      gate.api('/api/observations', {
        method: 'POST',
        body: {
          operation: { destination_ref: ref },
          kind: 'callback',
          by: 'exports-webhook',
          settles,
          payload: { job: ref, status },
        },
      });
    const jobs = (name: string) => ledger.filter((j) => j.name === name);

    it("accepted and pending while the job runs, even past pending_ttl; the webhook's done makes the repeat a duplicate", async () => {
      const first = await start('agent-1', 'q3-report');
      expect(first.status).toBe(202);
      expect(first.headers['effectgate-verdict']).toBe('allow');
      const op = first.headers['effectgate-operation'] as string;
      const ref = `/exports/${jobs('q3-report')[0]!.id}`;
      const accepted = await gate.trail(op);
      expect(accepted.operation.state).toBe('accepted');
      expect(accepted.operation.attempts[0]).toMatchObject({
        outcomeRule: 'accepted 202',
        destinationRef: ref,
      });

      // Past the 2 s pending_ttl: an accepted key is never taken over.
      await new Promise((r) => setTimeout(r, 2_200));
      const meanwhile = await start('agent-2', 'q3-report');
      expect(meanwhile.status).toBe(409);
      expect(meanwhile.json).toMatchObject({
        verdict: 'pending',
        operation_id: op,
        operation_state: 'accepted',
        destination_ref: ref,
      });
      expect(jobs('q3-report')).toHaveLength(1);

      jobs('q3-report')[0]!.status = 'done';
      const settled = await webhook(ref, 'succeeded', 'done');
      expect(settled.status, JSON.stringify(settled.json)).toBe(200);
      expect(settled.json).toMatchObject({ result: 'succeeded', operationState: 'succeeded' });
      const repeat = await start('agent-3', 'q3-report');
      expect(repeat.status).toBe(409);
      expect(repeat.json).toMatchObject({ verdict: 'duplicate', operation_id: op });
      expect(jobs('q3-report')).toHaveLength(1);
    });

    it("the webhook's failed releases the key: the retry goes out once, as the same operation", async () => {
      const first = await start('agent-4', 'q4-report');
      expect(first.status).toBe(202);
      const op = first.headers['effectgate-operation'] as string;
      const ref = `/exports/${jobs('q4-report')[0]!.id}`;
      jobs('q4-report')[0]!.status = 'failed';
      const failed = await webhook(ref, 'failed', 'failed');
      expect(failed.json).toMatchObject({ result: 'failed', operationState: 'failed' });
      const retry = await start('agent-5', 'q4-report');
      expect(retry.status).toBe(202);
      expect(retry.headers['effectgate-verdict']).toBe('allow');
      expect(retry.headers['effectgate-operation']).toBe(op);
      expect(jobs('q4-report')).toHaveLength(2);
    });
  });
}
