/**
 * A destination that answers `202 Accepted` through the in-process front door, against a job
 * service stand-in that keeps its own ledger and finishes (or fails) jobs later: the operation is
 * accepted with the job's Location, a repeat meanwhile is `pending` naming it, the tool's reconcile
 * lookup settles it once the job is done (the repeat is then a duplicate), and a failure reported
 * by the destination's callback releases the key so the retry goes out.
 */
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { startUpstream, type Upstream } from '../../helpers/upstream.js';

const POLICY = `
version: 1
tools:
  - id: jobs.start_export
    match: { hosts: [127.0.0.1], method: POST, path: /exports }
    effect: create
    dedupe: { key: [$.body.name], window: 1h }
    outcome:
      accepted: [202]              # the export runs later; Location names it
    reconcile:                     # finished exports only: found means done
      method: GET
      path: /exports?status=done
      match: { $.name: $.body.name }
  # The same job service behind a path whose tool says the destination honors idempotency keys:
  # a retry of an unknown outcome needs no lookup, but accepted work is still found by looking.
  - id: jobs.start_export_keyed
    match: { hosts: [127.0.0.1], method: POST, path: /keyed-exports }
    effect: create
    dedupe: { key: [$.body.name], window: 1h }
    idempotency: { header: Idempotency-Key, honored: true }
    outcome:
      accepted: [202]
    reconcile:
      method: GET
      path: /exports?status=done
      match: { $.name: $.body.name }
`;

interface Job {
  readonly id: number;
  readonly name: string;
  status: 'queued' | 'done' | 'failed';
}

for (const target of storeTargets()) {
  describe(`202 Accepted through the undici interceptor, on ${target.name}`, () => {
    let store: TestStore;
    let gate: Gate;
    let upstream: Upstream;
    let agent: Agent;
    const ledger: Job[] = [];

    beforeAll(async () => {
      store = await openTestStore(target);
      gate = await createGate({
        policies: parsePolicyFiles([{ file: 'jobs.yaml', text: POLICY }]),
        store,
        scope: { tenant: 'acme', area: 'data', agent: 'exporter' },
      });
      upstream = await startUpstream((req, res) => {
        const send = (status: number, json: unknown, headers: Record<string, string> = {}): void => {
          const body = JSON.stringify(json);
          res.writeHead(status, {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            ...headers,
          });
          res.end(body);
        };
        if (req.method === 'POST' && (req.url === '/exports' || req.url === '/keyed-exports')) {
          const { name } = JSON.parse(req.body.toString('utf8')) as { name: string };
          const job: Job = { id: ledger.length + 1, name, status: 'queued' };
          ledger.push(job);
          return send(202, { id: job.id, status: 'queued' }, { location: `/exports/${job.id}` });
        }
        if (req.method === 'GET' && req.url === '/exports?status=done') {
          return send(
            200,
            ledger.filter((j) => j.status === 'done'),
          );
        }
        return send(404, { error: 'not_found' });
      });
      agent = new Agent();
    });
    afterAll(async () => {
      await agent?.close();
      await gate?.close();
      await upstream?.close();
      await store?.close();
    });

    const start = async (run: string, name: string, path = '/exports') => {
      const dispatcher: Dispatcher = agent.compose(gateInterceptor(gate, { run }));
      const res = await request(`${upstream.url}${path}`, {
        dispatcher,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      const operation = res.headers['effectgate-operation'];
      return {
        status: res.statusCode,
        verdict: res.headers['effectgate-verdict'],
        operation: typeof operation === 'string' ? operation : null,
        body: (await res.body.json()) as Record<string, unknown>,
      };
    };
    const jobs = (name: string) => ledger.filter((j) => j.name === name);

    it('accepted, pending while it runs, settled by the reconcile lookup once done: then a duplicate', async () => {
      const first = await start('run-1', 'q3-report');
      expect(first).toMatchObject({ status: 202, verdict: 'allow' });
      const op = await store.getOperation(first.operation!);
      expect(op?.state).toBe('accepted');
      expect(op?.attempts[0]).toMatchObject({
        status: 202,
        outcomeRule: 'accepted 202',
        destinationRef: '/exports/1',
      });

      const meanwhile = await start('run-2', 'q3-report');
      expect(meanwhile).toMatchObject({
        status: 409,
        verdict: 'pending',
        body: { operation_id: first.operation, operation_state: 'accepted', destination_ref: '/exports/1' },
      });
      expect(jobs('q3-report')).toHaveLength(1);

      jobs('q3-report')[0]!.status = 'done';
      const after = await start('run-3', 'q3-report');
      expect(after).toMatchObject({ status: 409, verdict: 'duplicate' });
      expect((await store.getOperation(first.operation!))?.state).toBe('succeeded');
      expect(jobs('q3-report')).toHaveLength(1);
    });

    it('a tool under idempotency.honored with a reconcile lookup still looks up its accepted operation', async () => {
      const first = await start('run-7', 'keyed-report', '/keyed-exports');
      expect(first).toMatchObject({ status: 202, verdict: 'allow' });
      expect((await store.getOperation(first.operation!))?.state).toBe('accepted');
      expect(await start('run-8', 'keyed-report', '/keyed-exports')).toMatchObject({ verdict: 'pending' });
      jobs('keyed-report')[0]!.status = 'done';
      const after = await start('run-9', 'keyed-report', '/keyed-exports');
      expect(after).toMatchObject({ status: 409, verdict: 'duplicate' });
      expect((await store.getOperation(first.operation!))?.state).toBe('succeeded');
      expect(jobs('keyed-report')).toHaveLength(1);
    });

    it('a failure the destination reports by callback releases the key: the retry goes out once', async () => {
      const first = await start('run-4', 'q4-report');
      expect(first).toMatchObject({ status: 202, verdict: 'allow' });
      jobs('q4-report')[0]!.status = 'failed';
      // Not done: the lookup finds nothing, so the repeat is still pending.
      expect(await start('run-5', 'q4-report')).toMatchObject({ status: 409, verdict: 'pending' });
      await store.addObservation({
        operationId: first.operation!,
        kind: 'callback',
        by: 'exports-webhook',
        reason: null,
        settles: 'failed',
        status: null,
        destinationRef: '/exports/2',
        refs: [],
        payloadFingerprint: 'sha256:failed-2',
        source: 'api',
      });
      const retry = await start('run-6', 'q4-report');
      expect(retry).toMatchObject({ status: 202, verdict: 'allow', operation: first.operation });
      expect(jobs('q4-report')).toHaveLength(2);
    });
  });
}
