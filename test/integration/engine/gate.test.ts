/**
 * The engine in process, against a real store (PGlite always, PostgreSQL with DATABASE_URL) and a
 * real loopback upstream reached through the real upstream client: store round trips per verdict,
 * scope isolation, fail-closed on a store outage.
 */
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { delay, jsonRpcReply, reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

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
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key }
  - id: mcp.create_ticket
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": create_ticket }
    effect: create
    dedupe: { key: [$.body.params.arguments.subject], window: 1h, wait: 0s }
    verdict: { protocol: jsonrpc }
  - id: t.slow
    match: { hosts: [127.0.0.1], method: POST, path: "/slow" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, pending_ttl: 1s, wait: 0s }
  - id: t.webhook
    match: { hosts: [127.0.0.1], method: POST, path: "/hooks/{team}/{secret}" }
    effect: notify
    redact: [$.path.secret]
`,
  },
]);

const scopeA = { tenant: 'acme', area: 'support', agent: 'bot' };

function post(upstream: Upstream, name: unknown, run = 'r1', rawBody?: string): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path: '/items',
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(rawBody ?? JSON.stringify({ name })),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

for (const target of storeTargets()) {
  describe(`Gate with a real store (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let gate: Gate;

    beforeAll(async () => {
      store = await openTestStore(target);
      upstream = await startUpstream((req, res, raw) =>
        req.url === '/slow'
          ? delay(2_500, reply(201, { id: 2 }))(req, res, raw)
          : req.url === '/mcp'
            ? jsonRpcReply()(req, res, raw)
            : reply(201, { id: 1 })(req, res, raw),
      );
      client = createUpstreamClient();
      gate = await createGate({ policies, store, scope: scopeA });
    });
    afterAll(async () => {
      await client?.close();
      await upstream?.close();
      await store?.close();
    });

    it('allow costs two store round trips, duplicate one, ungoverned none', async () => {
      const t0 = store.stats.roundTrips;
      const allowed = await gate.handle(post(upstream, 'rt-1'), client.send);
      expect(allowed.status).toBe(201);
      expect(store.stats.roundTrips - t0).toBe(2);

      const t1 = store.stats.roundTrips;
      const dup = await gate.handle(post(upstream, 'rt-1', 'r2'), client.send);
      expect(dup.status).toBe(409);
      expect(store.stats.roundTrips - t1).toBe(1);

      const t2 = store.stats.roundTrips;
      const head = { ...post(upstream, 'x'), path: '/health', method: 'GET' };
      expect(gate.route(head)).toEqual({ kind: 'pass' });
      expect(store.stats.roundTrips - t2).toBe(0);
    });

    it('never lets one tenant’s effect make another tenant’s identical call a duplicate', async () => {
      const gateB = await createGate({ policies, store, scope: { ...scopeA, tenant: 'globex' } });
      const otherAgent = await createGate({ policies, store, scope: { ...scopeA, agent: 'bot-2' } });
      expect((await gate.handle(post(upstream, 'same-name'), client.send)).status).toBe(201);
      expect((await gateB.handle(post(upstream, 'same-name'), client.send)).status).toBe(201);
      expect((await otherAgent.handle(post(upstream, 'same-name'), client.send)).status).toBe(201);
      expect((await gateB.handle(post(upstream, 'same-name', 'r9'), client.send)).status).toBe(409);
      expect(upstream.requests.filter((r) => r.body.toString().includes('same-name'))).toHaveLength(3);
    });

    it('keys the loop breaker by scope: a run id shared with another tenant is not halted by its duplicates', async () => {
      const other = await createGate({ policies, store, scope: { ...scopeA, tenant: 'initech' } });
      await other.handle(post(upstream, 'loop-x', 'shared-run'), client.send);
      for (let i = 0; i < 3; i++) await other.handle(post(upstream, 'loop-x', 'shared-run'), client.send);
      // The fourth proposal of the same done effect halts the run; then everything of it is halted.
      expect((await other.handle(post(upstream, 'loop-x', 'shared-run'), client.send)).status).toBe(429);
      expect((await other.handle(post(upstream, 'loop-y', 'shared-run'), client.send)).status).toBe(429);
      expect((await gate.handle(post(upstream, 'loop-z', 'shared-run'), client.send)).status).toBe(201);
    });

    it('refuses a named run the gate derives (auto-…) or one that cannot be a page segment, sending nothing', async () => {
      const before = upstream.requests.length;
      const t = store.stats.roundTrips;
      for (const run of ['auto-0193aa', '.', '..']) {
        const res = await gate.handle(post(upstream, 'named-run', run), client.send);
        expect(res.status, run).toBe(400);
        expect(new TextDecoder().decode(res.body)).toContain('Effectgate-Run must not');
      }
      // A JSON-RPC tool's client gets the refusal as a JSON-RPC error for its request's id (kept a
      // 400, as an MCP server answers a request it rejects at the transport).
      const mcp = await gate.handle(
        {
          ...post(upstream, null, 'auto-0193bb'),
          path: '/mcp',
          body: new TextEncoder().encode(
            JSON.stringify({
              jsonrpc: '2.0',
              id: 41,
              method: 'tools/call',
              params: { name: 'create_ticket', arguments: { subject: 'named a derived run' } },
            }),
          ),
        },
        client.send,
      );
      expect(mcp.status).toBe(400);
      expect(JSON.parse(new TextDecoder().decode(mcp.body))).toMatchObject({
        id: 41,
        error: { code: -32600 },
      });
      expect(upstream.requests.length).toBe(before);
      expect(store.stats.roundTrips - t).toBe(0);
      expect((await gate.handle(post(upstream, 'named-run', 'auto'), client.send)).status).toBe(201);
    });

    it('refuses key values it cannot represent faithfully (422), without calling them a store outage', async () => {
      const before = upstream.requests.length;
      const cases = ['{"name": 9007199254740993}', '{"name": "a\\u0000b"}', '{"name": "\\ud800"}'];
      for (const raw of cases) {
        const res = await gate.handle(post(upstream, null, 'r-bad', raw), client.send);
        expect(res.status, raw).toBe(422);
        const body = JSON.parse(new TextDecoder().decode(res.body)) as Record<string, unknown>;
        expect(body).toMatchObject({ verdict: 'block', reason: 'key_value_invalid' });
      }
      expect(upstream.requests.length).toBe(before);
    });

    it('answers arguments it cannot canonicalize (1e400) with 400 and deep nesting with 413, not 503', async () => {
      const res = await gate.handle(post(upstream, null, 'r-deep', '{"name":"big","x":1e400}'), client.send);
      expect(res.status).toBe(400);
      expect(new TextDecoder().decode(res.body)).toContain('cannot read this request');
      const deep = `{"name":"deep","x":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
      const refused = await gate.handle(post(upstream, null, 'r-deep', deep), client.send);
      expect(refused.status).toBe(413);
      expect(new TextDecoder().decode(refused.body)).toContain('body_too_complex');
    });

    it('treats query names like constructor and __proto__ as data', async () => {
      const req = {
        ...post(upstream, 'query-names'),
        query: 'constructor=1&__proto__=2&__proto__=3&toString=x',
      };
      expect((await gate.handle(req, client.send)).status).toBe(201);
    });

    it('answers a JSON-RPC tool with a JSON-RPC error carrying the request id; other MCP calls pass', async () => {
      const call = (id: number, name: string): GateRequest => ({
        ...post(upstream, null, 'r-mcp'),
        path: '/mcp',
        body: new TextEncoder().encode(
          JSON.stringify({
            jsonrpc: '2.0',
            id,
            method: 'tools/call',
            params: { name, arguments: { subject: 'VPN down' } },
          }),
        ),
      });
      expect((await gate.handle(call(1, 'create_ticket'), client.send)).status).toBe(200);
      const dup = await gate.handle(call(2, 'create_ticket'), client.send);
      expect(dup.status).toBe(200);
      expect(dup.headers['effectgate-verdict']).toBe('duplicate');
      const rpc = JSON.parse(new TextDecoder().decode(dup.body)) as {
        id: number;
        error: { message: string; data: Record<string, unknown> };
      };
      expect(rpc.id).toBe(2);
      expect(rpc.error.message).toContain('already carried out');
      expect(rpc.error.data).toMatchObject({ verdict: 'duplicate', tool: 'mcp.create_ticket' });
      // A different MCP tool on the same endpoint matches no classification: relayed ungoverned.
      const other = await gate.handle(call(3, 'search_tickets'), client.send);
      expect(other.headers['effectgate-verdict']).toBeUndefined();
      expect(other.status).toBe(200);
    });

    it('gives up on a dispatch before its reservation could expire: unknown, and never sent twice', async () => {
      const slow: GateRequest = { ...post(upstream, 'slow-effect', 'r-slow'), path: '/slow' };
      const first = await gate.handle(slow, client.send);
      // pending_ttl is 1 s: the gate stops waiting at 0.9 s and records the outcome as unknown.
      expect(first.status).toBe(504);
      const body = JSON.parse(new TextDecoder().decode(first.body)) as Record<string, unknown>;
      expect(body).toMatchObject({
        verdict: 'allow',
        dispatch_state: 'sent_no_response',
        operation_state: 'unknown',
      });
      await new Promise((r) => setTimeout(r, 1_200)); // past pending_ttl
      const again = await gate.handle(
        { ...slow, context: { ...slow.context, run: 'r-slow-2' } },
        client.send,
      );
      // Not taken over by TTL: the retry of an unknown outcome is held for an approval.
      expect(again.status).toBe(428);
      expect(JSON.parse(new TextDecoder().decode(again.body))).toMatchObject({
        verdict: 'hold',
        operation_state: 'unknown',
        previous_dispatch_state: 'sent_no_response',
        approval_id: expect.any(String),
      });
      expect(upstream.requests.filter((r) => r.url === '/slow')).toHaveLength(1);
    });

    it('never stores a path capture the tool declares secret', async () => {
      const req: GateRequest = { ...post(upstream, 'x'), path: '/hooks/T1/XOXB-SUPER-SECRET' };
      const res = await gate.handle(req, client.send);
      expect(res.status).toBe(201);
      expect(upstream.requests.at(-1)?.url).toBe('/hooks/T1/XOXB-SUPER-SECRET');
      const op = await store.getOperation(res.headers['effectgate-operation'] as string);
      expect(op?.attempts[0]?.request.path).toBe('/hooks/T1/{secret}');
      const dump =
        JSON.stringify(await store.query('select * from attempts')) +
        JSON.stringify(await store.readEvents(0, 100_000));
      expect(dump).not.toContain('XOXB-SUPER-SECRET');
    });

    it('records the operation, its attempt and the decisions with the semantic key values', async () => {
      const res = await gate.handle(post(upstream, 'trail-me', 'run-trail'), client.send);
      const opId = res.headers['effectgate-operation'] as string;
      const op = await store.getOperation(opId);
      expect(op).toMatchObject({
        toolId: 't.create',
        state: 'succeeded',
        keyValues: ['trail-me'],
        idempotencyHeader: 'Idempotency-Key',
      });
      expect(op?.scope).toEqual(scopeA);
      expect(op?.attempts).toHaveLength(1);
      expect(op?.attempts[0]).toMatchObject({
        number: 1,
        dispatchState: 'response_received',
        status: 201,
        runId: 'run-trail',
      });
      expect(op?.attempts[0]?.request.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
      const decisions = await store.listDecisions({ runId: 'run-trail' });
      expect(decisions.map((d) => d.verdict)).toEqual(['allow']);
    });
  });
}

describe('store outage', () => {
  it('fails closed for governed calls (503 problem, nothing sent) while ungoverned traffic keeps flowing', async () => {
    const [target] = storeTargets();
    const store = await openTestStore(target!);
    const upstream = await startUpstream(reply(201, { ok: true }));
    const gate = await createGate({ policies, store, scope: scopeA });
    const proxy = createProxyServer({ gate });
    const addr = await proxy.listen('127.0.0.1', 0);
    const agent = new ProxyAgent({ uri: `http://127.0.0.1:${addr.port}`, proxyTunnel: false });
    try {
      await store.close(); // the store goes away under a running gate
      const governed = await request(`${upstream.url}/items`, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json' },
        body: '{"name":"n"}',
      });
      expect(governed.statusCode).toBe(503);
      expect(governed.headers['content-type']).toBe('application/problem+json');
      expect(await governed.body.json()).toMatchObject({
        code: 'EG_ERR_STORE_UNAVAILABLE',
        tool: 't.create',
      });
      const ungoverned = await request(`${upstream.url}/health`, { dispatcher: agent });
      expect(ungoverned.statusCode).toBe(201);
      await ungoverned.body.text();
      expect(upstream.requests.map((r) => r.url)).toEqual(['/health']);
    } finally {
      await agent.close();
      await proxy.close();
      await upstream.close();
    }
  });
});
