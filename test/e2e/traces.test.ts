/**
 * `effectgate proxy` with the standard OTEL_* variables exports its spans over OTLP/HTTP JSON to an
 * in-process collector. The batch delay is set far beyond the test, so spans can only arrive
 * because the gate's stop flushes them. The built CLI (`npm run build` first).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type OtlpCollector, startOtlpCollector } from '../helpers/otlp-collector.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { reply, startUpstream, type Upstream } from '../helpers/upstream.js';

const POLICIES = fileURLToPath(new URL('../fixtures/e2e-policies/', import.meta.url));

describe('effectgate proxy exports traces when OTEL_EXPORTER_OTLP_ENDPOINT is set', () => {
  let upstream: Upstream;
  let collector: OtlpCollector;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'effectgate-traces-'));
    upstream = await startUpstream(reply(201, { html_url: 'https://example.test/issues/1' }));
    collector = await startOtlpCollector();
  });

  afterAll(async () => {
    await upstream?.close();
    await collector?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('propagates the agent’s trace to the destination and flushes the spans on stop', async () => {
    const proxy = await startProxyProcess(
      ['--policies', POLICIES, '--store', `pglite:${join(dir, 'store')}`, '--tenant', 'acme'],
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_BSP_SCHEDULE_DELAY: '600000',
        OTEL_SERVICE_NAME: 'effectgate-e2e',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-token=e2e',
      },
    );
    const agent = new ProxyAgent({ uri: proxy.url, proxyTunnel: false });
    const traceId = randomBytes(16).toString('hex');
    const agentSpanId = randomBytes(8).toString('hex');
    const send = async (title: string): Promise<Record<string, string | string[] | undefined>> => {
      const res = await request(`${upstream.url}/repos/acme/api/issues`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-${agentSpanId}-01` },
        body: JSON.stringify({ title }),
      });
      await res.body.dump();
      return res.headers;
    };
    try {
      const allowed = await send('Traced through the proxy');
      expect(allowed['effectgate-verdict']).toBe('allow');
      const duplicate = await send('Traced through the proxy');
      expect(duplicate['effectgate-verdict']).toBe('duplicate');
      expect(upstream.requests).toHaveLength(1);
      const [, sentTrace, sentSpan] = String(upstream.requests[0]?.headers['traceparent']).split('-');
      expect(sentTrace).toBe(traceId);
      expect(sentSpan).not.toBe(agentSpanId);
      // Nothing exported yet: the batch waits for its (ten-minute) delay, or for the stop.
      expect(collector.spans).toHaveLength(0);

      await agent.close();
      const stopping = Date.now();
      expect(await proxy.stop('SIGTERM')).toBe(0);
      expect(Date.now() - stopping).toBeLessThan(10_000);

      const spans = await collector.waitFor((s) => s.traceId === traceId, 3, 2_000);
      const decisions = spans.filter((s) => s.name === 'execute_tool test.create_issue');
      expect(decisions.map((s) => s.attributes['effectgate.verdict']).sort()).toEqual(['allow', 'duplicate']);
      for (const d of decisions) expect(d.parentSpanId).toBe(agentSpanId);
      const attempt = spans.find((s) => s.kind === 3);
      expect(attempt?.spanId).toBe(sentSpan);
      expect(attempt?.parentSpanId).toBe(
        decisions.find((d) => d.attributes['effectgate.verdict'] === 'allow')?.spanId,
      );
      expect(attempt?.attributes['url.path']).toBe('/repos/acme/api/issues');
      expect(attempt?.attributes['effectgate.operation_state']).toBe('succeeded');
      expect(attempt?.resource['service.name']).toBe('effectgate-e2e');
      expect(attempt?.resource['deployment.environment.name']).toBe('test');
      expect(typeof attempt?.resource['service.version']).toBe('string');
      expect(collector.exports.every((e) => e.headers['x-collector-token'] === 'e2e')).toBe(true);
    } finally {
      await agent.destroy().catch(() => undefined);
      await proxy.stop();
    }
  });
});
