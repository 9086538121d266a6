/**
 * Event-stream answers of a JSON-RPC tool (docs/design.md §4.1): forwarded to the
 * agent as they arrive while the gate reads them for the JSON-RPC response; a stream the agent
 * closes first, or that ends without the response, leaves the attempt `sent_no_response` and the
 * operation `unknown` (its retry is held, never a second effect); a stream far past the buffered
 * response cap still flows. Through the forward proxy and the undici interceptor, on each store,
 * against a loopback MCP-style endpoint the test drives event by event.
 */
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, type Dispatcher, ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';

const policies = parsePolicyFiles([
  {
    file: 'streams.yaml',
    text: `
version: 1
tools:
  - id: mcp.run_job
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": run_job }
    effect: create
    dedupe: { key: [$.body.params.arguments.job], window: 1h, wait: 0s }
    verdict: { protocol: jsonrpc }
  - id: mcp.quick_job
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": quick_job }
    effect: create
    # A deadline of 1.8 s for the whole call, stream included.
    dedupe: { key: [$.body.params.arguments.job], window: 1h, wait: 0s, pending_ttl: 2s }
    # A 202 from this server means "accepted, may still run": never a definite failure.
    outcome: { unknown: [202, 5xx] }
    verdict: { protocol: jsonrpc }
`,
  },
]);

/** One `tools/call` the endpoint received: the test writes its events and ends it. */
interface OpenCall {
  readonly id: unknown;
  readonly job: string;
  readonly res: ServerResponse;
  event(message: unknown): void;
}

const progress = (n: number): unknown => ({
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: 't', progress: n },
});

