/**
 * The official MCP SDKs as clients through the real `effectgate proxy` binary: the TypeScript SDK
 * (`@modelcontextprotocol/sdk`, its transport's fetch given an undici ProxyAgent) and the Python
 * SDK (`mcp`, its httpx2 client reading HTTP_PROXY / HTTPS_PROXY and SSL_CERT_FILE), over
 * Streamable HTTP to a loopback MCP server built on the SDK (integration/mcp/ticket-server.ts,
 * whose ledger records every tool execution), in plain HTTP and in HTTPS the gate intercepts.
 *
 * The same tools/call twice: the tool runs once, and the second call's answer is the gate's
 * JSON-RPC error, which each SDK raises as its McpError with the gate's reason; the trail and the
 * ledger agree. A call whose answer is lost after the tool ran leaves the operation unknown, and
 * the same call again is held, never run twice (docs/design.md §3 "Unknown is dangerous"). The
 * Python SDK is not packaged by Debian: without its virtual environment its tests report
 * themselves skipped, with the reason.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import { type CallToolResult, McpError } from '@modelcontextprotocol/sdk/types.js';
import { ProxyAgent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type GateUnderTest, startGateUnderTest } from '../helpers/gate-under-test.js';
import { runCli } from '../helpers/proxy-process.js';
import { storeTargets } from '../helpers/store.js';
import { selfSignedCert } from '../helpers/upstream.js';
import { startTicketServer, type TicketServer } from '../integration/mcp/ticket-server.js';
import { MCP_PYTHON, pythonModuleMissing, runPythonClient } from './clients/python-client.js';

const POLICIES = new URL('../fixtures/client-policies/', import.meta.url).pathname;
const TRANSPORTS = ['http', 'https'] as const;
type Transport = (typeof TRANSPORTS)[number];
/** The gate's JSON-RPC error codes (docs/verdicts.md, JSON-RPC and MCP tools). */
const DUPLICATE = -32051;
const HOLD = -32053;

/** One call as mcp_client.py printed it. */
interface PythonCall {
  readonly error: string | null;
  readonly is_error?: boolean;
  readonly text?: string;
  readonly code?: number;
  readonly surfaced?: string;
  readonly data?: Record<string, unknown>;
}

/** `effectgate trail --json`: the operation and its timeline. */
interface TrailReport {
  readonly operation: { readonly id: string; readonly state: string };
  readonly trail: {
    readonly timeline: readonly {
      readonly type: string;
      readonly verdict?: string;
      readonly dispatch_state?: string;
    }[];
  };
}

const pythonMissing = pythonModuleMissing('mcp', MCP_PYTHON);

/** The rejection of `call`, which must reject. */
async function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (err: unknown) => err,
  );
}

