/**
 * A real MCP server on loopback for the SDK tests: the official SDK's `McpServer` behind its
 * `StreamableHTTPServerTransport` (stateless: one server and transport per POST, as the SDK's
 * stateless example does; SSE responses, the transport's default) on a `node:http` server. Its
 * `ledger` is the destination's own record of every tool execution, the ground truth the tests
 * compare the gate's verdicts with.
 *
 * Tools, each taking `{ subject }`:
 * - `create_ticket` creates a ticket. A subject containing `drop:` is the commit-then-drop
 *   case: the ticket is created (recorded), then the connection is destroyed before the result is
 *   written, so nobody outside the server knows it happened.
 * - `flaky_ticket` answers an MCP tool execution error (`isError: true`) the first time for a
 *   subject and creates the ticket on the next call.
 * - `guarded_ticket` answers a JSON-RPC error the first time for a subject (the SDK's
 *   `UrlElicitationRequiredError`, code -32042: the one error an `McpServer` tool throws that
 *   reaches the client as a JSON-RPC `error` rather than an `isError` result) and creates the
 *   ticket on the next call.
 * - `slow_ticket` sends a progress notification (to the request's progress token), then waits
 *   until the test calls `release(subject)` before it creates the ticket: a result that can only
 *   come after the agent has seen the progress.
 * - `confirm_ticket` is a multi-round-trip call (MCP 2026-07-28, `resultType: "input_required"`):
 *   without an accepted `inputResponses.confirm` and its `requestState` it runs nothing and asks
 *   for a confirmation; the same call again with them creates the ticket. The SDK (1.32.2) has no
 *   server support for it, so this server answers it by hand, as JSON, or as an event stream when
 *   the subject contains `sse:`.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { type CallToolResult, UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import type { SelfSignedCert } from '../../helpers/upstream.js';

export interface Execution {
  readonly tool: string;
  readonly subject: string;
  /**
   * `created` (an effect), `tool_error` (isError answered), `rpc_error` (JSON-RPC error thrown),
   * `input_required` (asked for input, ran nothing).
   */
  readonly result: 'created' | 'tool_error' | 'rpc_error' | 'input_required';
  readonly ticket: string | null;
}

/** A `tools/call` POST that reached the server (whatever the tool then did). */
export interface ReceivedCall {
  readonly id: unknown;
  readonly name: unknown;
  readonly subject: unknown;
  readonly params: Record<string, unknown>;
  readonly headers: IncomingMessage['headers'];
}

export interface TicketServer {
  /** `http://127.0.0.1:PORT/mcp` (`https://` with `tls`) */
  readonly url: string;
  readonly ledger: readonly Execution[];
  readonly calls: readonly ReceivedCall[];
  executionsOf(subject: string): Execution[];
  /** Lets the `slow_ticket` call for `subject` finish. */
  release(subject: string): void;
  callsOf(subject: string): ReceivedCall[];
  close(): Promise<void>;
}