async function startEndpoint(): Promise<{
  url: string;
  next(): Promise<OpenCall>;
  /** Jobs the endpoint ran (received), in order: the destination's own ledger. */
  readonly received: string[];
  close(): Promise<void>;
}> {
  const waiting: ((c: OpenCall) => void)[] = [];
  const ready: OpenCall[] = [];
  const received: string[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => {
      text += d.toString();
    });
    req.on('end', () => {
      const rpc = JSON.parse(text) as { id: unknown; params: { arguments: { job: string } } };
      received.push(rpc.params.arguments.job);
      const job = rpc.params.arguments.job;
      // `…-202`: answers 202; `…-late-head`: the head comes only when the test writes.
      if (!job.endsWith('-late-head')) {
        res.writeHead(job.endsWith('-202') ? 202 : 200, {
          'content-type': 'text/event-stream',
          'cache-control': 'no-cache',
        });
        res.flushHeaders();
      }
      const call: OpenCall = {
        id: rpc.id,
        job: rpc.params.arguments.job,
        res,
        event: (message) => {
          if (!res.headersSent) res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
        },
      };
      const w = waiting.shift();
      if (w === undefined) ready.push(call);
      else w(call);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    received,
    next: () => {
      const c = ready.shift();
      return c === undefined ? new Promise((resolve) => waiting.push(resolve)) : Promise.resolve(c);
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Reads a response body chunk by chunk, so the test can see what arrived when. */
async function* chunks(body: AsyncIterable<Buffer>): AsyncGenerator<string> {
  for await (const chunk of body) yield chunk.toString();
}

for (const target of storeTargets()) {
  describe(`event-stream answers of a JSON-RPC tool (${target.name})`, () => {
    let store: TestStore;
    let endpoint: Awaited<ReturnType<typeof startEndpoint>>;
    let gate: Gate;
    let proxy: ProxyServer;
    let proxyAgent: ProxyAgent;
    let interceptor: Dispatcher;

    beforeAll(async () => {
      store = await openTestStore(target);
      endpoint = await startEndpoint();
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'jobs', agent: 'bot' } });
      proxy = createProxyServer({ gate });
      const addr = await proxy.listen('127.0.0.1', 0);
      proxyAgent = new ProxyAgent({ uri: `http://127.0.0.1:${addr.port}`, proxyTunnel: false });
      interceptor = new Agent().compose(gateInterceptor(gate, { run: 'r-streams' }));
    });
    afterAll(async () => {
      await proxyAgent?.close();
      await interceptor?.close();
      await proxy?.close();
      await gate?.close();
      await endpoint?.close();
      await store?.close();
    });

    const call = (
      dispatcher: Dispatcher,
      job: string,
      id: number | string,
      signal?: AbortSignal,
      name = 'run_job',
      extra: Record<string, unknown> = {},
    ) =>
      request(endpoint.url, {
        dispatcher,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name, arguments: { job, ...extra } },
        }),
        ...(signal === undefined ? {} : { signal }),
      });

    /** The operation of `job`, once the store has its outcome (streams settle after the head). */
    async function operationOf(job: string, state: string, toolId = 'mcp.run_job') {
      for (let i = 0; i < 200; i++) {
        const [op] = await store.listOperations({ toolId, keyValues: [job] });
        if (op?.state === state) return op;
        await new Promise((r) => setTimeout(r, 20));
      }
      const [last] = await store.listOperations({ toolId, keyValues: [job] });
      throw new Error(
        `operation of ${job} never became ${state}: ${JSON.stringify(last?.state)} ${JSON.stringify(last?.attempts)}`,
      );
    }

    for (const [doorName, door] of [
      ['proxy', () => proxyAgent],
      ['interceptor', () => interceptor],
    ] as const) {
      describe(`through the ${doorName}`, () => {
        it('forwards progress before the result, then records the result and answers a repeat as a duplicate', async () => {
          const job = `${doorName}-progress`;
          const pending = call(door(), job, 1);
          const open = await endpoint.next();
          open.event(progress(1));
          const res = await pending;
          expect(res.statusCode).toBe(200);
          expect(res.headers['effectgate-verdict']).toBe('allow');
          const reader = chunks(res.body);
          // The progress event is here while the tool is still running: nothing was buffered.
          expect((await reader.next()).value).toContain('notifications/progress');
          open.event({ jsonrpc: '2.0', id: open.id, result: { content: [{ type: 'text', text: 'done' }] } });
          open.res.end();
          let rest = '';
          for await (const text of reader) rest += text;
          expect(rest).toContain('"result"');
          expect(await operationOf(job, 'succeeded')).toMatchObject({ state: 'succeeded' });
          const repeat = await call(door(), job, 2);
          expect(await repeat.body.json()).toMatchObject({
            id: 2,
            error: { data: { verdict: 'duplicate' } },
          });
          expect(endpoint.received.filter((j) => j === job)).toHaveLength(1);
        });

        it('leaves the attempt sent_no_response when the agent closes the stream first; the retry is held', async () => {
          const job = `${doorName}-closed`;
          const abort = new AbortController();
          const pending = call(door(), job, 1, abort.signal);
          const open = await endpoint.next();
          open.event(progress(1));
          const res = await pending;
          const reader = chunks(res.body);
          expect((await reader.next()).value).toContain('notifications/progress');
          const upstreamClosed = once(open.res, 'close');
          abort.abort();
          await reader.next().catch(() => undefined);
          // Closing the stream closes the call at the destination too (MCP: cancellation).
          await upstreamClosed;
          const op = await operationOf(job, 'unknown');
          expect(op.attempts.map((a) => a.dispatchState)).toEqual(['sent_no_response']);
          const retry = await call(door(), job, 2);
          expect(await retry.body.json()).toMatchObject({
            id: 2,
            error: { data: { verdict: 'hold', operation_id: op.id } },
          });
          expect(endpoint.received.filter((j) => j === job)).toHaveLength(1);
        });

        it('calls a stream that ends without the response unknown', async () => {
          const job = `${doorName}-ended`;
          const pending = call(door(), job, 1);
          const open = await endpoint.next();
          open.event(progress(1));
          // A response to another request id is not this call's answer.
          open.event({ jsonrpc: '2.0', id: 999, result: {} });
          open.res.end();
          const res = await pending;
          expect(await res.body.text()).toContain('notifications/progress');
          await operationOf(job, 'unknown');
        });

        it('keeps a JSON-RPC error in a 2xx the policy calls unknown from releasing the key', async () => {
          const job = `${doorName}-202`;
          const pending = call(door(), job, 1, undefined, 'quick_job');
          const open = await endpoint.next();
          open.event({ jsonrpc: '2.0', id: open.id, error: { code: -32000, message: 'accepted, then?' } });
          open.res.end();
          await (await pending).body.text();
          const op = await operationOf(job, 'unknown', 'mcp.quick_job');
          expect(op.attempts.map((a) => a.dispatchState)).toEqual(['response_received']);
          const retry = await call(door(), job, 2, undefined, 'quick_job');
          expect(await retry.body.json()).toMatchObject({ error: { data: { verdict: 'hold' } } });
          expect(endpoint.received.filter((j) => j === job)).toHaveLength(1);
        });

        it('settles a stream nobody reads when its deadline cuts it: unknown, not left open', async () => {
          const job = `${doorName}-unread`;
          const pending = call(door(), job, 1, undefined, 'quick_job');
          const open = await endpoint.next();
          const res = await pending;
          expect(res.statusCode).toBe(200);
          // The agent never reads the body; the destination fills every buffer, then stalls.
          const filler = `: ${'x'.repeat(64 * 1024)}\n\n`;
          for (let i = 0; i < 64 && open.res.write(filler); i++);
          const op = await operationOf(job, 'unknown', 'mcp.quick_job');
          expect(op.attempts.map((a) => a.dispatchState)).toEqual(['sent_no_response']);
          res.body.destroy();
        });

        it('settles the call of an agent that left before the head came: unknown, not left open', async () => {
          const job = `${doorName}-late-head`;
          const abort = new AbortController();
          const pending = call(door(), job, 1, abort.signal).catch((err: unknown) => err);
          const open = await endpoint.next();
          abort.abort();
          await new Promise((r) => setTimeout(r, 50));
          // The head, then (later) the result, which nobody reads any more: the gate cannot know it.
          open.res.writeHead(200, { 'content-type': 'text/event-stream' });
          open.res.flushHeaders();
          await pending;
          await new Promise((r) => setTimeout(r, 50));
          open.event({ jsonrpc: '2.0', id: open.id, result: {} });
          open.res.end();
          const op = await operationOf(job, 'unknown');
          expect(op.attempts.map((a) => a.dispatchState)).toEqual(['sent_no_response']);
        });

        it('streams the answer to a call whose large arguments were analysed on the worker', async () => {
          // 64 KiB of arguments: the proposal (and the request id the verdicts answer) comes from
          // the analysis worker, the stream from the event loop.
          const job = `${doorName}-large-args`;
          const notes = 'n'.repeat(64 * 1024);
          const pending = call(door(), job, 'big-1', undefined, 'run_job', { notes });
          const open = await endpoint.next();
          expect(open.id).toBe('big-1');
          open.event(progress(1));
          open.event({ jsonrpc: '2.0', id: open.id, result: { content: [] } });
          open.res.end();
          expect(await (await pending).body.text()).toContain('"result"');
          await operationOf(job, 'succeeded');
          const repeat = await call(door(), job, 'big-2', undefined, 'run_job', { notes });
          expect(await repeat.body.json()).toMatchObject({
            id: 'big-2',
            error: { data: { verdict: 'duplicate' } },
          });
          expect(endpoint.received.filter((j) => j === job)).toHaveLength(1);
        });

        it('streams far past the 8 MiB cap of a buffered answer, then reads the result at its end', async () => {
          const job = `${doorName}-long`;
          const pending = call(door(), job, 1);
          const open = await endpoint.next();
          const res = await pending;
          const filler = `: ${'x'.repeat(64 * 1024)}\n\n`;
          let sent = 0;
          const write = async (): Promise<void> => {
            for (let i = 0; i < 200; i++) {
              sent += filler.length;
              if (!open.res.write(filler)) await once(open.res, 'drain');
            }
            open.event({ jsonrpc: '2.0', id: open.id, result: { content: [] } });
            open.res.end();
          };
          let received = 0;
          const [, text] = await Promise.all([
            write(),
            (async () => {
              let tail = '';
              for await (const chunk of res.body) {
                received += chunk.length;
                tail = (tail + chunk.toString()).slice(-4096);
              }
              return tail;
            })(),
          ]);
          expect(sent).toBeGreaterThan(12 * 1024 * 1024);
          expect(received).toBeGreaterThan(sent);
          expect(text).toContain('"result"');
          await operationOf(job, 'succeeded');
        });
      });
    }
  });
}
