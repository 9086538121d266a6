/**
 * The outcome of a JSON-RPC tool is read from its JSON-RPC response (docs/design.md §4.1 "MCP and
 * other JSON-RPC tools"): an HTTP 200 carrying a JSON-RPC error or an MCP tool
 * error is not a success, and confirming its key would bar the agent from ever trying again.
 */
import { describe, expect, it } from 'vitest';
import { jsonRpcOutcome } from '../../../src/engine/jsonrpc-outcome.js';
import { refuseDisagreeingMcpHeaders } from '../../../src/engine/mcp-routing-headers.js';
import { parsePolicyFiles, type Tool } from '../../../src/policy/index.js';

function tool(extra = ''): Tool {
  const [t] = parsePolicyFiles([
    {
      file: 'rpc.yaml',
      text: `
version: 1
tools:
  - id: mcp.create_ticket
    match: { hosts: [mcp.example], method: POST, path: /mcp, body: { "$.params.name": create_ticket } }
    effect: create
    response: { ref: $.structuredContent.url }
    verdict: { protocol: jsonrpc }
${extra}`,
    },
  ]).tools;
  return t as Tool;
}

const json = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));
const rpc = (id: unknown, member: Record<string, unknown>): Uint8Array =>
  json({ jsonrpc: '2.0', id, ...member });
const APP_JSON = 'application/json';

describe('jsonRpcOutcome', () => {
  const t = tool();

  it('calls a result succeeded and reads the destination reference from the result', () => {
    const body = rpc(7, { result: { content: [], structuredContent: { url: 'https://t/1' } } });
    expect(jsonRpcOutcome(t, 7, 200, APP_JSON, body)).toEqual({
      operationState: 'succeeded',
      destinationRef: 'https://t/1',
      note: null,
      rule: 'jsonrpc result',
      errorCode: null,
    });
  });

  it('calls a JSON-RPC error failed, keeping only its code (the message may echo the request)', () => {
    const body = rpc('a', { error: { code: -32602, message: 'bad token sk-live-123' } });
    expect(jsonRpcOutcome(t, 'a', 200, APP_JSON, body)).toEqual({
      operationState: 'failed',
      destinationRef: null,
      note: 'JSON-RPC error -32602',
      rule: 'jsonrpc error',
      errorCode: null,
    });
  });

  it('calls an MCP tool error failed, unless outcome.tool_error says otherwise', () => {
    const body = rpc(1, { result: { isError: true, content: [{ type: 'text', text: 'quota' }] } });
    expect(jsonRpcOutcome(t, 1, 200, APP_JSON, body).operationState).toBe('failed');
    for (const said of ['succeeded', 'unknown'] as const) {
      const lenient = tool(`    outcome: { tool_error: ${said} }`);
      expect(jsonRpcOutcome(lenient, 1, 200, APP_JSON, body).operationState).toBe(said);
    }
  });

  it('calls a 2xx without the response to this id unknown: another id, another type, none at all', () => {
    for (const body of [
      rpc(8, { result: {} }),
      rpc('7', { result: {} }),
      json({ ok: true }),
      new TextEncoder().encode('not json'),
      new Uint8Array(0),
      rpc(7, { method: 'notifications/progress', params: {} }),
    ]) {
      const out = jsonRpcOutcome(t, 7, 200, APP_JSON, body);
      expect(out.operationState).toBe('unknown');
      expect(out.note).toMatch(/without the JSON-RPC response to id 7/);
    }
  });

  it('keeps the HTTP contract for other statuses', () => {
    expect(jsonRpcOutcome(t, 1, 400, APP_JSON, rpc(1, { error: { code: -32600 } })).operationState).toBe(
      'failed',
    );
    expect(jsonRpcOutcome(t, 1, 503, APP_JSON, rpc(1, { result: {} })).operationState).toBe('unknown');
  });

  it('finds the response in a batch and in an event stream after notifications', () => {
    const batch = json([
      { jsonrpc: '2.0', id: 1, result: {} },
      { jsonrpc: '2.0', id: 2, error: { code: -1 } },
    ]);
    expect(jsonRpcOutcome(t, 2, 200, APP_JSON, batch).operationState).toBe('failed');
    const stream = new TextEncoder().encode(
      [
        ': keep-alive',
        'event: message',
        `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } })}`,
        '',
        'event: message',
        'id: 2',
        // A data field split over two lines is one value joined by a line feed.
        `data: {"jsonrpc":"2.0","id":3,`,
        `data: "result":{"structuredContent":{"url":"https://t/3"}}}`,
        '',
        '',
      ].join('\r\n'),
    );
    expect(jsonRpcOutcome(t, 3, 200, 'text/event-stream; charset=utf-8', stream)).toMatchObject({
      operationState: 'succeeded',
      destinationRef: 'https://t/3',
    });
  });

  it('does not take an event the stream ended in the middle of for the response', () => {
    const cut = new TextEncoder().encode(
      `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 3, result: {} })}`,
    );
    expect(jsonRpcOutcome(t, 3, 200, 'text/event-stream', cut).operationState).toBe('unknown');
  });

  it('calls input_required open: the tool did not run, the operation awaits its continuation', () => {
    const body = rpc(4, {
      result: { resultType: 'input_required', inputRequests: { who: {} }, requestState: 's1' },
    });
    expect(jsonRpcOutcome(t, 4, 200, APP_JSON, body)).toMatchObject({
      operationState: 'open',
      destinationRef: null,
    });
  });

  it('reads input_required only from resultType: a finished call is never taken for incomplete', () => {
    // A result that merely carries inputRequests (an early MRTR draft's only sign) is a result: taking
    // a finished call for an unfinished one would let its repeat run the tool again.
    const body = rpc(5, { result: { content: [], inputRequests: { who: {} } } });
    expect(jsonRpcOutcome(t, 5, 200, APP_JSON, body).operationState).toBe('succeeded');
  });
});