/** With `tls` it serves HTTPS with that key pair (`selfSignedCert()`). */
export async function startTicketServer(
  options: { readonly tls?: SelfSignedCert } = {},
): Promise<TicketServer> {
  const ledger: Execution[] = [];
  const calls: ReceivedCall[] = [];
  const seen = new Map<string, number>();
  let tickets = 0;
  const latches = new Map<string, { promise: Promise<void>; open: () => void }>();
  const latch = (subject: string): { promise: Promise<void>; open: () => void } => {
    let l = latches.get(subject);
    if (l === undefined) {
      let open!: () => void;
      const promise = new Promise<void>((resolve) => {
        open = resolve;
      });
      l = { promise, open };
      latches.set(subject, l);
    }
    return l;
  };

  const attempt = (tool: string, subject: string): number => {
    const n = (seen.get(`${tool}\0${subject}`) ?? 0) + 1;
    seen.set(`${tool}\0${subject}`, n);
    return n;
  };
  const create = (tool: string, subject: string): CallToolResult => {
    tickets += 1;
    const ticket = `T-${tickets}`;
    ledger.push({ tool, subject, result: 'created', ticket });
    return { content: [{ type: 'text', text: `Created ticket ${ticket}: ${subject}` }] };
  };

  /** The MCP server for one HTTP exchange: `res` lets `create_ticket` drop it after the effect. */
  const mcpFor = (res: ServerResponse): McpServer => {
    const mcp = new McpServer({ name: 'ticket-server', version: '1.0.0' });
    const input = { subject: z.string() };
    mcp.registerTool(
      'create_ticket',
      { description: 'Create a ticket', inputSchema: input },
      ({ subject }) => {
        const result = create('create_ticket', subject);
        // Commit, then lose the response: the socket goes before the result is written.
        if (subject.includes('drop:')) res.socket?.destroy();
        return result;
      },
    );
    mcp.registerTool(
      'flaky_ticket',
      { description: 'Create a ticket; fails once', inputSchema: input },
      ({ subject }) => {
        if (attempt('flaky_ticket', subject) === 1) {
          ledger.push({ tool: 'flaky_ticket', subject, result: 'tool_error', ticket: null });
          return { content: [{ type: 'text', text: 'Ticket backend busy, try again' }], isError: true };
        }
        return create('flaky_ticket', subject);
      },
    );
    mcp.registerTool(
      'guarded_ticket',
      { description: 'Create a ticket; needs authorization once', inputSchema: input },
      ({ subject }) => {
        if (attempt('guarded_ticket', subject) === 1) {
          ledger.push({ tool: 'guarded_ticket', subject, result: 'rpc_error', ticket: null });
          throw new UrlElicitationRequiredError([
            {
              mode: 'url',
              elicitationId: `auth-${subject}`,
              url: 'http://127.0.0.1/authorize',
              message: 'Authorize the ticket system first',
            },
          ]);
        }
        return create('guarded_ticket', subject);
      },
    );
    mcp.registerTool(
      'slow_ticket',
      { description: 'Create a ticket, reporting progress first', inputSchema: input },
      async ({ subject }, extra) => {
        const token = extra._meta?.progressToken;
        if (token !== undefined) {
          await extra.sendNotification({
            method: 'notifications/progress',
            params: { progressToken: token, progress: 1, total: 2, message: 'queued' },
          });
        }
        await latch(subject).promise;
        return create('slow_ticket', subject);
      },
    );
    return mcp;
  };

  /** `confirm_ticket`: asks for a confirmation first, creates the ticket on an accepted continuation. */
  const confirmTicket = (subject: string, params: Record<string, unknown>): Record<string, unknown> => {
    const state = `confirm:${subject}`;
    const responses = params['inputResponses'] as { confirm?: { result?: { action?: unknown } } } | undefined;
    if (params['requestState'] === state && responses?.confirm?.result?.action === 'accept') {
      return { ...create('confirm_ticket', subject) };
    }
    ledger.push({ tool: 'confirm_ticket', subject, result: 'input_required', ticket: null });
    return {
      resultType: 'input_required',
      inputRequests: {
        confirm: {
          method: 'elicitation/create',
          params: {
            mode: 'form',
            message: `Create a ticket "${subject}"?`,
            requestedSchema: { type: 'object', properties: {} },
          },
        },
      },
      requestState: state,
    };
  };
  const answerByHand = (res: ServerResponse, id: unknown, result: unknown, subject: string): void => {
    const message = JSON.stringify({ jsonrpc: '2.0', id, result });
    if (subject.includes('sse:')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.end(`event: message\ndata: ${message}\n\n`);
    } else {
      res.writeHead(200, { 'content-type': 'application/json' }).end(message);
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.url?.split('?')[0] !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    // Stateless: no standalone GET stream and no session to DELETE.
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    if (body['method'] === 'tools/call') {
      const params = (body['params'] ?? {}) as Record<string, unknown>;
      const args = (params['arguments'] ?? {}) as Record<string, unknown>;
      calls.push({
        id: body['id'],
        name: params['name'],
        subject: args['subject'],
        params,
        headers: req.headers,
      });
      if (params['name'] === 'confirm_ticket') {
        answerByHand(
          res,
          body['id'],
          confirmTicket(String(args['subject']), params),
          String(args['subject']),
        );
        return;
      }
    }
    const mcp = mcpFor(res);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void mcp.close();
    });
    await mcp.connect(transport);
    await transport.handleRequest(req, res, body);
  };

  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
  };
  const server =
    options.tls === undefined ? createServer(listener) : createHttpsServer(options.tls, listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;

  return {
    url: `${options.tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}/mcp`,
    ledger,
    calls,
    executionsOf: (subject) => ledger.filter((e) => e.subject === subject),
    callsOf: (subject) => calls.filter((c) => c.subject === subject),
    release: (subject) => latch(subject).open(),
    close: async () => {
      for (const l of latches.values()) l.open();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
