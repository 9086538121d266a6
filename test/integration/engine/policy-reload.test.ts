/**
 * Hot reload of policies in the engine, on a real store (PGlite always,
 * PostgreSQL with DATABASE_URL) and a real loopback destination: a request in flight finishes
 * under the set it started with, a reload governs from its next request, and reloads under load
 * leave no analysis worker of a replaced generation behind.
 */
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { liveAnalysisWorkers } from '../../../src/engine/proposal-pool.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { type PolicySet, parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { delay, type RecordedRequest, reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

/** A set of tools on 127.0.0.1, each `id path` pair one POST route keyed by `$.body.name`. */
function policySet(file: string, tools: readonly (readonly [string, string])[]): PolicySet {
  const body = tools
    .map(
      ([id, path]) => `
  - id: ${id}
    match: { hosts: [127.0.0.1], method: POST, path: "${path}" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }`,
    )
    .join('');
  return parsePolicyFiles([{ file, text: `version: 1\ntools:${body}\n` }]);
}

/** One MCP tools/call tool on `/mcp`, answered as an event stream. */
function mcpSet(file: string, id: string): PolicySet {
  return parsePolicyFiles([
    {
      file,
      text: `version: 1
tools:
  - id: ${id}
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
}

/** Opens an event stream at once and sends the JSON-RPC response 600 ms later. */
function slowStream(request: RecordedRequest, res: ServerResponse): void {
  const rpc = JSON.parse(request.body.toString()) as { id: unknown };
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
  setTimeout(() => {
    res.end(
      `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result: { content: [] } })}\n\n`,
    );
  }, 600);
}

const scope = { tenant: 'acme', area: 'reload', agent: 'bot' };

function post(upstream: Upstream, path: string, name: string, run: string, pad = 0): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path,
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify({ name, pad: 'x'.repeat(pad) })),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

async function until(what: string, ok: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

for (const target of storeTargets()) {
  describe(`policy reload (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let gate: Gate;

    beforeAll(async () => {
      store = await openTestStore(target);
      upstream = await startUpstream((req, res, raw) =>
        req.url === '/mcp'
          ? slowStream(req, res)
          : req.url === '/slow'
            ? delay(800, reply(201, { id: 'slow' }))(req, res, raw)
            : reply(201, { id: 1 })(req, res, raw),
      );
      client = createUpstreamClient();
      gate = await createGate({
        policies: policySet('start.yaml', [
          ['t.slow', '/slow'],
          ['t.items', '/items'],
        ]),
        store,
        scope,
      });
    });
    afterAll(async () => {
      await gate?.close();
      await client?.close();
      await upstream?.close();
      await store?.close();
    });

    it('lets a request in flight finish under the set it started with; the next is classified by the new one', async () => {
      expect(gate.generation.generation).toBe(1);
      const inFlight = gate.handle(post(upstream, '/slow', 'in-flight', 'r-a1'), client.send);
      await until('the slow call at its destination', () =>
        upstream.requests.some((r) => r.url === '/slow' && r.body.toString().includes('in-flight')),
      );
      // The tool of the call in flight is gone from the new set; another takes its route.
      const report = await gate.reload(
        policySet('next.yaml', [
          ['t.slow.v2', '/slow'],
          ['t.items', '/items'],
        ]),
      );
      expect(report).toMatchObject({ generation: 2, tools: 2, previous: { generation: 1 } });
      expect(report.digest).not.toBe(report.previous.digest);
      expect(gate.policies.tools.map((t) => t.id)).toEqual(['t.slow.v2', 't.items']);
      // The old generation still has a user: it is retiring, not stopped.
      expect(gate.generation.retiring).toBe(1);

      const answered = await inFlight;
      expect(answered.status).toBe(201);
      expect(JSON.parse(new TextDecoder().decode(answered.body))).toEqual({ id: 'slow' });
      expect(answered.headers['effectgate-verdict']).toBe('allow');
      const [old] = await store.listOperations({ toolId: 't.slow' });
      expect(old?.state).toBe('succeeded');
      expect(old?.attempts.map((a) => a.status)).toEqual([201]);
      const decisions = await store.listDecisions({ operationId: old!.id });
      expect(decisions.map((d) => [d.toolId, d.verdict])).toEqual([['t.slow', 'allow']]);
      await until('the replaced generation stopped', () => gate.generation.retiring === 0);

      // The same call again: the new set's tool, a new operation (not the old tool's duplicate).
      const next = await gate.handle(post(upstream, '/slow', 'in-flight', 'r-a2'), client.send);
      expect(next.status).toBe(201);
      const [renamed] = await store.listOperations({ toolId: 't.slow.v2' });
      expect(renamed?.state).toBe('succeeded');
      expect(renamed?.id).not.toBe(old?.id);
    });

    it('governs a tool a reload adds from its next request: the second call is a duplicate', async () => {
      const head = post(upstream, '/new', 'added', 'r-c1');
      expect(gate.route(head)).toEqual({ kind: 'pass' });
      await gate.reload(
        policySet('added.yaml', [
          ['t.slow.v2', '/slow'],
          ['t.items', '/items'],
          ['t.new', '/new'],
        ]),
      );
      expect(gate.route(head).kind).toBe('govern');
      expect((await gate.handle(head, client.send)).status).toBe(201);
      const again = await gate.handle(post(upstream, '/new', 'added', 'r-c2'), client.send);
      expect(again.status).toBe(409);
      expect(again.headers['effectgate-verdict']).toBe('duplicate');
      expect(upstream.requests.filter((r) => r.url === '/new')).toHaveLength(1);
    });

    it('stops every replaced generation’s analysis workers after reloads under load', async () => {
      const sets = [
        policySet('a.yaml', [['t.items', '/items']]),
        policySet('b.yaml', [
          ['t.items', '/items'],
          ['t.extra', '/extra'],
        ]),
      ];
      const before = gate.generation.generation;
      const rounds = 4;
      let peak = 0;
      for (let i = 0; i < rounds; i++) {
        // Bodies past the offload threshold (16 KiB): each generation starts its own worker.
        const load = Array.from({ length: 3 }, (_, j) =>
          gate.handle(post(upstream, '/items', `load-${i}-${j}`, `r-d${i}`, 20_000), client.send),
        );
        const reloaded = gate.reload(sets[i % 2]!);
        const answers = await Promise.all(load);
        peak = Math.max(peak, liveAnalysisWorkers());
        expect(answers.map((a) => a.status)).toEqual([201, 201, 201]);
        await reloaded;
      }
      // Every request of the last generation too: its worker is the only one left.
      expect(
        (await gate.handle(post(upstream, '/items', 'load-last', 'r-d9', 20_000), client.send)).status,
      ).toBe(201);
      await until('every replaced generation stopped', () => gate.generation.retiring === 0);
      expect(gate.generation.generation).toBe(before + rounds);
      // The large bodies did start workers, one generation after another; only the current one's is left.
      expect(peak).toBeGreaterThanOrEqual(1);
      await until('the replaced workers exited', () => liveAnalysisWorkers() === 1);
      expect(gate.generation.analysisWorkers).toBe(1);
      const ops = await store.listOperations({ toolId: 't.items', limit: 100 });
      expect(ops.filter((o) => o.state === 'succeeded').length).toBe(rounds * 3 + 1);
    });

    it('records a streamed outcome under the set its request started with, after a reload replaced it', async () => {
      const current = gate.policies;
      await gate.reload(mcpSet('mcp-old.yaml', 'mcp.old'));
      const call = {
        ...post(upstream, '/mcp', 'unused', 'r-s1'),
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: new TextEncoder().encode(
          JSON.stringify({
            jsonrpc: '2.0',
            id: 7,
            method: 'tools/call',
            params: { name: 'create_ticket', arguments: { subject: 'streamed across a reload' } },
          }),
        ),
      };
      const answered = await gate.handle(call, client.send);
      expect(answered.stream).toBeDefined();
      // The answer is still streaming: the tool it was classified by leaves the set.
      await gate.reload(mcpSet('mcp-new.yaml', 'mcp.new'));
      let text = '';
      for await (const chunk of answered.stream!) text += new TextDecoder().decode(chunk);
      expect(text).toContain('"id":7');
      const op = await (async () => {
        for (let i = 0; i < 200; i++) {
          const [found] = await store.listOperations({ toolId: 'mcp.old' });
          if (found !== undefined && found.state !== 'open') return found;
          await sleep(20);
        }
        return null;
      })();
      expect(op?.state).toBe('succeeded');
      // The same call now is the new set's tool: a new operation, not the old one's duplicate.
      const again = await gate.handle({ ...call, context: { ...call.context, run: 'r-s2' } }, client.send);
      for await (const _ of again.stream ?? []) {
        // drained
      }
      expect(again.headers['effectgate-verdict']).toBe('allow');
      await gate.reload(current);
    });

    it('refuses a reload once the gate is closing, and close() still drains the call in flight', async () => {
      const other = await createGate({
        policies: policySet('close.yaml', [['t.slow', '/slow']]),
        store,
        scope,
      });
      const inFlight = other.handle(post(upstream, '/slow', 'closing', 'r-e1'), client.send);
      await until('the slow call at its destination', () =>
        upstream.requests.some((r) => r.body.toString().includes('"closing"')),
      );
      const closed = other.close();
      await expect(other.reload(policySet('late.yaml', [['t.items', '/items']]))).rejects.toThrow(
        /gate is stopping/,
      );
      expect((await inFlight).status).toBe(201);
      expect(await closed).toEqual({ unwrittenOutcomes: 0, abandonedCalls: 0 });
      const [op] = await store
        .listOperations({ toolId: 't.slow', limit: 100 })
        .then((l) => l.filter((o) => o.runId === 'r-e1'));
      expect(op?.state).toBe('succeeded');
    });
  });
}
