/**
 * The official MCP TypeScript SDK end to end: an SDK `Client` over its
 * `StreamableHTTPClientTransport`, as a real agent uses it, calls tools of a real SDK `McpServer`
 * on loopback (`ticket-server.ts`) through the real gate on a real store, by both front doors: the
 * forward proxy (an undici `ProxyAgent` given to the transport's `fetch`) and the in-process undici
 * interceptor. The server's ledger of executions is the ground truth: a duplicate never reaches
 * it, a failed call (`isError` or a JSON-RPC error) leaves the agent free to try again, and a call
 * whose response was lost is held on retry rather than run twice (docs/design.md §4.1, §4.3).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type CallToolResult, McpError, ResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { Agent, type Dispatcher, ProxyAgent, request, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { gateInterceptor } from '../../../src/undici/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { startTicketServer, type TicketServer } from './ticket-server.js';

const tool = (name: string, extra = ''): string => `
  - id: mcp.${name}
    match:
      hosts: [127.0.0.1]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": ${name} }
    effect: create
    dedupe: { key: [$.body.params.arguments.subject], window: 1h, wait: 0s }
    verdict: { protocol: jsonrpc }${extra}`;

const policies = parsePolicyFiles([
  {
    file: 'mcp-sdk.yaml',
    text: `
version: 1
tools:${tool('create_ticket')}${tool('flaky_ticket')}${tool('guarded_ticket')}${tool('slow_ticket')}${tool(
      'confirm_ticket',
      '\n    idempotency: { header: Idempotency-Key }',
    )}
`,
  },
]);

/** The gate's JSON-RPC error codes (verdict-response.ts) and the SDK's for URL elicitation. */
const ALLOW = -32050;
const DUPLICATE = -32051;
const HOLD = -32053;
const INVALID_REQUEST = -32600;
const URL_ELICITATION_REQUIRED = -32042;

/** One HTTP exchange of the SDK transport, as its `fetch` saw it. */
interface Exchange {
  readonly method: string;
  readonly rpc: { id?: unknown; method?: unknown } | null;
  readonly status: number | null;
  readonly verdict: string | null;
  readonly operation: string | null;
  readonly error: unknown;
}

interface FrontDoor {
  readonly name: string;
  readonly dispatcher: Dispatcher;
}

/**
 * An SDK client connected through `door`, and every exchange its transport made. Each test is its
 * own agent run (`Effectgate-Run`, as an agent-aware client sends it): the loop breaker counts a
 * run's duplicates, and one run per test keeps the tests independent.
 */
async function connect(
  door: FrontDoor,
  url: string,
  run: string,
): Promise<{ client: Client; exchanges: Exchange[] }> {
  const exchanges: Exchange[] = [];
  const fetch: FetchLike = async (target, init) => {
    const text = typeof init?.body === 'string' ? init.body : null;
    const base = {
      method: init?.method ?? 'GET',
      rpc: text === null ? null : (JSON.parse(text) as Exchange['rpc']),
    };
    try {
      const res = (await undiciFetch(target, {
        ...(init as Parameters<typeof undiciFetch>[1]),
        dispatcher: door.dispatcher,
      })) as unknown as Response;
      exchanges.push({
        ...base,
        status: res.status,
        verdict: res.headers.get('effectgate-verdict'),
        operation: res.headers.get('effectgate-operation'),
        error: null,
      });
      return res;
    } catch (error) {
      exchanges.push({ ...base, status: null, verdict: null, operation: null, error });
      throw error;
    }
  };
  const client = new Client({ name: 'effectgate-test-agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      fetch,
      requestInit: { headers: { 'effectgate-run': run } },
    }),
  );
  return { client, exchanges };
}

/** The rejection of `call`, which must reject. */
async function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );
}

const toolCalls = (exchanges: readonly Exchange[]): Exchange[] =>
  exchanges.filter((e) => e.rpc?.method === 'tools/call');

