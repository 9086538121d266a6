/**
 * Retry lineage through the engine, against a real store and a real loopback upstream: the reason
 * of a later attempt comes from the closed set (client-claimed operator_requested, a refreshed
 * credential, or how the previous attempt ended), and a claim outside the set is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { GateContext, GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: t.create
    match: { hosts: [127.0.0.1], method: POST, path: "/items" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key }
    retry: { budget: 5 }
`,
  },
]);

const noContext: GateContext = {
  run: null,
  step: null,
  operation: null,
  worker: null,
  agentVersion: null,
  retryReason: null,
};

function post(
  upstream: Upstream,
  name: string,
  headers: Record<string, string> = {},
  context: Partial<GateContext> = {},
): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path: '/items',
    query: '',
    headers: { 'content-type': 'application/json', ...headers },
    body: new TextEncoder().encode(JSON.stringify({ name })),
    context: { ...noContext, ...context },
  };
}

for (const target of storeTargets()) {
  describe(`retry lineage through the gate (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let gate: Gate;
    // Per item name: the statuses the upstream answers, in order (then 201).
    const script = new Map<string, number[]>();

    beforeAll(async () => {
      store = await openTestStore(target);
      upstream = await startUpstream((req, res) => {
        const name = (JSON.parse(req.body.toString()) as { name: string }).name;
        const status = script.get(name)?.shift() ?? 201;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ name, status }));
      });
      client = createUpstreamClient();
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'ops', agent: 'bot' } });
    });

    afterAll(async () => {
      await client?.close();
      await upstream?.close();
      await store?.close();
    });

    it('refuses a retry reason outside the closed set with 400, before any store round trip', async () => {
      const before = store.stats.roundTrips;
      const sent = upstream.requests.length;
      const res = await gate.handle(
        post(upstream, 'prose', {}, { retryReason: 'I am sure it is fine now' }),
        client.send,
      );
      expect(res.status).toBe(400);
      expect(new TextDecoder().decode(res.body)).toContain('operator_requested');
      expect(store.stats.roundTrips).toBe(before);
      expect(upstream.requests.length).toBe(sent);
    });

    it('records operator_requested when the client claims it, and the same operation and key go out', async () => {
      script.set('op-req', [422]);
      const first = await gate.handle(post(upstream, 'op-req'), client.send);
      expect(first.status).toBe(422);
      const again = await gate.handle(
        post(upstream, 'op-req', {}, { retryReason: 'operator_requested' }),
        client.send,
      );
      expect(again.status).toBe(201);
      const opId = again.headers['effectgate-operation'] as string;
      expect(opId).toBe(first.headers['effectgate-operation']);
      const op = await store.getOperation(opId);
      expect(
        op?.attempts.map((a) => [a.number, a.retryReason, a.retryDecision, a.remainingAttempts]),
      ).toEqual([
        [1, null, null, 4],
        [2, 'operator_requested', 'previous_attempt_failed', 3],
      ]);
      expect(op?.attempts[1]?.retryOfAttemptId).toBe(op?.attempts[0]?.id);
      const keys = upstream.requests
        .filter((r) => r.body.toString().includes('op-req'))
        .map((r) => r.headers['idempotency-key']);
      expect(keys).toEqual([opId, opId]);
    });

    it('tells a refreshed credential from a plain retry by its keyed fingerprint, never storing it', async () => {
      script.set('cred', [401, 401]);
      await gate.handle(post(upstream, 'cred', { authorization: 'Bearer old-token-1' }), client.send);
      await gate.handle(post(upstream, 'cred', { authorization: 'Bearer old-token-1' }), client.send);
      const res = await gate.handle(
        post(upstream, 'cred', { authorization: 'Bearer new-token-2' }),
        client.send,
      );
      expect(res.status).toBe(201);
      const op = await store.getOperation(res.headers['effectgate-operation'] as string);
      expect(op?.attempts.map((a) => a.retryReason)).toEqual([null, null, 'credential_refreshed']);
      const refs = op?.attempts.map((a) => a.request.authorityRef);
      expect(refs?.[0]).toMatch(/^authorization:hmac-sha256:[0-9a-f]{32}$/);
      expect(refs?.[0]).toBe(refs?.[1]);
      expect(refs?.[2]).not.toBe(refs?.[0]);
      const dump =
        JSON.stringify(await store.query('select * from attempts')) +
        JSON.stringify(await store.readEvents(0, 100_000));
      expect(dump).not.toContain('old-token-1');
      expect(dump).not.toContain('new-token-2');
    });

    it('derives rate_limited after a 429 and keeps the budget on the attempt', async () => {
      script.set('busy', [429]);
      await gate.handle(post(upstream, 'busy'), client.send);
      const res = await gate.handle(post(upstream, 'busy'), client.send);
      expect(res.status).toBe(201);
      const op = await store.getOperation(res.headers['effectgate-operation'] as string);
      expect(op?.attempts[1]).toMatchObject({ retryReason: 'rate_limited', remainingAttempts: 3 });
    });
  });
}
