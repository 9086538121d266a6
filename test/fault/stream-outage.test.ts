/**
 * The store cut at the worst moment of a streamed MCP call: when the JSON-RPC response event
 * arrives and its outcome is written (recordOutcome never reaches PostgreSQL, which stays down for
 * 1 s). The agent still gets the whole stream, the outcome lands once the store is back, the repeat
 * is a duplicate, and the destination's own ledger agrees with the trail: one execution, one
 * operation, one attempt. Through a TCP relay the test owns in front of PostgreSQL.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ProxyAgent, request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../src/engine/index.js';
import { parsePolicyFiles } from '../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../src/proxy/index.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { STATEMENT, startTcpRelay, type TcpRelay } from './tcp-relay.js';

const policies = parsePolicyFiles([
  {
    file: 'stream-outage.yaml',
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
`,
  },
]);

for (const target of storeTargets()) {
  describe.skipIf(target.kind !== 'postgres')(
    `a streamed MCP answer while the store is cut (${target.name}${target.kind === 'postgres' ? '' : ': skipped, needs the PostgreSQL relay'})`,
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

      it('recordOutcome cut as the response event arrives: the agent gets it all, the outcome lands once, the repeat is a duplicate', async () => {
        // The destination's own ledger: every tools/call it executed.
        const executed: string[] = [];
        const server = createServer((req, res) => {
          let text = '';
          req.on('data', (d: Buffer) => {
            text += d.toString();
          });
          req.on('end', () => {
            const rpc = JSON.parse(text) as { id: unknown; params: { arguments: { job: string } } };
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
        });
        server.listen(0, '127.0.0.1');
        await once(server, 'listening');
        close = () => new Promise<void>((resolve) => server.close(() => resolve()));
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;

        store = await openTestStore(target);
        relay = await startTcpRelay();
        gate = await createGate({
          policies,
          store: relay.url(store.url),
          scope: { tenant: 'acme', area: 'jobs', agent: 'bot' },
          instanceId: 'fault-stream-outage',
        });
        proxy = createProxyServer({ gate });
        agent = new ProxyAgent({
          uri: `http://127.0.0.1:${(await proxy.listen('127.0.0.1', 0)).port}`,
          proxyTunnel: false,
        });
        const call = (id: number) =>
          request(url, {
            dispatcher: agent,
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            body: JSON.stringify({
              jsonrpc: '2.0',
              id,
              method: 'tools/call',
              params: { name: 'run_job', arguments: { job: 'j1' } },
            }),
          });

        const trapped = relay.trigger({
          pattern: STATEMENT.recordOutcome,
          when: 'before-forward',
          action: 'down',
        });
        const first = await call(1);
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

        const repeat = await call(2);
        expect(await repeat.body.json()).toMatchObject({ id: 2, error: { data: { verdict: 'duplicate' } } });
        expect(executed).toEqual(['j1']);
        const report = await gate.close();
        expect(report.unwrittenOutcomes).toBe(0);
        expect(await store.listOperations({ toolId: 'mcp.run_job' })).toHaveLength(1);
      });
    },
  );
}
