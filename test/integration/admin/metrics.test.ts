/**
 * `GET /metrics` of a real admin server, fed by the engine in process against a real store and a
 * real loopback upstream: an allow, a duplicate, a hold, a wait on another run's reservation and a
 * reconciliation happen, then a scrape shows them. /metrics is open; /api still needs the token.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AdminServer,
  createAdminServer,
  createPrometheusMetrics,
  type PrometheusMetrics,
} from '../../../src/admin/index.js';
import { createGate, type Gate } from '../../../src/engine/index.js';
import type { GateRequest } from '../../../src/engine/types.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createUpstreamClient, type UpstreamClient } from '../../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { commitThenDestroy, delay, reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const TOKEN = 'eg-admin-metrics-5d1e8a0c2b7f4e69';

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
  - id: t.lost
    match: { hosts: [127.0.0.1], method: POST, path: "/lost" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
  - id: t.slow
    match: { hosts: [127.0.0.1], method: POST, path: "/slow" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 5s }
  - id: t.recon
    match: { hosts: [127.0.0.1], method: POST, path: "/recon" }
    effect: create
    dedupe: { key: [$.body.name], window: 1h, wait: 0s }
    reconcile:
      method: GET
      path: /recon
      items: $[*]
      match: { $.name: $.body.name }
`,
  },
]);

function post(upstream: Upstream, path: string, name: string, run: string): GateRequest {
  return {
    scheme: 'http',
    method: 'POST',
    host: '127.0.0.1',
    port: upstream.port,
    path,
    query: '',
    headers: { 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify({ name })),
    context: { run, step: null, operation: null, worker: null, agentVersion: null, retryReason: null },
  };
}

interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

function call(port: number, method: string, path: string, token?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: Buffer.concat(chunks).toString('utf8'),
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** The value of the sample with exactly this name and label text, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

for (const target of storeTargets()) {
  describe(`GET /metrics (${target.name})`, () => {
    let store: TestStore;
    let upstream: Upstream;
    let client: UpstreamClient;
    let metrics: PrometheusMetrics;
    let gate: Gate;
    let admin: AdminServer;
    let port: number;

    beforeAll(async () => {
      store = await openTestStore(target);
      upstream = await startUpstream((req, res, raw) => {
        if (req.url === '/lost' || (req.url === '/recon' && req.method === 'POST'))
          return commitThenDestroy()(req, res, raw);
        if (req.url === '/recon') return reply(200, [{ name: 'other' }, { name: 'recon-1' }])(req, res, raw);
        if (req.url === '/slow') return delay(400, reply(201, { id: 3 }))(req, res, raw);
        return reply(201, { id: 1 })(req, res, raw);
      });
      client = createUpstreamClient();
      metrics = createPrometheusMetrics({ store });
      gate = await createGate({
        policies,
        store,
        scope: { tenant: 'acme', area: 'support', agent: 'bot' },
        metrics,
      });
      admin = createAdminServer({ store, token: TOKEN, metrics });
      port = (await admin.listen('127.0.0.1', 0)).port;
    });
    afterAll(async () => {
      await admin?.close();
      await client?.close();
      await upstream?.close();
      await store?.close();
    });

    it('counts an allow, a duplicate, a hold, a reservation wait and a reconciliation', async () => {
      // allow, then a duplicate from another run
      expect((await gate.handle(post(upstream, '/items', 'item-1', 'r1'), client.send)).status).toBe(201);
      expect((await gate.handle(post(upstream, '/items', 'item-1', 'r2'), client.send)).status).toBe(409);
      // sent, no response: unknown; the next proposal is held for an approval
      expect((await gate.handle(post(upstream, '/lost', 'lost-1', 'r1'), client.send)).status).toBe(502);
      const held = await gate.handle(post(upstream, '/lost', 'lost-1', 'r2'), client.send);
      expect(held.status).toBe(428);
      expect(held.headers['effectgate-verdict']).toBe('hold');
      // r4 waits on r3's reservation, then finds it confirmed
      const first = gate.handle(post(upstream, '/slow', 'slow-1', 'r3'), client.send);
      await new Promise((r) => setTimeout(r, 100));
      const second = await gate.handle(post(upstream, '/slow', 'slow-1', 'r4'), client.send);
      expect((await first).status).toBe(201);
      expect(second.headers['effectgate-verdict']).toBe('duplicate');
      // unknown, then a lookup finds the effect: a duplicate settled by reconciliation
      expect((await gate.handle(post(upstream, '/recon', 'recon-1', 'r1'), client.send)).status).toBe(502);
      const found = await gate.handle(post(upstream, '/recon', 'recon-1', 'r2'), client.send);
      expect(found.headers['effectgate-verdict']).toBe('duplicate');

      const scraped = await call(port, 'GET', '/metrics'); // no token
      expect(scraped.status).toBe(200);
      expect(scraped.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      expect(scraped.headers['cache-control']).toBe('no-store');
      const text = scraped.text;
      expect(text).toContain('effectgate_decisions_total{verdict="duplicate",tool="t.create"} 1\n');
      expect(sample(text, 'effectgate_decisions_total{verdict="allow",tool="t.create"}')).toBe(1);
      expect(sample(text, 'effectgate_decisions_total{verdict="allow",tool="t.lost"}')).toBe(1);
      expect(sample(text, 'effectgate_decisions_total{verdict="hold",tool="t.lost"}')).toBe(1);
      expect(sample(text, 'effectgate_decisions_total{verdict="duplicate",tool="t.slow"}')).toBe(1);
      expect(sample(text, 'effectgate_decisions_total{verdict="duplicate",tool="t.recon"}')).toBe(1);
      expect(
        sample(text, 'effectgate_upstream_duration_seconds_count{tool="t.create",outcome="succeeded"}'),
      ).toBe(1);
      expect(
        sample(text, 'effectgate_upstream_duration_seconds_count{tool="t.lost",outcome="unknown"}'),
      ).toBe(1);
      const slow = sample(
        text,
        'effectgate_upstream_duration_seconds_sum{tool="t.slow",outcome="succeeded"}',
      );
      expect(slow).toBeGreaterThanOrEqual(0.35);
      // The gate's own time excludes the 400 ms dispatch, but includes the waiting
      expect(sample(text, 'effectgate_gate_overhead_seconds_count{verdict="allow"}')).toBe(4);
      expect(sample(text, 'effectgate_gate_overhead_seconds_count{verdict="duplicate"}')).toBe(3);
      expect(sample(text, 'effectgate_reservation_waits_total{tool="t.slow"}')).toBe(1);
      expect(sample(text, 'effectgate_reservation_wait_seconds_count')).toBe(1);
      expect(sample(text, 'effectgate_reservation_wait_seconds_sum')).toBeGreaterThan(0.1);
      expect(sample(text, 'effectgate_reconciliations_total{tool="t.recon",result="match"}')).toBe(1);
      // t.lost stays unknown (held); t.recon was settled by the lookup
      expect(sample(text, 'effectgate_unresolved_operations{state="unknown"}')).toBe(1);
      expect(sample(text, 'effectgate_unresolved_operations{state="open"}')).toBe(0);
      expect(sample(text, 'effectgate_store_up')).toBe(1);
      expect(text).toContain('# TYPE effectgate_process_cpu_seconds_total counter');
      // No key value, run id or scope in any label
      for (const secretish of ['item-1', 'lost-1', 'r1', 'acme', 'bot"'])
        expect(text).not.toContain(secretish);
    });

    it('exports what group commit did, as the store counted it', async () => {
      // Eight proposals at once: on PGlite (one round trip in flight) the ones behind the first
      // always share a batch; on PostgreSQL they may.
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          gate.handle(post(upstream, '/items', `gc-${i}`, `gc-r${i}`), client.send),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(8).fill(201));
      const gc = store.stats.groupCommit;
      if (target.kind === 'pglite') expect(gc.batches).toBeGreaterThan(0);
      const text = (await call(port, 'GET', '/metrics')).text;
      expect(sample(text, 'effectgate_store_group_commit_total{event="batches"}')).toBe(gc.batches);
      expect(sample(text, 'effectgate_store_group_commit_total{event="batched_calls"}')).toBe(
        gc.batchedCalls,
      );
      expect(sample(text, 'effectgate_store_group_commit_total{event="fallbacks"}')).toBe(gc.fallbacks);
    });

    it('is open like /healthz while /api still needs the token', async () => {
      expect((await call(port, 'GET', '/metrics')).status).toBe(200);
      const head = await call(port, 'HEAD', '/metrics');
      expect(head.status).toBe(200);
      expect(head.text).toBe('');
      expect((await call(port, 'POST', '/metrics')).status).toBe(405);
      expect((await call(port, 'GET', '/metrics/extra')).status).toBe(404);
      const api = await call(port, 'GET', '/api/operations');
      expect(api.status).toBe(401);
      expect(api.headers['www-authenticate']).toContain('Bearer');
      expect((await call(port, 'GET', '/api/operations', 'not-the-token')).status).toBe(401);
      expect((await call(port, 'GET', '/api/operations', TOKEN)).status).toBe(200);
    });

    it('still answers when the store is down, with store_up 0', async () => {
      const dead = await openTestStore(target);
      await dead.close();
      const server = createAdminServer({ store: dead, token: TOKEN });
      const { port: deadPort } = await server.listen('127.0.0.1', 0);
      try {
        const r = await call(deadPort, 'GET', '/metrics');
        expect(r.status).toBe(200);
        expect(sample(r.text, 'effectgate_store_up')).toBe(0);
        // A server without the gate's metrics has no decisions, but the same metric families.
        expect(r.text).toContain('# TYPE effectgate_decisions_total counter');
        expect(r.text).not.toContain('effectgate_decisions_total{');
      } finally {
        await server.close();
      }
    });
  });
}
