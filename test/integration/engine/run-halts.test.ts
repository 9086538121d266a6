/**
 * Whose runs a halt reaches (from the run model's second hostile review): a
 * derived run's halt follows its client on the same gate instance (a restart of it, the idle
 * bound), and no further: not another in-process gate, not another sidecar replica that also sees
 * its agent at 127.0.0.1, not a new fixed run id. A delegated worker that loops on a done
 * operation halts even after the key's window ended.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
loop_breaker: { max_duplicate_skips: 2 }
tools:
  - id: t.create
    match: { hosts: [127.0.0.1], method: POST, path: "/items" }
    effect: create
    dedupe: { key: [$.body.name], window: 1s, wait: 0s }
    idempotency: { header: Idempotency-Key }
`,
  },
]);
const scope = { tenant: 'acme', area: 'support', agent: 'bot' };

function post(
  upstream: Upstream,
  name: string,
  at: { client?: string; run?: string; operation?: string } = {},
): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path: '/items',
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify({ name })),
    context: {
      run: at.run ?? null,
      step: null,
      operation: at.operation ?? null,
      worker: null,
      agentVersion: null,
      retryReason: null,
    },
    ...(at.client === undefined ? {} : { client: at.client }),
  };
}

for (const target of storeTargets()) {
  describe(`whose runs a halt reaches (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    const gates: Gate[] = [];
    const gate = async (options: { instanceId: string; runId?: string; agent?: string }): Promise<Gate> => {
      const g = await createGate({
        policies,
        store,
        scope: { ...scope, agent: options.agent ?? scope.agent },
        instanceId: options.instanceId,
        ...(options.runId === undefined ? {} : { runId: options.runId }),
      });
      gates.push(g);
      return g;
    };

    beforeAll(async () => {
      store = await openTestStore(target);
      upstream = await startUpstream(reply(201, { id: 1 }));
      client = createUpstreamClient();
    });

    afterAll(async () => {
      for (const g of gates) await g.close();
      await client?.close();
      await upstream?.close();
      await store?.close();
    });

    async function loopUntilHalted(g: Gate, name: string, at: { client?: string } = {}): Promise<void> {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++)
        statuses.push((await g.handle(post(upstream, name, at), client.send)).status);
      expect(statuses).toEqual([201, 409, 409, 429]);
    }

    it('an in-process agent’s loop halts neither another in-process agent of the scope nor its next run', async () => {
      const a = await gate({ instanceId: 'host-a/in-process' });
      const b = await gate({ instanceId: 'host-b/in-process' });
      await loopUntilHalted(a, 'loop-in-a');
      expect((await b.handle(post(upstream, 'b-own-effect'), client.send)).status).toBe(201);
      expect((await a.handle(post(upstream, 'a-new-effect'), client.send)).status).toBe(429);
    });

    it('one sidecar replica’s agent looping does not halt another replica’s (both at 127.0.0.1)', async () => {
      const pod1 = await gate({ instanceId: 'pod-1/127.0.0.1:8080', agent: 'triage-bot' });
      const pod2 = await gate({ instanceId: 'pod-2/127.0.0.1:8080', agent: 'triage-bot' });
      await loopUntilHalted(pod1, 'loop-in-pod-1', { client: '127.0.0.1' });
      expect(
        (await pod2.handle(post(upstream, 'pod-2-effect', { client: '127.0.0.1' }), client.send)).status,
      ).toBe(201);
    });

    it('the same gate instance, restarted, keeps its looping client halted', async () => {
      const first = await gate({ instanceId: 'host-c/127.0.0.1:8080', agent: 'restarts' });
      await loopUntilHalted(first, 'loop-before-restart', { client: '10.0.0.7' });
      await first.close();
      const again = await gate({ instanceId: 'host-c/127.0.0.1:8080', agent: 'restarts' });
      const res = await again.handle(post(upstream, 'after-restart', { client: '10.0.0.7' }), client.send);
      expect(res.status).toBe(429);
      expect(
        (await again.handle(post(upstream, 'other-client', { client: '10.0.0.8' }), client.send)).status,
      ).toBe(201);
    });

    it('a fixed run id is the operator’s: a new deploy with a new run id is not halted by the old one', async () => {
      const deploy1 = await gate({ instanceId: 'host-d', runId: 'deploy-1', agent: 'fixed' });
      await loopUntilHalted(deploy1, 'loop-deploy-1', { client: '10.0.0.9' });
      await deploy1.close();
      const deploy2 = await gate({ instanceId: 'host-d', runId: 'deploy-2', agent: 'fixed' });
      expect(
        (await deploy2.handle(post(upstream, 'fresh', { client: '10.0.0.9' }), client.send)).status,
      ).toBe(201);
    });

    it('halts a delegated worker that keeps re-proposing a done operation after its window', async () => {
      const g = await gate({ instanceId: 'host-e', agent: 'delegating' });
      expect((await g.handle(post(upstream, 'd1', { run: 'owner' }), client.send)).status).toBe(201);
      const op = String(upstream.requests.at(-1)!.headers['idempotency-key']);
      const sent = upstream.requests.length;
      await new Promise((r) => setTimeout(r, 1_300));
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        statuses.push(
          (await g.handle(post(upstream, 'd1', { run: 'worker-loop', operation: op }), client.send)).status,
        );
      }
      expect(statuses).toEqual([409, 409, 429, 429]);
      expect(upstream.requests.length).toBe(sent);
    });
  });
}
