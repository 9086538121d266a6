/**
 * The in-process front door end to end: a real engine on a real store (embedded PGlite), a real
 * loopback upstream, and real undici clients (`request` through a composed Agent, and `fetch`
 * through `setGlobalDispatcher`).
 */
import { Readable } from 'node:stream';
import {
  Agent,
  type Dispatcher,
  getGlobalDispatcher,
  request,
  setGlobalDispatcher,
  fetch as undiciFetch,
} from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { commitThenDestroy, reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'inline.yaml',
    text: `
version: 1
tools:
  - id: t.create_issue
    match: { hosts: [127.0.0.1], method: POST, path: "/repos/{owner}/{repo}/issues" }
    effect: create
    dedupe: { key: [$.path.owner, $.path.repo, $.body.title], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key }
    response: { ref: $.html_url }
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

const BIG = 5 * 1024 * 1024;

describe('gateInterceptor with a real engine and store', () => {
  let store: Store;
  let gate: Gate;
  let upstream: Upstream;
  let agent: Agent;
  let gated: Dispatcher;

  beforeAll(async () => {
    store = await openStore({ url: 'pglite:memory' });
    gate = await createGate({
      policies,
      store,
      scope: { tenant: 'acme', area: 'support', agent: 'bot' },
    });
    upstream = await startUpstream((req, res, raw) => {
      if (req.url === '/big') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        const chunk = Buffer.alloc(64 * 1024, 7);
        let sent = 0;
        const pump = (): void => {
          while (sent < BIG) {
            sent += chunk.length;
            if (!res.write(chunk)) {
              res.once('drain', pump);
              return;
            }
          }
          res.end();
        };
        pump();
        return;
      }
      if (req.url === '/mcp')
        return reply(200, { jsonrpc: '2.0', id: 1, result: { ok: true } })(req, res, raw);
      return reply(201, { html_url: `https://example.test/issues/${upstream.requests.length}` })(
        req,
        res,
        raw,
      );
    });
    agent = new Agent();
    gated = agent.compose(gateInterceptor(gate, { run: 'r1', maxBodyBytes: 1024 }));
  });

  afterAll(async () => {
    await agent?.close();
    await upstream?.close();
    await store?.close();
  });

  // Each scenario its own run: the loop breaker halts a run after repeated duplicates.
  const inRun = (run: string): Dispatcher =>
    agent.compose(gateInterceptor(gate, { run, maxBodyBytes: 1024 }));
  const seen = (fragment: string) => upstream.requests.filter((r) => r.body.toString().includes(fragment));

  it('allows a first create with an Idempotency-Key and answers the identical second 409 duplicate (undici.request)', async () => {
    const body = JSON.stringify({ title: 'Disk full on db-1' });
    const first = await request(`${upstream.url}/repos/acme/api/issues`, {
      dispatcher: gated,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(first.statusCode).toBe(201);
    expect(first.headers['effectgate-verdict']).toBe('allow');
    const operation = first.headers['effectgate-operation'];
    expect(typeof operation).toBe('string');
    expect(await first.body.json()).toMatchObject({ html_url: expect.any(String) });
    expect(seen('Disk full on db-1')).toHaveLength(1);
    expect(seen('Disk full on db-1')[0]!.headers['idempotency-key']).toBe(operation);

    const second = await request(`${upstream.url}/repos/acme/api/issues`, {
      dispatcher: gated,
      method: 'POST',
      headers: [['content-type', 'application/json']] as unknown as string[],
      body: Readable.from([Buffer.from(body)]),
    });
    expect(second.statusCode).toBe(409);
    expect(second.headers['content-type']).toContain('application/problem+json');
    expect(second.headers['effectgate-verdict']).toBe('duplicate');
    const problem = (await second.body.json()) as Record<string, unknown>;
    // The run comes from the interceptor's options: the trail and the verdict name it.
    expect(problem).toMatchObject({
      verdict: 'duplicate',
      operation_id: operation,
      source: { run_id: 'r1' },
    });
    expect(seen('Disk full on db-1')).toHaveLength(1);
  });

  it('gates plain fetch() through setGlobalDispatcher (undici fetch and the global one)', async () => {
    const previous = getGlobalDispatcher();
    setGlobalDispatcher(gated);
    try {
      const init = {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'Effectgate-Step': 'open-ticket' },
        body: JSON.stringify({ title: 'Pager storm' }),
      };
      const first = await undiciFetch(`${upstream.url}/repos/acme/ops/issues`, init);
      expect(first.status).toBe(201);
      expect(first.headers.get('effectgate-verdict')).toBe('allow');
      await first.arrayBuffer();
      const second = await globalThis.fetch(`${upstream.url}/repos/acme/ops/issues`, init);
      expect(second.status).toBe(409);
      expect(second.headers.get('effectgate-verdict')).toBe('duplicate');
      // Effectgate-Step was read from the first request (and then stripped), the run from the options.
      expect(await second.json()).toMatchObject({
        verdict: 'duplicate',
        source: { run_id: 'r1', step: 'open-ticket' },
      });
      const sent = seen('Pager storm');
      expect(sent).toHaveLength(1);
      expect(Object.keys(sent[0]!.headers).filter((h) => h.startsWith('effectgate-'))).toEqual([]);
    } finally {
      setGlobalDispatcher(previous);
    }
  });

  it('streams an ungoverned response untouched, without gate headers, and strips Effectgate-* headers', async () => {
    const res = await request(`${upstream.url}/big`, {
      dispatcher: gated,
      headers: { 'Effectgate-Run': 'other-run', 'x-trace': 't1' },
    });
    expect(res.statusCode).toBe(200);
    expect(Object.keys(res.headers).filter((h) => h.startsWith('effectgate-'))).toEqual([]);
    let size = 0;
    let chunks = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      chunks += 1;
    }
    expect(size).toBe(BIG);
    expect(chunks).toBeGreaterThan(1);
    const got = upstream.requests.find((r) => r.url === '/big')!;
    expect(got.headers['x-trace']).toBe('t1');
    expect(got.headers['effectgate-run']).toBeUndefined();
  });

  it('answers a JSON-RPC tool duplicate with a JSON-RPC error carrying the request id', async () => {
    const call = (id: number) =>
      request(`${upstream.url}/mcp`, {
        dispatcher: gated,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'create_ticket', arguments: { subject: 'VPN down' } },
        }),
      });
    const first = await call(1);
    expect(first.statusCode).toBe(200);
    expect(first.headers['effectgate-verdict']).toBe('allow');
    await first.body.dump();
    const dup = await call(7);
    expect(dup.statusCode).toBe(200);
    expect(dup.headers['effectgate-verdict']).toBe('duplicate');
    const rpc = (await dup.body.json()) as {
      id: number;
      error: { message: string; data: Record<string, unknown> };
    };
    expect(rpc.id).toBe(7);
    expect(rpc.error.data).toMatchObject({ verdict: 'duplicate', tool: 'mcp.create_ticket' });
    expect(seen('VPN down')).toHaveLength(1);
  });

  it('answers 502 not_sent when the upstream refuses the connection', async () => {
    const dead = await startUpstream();
    const url = dead.url;
    await dead.close();
    const res = await request(`${url}/repos/acme/api/issues`, {
      dispatcher: inRun('r-refused'),
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'refused' }),
    });
    expect(res.statusCode).toBe(502);
    expect(await res.body.json()).toMatchObject({ dispatch_state: 'not_sent' });
  });

  it('answers 502 sent_no_response when the upstream cuts the socket after reading the request', async () => {
    const cutter = await startUpstream(commitThenDestroy());
    try {
      const res = await request(`${cutter.url}/repos/acme/api/issues`, {
        dispatcher: inRun('r-cut'),
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ title: 'cut' }),
      });
      expect(res.statusCode).toBe(502);
      expect(await res.body.json()).toMatchObject({ dispatch_state: 'sent_no_response' });
      expect(cutter.requests).toHaveLength(1);
    } finally {
      await cutter.close();
    }
  });

  it('refuses a governed body over the limit with 413 and sends nothing (buffer and stream)', async () => {
    const big = JSON.stringify({ title: 'x'.repeat(2048) });
    const buffered = await request(`${upstream.url}/repos/acme/api/issues`, {
      dispatcher: gated,
      method: 'POST',
      body: big,
    });
    expect(buffered.statusCode).toBe(413);
    await buffered.body.dump();
    const streamed = await request(`${upstream.url}/repos/acme/api/issues`, {
      dispatcher: gated,
      method: 'POST',
      body: Readable.from([Buffer.from(big.slice(0, 1000)), Buffer.from(big.slice(1000))]),
    });
    expect(streamed.statusCode).toBe(413);
    await streamed.body.dump();
    expect(seen('x'.repeat(2048))).toHaveLength(0);
  });
});