for (const target of storeTargets()) {
  describe(`the MCP TypeScript SDK through the gate (${target.name})`, () => {
    let store: TestStore;
    let server: TicketServer;
    let gate: Gate;
    let proxy: ProxyServer;
    let proxyAgent: ProxyAgent;
    let interceptor: Dispatcher;
    const doors: FrontDoor[] = [];

    beforeAll(async () => {
      store = await openTestStore(target);
      server = await startTicketServer();
      gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'support', agent: 'bot' } });
      proxy = createProxyServer({ gate });
      const addr = await proxy.listen('127.0.0.1', 0);
      proxyAgent = new ProxyAgent({ uri: `http://127.0.0.1:${addr.port}`, proxyTunnel: false });
      interceptor = new Agent().compose(gateInterceptor(gate, { run: 'r-mcp-sdk' }));
      doors.push({ name: 'proxy', dispatcher: proxyAgent }, { name: 'interceptor', dispatcher: interceptor });
    });
    afterAll(async () => {
      await proxyAgent?.close();
      await interceptor?.close();
      await proxy?.close();
      await gate?.close();
      await server?.close();
      await store?.close();
    });

    for (const doorName of ['proxy', 'interceptor'] as const) {
      const door = (): FrontDoor => doors.find((d) => d.name === doorName)!;
      const subjectFor = (what: string): string => `${doorName}: ${what}`;
      let runs = 0;
      /** A run of its own for each test. */
      const runFor = (): string => `r-${doorName}-${++runs}`;

      describe(`through the ${doorName}`, () => {
        it('answers a repeated create_ticket with the gate duplicate error, run once by the server', async () => {
          const subject = subjectFor('printer on fire');
          const { client, exchanges } = await connect(door(), server.url, runFor());
          try {
            const first = (await client.callTool({
              name: 'create_ticket',
              arguments: { subject },
            })) as CallToolResult;
            expect(first.isError).toBeFalsy();
            expect(first.content).toEqual([
              { type: 'text', text: expect.stringMatching(/^Created ticket T-\d+: /) },
            ]);

            const err = await rejection(client.callTool({ name: 'create_ticket', arguments: { subject } }));
            expect(err).toBeInstanceOf(McpError);
            const mcpError = err as McpError;
            expect(mcpError.code).toBe(DUPLICATE);
            expect(mcpError.message).toMatch(new RegExp(`^MCP error ${DUPLICATE}: `));
            const [a, b] = toolCalls(exchanges);
            expect(a).toMatchObject({ status: 200, verdict: 'allow' });
            expect(b).toMatchObject({ status: 200, verdict: 'duplicate', operation: a!.operation });
            // A new JSON-RPC id for the repeat: the id is never part of the fingerprint.
            expect(b!.rpc?.id).not.toEqual(a!.rpc?.id);
            expect(mcpError.data).toMatchObject({
              verdict: 'duplicate',
              tool: 'mcp.create_ticket',
              operation_id: a!.operation,
              source: { operation_id: a!.operation },
            });
          } finally {
            await client.close();
          }
          expect(server.executionsOf(subject)).toEqual([
            expect.objectContaining({ tool: 'create_ticket', result: 'created' }),
          ]);
          expect(server.callsOf(subject)).toHaveLength(1);
        });

        it('delivers progress before a slow result: the tool finishes only once the agent saw it', async () => {
          const subject = subjectFor('long export');
          const { client, exchanges } = await connect(door(), server.url, runFor());
          try {
            const seen: string[] = [];
            const result = (await client.callTool(
              { name: 'slow_ticket', arguments: { subject } },
              undefined,
              {
                // The server holds the result until this runs: a gate that buffered the stream
                // would never deliver the progress, and the call would never end.
                onprogress: (p) => {
                  seen.push(String(p.message));
                  server.release(subject);
                },
              },
            )) as CallToolResult;
            expect(seen).toEqual(['queued']);
            expect(result.content).toEqual([
              { type: 'text', text: expect.stringMatching(/^Created ticket T-\d+: /) },
            ]);
            const err = await rejection(client.callTool({ name: 'slow_ticket', arguments: { subject } }));
            expect((err as McpError).code).toBe(DUPLICATE);
            expect(toolCalls(exchanges).map((e) => e.verdict)).toEqual(['allow', 'duplicate']);
          } finally {
            await client.close();
          }
          expect(server.executionsOf(subject)).toHaveLength(1);
        });

        it('records the result of a call the SDK abandons mid-stream: its stream stays open, so the gate reads it', async () => {
          // The SDK cancels with notifications/cancelled and leaves the event stream open (the raw
          // close of a stream is event-streams.test.ts): the gate reads on, and the trail has the
          // server's own result, not a guess; the retry is its duplicate.
          const subject = subjectFor('abandoned export');
          const { client, exchanges } = await connect(door(), server.url, runFor());
          try {
            const abort = new AbortController();
            const first = client.callTool({ name: 'slow_ticket', arguments: { subject } }, undefined, {
              signal: abort.signal,
              onprogress: () => abort.abort(),
            });
            await rejection(first);
            server.release(subject);
            const operation = toolCalls(exchanges)[0]?.operation ?? null;
            let op = null;
            for (let i = 0; i < 100 && op?.state !== 'succeeded'; i++) {
              [op] = await store.listOperations({ toolId: 'mcp.slow_ticket', keyValues: [subject] });
              if (op?.state !== 'succeeded') await new Promise((r) => setTimeout(r, 20));
            }
            expect(op).toMatchObject({ id: operation, state: 'succeeded' });
            expect(op?.attempts.map((a) => a.dispatchState)).toEqual(['response_received']);
            const err = await rejection(client.callTool({ name: 'slow_ticket', arguments: { subject } }));
            expect((err as McpError).code).toBe(DUPLICATE);
          } finally {
            await client.close();
          }
          expect(server.callsOf(subject)).toHaveLength(1);
          expect(server.executionsOf(subject)).toHaveLength(1);
        });

        it('releases the key after an isError result: the retry runs, the next call is a duplicate', async () => {
          const subject = subjectFor('VPN down');
          const { client, exchanges } = await connect(door(), server.url, runFor());
          try {
            const call = (): Promise<unknown> =>
              client.callTool({ name: 'flaky_ticket', arguments: { subject } });
            const first = (await call()) as CallToolResult;
            expect(first).toMatchObject({
              isError: true,
              content: [{ type: 'text', text: 'Ticket backend busy, try again' }],
            });
            const second = (await call()) as CallToolResult;
            expect(second.isError).toBeFalsy();
            expect(second.content).toEqual([
              { type: 'text', text: expect.stringMatching(/^Created ticket T-\d+: /) },
            ]);
            const third = await rejection(call());
            expect(third).toBeInstanceOf(McpError);
            expect(third).toMatchObject({ code: DUPLICATE, data: { verdict: 'duplicate' } });
            expect(toolCalls(exchanges).map((e) => e.verdict)).toEqual(['allow', 'allow', 'duplicate']);
          } finally {
            await client.close();
          }
          expect(server.executionsOf(subject).map((e) => e.result)).toEqual(['tool_error', 'created']);
          expect(server.callsOf(subject)).toHaveLength(2);
        });

        it('releases the key after a JSON-RPC error from the server the same way', async () => {
          const subject = subjectFor('badge reader');
          const { client, exchanges } = await connect(door(), server.url, runFor());
          try {
            const call = (): Promise<unknown> =>
              client.callTool({ name: 'guarded_ticket', arguments: { subject } });
            const first = await rejection(call());
            expect(first).toBeInstanceOf(McpError);
            expect(first).toMatchObject({
              code: URL_ELICITATION_REQUIRED,
              data: { elicitations: [{ elicitationId: `auth-${subject}` }] },
            });
            const second = (await call()) as CallToolResult;
            expect(second.isError).toBeFalsy();
            expect(second.content).toEqual([
              { type: 'text', text: expect.stringMatching(/^Created ticket T-\d+: /) },
            ]);
            const third = await rejection(call());
            expect(third).toMatchObject({ code: DUPLICATE, data: { verdict: 'duplicate' } });
            expect(toolCalls(exchanges).map((e) => e.verdict)).toEqual(['allow', 'allow', 'duplicate']);
          } finally {
            await client.close();
          }
          expect(server.executionsOf(subject).map((e) => e.result)).toEqual(['rpc_error', 'created']);
          expect(server.callsOf(subject)).toHaveLength(2);
        });

        it('holds the retry of a call whose response was lost after the server committed it', async () => {
          const subject = subjectFor('drop: disk full');
          const { client, exchanges } = await connect(door(), server.url, runFor());
          let firstError: unknown;
          let held: unknown;
          try {
            firstError = await rejection(client.callTool({ name: 'create_ticket', arguments: { subject } }));
            // The agent retries the same call: the SDK gives it a new JSON-RPC id.
            held = await rejection(client.callTool({ name: 'create_ticket', arguments: { subject } }));
          } finally {
            await client.close();
          }
          const [a, b] = toolCalls(exchanges);
          // The lost response: the gate's JSON-RPC error, the outcome unknown, the operation named.
          expect(a).toMatchObject({ status: 200, verdict: 'allow', operation: expect.any(String) });
          expect(firstError).toBeInstanceOf(McpError);
          expect(firstError).toMatchObject({
            code: ALLOW,
            data: {
              verdict: 'allow',
              operation_id: a!.operation,
              attempt_id: expect.any(String),
              dispatch_state: 'sent_no_response',
              operation_state: 'unknown',
            },
          });
          const firstAttempt = (firstError as McpError).data as { attempt_id: string };
          // The retry, with a new JSON-RPC id, is the same operation: held, nothing sent.
          expect(b!.rpc?.id).not.toEqual(a!.rpc?.id);
          expect(b).toMatchObject({ status: 200, verdict: 'hold', operation: a!.operation });
          expect(held).toBeInstanceOf(McpError);
          expect((held as McpError).message).toMatch(new RegExp(`^MCP error ${HOLD}: `));
          expect(held).toMatchObject({
            code: HOLD,
            data: {
              verdict: 'hold',
              tool: 'mcp.create_ticket',
              operation_id: a!.operation,
              previous_attempt_id: firstAttempt.attempt_id,
              previous_dispatch_state: 'sent_no_response',
              operation_state: 'unknown',
            },
          });

          // One effect at the destination, one operation at the gate, its outcome unknown.
          expect(server.executionsOf(subject)).toEqual([
            expect.objectContaining({ tool: 'create_ticket', result: 'created' }),
          ]);
          expect(server.callsOf(subject)).toHaveLength(1);
          const ops = await store.listOperations({ toolId: 'mcp.create_ticket', keyValues: [subject] });
          expect(
            ops.map((o) => ({
              id: o.id,
              state: o.state,
              attempts: o.attempts.map((t) => ({ id: t.id, dispatchState: t.dispatchState })),
            })),
          ).toEqual([
            {
              id: a!.operation,
              state: 'unknown',
              attempts: [{ id: firstAttempt.attempt_id, dispatchState: 'sent_no_response' }],
            },
          ]);
        });

        for (const answer of ['JSON', 'an event stream'] as const) {
          it(`continues a call answered input_required (as ${answer}) as the same operation: one ticket, then a duplicate`, async () => {
            const subject = subjectFor(`${answer === 'JSON' ? '' : 'sse: '}a new laptop`);
            const { client, exchanges } = await connect(door(), server.url, runFor());
            // The SDK has no multi-round-trip support yet: the agent sends the continuation itself,
            // as MCP 2026-07-28 says (same call, a new id, inputResponses and requestState).
            const call = (more: Record<string, unknown>): Promise<Record<string, unknown>> =>
              client.request(
                {
                  method: 'tools/call',
                  params: { name: 'confirm_ticket', arguments: { subject }, ...more },
                } as Parameters<Client['request']>[0],
                ResultSchema,
              );
            let first: Record<string, unknown>;
            let done: Record<string, unknown>;
            let again: unknown;
            try {
              first = await call({});
              expect(first).toMatchObject({
                resultType: 'input_required',
                requestState: `confirm:${subject}`,
                inputRequests: { confirm: { method: 'elicitation/create' } },
              });
              const continuation = {
                inputResponses: { confirm: { result: { action: 'accept', content: {} } } },
                requestState: first['requestState'],
              };
              done = await call(continuation);
              expect(done['content']).toEqual([
                { type: 'text', text: expect.stringMatching(/^Created ticket T-\d+: /) },
              ]);
              again = await rejection(call(continuation));
            } finally {
              await client.close();
            }
            expect(again).toBeInstanceOf(McpError);
            expect(again).toMatchObject({ code: DUPLICATE, data: { verdict: 'duplicate' } });
            const [a, b, c] = toolCalls(exchanges);
            expect([a, b, c].map((e) => e?.verdict)).toEqual(['allow', 'allow', 'duplicate']);
            // One operation throughout: the continuation is its attempt 2, the repeat its duplicate.
            expect(b!.operation).toBe(a!.operation);
            expect(c!.operation).toBe(a!.operation);
            expect(b!.rpc?.id).not.toEqual(a!.rpc?.id);

            // The destination ran the tool once, and saw the same Idempotency-Key both times.
            expect(server.executionsOf(subject).map((e) => e.result)).toEqual(['input_required', 'created']);
            const calls = server.callsOf(subject);
            expect(calls).toHaveLength(2);
            expect(calls[0]!.headers['idempotency-key']).toEqual(expect.any(String));
            expect(calls[1]!.headers['idempotency-key']).toBe(calls[0]!.headers['idempotency-key']);
            expect(calls[1]!.params['inputResponses']).toBeDefined();

            const ops = await store.listOperations({ toolId: 'mcp.confirm_ticket', keyValues: [subject] });
            expect(ops).toHaveLength(1);
            const [op] = ops;
            expect(op).toMatchObject({ id: a!.operation, state: 'succeeded' });
            const [t1, t2] = op!.attempts;
            expect(op!.attempts).toHaveLength(2);
            expect(t1).toMatchObject({ number: 1, dispatchState: 'response_received', status: 200 });
            expect(t1!.error).toMatch(/input_required/);
            expect(t2).toMatchObject({
              number: 2,
              dispatchState: 'response_received',
              retryOfAttemptId: t1!.id,
              retryReason: 'input_required',
              retryDecision: 'input_continuation',
            });
            // Both attempts are the same request: the continuation's inputs are not a change.
            expect(t2!.request.fingerprint).toBe(t1!.request.fingerprint);
          });
        }

        it('refuses an Mcp-Method or Mcp-Name header that disagrees with the body, sending nothing', async () => {
          const subject = subjectFor('header says otherwise');
          const run = runFor();
          const ledgerBefore = server.ledger.length;
          const callsBefore = server.calls.length;
          const send = async (
            headers: Record<string, string>,
            id: number,
          ): Promise<{ status: number; type: unknown; body: unknown }> => {
            const res = await request(server.url, {
              dispatcher: door().dispatcher,
              method: 'POST',
              headers: {
                'content-type': 'application/json',
                accept: 'application/json, text/event-stream',
                'mcp-protocol-version': '2025-06-18',
                'effectgate-run': run,
                ...headers,
              },
              body: JSON.stringify({
                jsonrpc: '2.0',
                id,
                method: 'tools/call',
                params: { name: 'create_ticket', arguments: { subject } },
              }),
            });
            const type = res.headers['content-type'];
            const text = await res.body.text();
            return {
              status: res.statusCode,
              type,
              body: type === 'application/json' ? JSON.parse(text) : text,
            };
          };

          const byMethod = await send({ 'mcp-method': 'tools/list' }, 41);
          expect(byMethod).toMatchObject({ status: 400, type: 'application/json' });
          expect(byMethod.body).toMatchObject({
            jsonrpc: '2.0',
            id: 41,
            error: { code: INVALID_REQUEST, message: expect.stringContaining('Mcp-Method') },
          });
          const byName = await send({ 'mcp-method': 'tools/call', 'mcp-name': 'delete_ticket' }, 42);
          expect(byName).toMatchObject({ status: 400, type: 'application/json' });
          expect(byName.body).toMatchObject({
            jsonrpc: '2.0',
            id: 42,
            error: { code: INVALID_REQUEST, message: expect.stringContaining('Mcp-Name') },
          });

          expect(server.ledger).toHaveLength(ledgerBefore);
          expect(server.calls).toHaveLength(callsBefore);
          expect(await store.listOperations({ toolId: 'mcp.create_ticket', keyValues: [subject] })).toEqual(
            [],
          );

          // Headers that agree are no refusal: the same call runs once.
          const agreeing = await send({ 'mcp-method': 'tools/call', 'mcp-name': 'create_ticket' }, 43);
          expect(agreeing).toMatchObject({ status: 200, type: 'text/event-stream' });
          expect(agreeing.body).toContain('Created ticket');
          expect(server.executionsOf(subject)).toHaveLength(1);
        });
      });
    }
  });
}
