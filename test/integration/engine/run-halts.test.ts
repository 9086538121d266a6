/**
 * Whose runs a halt reaches: only the named run that earned it. A run the gate derives (no
 * Effectgate-Run) is every process of a scope behind one address, so it never halts, and a duplicate
 * from it says so (`same_address`, `derived_run`) instead of "your own run". A named run's halt
 * outlives a restart of its gate; a new fixed run id starts clean. A delegated worker that loops on
 * a done operation halts even after the key's window ended.
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

    async function loopUntilHalted(
      g: Gate,
      name: string,
      at: { client?: string; run?: string } = {},
    ): Promise<void> {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++)
        statuses.push((await g.handle(post(upstream, name, at), client.send)).status);
      expect(statuses).toEqual([201, 409, 409, 429]);
    }

    /** Proposes `name` five times from a run the gate derives: answered, never halted. */
    async function loopDerived(g: Gate, name: string, at: { client?: string } = {}): Promise<unknown> {
      const statuses: number[] = [];
      let last: unknown = null;
      for (let i = 0; i < 5; i++) {
        const res = await g.handle(post(upstream, name, at), client.send);
        statuses.push(res.status);
        last = JSON.parse(new TextDecoder().decode(res.body));
      }
      expect(statuses).toEqual([201, 409, 409, 409, 409]);
      return last;
    }

    it('an unnamed in-process agent is never halted: every repeat is a duplicate, and its next effect goes out', async () => {
      const a = await gate({ instanceId: 'host-a/in-process' });
      const last = await loopDerived(a, 'loop-in-a');
      // Not "proposing it again halts the run": nothing halts a derived run.
      expect(last).toMatchObject({ verdict: 'duplicate', duplicate_skips: 4 });
      expect(String((last as { detail: string }).detail)).not.toContain('halts the run');
      expect((await a.handle(post(upstream, 'a-new-effect'), client.send)).status).toBe(201);
      expect(await store.listRuns({ halted: true })).toEqual([]);
    });

    it('processes sharing one address: a duplicate is attributed to the address, and another process’s new effect is allowed', async () => {
      const pod = await gate({ instanceId: 'pod-1/127.0.0.1:8080', agent: 'triage-bot' });
      const last = (await loopDerived(pod, 'loop-in-pod-1', { client: '127.0.0.1' })) as {
        source: Record<string, unknown>;
        detail: string;
      };
      // Same derived run id as the proposal's: the same address, not necessarily the same process.
      expect(last.source).toMatchObject({ derived_run: true, same_address: true });
      expect(last.detail).toContain('not necessarily this process');
      expect(
        (await pod.handle(post(upstream, 'other-process-payment', { client: '127.0.0.1' }), client.send))
          .status,
      ).toBe(201);
    });

    it('a named run’s duplicate of a derived run’s effect says the source was derived, not its own', async () => {
      const g = await gate({ instanceId: 'host-b/in-process' });
      expect((await g.handle(post(upstream, 'by-derived'), client.send)).status).toBe(201);
      const res = await g.handle(post(upstream, 'by-derived', { run: 'named-1' }), client.send);
      expect(res.status).toBe(409);
      const body = JSON.parse(new TextDecoder().decode(res.body)) as { source: Record<string, unknown> };
      expect(body.source).toMatchObject({ derived_run: true, same_address: false });
    });

    it('a named run halts, and stays halted across a restart of its gate; another run does not', async () => {
      const first = await gate({ instanceId: 'host-c/127.0.0.1:8080', agent: 'restarts' });
      await loopUntilHalted(first, 'loop-before-restart', { run: 'looping-run' });
      await first.close();
      const again = await gate({ instanceId: 'host-c/127.0.0.1:8080', agent: 'restarts' });
      const res = await again.handle(post(upstream, 'after-restart', { run: 'looping-run' }), client.send);
      expect(res.status).toBe(429);
      expect(
        (await again.handle(post(upstream, 'other-run', { run: 'other-run' }), client.send)).status,
      ).toBe(201);
      // The unnamed traffic of the same address is not that run.
      expect(
        (await again.handle(post(upstream, 'unnamed', { client: '127.0.0.1' }), client.send)).status,
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
