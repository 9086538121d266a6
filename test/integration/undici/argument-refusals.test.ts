/**
 * Ambiguous and too complex arguments through the in-process front door (undici interceptor) with a
 * real engine and store: the same refusals as the proxy, nothing sent, no store round trip.
 */
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: shop.refund
    match: { hosts: [127.0.0.1], method: POST, path: /refunds }
    effect: financial
    dedupe: { key: [$.query.order, $.body.title], window: 1h, wait: 0s }
`,
  },
]);

describe('argument refusals through gateInterceptor', () => {
  let store: TestStore;
  let upstream: Upstream;
  let gate: Gate;
  let agent: Agent;
  let gated: Dispatcher;

  beforeAll(async () => {
    store = await openTestStore(storeTargets()[0]!);
    upstream = await startUpstream(reply(201, { id: 1 }));
    gate = await createGate({
      policies,
      store,
      scope: { tenant: 'acme', area: 'shop', agent: 'bot' },
      // Tighter than the defaults, to show createGate's override reaches the engine.
      bodyLimits: { maxDepth: 8 },
    });
    agent = new Agent();
    gated = agent.compose(gateInterceptor(gate, { run: 'r1' }));
  });
  afterAll(async () => {
    await agent?.close();
    await gate?.close();
    await upstream?.close();
    await store?.close();
  });

  async function post(
    path: string,
    body: string,
  ): Promise<{ status: number; problem: Record<string, unknown> }> {
    const res = await request(`${upstream.url}${path}`, {
      dispatcher: gated,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    return { status: res.statusCode, problem: (await res.body.json()) as Record<string, unknown> };
  }

  it('refuses duplicate members, repeated key parameters and deep bodies before store and upstream', async () => {
    const t0 = store.stats.roundTrips;
    const dup = await post('/refunds?order=42', '{"title":"Refund 42","title":"x1"}');
    expect(dup).toMatchObject({
      status: 422,
      problem: { code: 'EG_ERR_ARGUMENTS_AMBIGUOUS', path: '$.body.title' },
    });
    const query = await post('/refunds?order=42&order=x1', '{"title":"Refund 42"}');
    expect(query).toMatchObject({ status: 422, problem: { path: '$.query.order' } });
    const deep = await post('/refunds?order=42', `{"title":"t","a":${'['.repeat(8)}${']'.repeat(8)}}`);
    expect(deep).toMatchObject({
      status: 413,
      problem: { code: 'EG_ERR_BODY_TOO_COMPLEX', path: '$.body.a[0][0][0][0][0][0][0]' },
    });
    expect(store.stats.roundTrips).toBe(t0);
    expect(upstream.requests).toHaveLength(0);

    const ok = await post('/refunds?order=42', `{"title":"t","a":${'['.repeat(7)}${']'.repeat(7)}}`);
    expect(ok.status).toBe(201);
    expect(upstream.requests).toHaveLength(1);
  });
});
