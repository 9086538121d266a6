/**
 * The gate's lifecycle in the engine: `createGate` registers and
 * recovers before it resolves, `close()` waits for governed calls in flight and their outcomes,
 * a store the gate opened is closed by it, and a gate that starts again under its instance id
 * recovers its previous life at once. Real stores, a real loopback destination, undici.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, defaultInstanceId } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { openStore, uuidv7 } from '../../../src/store/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: t.create
    match: { hosts: [127.0.0.1], method: POST, path: /effects }
    effect: create
    dedupe: { key: [$.body.order], window: 1h, wait: 0s, pending_ttl: 10s }
    idempotency: { header: Idempotency-Key }
`,
  },
]);

const scope = { tenant: 'acme', area: 'ops', agent: 'bot' };

describe('gate lifecycle', () => {
  let upstream: Upstream;
  const agent = new Agent();

  beforeAll(async () => {
    upstream = await startUpstream(async (req, res, raw) => {
      // A call that stays at the destination for a while: close() must wait for it.
      if (req.body.toString().includes('slow')) await new Promise((r) => setTimeout(r, 400));
      return reply(201, { ok: true })(req, res, raw);
    });
  });

  afterAll(async () => {
    await agent.close();
    await upstream?.close();
  });

  const post = (gate: Parameters<typeof gateInterceptor>[0], order: string) =>
    request(`${upstream.url}/effects`, {
      dispatcher: agent.compose(gateInterceptor(gate, { run: `run-${uuidv7()}` })),
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ order }),
    });

  it('createGate without a store opens the embedded default, and close() releases it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-default-'));
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      const gate = await createGate({ policies, scope });
      expect(gate.store.kind).toBe('pglite');
      const r = await post(gate, `default-${uuidv7()}`);
      expect(r.statusCode).toBe(201);
      await r.body.dump();
      expect(await gate.close()).toEqual({ unwrittenOutcomes: 0, abandonedCalls: 0 });
      // Closed and unlocked: the same directory opens again.
      const again = await openStore({ url: 'pglite:./.effectgate' });
      const ops = await again.listOperations({ toolId: 't.create' });
      expect(ops.map((o) => o.state)).toEqual(['succeeded']);
      await again.close();
    } finally {
      process.chdir(cwd);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the default instance id is stable: host and listen address, or host and scope in process', () => {
    expect(defaultInstanceId({ listen: { host: '127.0.0.1', port: 8080 } })).toBe(
      defaultInstanceId({ listen: { host: '127.0.0.1', port: 8080 } }),
    );
    expect(defaultInstanceId({ listen: { host: '::1', port: 8080 } })).toMatch(/\/\[::1\]:8080$/);
    expect(defaultInstanceId({ listen: { host: '127.0.0.1', port: 0 } })).toMatch(/pid-\d+$/);
    expect(defaultInstanceId({ scope: 'acme/ops/bot' })).toMatch(/\/in-process\/acme\/ops\/bot$/);
  });

  for (const target of storeTargets()) {
    describe(`on ${target.name}`, () => {
      let store: TestStore;

      beforeAll(async () => {
        store = await openTestStore(target);
      });

      afterAll(async () => {
        await store?.close();
      });

      it('close() waits for a governed call in flight and writes its outcome before it resolves', async () => {
        const instanceId = `gate-${uuidv7()}`;
        const gate = await createGate({ policies, store, scope, instanceId });
        const order = `slow-${uuidv7()}`;
        const call = post(gate, order);
        await new Promise((r) => setTimeout(r, 100)); // the call is at the destination
        const report = await gate.close();
        expect(report).toEqual({ unwrittenOutcomes: 0, abandonedCalls: 0 });
        const r = await call;
        expect(r.statusCode).toBe(201);
        await r.body.dump();
        const [op] = await store.listOperations({ keyValues: [order], toolId: 't.create' });
        expect(op?.state).toBe('succeeded');
        expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['response_received']);
        // A clean stop is recorded: no replica will ever recover this life.
        const rows = await store.query(
          `select stopped_at is not null as stopped from gate_instances where id = '${instanceId}'`,
        );
        expect(rows).toEqual([{ stopped: true }]);
        // The store was passed in open: the gate leaves it open.
        await store.ping();
      });

      it('a gate started again under its instance id recovers its previous life at once', async () => {
        const instanceId = `gate-${uuidv7()}`;
        // A previous life that died with an attempt in flight (the store never heard of its end).
        await store.registerInstance(instanceId);
        const lost = await store.decide({
          kind: 'reserve',
          decisionId: uuidv7(),
          runId: 'previous-life',
          step: null,
          worker: null,
          agentVersion: null,
          scope,
          toolId: 't.create',
          explain: 'POST 127.0.0.1 /effects',
          maxDuplicateSkips: 3,
          request: {
            scheme: 'http',
            method: 'POST',
            host: '127.0.0.1',
            port: upstream.port,
            path: '/effects',
            route: 'POST 127.0.0.1 /effects',
            fingerprint: 'sha256:00',
            authorityRef: null,
          },
          key: null,
          keyError: null,
          newOperationId: uuidv7(),
          newAttemptId: uuidv7(),
          idempotencyHeader: 'Idempotency-Key',
          retryBudget: 3,
          unknownRule: 'hold',
          onExpired: 'unknown',
          claimedOperationId: null,
          clientRetryReason: null,
          reconciliation: null,
          gateInstance: instanceId,
          deadlineMs: 60_000,
          recordPending: true,
        });
        if (lost.verdict !== 'allow') throw new Error(`expected allow, got ${lost.verdict}`);
        // A stale window far longer than the test: only the stable identity can explain recovery.
        const gate = await createGate({ policies, store, scope, instanceId, staleAfterMs: 3_600_000 });
        const op = await store.getOperation(lost.operationId);
        expect(op?.state).toBe('unknown');
        expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['sent_no_response']);
        const observations = await store.listObservations(lost.operationId);
        expect(observations.map((o) => [o.kind, o.result])).toEqual([['gate_restarted', 'marked_unknown']]);
        await gate.close();
      });
    });
  }
});
