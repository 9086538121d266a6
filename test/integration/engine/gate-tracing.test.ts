/**
 * OpenTelemetry traces of the engine, exported over real OTLP/HTTP JSON to an in-process collector:
 * a decision span per governed proposal (parented by the agent's traceparent), a CLIENT span per
 * attempt whose id the destination receives as its traceparent, nothing secret in any attribute,
 * and an untouched traceparent when tracing is off. Real store (PGlite; PostgreSQL with
 * DATABASE_URL), real loopback destination, real upstream client.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate, tracerFromEnv, tracingFromEnv } from '../../../src/engine/index.js';
import { createOtelTracer } from '../../../src/engine/otel-tracer.js';
import type { Proposal } from '../../../src/engine/proposal.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { type CollectedSpan, type OtlpCollector, startOtlpCollector } from '../../helpers/otlp-collector.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import {
  commitThenDestroy,
  jsonRpcReply,
  reply,
  startUpstream,
  type Upstream,
} from '../../helpers/upstream.js';

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
  - id: t.lost
    match: { hosts: [127.0.0.1], method: POST, path: "/lost" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
  - id: mcp.create_ticket
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": create_ticket }
    effect: create
    dedupe: { key: [$.body.params.arguments.subject], window: 1h, wait: 0s }
    verdict: { protocol: jsonrpc }
  - id: t.webhook
    match: { hosts: [127.0.0.1], method: POST, path: "/hooks/{team}/{secret}" }
    effect: notify
    redact: [$.path.secret]
`,
  },
]);

const silentLogger = { info() {}, warn() {}, error() {} };
const scope = { tenant: 'acme', area: 'support', agent: 'bot' };
const SECRET = 'XOXB-SUPER-SECRET';
const CREDENTIAL = 'Bearer sk-live-credential';

/** A fresh agent span: its trace id and span id, and the traceparent naming it (sampled). */
function agentSpan(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

function post(
  upstream: Upstream,
  path: string,
  name: string,
  run: string,
  headers: Record<string, string> = {},
  query = '',
): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path,
    query,
    headers: { 'content-type': 'application/json', authorization: CREDENTIAL, ...headers },
    body: new TextEncoder().encode(JSON.stringify({ name, password: SECRET })),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

function inTrace(traceId: string): (s: CollectedSpan) => boolean {
  return (s) => s.traceId === traceId;
}

for (const target of storeTargets()) {
  describe(`Gate traces over OTLP/HTTP (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let collector: OtlpCollector;
    let gate: Gate;
    let untraced: Gate;

    beforeAll(async () => {
      store = await openTestStore(target);
      collector = await startOtlpCollector();
      upstream = await startUpstream((req, res, raw) =>
        req.url === '/lost'
          ? commitThenDestroy()(req, res, raw)
          : req.url === '/mcp'
            ? jsonRpcReply(undefined, { sse: true })(req, res, raw)
            : reply(201, { id: 1 })(req, res, raw),
      );
      client = createUpstreamClient();
      const tracer = await tracerFromEnv({
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '20' },
      });
      gate = await createGate({ policies, store, scope, tracer });
      untraced = await createGate({ policies, store, scope: { ...scope, agent: 'untraced' } });
    });
    afterAll(async () => {
      await gate?.close();
      await untraced?.close();
      await client?.close();
      await upstream?.close();
      await collector?.close();
      await store?.close();
    });

    it('parents the decision on the agent’s span and the destination on the attempt’s', async () => {
      const agent = agentSpan();
      const res = await gate.handle(
        post(upstream, '/items', 'traced-1', 'run-t1', {
          traceparent: agent.traceparent,
          tracestate: 'acme=1',
        }),
        client.send,
      );
      expect(res.status).toBe(201);
      const spans = await collector.waitFor(inTrace(agent.traceId), 2);
      const decision = spans.find((s) => s.name === 'execute_tool t.create');
      const attempt = spans.find((s) => s.name === 'POST');
      expect(decision).toBeDefined();
      expect(attempt).toBeDefined();
      if (decision === undefined || attempt === undefined) return;

      expect(decision.parentSpanId).toBe(agent.spanId);
      expect(decision.kind).toBe(1);
      expect(decision.status).toBe(0);
      expect(decision.attributes).toEqual({
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.tool.name': 't.create',
        'effectgate.tool.effect': 'create',
        'effectgate.run.id': 'run-t1',
        'effectgate.verdict': 'allow',
        'effectgate.decision.id': res.headers['effectgate-decision'],
        'effectgate.operation.id': res.headers['effectgate-operation'],
        'effectgate.attempt.id': res.headers['effectgate-attempt'],
        'effectgate.attempt.number': 1,
      });
      expect(decision.resource['service.name']).toBe('effectgate');

      expect(attempt.parentSpanId).toBe(decision.spanId);
      expect(attempt.kind).toBe(3);
      expect(attempt.status).toBe(0);
      expect(attempt.attributes).toMatchObject({
        'http.request.method': 'POST',
        'server.address': '127.0.0.1',
        'server.port': upstream.port,
        'url.scheme': 'http',
        'url.path': '/items',
        'http.response.status_code': 201,
        'effectgate.attempt.id': res.headers['effectgate-attempt'],
        'effectgate.attempt.number': 1,
        'effectgate.dispatch_state': 'response_received',
        'effectgate.operation_state': 'succeeded',
      });

      // The destination's parent is the attempt; the agent's tracestate travels on.
      const sent = upstream.requests.at(-1);
      expect(sent?.headers['traceparent']).toBe(`00-${agent.traceId}-${attempt.spanId}-01`);
      expect(sent?.headers['tracestate']).toBe('acme=1');
      expect(sent?.headers['idempotency-key']).toBe(res.headers['effectgate-operation']);
    });

    it('gives a duplicate its decision span with verdict duplicate and no attempt span', async () => {
      await gate.handle(post(upstream, '/items', 'traced-dup', 'run-d1'), client.send);
      const before = upstream.requests.length;
      const agent = agentSpan();
      const dup = await gate.handle(
        post(upstream, '/items', 'traced-dup', 'run-d2', { traceparent: agent.traceparent }),
        client.send,
      );
      expect(dup.status).toBe(409);
      expect(upstream.requests.length).toBe(before);
      const [decision] = await collector.waitFor(inTrace(agent.traceId));
      expect(decision?.name).toBe('execute_tool t.create');
      expect(decision?.parentSpanId).toBe(agent.spanId);
      expect(decision?.attributes['effectgate.verdict']).toBe('duplicate');
      expect(decision?.attributes['effectgate.decision.id']).toBe(dup.headers['effectgate-decision']);
      expect(decision?.attributes['effectgate.operation.id']).toBe(dup.headers['effectgate-operation']);
      expect(decision?.attributes['effectgate.attempt.id']).toBeUndefined();
      // Give a stray attempt span time to arrive before saying there is none.
      await new Promise((r) => setTimeout(r, 200));
      expect(collector.spans.filter(inTrace(agent.traceId))).toHaveLength(1);
    });

    it('marks a lost response’s attempt an error: sent, no response, operation unknown', async () => {
      const agent = agentSpan();
      const res = await gate.handle(
        post(upstream, '/lost', 'lost-1', 'run-l1', { traceparent: agent.traceparent }),
        client.send,
      );
      expect(res.headers['effectgate-verdict']).toBe('allow');
      const spans = await collector.waitFor(inTrace(agent.traceId), 2);
      const attempt = spans.find((s) => s.kind === 3);
      expect(attempt?.status).toBe(2);
      expect(attempt?.attributes['effectgate.dispatch_state']).toBe('sent_no_response');
      expect(attempt?.attributes['effectgate.operation_state']).toBe('unknown');
      expect(attempt?.attributes['http.response.status_code']).toBeUndefined();
      expect(typeof attempt?.attributes['error.type']).toBe('string');
    });

    it('ends a streamed answer’s attempt span with the outcome its response event shows', async () => {
      const agent = agentSpan();
      const call = {
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'create_ticket', arguments: { subject: 'streamed' } },
      };
      const res = await gate.handle(
        {
          ...post(upstream, '/mcp', '', 'run-s1', {
            traceparent: agent.traceparent,
            accept: 'application/json, text/event-stream',
          }),
          body: new TextEncoder().encode(JSON.stringify(call)),
        },
        client.send,
      );
      expect(res.headers['effectgate-verdict']).toBe('allow');
      expect(res.stream).toBeDefined();
      let events = '';
      for await (const chunk of res.stream ?? []) events += new TextDecoder().decode(chunk);
      expect(events).toContain('"id":7');
      const spans = await collector.waitFor(inTrace(agent.traceId), 2);
      const attempt = spans.find((s) => s.kind === 3);
      expect(spans.find((s) => s.kind === 1)?.name).toBe('execute_tool mcp.create_ticket');
      expect(attempt?.attributes['effectgate.operation_state']).toBe('succeeded');
      expect(attempt?.attributes['http.response.status_code']).toBe(200);
      expect(attempt?.status).toBe(0);
    });

    it('starts a trace when the agent sends none, and exports no secret, query or header value', async () => {
      const res = await gate.handle(
        post(upstream, `/hooks/T1/${SECRET}`, 'hook', 'run-h1', { 'x-api-key': SECRET }, `token=${SECRET}`),
        client.send,
      );
      expect(res.status).toBe(201);
      const sent = upstream.requests.at(-1);
      const traceparent = String(sent?.headers['traceparent']);
      const [, traceId, spanId] = traceparent.split('-');
      const spans = await collector.waitFor((s) => s.traceId === traceId, 2);
      const decision = spans.find((s) => s.name === 'execute_tool t.webhook');
      const attempt = spans.find((s) => s.spanId === spanId);
      expect(decision?.parentSpanId).toBe('');
      expect(attempt?.parentSpanId).toBe(decision?.spanId);
      expect(attempt?.attributes['url.path']).toBe('/hooks/T1/{secret}');
      const exported = JSON.stringify(collector.spans);
      expect(exported).not.toContain(SECRET);
      expect(exported).not.toContain('sk-live-credential');
      expect(exported).not.toContain('token=');
    });

    it('leaves the agent’s traceparent to the destination untouched when tracing is off', async () => {
      const agent = agentSpan();
      const exportedBefore = collector.spans.length;
      const res = await untraced.handle(
        post(upstream, '/items', 'untraced-1', 'run-u1', {
          traceparent: agent.traceparent,
          tracestate: 'acme=2',
        }),
        client.send,
      );
      expect(res.status).toBe(201);
      const sent = upstream.requests.at(-1);
      expect(sent?.headers['traceparent']).toBe(agent.traceparent);
      expect(sent?.headers['tracestate']).toBe('acme=2');
      await new Promise((r) => setTimeout(r, 100));
      expect(collector.spans.filter(inTrace(agent.traceId))).toHaveLength(0);
      expect(collector.spans.length).toBe(exportedBefore);
    });

    it('exports OTLP/HTTP JSON to /v1/traces', () => {
      expect(collector.exports.length).toBeGreaterThan(0);
      for (const e of collector.exports) {
        expect(e.path).toBe('/v1/traces');
        expect(e.headers['content-type']).toBe('application/json');
      }
    });
  });
}

describe('closing a tracer whose collector never answers', () => {
  it('gives up after its bound instead of holding the gate’s stop', async () => {
    // Accepts the export and never answers: the exporter's own timeout (10 s) is longer.
    const sockets = new Set<Socket>();
    const blackHole = createServer(() => undefined);
    blackHole.on('connection', (s) => sockets.add(s));
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(blackHole.address() as AddressInfo).port}/v1/traces`;
    const settings = tracingFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url });
    if (!settings.on) throw new Error('tracing should be on');
    const tracer = createOtelTracer({ ...settings, logger: silentLogger, closeTimeoutMs: 300 });
    const proposal = { tool: { id: 't.x', effect: 'create' }, common: { runId: 'r' } } as unknown as Proposal;
    const head = { headers: {} } as unknown as GateRequest;
    tracer
      .decision(head, proposal, performance.now())
      .end({ status: 200, headers: {}, body: new Uint8Array(0) });
    const started = Date.now();
    await tracer.close();
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(2_000);
    // A second close is the same one.
    await tracer.close();
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => blackHole.close(() => resolve()));
  });
});

