/**
 * What shadow mode sends is visible where enforce's sends are (from a hostile review): a request
 * sent anyway is an effect at the destination, so it has its own CLIENT span and the destination
 * is parented on it, as for an allowed attempt.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate, tracerFromEnv } from '../../../src/engine/index.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { type OtlpCollector, startOtlpCollector } from '../../helpers/otlp-collector.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
default: block
tools:
  - id: t.create
    match: { hosts: [127.0.0.1], method: POST, path: "/items" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
`,
  },
]);

const scope = { tenant: 'acme', area: 'support', agent: 'review-obs' };

function post(
  upstream: Upstream,
  path: string,
  name: string,
  run: string,
  traceparent?: string,
): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path,
    query: '',
    headers: { 'content-type': 'application/json', ...(traceparent ? { traceparent } : {}) },
    body: new TextEncoder().encode(JSON.stringify({ name })),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

/** The gate's log lines, as the CLI's JSON logger would get them. */
const logged: { fields: Record<string, unknown>; message: string }[] = [];
const logger = {
  info: (fields: Record<string, unknown>, message: string) => void logged.push({ fields, message }),
  warn: (fields: Record<string, unknown>, message: string) => void logged.push({ fields, message }),
  error: (fields: Record<string, unknown>, message: string) => void logged.push({ fields, message }),
};

for (const target of storeTargets()) {
  describe(`shadow sends are observable (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let collector: OtlpCollector;
    let gate: Gate;

    beforeAll(async () => {
      store = await openTestStore(target);
      collector = await startOtlpCollector();
      upstream = await startUpstream(reply(201, { id: 1 }));
      client = createUpstreamClient();
      const tracer = await tracerFromEnv({
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '20' },
      });
      gate = await createGate({ policies, store, scope, tracer, mode: 'shadow', analysisThreads: 0, logger });
    });
    afterAll(async () => {
      await gate?.close();
      await client?.close();
      await upstream?.close();
      await collector?.close();
      await store?.close();
    });

    it('a would_duplicate sent anyway has a CLIENT span, and the destination is parented on it, not on the agent', async () => {
      await gate.handle(post(upstream, '/items', 'traced-dup', 'run-t'), client.send);
      const traceId = randomBytes(16).toString('hex');
      const agentSpanId = randomBytes(8).toString('hex');
      const res = await gate.handle(
        post(upstream, '/items', 'traced-dup', 'run-t', `00-${traceId}-${agentSpanId}-01`),
        client.send,
      );
      expect(res.headers['effectgate-verdict']).toBe('would_duplicate');
      const [decision] = await collector.waitFor((s) => s.traceId === traceId && s.kind !== 3);
      expect(decision?.attributes['effectgate.verdict']).toBe('would_duplicate');
      await new Promise((r) => setTimeout(r, 300));
      const client_ = collector.spans.filter((s) => s.traceId === traceId && s.kind === 3);
      // The effect happened at the destination: the trace must show the call that made it.
      expect(client_).toHaveLength(1);
      expect(upstream.requests.at(-1)?.headers['traceparent']).toBe(`00-${traceId}-${client_[0]?.spanId}-01`);
    });

    it('a request default: block would refuse goes out in shadow, and the log says enforce mode would refuse it', () => {
      const head = { ...post(upstream, '/other', 'x', 'run-db'), query: 'token=never-logged' };
      expect(gate.route(head).kind).toBe('pass');
      const line = logged.find(
        (l) => l.fields['verdict'] === 'would_block' && l.fields['port'] === upstream.port,
      );
      expect(line?.fields).toMatchObject({
        reason: 'unclassified',
        mode: 'shadow',
        method: 'POST',
        host: '127.0.0.1',
        port: upstream.port,
      });
      expect(JSON.stringify(line)).not.toContain('never-logged');
    });
  });
}
