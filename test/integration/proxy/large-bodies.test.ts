/**
 * Large governed bodies are analysed on a worker thread, and that must never
 * change what the gate decides: through the real forward proxy (and the undici interceptor), a
 * store and a loopback destination, the same effect sent once with a small body (analysed on the
 * event loop) and once with a large one (on the worker) is one effect at the destination.
 */
import { Agent, ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { jsonRpcReply, reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: shop.refund
    match: { hosts: [127.0.0.1], method: POST, path: /refunds }
    effect: financial
    dedupe: { key: [$.query.order, $.body.amount], window: 1h, wait: 0s }
  - id: mcp.create_ticket
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": create_ticket }
    effect: create
    dedupe: { key: [$.body.params.arguments.subject], window: 1h, wait: 0s }
    verdict: { protocol: jsonrpc }
`,
  },
]);

/** Well past the 16 KiB from which a body goes to the worker. */
const PAD = 'p'.repeat(256 * 1024);

for (const target of storeTargets()) {
  describe(`large governed bodies (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let gate: Gate;
    let proxy: ProxyServer;
    let agent: ProxyAgent;

    beforeAll(async () => {
      store = await openTestStore(target);
      upstream = await startUpstream((req, res, raw) =>
        (req.url === '/mcp' ? jsonRpcReply() : reply(201, { id: 're_1' }))(req, res, raw),
      );
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'shop', agent: 'bot' } });
      proxy = createProxyServer({ gate });
      const addr = await proxy.listen('127.0.0.1', 0);
      agent = new ProxyAgent({ uri: `http://127.0.0.1:${addr.port}`, proxyTunnel: false });
    });
    afterAll(async () => {
      await agent?.close();
      await proxy?.close();
      await gate?.close();
      await upstream?.close();
      await store?.close();
    });

    async function post(
      path: string,
      body: unknown,
      dispatcher: Agent | ProxyAgent = agent,
    ): Promise<{ status: number; body: Record<string, unknown>; verdict: unknown }> {
      const res = await request(`${upstream.url}${path}`, {
        dispatcher,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return {
        status: res.statusCode,
        body: (await res.body.json()) as Record<string, unknown>,
        verdict: res.headers['effectgate-verdict'],
      };
    }

    const sentTo = (path: string): number => upstream.requests.filter((r) => r.url.startsWith(path)).length;

    it('answers a large repeat of a small effect as its duplicate: one effect at the destination', async () => {
      const first = await post('/refunds?order=1', { amount: 5, note: 'small' });
      expect(first).toMatchObject({ status: 201, verdict: 'allow' });
      const large = await post('/refunds?order=1', { amount: 5, note: PAD });
      expect(large).toMatchObject({ status: 409, verdict: 'duplicate' });
      expect(sentTo('/refunds?order=1')).toBe(1);
    });

    it('answers a small repeat of a large effect as its duplicate, through the interceptor too', async () => {
      const large = await post('/refunds?order=2', { amount: 7, note: PAD });
      expect(large).toMatchObject({ status: 201, verdict: 'allow' });
      const direct = new Agent().compose(gateInterceptor(gate, { run: 'r-large' }));
      try {
        const small = await post('/refunds?order=2', { amount: 7 }, direct as unknown as Agent);
        expect(small).toMatchObject({ status: 409, verdict: 'duplicate' });
        const largeAgain = await post(
          '/refunds?order=2',
          { amount: 7, note: `${PAD}!` },
          direct as unknown as Agent,
        );
        expect(largeAgain).toMatchObject({ status: 409, verdict: 'duplicate' });
      } finally {
        await direct.close();
      }
      expect(sentTo('/refunds?order=2')).toBe(1);
    });

    it('keeps distinct large effects distinct, and refuses an ambiguous one deep in a large body', async () => {
      const a = await post('/refunds?order=3', { amount: 1, note: PAD });
      const b = await post('/refunds?order=3', { amount: 2, note: PAD });
      expect([a.status, b.status]).toEqual([201, 201]);
      const res = await request(`${upstream.url}/refunds?order=3`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"note":"${PAD}","amount":3,"items":[{"id":1,"id":2}]}`,
      });
      expect(res.statusCode).toBe(422);
      expect(await res.body.json()).toMatchObject({
        code: 'EG_ERR_ARGUMENTS_AMBIGUOUS',
        path: '$.body.items[0].id',
      });
      expect(sentTo('/refunds?order=3')).toBe(2);
    });

    it('answers a large JSON-RPC duplicate with a JSON-RPC error carrying the request id', async () => {
      const call = (id: string): unknown => ({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'create_ticket', arguments: { subject: 'Disk full', body: PAD } },
      });
      expect((await post('/mcp', call('a1'))).status).toBe(200);
      const again = await post('/mcp', call('a2'));
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({
        jsonrpc: '2.0',
        id: 'a2',
        error: { data: { verdict: 'duplicate' } },
      });
      expect(sentTo('/mcp')).toBe(1);
    });
  });
}

describe('large governed bodies, gate edges (pglite:memory)', () => {
  it('governs a large body under a policy set composed by hand, on the event loop', async () => {
    const upstream = await startUpstream(reply(201, { id: 're_2' }));
    const warnings: string[] = [];
    const logger = { info() {}, error() {}, warn: (_f: unknown, m: string) => warnings.push(m) };
    // A set the worker cannot compile the same copy of: it must not decide on other policies.
    const composed = { ...policies, tools: [...policies.tools] };
    const gate = await createGate({
      policies: composed,
      store: 'pglite:memory',
      scope: { tenant: 'acme', area: 'shop', agent: 'bot' },
      logger,
    });
    const agent = new Agent().compose(gateInterceptor(gate, { run: 'r-composed' }));
    try {
      const send = async (): Promise<number> => {
        const res = await request(`${upstream.url}/refunds?order=9`, {
          dispatcher: agent,
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ amount: 9, note: PAD }),
        });
        await res.body.dump();
        return res.statusCode;
      };
      expect([await send(), await send()]).toEqual([201, 409]);
      expect(upstream.requests).toHaveLength(1);
      expect(warnings.join('\n')).toMatch(/not made by loadPolicies or parsePolicyFiles/);
    } finally {
      await agent.close();
      await gate.close();
      await upstream.close();
    }
  });

  it('lets a call whose large body is being analysed finish when the gate closes', async () => {
    const upstream = await startUpstream(reply(201, { id: 're_3' }));
    const gate = await createGate({
      policies,
      store: 'pglite:memory',
      scope: { tenant: 'acme', area: 'shop', agent: 'bot' },
    });
    const agent = new Agent().compose(gateInterceptor(gate, { run: 'r-close' }));
    try {
      // 50,000 members: about 100 ms of analysis on the worker (and its start before that).
      const members = Array.from({ length: 49_000 }, (_, i) => `"k${i}":0`).join(',');
      const call = request(`${upstream.url}/refunds?order=10`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: `{"amount":10,${members}}`,
      });
      await new Promise((r) => setTimeout(r, 30));
      const report = await gate.close();
      const res = await call;
      await res.body.dump();
      expect(res.statusCode).toBe(201);
      expect(report).toMatchObject({ abandonedCalls: 0, unwrittenOutcomes: 0 });
      expect(upstream.requests).toHaveLength(1);
    } finally {
      await agent.close();
      await upstream.close();
    }
  });
});