for (const target of storeTargets()) {
  describe(`MCP SDKs through the proxy binary (${target.name})`, () => {
    let dir: string;
    let caPem: string;
    const servers = {} as Record<Transport, TicketServer>;
    let gate: GateUnderTest;
    const agents: ProxyAgent[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-mcp-clients-'));
      const init = await runCli(['ca', 'init', '--dir', join(dir, 'ca')]);
      expect(init.code).toBe(0);
      caPem = join(dir, 'ca', 'ca.pem');
      const cert = selfSignedCert();
      writeFileSync(join(dir, 'upstream.pem'), cert.cert);
      servers.http = await startTicketServer();
      servers.https = await startTicketServer({ tls: cert });
      gate = await startGateUnderTest(target, POLICIES, {
        extraArgs: [
          '--ca-dir',
          join(dir, 'ca'),
          '--upstream-ca',
          join(dir, 'upstream.pem'),
          '--allow-connect-ports',
          new URL(servers.https.url).port,
        ],
      });
    }, 120_000);

    afterAll(async () => {
      for (const a of agents) await a.close();
      await gate?.close();
      await servers.http?.close();
      await servers.https?.close();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    const trailOf = async (subject: string): Promise<TrailReport> => {
      const r = await gate.cli([
        'trail',
        '--tool',
        'mcp.create_ticket',
        '--key',
        JSON.stringify([subject]),
        '--json',
      ]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as TrailReport;
    };
    const of = (report: TrailReport, type: string) => report.trail.timeline.filter((e) => e.type === type);

    /** An SDK client whose transport sends through the gate (absolute form, or a CONNECT it intercepts). */
    async function tsClient(t: Transport): Promise<Client> {
      const agent =
        t === 'http'
          ? new ProxyAgent({ uri: gate.proxy.url, proxyTunnel: false })
          : new ProxyAgent({ uri: gate.proxy.url, requestTls: { ca: readFileSync(caPem, 'utf8') } });
      agents.push(agent);
      const fetch: FetchLike = async (url, init) =>
        (await undiciFetch(url, {
          ...(init as Parameters<typeof undiciFetch>[1]),
          dispatcher: agent,
        })) as unknown as Response;
      const client = new Client({ name: 'effectgate-e2e-agent', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(servers[t].url), { fetch }));
      return client;
    }

    const pythonEnv = (): NodeJS.ProcessEnv => ({
      HTTP_PROXY: gate.proxy.url,
      http_proxy: gate.proxy.url,
      HTTPS_PROXY: gate.proxy.url,
      https_proxy: gate.proxy.url,
      NO_PROXY: '',
      no_proxy: '',
      SSL_CERT_FILE: caPem,
    });

    /** The ledger holds one execution of `subject`, and the trail one operation in `state`. */
    async function expectOneExecution(t: Transport, subject: string, state: string, verdicts: string[]) {
      expect(servers[t].executionsOf(subject).map((e) => e.result)).toEqual(['created']);
      expect(servers[t].callsOf(subject)).toHaveLength(1);
      const report = await trailOf(subject);
      expect(report.operation.state).toBe(state);
      expect(of(report, 'attempt')).toHaveLength(1);
      expect(of(report, 'decision').map((d) => d.verdict)).toEqual(verdicts);
      return report;
    }

    for (const t of TRANSPORTS) {
      it(`TypeScript SDK (${t}): the tool runs once, the repeat is an McpError with the gate's reason`, async () => {
        const subject = `ts twice ${t}`;
        const client = await tsClient(t);
        try {
          const first = (await client.callTool({
            name: 'create_ticket',
            arguments: { subject },
          })) as CallToolResult;
          expect(first.isError).toBeFalsy();
          const err = await rejection(client.callTool({ name: 'create_ticket', arguments: { subject } }));
          expect(err).toBeInstanceOf(McpError);
          expect((err as McpError).code).toBe(DUPLICATE);
          expect((err as McpError).message).toContain('already carried out');
          const report = await expectOneExecution(t, subject, 'succeeded', ['allow', 'duplicate']);
          expect((err as McpError).message).toContain(report.operation.id);
        } finally {
          await client.close();
        }
      }, 60_000);

      it(`TypeScript SDK (${t}): the answer lost after the tool ran, the same call again is held`, async () => {
        const subject = `drop: ts lost ${t}`;
        const client = await tsClient(t);
        try {
          // The gate's answer to the lost response, then to the repeat: neither runs the tool again.
          const lost = await rejection(client.callTool({ name: 'create_ticket', arguments: { subject } }));
          expect(lost).toBeInstanceOf(McpError);
          const held = await rejection(client.callTool({ name: 'create_ticket', arguments: { subject } }));
          expect((held as McpError).code).toBe(HOLD);
          expect((held as McpError).message).toContain('approv');
          const report = await expectOneExecution(t, subject, 'unknown', ['allow', 'hold']);
          expect(of(report, 'attempt').map((a) => a.dispatch_state)).toEqual(['sent_no_response']);
        } finally {
          await client.close();
        }
      }, 60_000);

      const pyTitle = `Python SDK (${t}): the tool runs once, the repeat is an MCPError with the gate's reason`;
      if (pythonMissing !== null) it.skip(`${pyTitle}: skipped, ${pythonMissing}`, () => undefined);
      else
        it(pyTitle, async () => {
          const subject = `python twice ${t}`;
          const calls = await runPythonClient<PythonCall>(
            'mcp_client.py',
            [servers[t].url, 'create_ticket', subject, '2'],
            pythonEnv(),
            { python: MCP_PYTHON },
          );
          expect(calls).toHaveLength(2);
          expect(calls[0]).toMatchObject({ error: null, is_error: false });
          expect(calls[1]).toMatchObject({ error: 'MCPError', code: DUPLICATE });
          expect(calls[1]!.surfaced).toContain('already carried out');
          const report = await expectOneExecution(t, subject, 'succeeded', ['allow', 'duplicate']);
          expect(calls[1]!.surfaced).toContain(report.operation.id);
        }, 90_000);

      const pyLost = `Python SDK (${t}): the answer lost after the tool ran, the same call again is held`;
      if (pythonMissing !== null) it.skip(`${pyLost}: skipped, ${pythonMissing}`, () => undefined);
      else
        it(pyLost, async () => {
          const subject = `drop: python lost ${t}`;
          const calls = await runPythonClient<PythonCall>(
            'mcp_client.py',
            [servers[t].url, 'create_ticket', subject, '2'],
            pythonEnv(),
            { python: MCP_PYTHON },
          );
          expect(calls).toHaveLength(2);
          expect(calls[0]).toMatchObject({ error: 'MCPError' });
          expect(calls[1]).toMatchObject({ error: 'MCPError', code: HOLD });
          expect(calls[1]!.surfaced).toContain('approv');
          const report = await expectOneExecution(t, subject, 'unknown', ['allow', 'hold']);
          expect(of(report, 'attempt').map((a) => a.dispatch_state)).toEqual(['sent_no_response']);
        }, 90_000);
    }
  });
}