describe('a collector that refuses the export', () => {
  it('is logged once when exports start failing and once when they work again', async () => {
    let status = 400;
    const refusing = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(status, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(refusing.address() as AddressInfo).port}`;
    const settings = tracingFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_BSP_SCHEDULE_DELAY: '10' });
    if (!settings.on) throw new Error('tracing should be on');
    const logged: string[] = [];
    const logger = {
      info: (_f: unknown, m: string) => logged.push(`info ${m}`),
      warn: (_f: unknown, m: string) => logged.push(`warn ${m}`),
      error: (_f: unknown, m: string) => logged.push(`error ${m}`),
    };
    const tracer = createOtelTracer({ ...settings, logger });
    const proposal = { tool: { id: 't.x', effect: 'create' }, common: { runId: 'r' } } as unknown as Proposal;
    const head = { headers: {} } as unknown as GateRequest;
    const decide = (): void => {
      tracer
        .decision(head, proposal, performance.now())
        .end({ status: 200, headers: {}, body: new Uint8Array(0) });
    };
    const until = async (what: () => boolean): Promise<void> => {
      const deadline = Date.now() + 5_000;
      while (!what() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    };
    decide();
    await until(() => logged.length > 0);
    decide();
    await new Promise((r) => setTimeout(r, 100));
    expect(logged).toEqual([
      'warn could not export traces to the OTLP endpoint; dropping them until it answers',
    ]);
    status = 200;
    decide();
    await until(() => logged.length > 1);
    expect(logged.at(-1)).toBe('info exporting traces again');
    expect(logged).toHaveLength(2);
    await tracer.close();
    await new Promise<void>((resolve) => refusing.close(() => resolve()));
  });
});
