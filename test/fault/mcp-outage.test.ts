/**
 * The store cut at the worst moments of an MCP call, through a TCP relay the test owns in front of
 * PostgreSQL, with the destination's own ledger compared with the trail each time:
 * - a streamed answer: recordOutcome never reaches PostgreSQL (down 1 s) as the JSON-RPC response
 *   event arrives. The agent still gets the whole stream, the outcome lands once the store is
 *   back, the repeat is a duplicate: one execution, one operation, one attempt.
 * - a multi-round-trip call: recordOutcome of the `input_required` answer never arrives (down
 *   1 s) and the agent sends its continuation at once, again and again. Until that outcome is
 *   written nothing goes out again (the key is still pending, or the store is down); then the
 *   continuation is attempt 2 of the same operation. The tool ran once, the trail has every
 *   attempt with its outcome.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProxyAgent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../src/engine/index.js';
import { parsePolicyFiles } from '../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../src/proxy/index.js';
import { verifyStoreChain } from '../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { STATEMENT, startTcpRelay, type TcpRelay } from './tcp-relay.js';

const policies = parsePolicyFiles([
  {
    file: 'mcp-outage.yaml',
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
  - id: mcp.confirm_job
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": confirm_job }
    effect: create
    dedupe: { key: [$.body.params.arguments.job], window: 1h, wait: 0s }
    idempotency: { header: Idempotency-Key }
    verdict: { protocol: jsonrpc }
`,
  },
]);

for (const target of storeTargets()) {
  describe.skipIf(target.kind !== 'postgres')(
    `MCP calls while the store is cut (${target.name}${target.kind === 'postgres' ? '' : ': skipped, needs the PostgreSQL relay'})`,
    () => {
      let store: TestStore;
      let relay: TcpRelay;
      let gate: Gate;
      let proxy: ProxyServer;
      let agent: ProxyAgent;
      let close: () => Promise<void>;

      afterEach(async () => {
        relay?.up();
        await agent?.close();
        await proxy?.close();
        await gate?.close().catch(() => undefined);
        await relay?.close();
        await store?.close();
        await close?.();
      });

      /** A destination on loopback at `/mcp` (closed after the test); returns its URL. */
      const serve = async (handler: RequestListener): Promise<string> => {
        const server = createServer(handler);
        server.listen(0, '127.0.0.1');
        await once(server, 'listening');
        close = () => new Promise<void>((resolve) => server.close(() => resolve()));
        return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
      };

      /** The gate on the store behind the relay, and an agent through its proxy. */
      const startGate = async (): Promise<void> => {
        store = await openTestStore(target);
        relay = await startTcpRelay();
        gate = await createGate({
          policies,
          store: relay.url(store.url),
          scope: { tenant: 'acme', area: 'jobs', agent: 'bot' },
          instanceId: 'fault-mcp-outage',
        });
        proxy = createProxyServer({ gate });
        agent = new ProxyAgent({
          uri: `http://127.0.0.1:${(await proxy.listen('127.0.0.1', 0)).port}`,
          proxyTunnel: false,
        });
      };

      /** A `tools/call` of `name` for job j1 through the proxy, with `more` params. */
      const callTool = (url: string, id: number, name: string, more: Record<string, unknown> = {}) =>
        request(url, {
          dispatcher: agent,
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id,
            method: 'tools/call',
            params: { name, arguments: { job: 'j1' }, ...more },
          }),
        });

      /** A response body read as the JSON-RPC message it is. */
      const readBody = async <T = unknown>(body: { text(): Promise<string> }): Promise<T> =>
        JSON.parse(await body.text()) as T;

      const bodyText = (req: IncomingMessage): Promise<string> =>
        new Promise((resolve) => {
          let text = '';
          req.on('data', (d: Buffer) => {
            text += d.toString();
          });
          req.on('end', () => resolve(text));
        });

      it('recordOutcome cut as the response event arrives: the agent gets it all, the outcome lands once, the repeat is a duplicate', async () => {
        // The destination's own ledger: every tools/call it executed.
        const executed: string[] = [];
        const url = await serve(async (req, res) => {
          const rpc = JSON.parse(await bodyText(req)) as {
            id: unknown;
            params: { arguments: { job: string } };
          };
          executed.push(rpc.params.arguments.job);
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const event = (m: unknown): string => `event: message\ndata: ${JSON.stringify(m)}\n\n`;
          res.write(event({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } }));
          setTimeout(() => {
            res.end(
              event({ jsonrpc: '2.0', id: rpc.id, result: { content: [{ type: 'text', text: 'done' }] } }),
            );
          }, 50);
        });
        await startGate();

        const trapped = relay.trigger({
          pattern: STATEMENT.recordOutcome,
          when: 'before-forward',
          action: 'down',
        });
        const first = await callTool(url, 1, 'run_job');
        await trapped;
        const back = new Promise((r) => setTimeout(r, 1_000)).then(() => relay.up());
        const text = await first.body.text();
        expect(text).toContain('notifications/progress');
        expect(text).toContain('"result"');
        await back;

        let op = null;
        for (let i = 0; i < 100 && op?.state !== 'succeeded'; i++) {
          [op] = await store.listOperations({ toolId: 'mcp.run_job', keyValues: ['j1'] });
          if (op?.state !== 'succeeded') await new Promise((r) => setTimeout(r, 50));
        }
        expect(op?.state).toBe('succeeded');
        expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['response_received']);

        const repeat = await callTool(url, 2, 'run_job');
        expect(await repeat.body.json()).toMatchObject({ id: 2, error: { data: { verdict: 'duplicate' } } });
        expect(executed).toEqual(['j1']);
        const report = await gate.close();
        expect(report.unwrittenOutcomes).toBe(0);
        expect(await store.listOperations({ toolId: 'mcp.run_job' })).toHaveLength(1);
      });

      it('recordOutcome of an input_required answer cut while the agent continues at once: nothing goes out twice, the continuation is attempt 2', async () => {
        // The destination's own ledger: what each tools/call did, and the Idempotency-Key it carried.
        const ledger: { result: 'input_required' | 'created'; key: unknown }[] = [];
        const url = await serve(async (req, res) => {
          const rpc = JSON.parse(await bodyText(req)) as {
            id: unknown;
            params: { inputResponses?: { confirm?: { result?: { action?: string } } } };
          };
          const accepted = rpc.params.inputResponses?.confirm?.result?.action === 'accept';
          ledger.push({
            result: accepted ? 'created' : 'input_required',
            key: req.headers['idempotency-key'],
          });
          const result = accepted
            ? { content: [{ type: 'text', text: 'Created job j1' }] }
            : {
                resultType: 'input_required',
                inputRequests: { confirm: { method: 'elicitation/create', params: { message: 'Run j1?' } } },
                requestState: 's1',
              };
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ jsonrpc: '2.0', id: rpc.id, result }));
        });
        await startGate();
        const continuation = {
          inputResponses: { confirm: { result: { action: 'accept', content: {} } } },
          requestState: 's1',
        };

        const trapped = relay.trigger({
          pattern: STATEMENT.recordOutcome,
          when: 'before-forward',
          action: 'down',
        });
        const first = await callTool(url, 1, 'confirm_job');
        await trapped;
        const back = new Promise((r) => setTimeout(r, 1_000)).then(() => relay.up());
        expect(await readBody<{ result: { resultType: string } }>(first.body)).toMatchObject({
          result: { resultType: 'input_required' },
        });

        // The agent answers the elicitation at once and keeps trying while the gate refuses.
        const answers: string[] = [];
        let done: { result?: { content?: unknown } } | null = null;
        for (let id = 2; id < 60 && done === null; id++) {
          const res = await callTool(url, id, 'confirm_job', continuation);
          const verdict = res.headers['effectgate-verdict'];
          const msg = await readBody<{
            result?: { content?: unknown };
            error?: { code?: number; data?: { verdict?: string } };
          }>(res.body);
          // The gate's verdict, or its JSON-RPC error code (-32056: the store is unavailable).
          answers.push(String(verdict ?? msg.error?.data?.verdict ?? msg.error?.code ?? res.statusCode));
          if (verdict === 'allow' && msg.result !== undefined) done = msg;
          else await new Promise((r) => setTimeout(r, 100));
        }
        await back;
        expect(done, `answers: ${answers.join(' ')}`).toMatchObject({
          result: { content: [{ type: 'text', text: 'Created job j1' }] },
        });
        console.log(`[fault mcp input_required outage]: continuation answers ${answers.join(' ')}`);
        // Before the outcome was written, every continuation was refused by the gate itself (the
        // first one at least: it is sent while the store is still down).
        expect(
          answers.slice(0, -1).every((a) => a !== 'allow'),
          answers.join(' '),
        ).toBe(true);

        // The destination ran the tool once, after asking once, with one Idempotency-Key.
        expect(ledger.map((e) => e.result)).toEqual(['input_required', 'created']);
        expect(ledger[1]!.key).toBe(ledger[0]!.key);
        const repeat = await callTool(url, 99, 'confirm_job', continuation);
        expect(await readBody(repeat.body)).toMatchObject({
          id: 99,
          error: { data: { verdict: 'duplicate' } },
        });
        expect(ledger).toHaveLength(2);

        // The trail agrees: one operation, two attempts, each with its outcome.
        const report = await gate.close();
        expect(report.unwrittenOutcomes).toBe(0);
        const ops = await store.listOperations({ toolId: 'mcp.confirm_job' });
        expect(ops).toHaveLength(1);
        expect(ops[0]).toMatchObject({ state: 'succeeded' });
        expect(ops[0]!.attempts).toMatchObject([
          { number: 1, dispatchState: 'response_received', status: 200 },
          { number: 2, dispatchState: 'response_received', retryDecision: 'input_continuation' },
        ]);
        expect((await verifyStoreChain(store)).ok).toBe(true);
      });
    },
  );
}