describe('JSON-RPC tools in policies', () => {
  it("never fingerprints the JSON-RPC id, params._meta or a continuation's inputs, on top of what the policy ignores", () => {
    const t = tool('    fingerprint: { ignore: [$.body.params.arguments.note] }');
    expect(t.fingerprintIgnore.map((p) => p.expression)).toEqual([
      '$.body.params.arguments.note',
      '$.body.id',
      '$.body.params._meta',
      '$.body.params.inputResponses',
      '$.body.params.requestState',
    ]);
  });

  it('accepts outcome.tool_error only on JSON-RPC tools, and only an outcome class', () => {
    expect(tool().outcome.toolError).toBe('failed');
    expect(() =>
      parsePolicyFiles([
        {
          file: 'http.yaml',
          text: 'version: 1\ntools:\n  - id: h\n    match: { hosts: [a.example], method: POST, path: /x }\n    effect: create\n    outcome: { tool_error: succeeded }\n',
        },
      ]),
    ).toThrow(
      /http\.yaml:6:\d+: tools\[0\]\.outcome\.tool_error: tool_error applies only to tools with verdict: \{ protocol: jsonrpc \}/,
    );
    expect(() => tool('    outcome: { tool_error: maybe }')).toThrow(
      /tool_error: expected one of succeeded, failed, unknown/,
    );
  });
});

describe('MCP routing headers', () => {
  const call = {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'create_ticket', arguments: {} },
  };
  const refused = (headers: Record<string, string | string[]>, body: unknown = call): string | null => {
    try {
      refuseDisagreeingMcpHeaders({ headers }, body);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  };

  it('lets agreeing headers, and their absence, through', () => {
    expect(refused({})).toBeNull();
    expect(refused({ 'mcp-method': 'tools/call', 'mcp-name': 'create_ticket' })).toBeNull();
    const read = { jsonrpc: '2.0', id: 2, method: 'resources/read', params: { uri: 'file:///a' } };
    expect(refused({ 'mcp-method': 'resources/read', 'mcp-name': 'file:///a' }, read)).toBeNull();
  });

  it('refuses a method or name the body does not have, and a header given twice', () => {
    expect(refused({ 'mcp-method': 'tools/list' })).toMatch(
      /Mcp-Method header says "tools\/list" but .* "tools\/call" at \$\.body\.method/,
    );
    expect(refused({ 'mcp-name': 'search' })).toMatch(
      /Mcp-Name header says "search" .* "create_ticket" at \$\.body\.params\.name/,
    );
    expect(refused({ 'mcp-method': ['tools/call', 'tools/call'] })).toMatch(/Mcp-Method/);
    expect(refused({ 'mcp-method': 'tools/call' }, 'not an object')).toMatch(/null at \$\.body\.method/);
  });
});
