/**
 * Ambiguous and too complex arguments through the real forward proxy, a real engine and a real
 * store: refused 422 / 413 with problem+json naming the path, nothing sent upstream, and no store
 * round trip made (docs/design.md §4.1 "Spellings").
 */
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
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

const MIB = 1024 * 1024;

for (const target of storeTargets()) {
  describe(`argument refusals through the forward proxy (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let gate: Gate;
    let proxy: ProxyServer;
    let agent: ProxyAgent;

    beforeAll(async () => {
      store = await openTestStore(target);
      upstream = await startUpstream(reply(201, { id: 1 }));
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
      body: string,
      contentType = 'application/json',
    ): Promise<{
      status: number;
      type: string;
      problem: Record<string, unknown>;
      roundTrips: number;
      sent: number;
    }> {
      const sentBefore = upstream.requests.length;
      const t0 = store.stats.roundTrips;
      const res = await request(`${upstream.url}${path}`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': contentType },
        body,
      });
      const problem = (await res.body.json()) as Record<string, unknown>;
      return {
        status: res.statusCode,
        type: String(res.headers['content-type']),
        problem,
        roundTrips: store.stats.roundTrips - t0,
        sent: upstream.requests.length - sentBefore,
      };
    }

    it('refuses a duplicate JSON member 422, naming its path, before the store and the upstream', async () => {
      const r = await post('/refunds?order=42', '{"title":"Refund 42","title":"x1"}');
      expect(r).toMatchObject({ status: 422, type: 'application/problem+json', roundTrips: 0, sent: 0 });
      expect(r.problem).toMatchObject({
        type: 'urn:effectgate:problem:arguments_ambiguous',
        status: 422,
        code: 'EG_ERR_ARGUMENTS_AMBIGUOUS',
        path: '$.body.title',
      });
      expect(r.problem['message']).toBe(r.problem['detail']);

      const nested = await post(
        '/refunds?order=42',
        '{"title":"t","items":[{"id":1},{"id":2},{"id":3,"id":4}]}',
      );
      expect(nested).toMatchObject({ status: 422, roundTrips: 0, sent: 0 });
      expect(nested.problem['path']).toBe('$.body.items[2].id');
    });

    it('refuses a repeated query parameter or form field a key path reads; lets other repeats through', async () => {
      const query = await post('/refunds?order=42&order=x1', '{"title":"Refund"}');
      expect(query).toMatchObject({ status: 422, roundTrips: 0, sent: 0 });
      expect(query.problem).toMatchObject({ code: 'EG_ERR_ARGUMENTS_AMBIGUOUS', path: '$.query.order' });

      const form = await post(
        '/refunds?order=7',
        'title=Refund+42&title=x1',
        'application/x-www-form-urlencoded',
      );
      expect(form).toMatchObject({ status: 422, roundTrips: 0, sent: 0 });
      expect(form.problem['path']).toBe('$.body.title');

      const harmless = await post('/refunds?order=43&tag=a&tag=b', '{"title":"Refund 43"}');
      expect(harmless).toMatchObject({ status: 201, sent: 1, roundTrips: 2 });
    });

    it('refuses 1 MB hostile shapes 413 body_too_complex without parsing or storing them', async () => {
      const depth = (MIB - 64) / 2;
      const deep = await post(
        '/refunds?order=1',
        `{"title":"d","a":${'['.repeat(depth)}${']'.repeat(depth)}}`,
      );
      expect(deep).toMatchObject({ status: 413, roundTrips: 0, sent: 0 });
      expect(deep.problem).toMatchObject({
        type: 'urn:effectgate:problem:body_too_complex',
        code: 'EG_ERR_BODY_TOO_COMPLEX',
      });
      expect(String(deep.problem['path'])).toMatch(/^\$\.body\.a(\[0\])+$/);

      const members = Array.from({ length: 80_000 }, (_, i) => `"k${i}":0`).join(',');
      const wide = await post('/refunds?order=1', `{"title":"w",${members}}`);
      expect(wide).toMatchObject({ status: 413, roundTrips: 0, sent: 0 });
      expect(wide.problem['detail']).toContain('100000');
    });

    it('answers a JSON-RPC tool with the same problem+json as the other pre-classification refusals', async () => {
      const body =
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_ticket","arguments":{"subject":"a","subject":"b"}}}';
      const r = await post('/mcp', body);
      expect(r).toMatchObject({ status: 422, type: 'application/problem+json', roundTrips: 0, sent: 0 });
      expect(r.problem['path']).toBe('$.body.params.arguments.subject');
    });

    it('leaves ungoverned bodies alone, duplicates and all', async () => {
      const sent = upstream.requests.length;
      const res = await request(`${upstream.url}/elsewhere`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"a":1,"a":2}',
      });
      expect(res.statusCode).toBe(201);
      await res.body.dump();
      expect(upstream.requests.length).toBe(sent + 1);
    });
  });
}
