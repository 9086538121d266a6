/**
 * MCP Tasks through the in-process front door: a `tools/call` answered with a task still working
 * (`result.task.taskId`, `status: "working"`) was accepted, not done. The operation is `accepted`
 * with the task id as its reference; `tasks/get` is a read the gate passes as it is (never a
 * proposal, never deduplicated); the same call again meanwhile is a JSON-RPC `pending` naming the
 * operation and the task; once the server's callback says the task completed, the same call is a
 * duplicate. The server's own ledger holds one task throughout.
 */
import { Agent, type Dispatcher, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { jsonRpcReply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const POLICY = `
version: 1
tools:
  - id: mcp.run_report
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": run_report }
    effect: create
    dedupe: { key: [$.body.params.arguments.report], window: 1h }
    verdict: { protocol: jsonrpc }
  - id: mcp.run_report_streamed
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp-sse
      body: { "$.method": tools/call, "$.params.name": run_report }
    effect: create
    dedupe: { key: [$.body.params.arguments.report], window: 1h }
    verdict: { protocol: jsonrpc }
  # Too broad on purpose: every call to this endpoint, keyed on whatever task it names.
  - id: mcp.anything
    match: { hosts: [127.0.0.1], method: POST, path: /mcp-all }
    effect: create
    dedupe: { key: [$.body.params.taskId], window: 1h, on_missing: allow }
    verdict: { protocol: jsonrpc }
`;

for (const target of storeTargets()) {
  describe(`MCP tasks through the undici interceptor, on ${target.name}`, () => {
    let store: TestStore;
    let gate: Gate;
    let upstream: Upstream;
    let agent: Agent;
    const tasks: { taskId: string; report: string; status: 'working' | 'completed' | 'failed' }[] = [];

    beforeAll(async () => {
      store = await openTestStore(target);
      gate = await createGate({
        policies: parsePolicyFiles([{ file: 'mcp.yaml', text: POLICY }]),
        store,
        scope: { tenant: 'acme', area: 'reports', agent: 'analyst' },
      });
      const answer = (rpc: { method?: unknown; params?: unknown }): Record<string, unknown> => {
        const params = rpc.params as { name?: string; arguments?: { report?: string }; taskId?: string };
        if (rpc.method === 'tools/call') {
          const task = {
            taskId: `task-${tasks.length + 1}`,
            report: params.arguments?.report ?? '',
            status: 'working' as const,
          };
          tasks.push(task);
          return { result: { task: { taskId: task.taskId, status: task.status, pollInterval: 1000 } } };
        }
        if (rpc.method === 'tasks/get') {
          const task = tasks.find((t) => t.taskId === params.taskId);
          return task === undefined
            ? { error: { code: -32602, message: 'no such task' } }
            : { result: { taskId: task.taskId, status: task.status } };
        }
        return { error: { code: -32601, message: 'method not found' } };
      };
      const json = jsonRpcReply(answer);
      // /mcp-sse answers every call as one event of a stream, as MCP streamable HTTP may.
      const streamed = jsonRpcReply(answer, { sse: true });
      upstream = await startUpstream((request, res, req) =>
        (request.url.startsWith('/mcp-sse') ? streamed : json)(request, res, req),
      );
      agent = new Agent();
    });
    afterAll(async () => {
      await agent?.close();
      await gate?.close();
      await upstream?.close();
      await store?.close();
    });

    let id = 0;
    const call = async (run: string, method: string, params: unknown, path = '/mcp') => {
      const dispatcher: Dispatcher = agent.compose(gateInterceptor(gate, { run }));
      const res = await request(`${upstream.url}${path}`, {
        dispatcher,
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
      });
      const operation = res.headers['effectgate-operation'];
      return {
        verdict: res.headers['effectgate-verdict'],
        operation: typeof operation === 'string' ? operation : null,
        // A streamed answer is one `message` event: its data is the JSON-RPC response.
        body: JSON.parse(
          String(res.headers['content-type']).startsWith('text/event-stream')
            ? ((await res.body.text()).match(/^data: (.*)$/m)?.[1] ?? 'null')
            : await res.body.text(),
        ) as Record<string, unknown>,
      };
    };
    const runReport = (run: string, report = 'q3', path = '/mcp') =>
      call(run, 'tools/call', { name: 'run_report', arguments: { report }, task: { ttl: 60_000 } }, path);
    const trail = async (operation: string) =>
      store.query<{ kind: string; result: string; by: string | null }>(
        `select kind, result, facts ->> 'by' as by from observations where operation_id = '${operation}' order by created_at`,
      );

    it('a working task is accepted; tasks/get passes; a repeat is pending, then a duplicate once it completed', async () => {
      const first = await runReport('run-1');
      expect(first.verdict).toBe('allow');
      expect(first.body).toMatchObject({ result: { task: { taskId: 'task-1', status: 'working' } } });
      const op = await store.getOperation(first.operation!);
      expect(op?.state).toBe('accepted');
      expect(op?.attempts[0]).toMatchObject({ outcomeRule: 'mcp task working', destinationRef: 'task-1' });

      for (let i = 0; i < 2; i++) {
        const polled = await call('run-1', 'tasks/get', { taskId: 'task-1' });
        expect(polled.verdict).toBeUndefined();
        expect(polled.body).toMatchObject({ result: { taskId: 'task-1', status: 'working' } });
      }

      const repeat = await runReport('run-2');
      expect(repeat.verdict).toBe('pending');
      expect(repeat.body).toMatchObject({
        error: {
          data: { operation_id: first.operation, operation_state: 'accepted', destination_ref: 'task-1' },
        },
      });

      tasks[0]!.status = 'completed';
      await store.addObservation({
        operationId: first.operation!,
        kind: 'callback',
        by: 'mcp-server',
        reason: null,
        settles: 'succeeded',
        status: null,
        destinationRef: 'task-1',
        refs: [],
        payloadFingerprint: 'sha256:task-1-completed',
        source: 'api',
      });
      const after = await runReport('run-3');
      expect(after.verdict).toBe('duplicate');
      expect(tasks).toHaveLength(1);
    });

    for (const path of ['/mcp', '/mcp-sse']) {
      it(`follows the task through tasks/get: completed settles it succeeded, a repeat is a duplicate (${path})`, async () => {
        const report = `done${path}`;
        const first = await runReport('run-4', report, path);
        expect(first.verdict).toBe('allow');
        const taskId = (first.body as { result: { task: { taskId: string } } }).result.task.taskId;
        const working = await call('run-4', 'tasks/get', { taskId }, path);
        expect(working.body).toMatchObject({ result: { taskId, status: 'working' } });
        expect((await store.getOperation(first.operation!))?.state).toBe('accepted');

        tasks.find((t) => t.taskId === taskId)!.status = 'completed';
        const done = await call('run-4', 'tasks/get', { taskId }, path);
        expect(done.verdict).toBeUndefined();
        expect(done.body).toMatchObject({ result: { taskId, status: 'completed' } });
        expect((await store.getOperation(first.operation!))?.state).toBe('succeeded');
        expect(await trail(first.operation!)).toEqual([
          { kind: 'read_back', result: 'succeeded', by: `MCP tasks/get ${taskId}` },
        ]);

        const repeat = await runReport('run-5', report, path);
        expect(repeat.verdict).toBe('duplicate');
        // The server's ledger and the trail agree: one task for this report, completed.
        expect(tasks.filter((t) => t.report === report)).toEqual([{ taskId, report, status: 'completed' }]);
      });
    }

    it('a task that failed settles its operation failed and releases the key: the retry goes out', async () => {
      const first = await runReport('run-6', 'broken');
      const taskId = (first.body as { result: { task: { taskId: string } } }).result.task.taskId;
      tasks.find((t) => t.taskId === taskId)!.status = 'failed';
      const failed = await call('run-6', 'tasks/get', { taskId });
      expect(failed.body).toMatchObject({ result: { taskId, status: 'failed' } });
      expect((await store.getOperation(first.operation!))?.state).toBe('failed');
      expect(await trail(first.operation!)).toEqual([
        { kind: 'read_back', result: 'failed', by: `MCP tasks/get ${taskId}` },
      ]);

      const retry = await runReport('run-7', 'broken');
      expect(retry.verdict).toBe('allow');
      expect(retry.operation).toBe(first.operation);
      const op = await store.getOperation(first.operation!);
      expect(op?.state).toBe('accepted');
      expect(op?.attempts.map((a) => a.destinationRef)).toEqual(
        tasks.filter((t) => t.report === 'broken').map((t) => t.taskId),
      );
      expect(tasks.filter((t) => t.report === 'broken').map((t) => t.status)).toEqual(['failed', 'working']);
    });

    it('never takes a task read for a proposal, even where a tool matches every call', async () => {
      for (let i = 0; i < 2; i++) {
        const polled = await call('run-9', 'tasks/get', { taskId: 'task-1' }, '/mcp-all');
        expect(polled.verdict, `poll ${i + 1}`).toBeUndefined();
        expect(polled.body).toMatchObject({ result: { taskId: 'task-1' } });
      }
    });
  });
}
