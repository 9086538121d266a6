import { describe, expect, it } from 'vitest';
import { EffectgateError } from '../../../src/errors.js';
import {
  annotationWarnings,
  Classifier,
  MCP_DEFAULT_HINTS,
  mcpEndpoint,
  type PolicySet,
  parsePolicyFiles,
  parseToolsList,
  type ToolsList,
  toolsCallBody,
} from '../../../src/policy/index.js';
import { lines } from './policy-test-helpers.js';

/** A policy tool on mcp.example.com POST /mcp; `extra` lines go at tool-field level. */
function mcpTool(id: string, body: Record<string, string>, ...extra: string[]): string[] {
  const conditions = Object.entries(body).map(([k, v]) => `        "${k}": ${v}`);
  return [
    `  - id: ${id}`,
    '    match:',
    '      hosts: [mcp.example.com]',
    '      method: POST',
    '      path: /mcp',
    ...(conditions.length > 0 ? ['      body:', ...conditions] : []),
    '    effect: create',
    '    verdict: { protocol: jsonrpc }',
    ...extra,
  ];
}

const CREATE_WITH_DEDUPE = mcpTool(
  'mcp.create_ticket',
  { '$.method': 'tools/call', '$.params.name': 'create_ticket' },
  '    dedupe: { key: [$.body.params.arguments.subject], window: 1h }',
);
const CLOSE_NO_DEDUPE = mcpTool('mcp.close_ticket', {
  '$.method': 'tools/call',
  '$.params.name': 'close_ticket',
});

function policies(...tools: string[][]): { file: string; text: string } {
  return { file: 'mcp.yaml', text: lines('version: 1', 'tools:', ...tools.flat()) };
}

function list(...tools: unknown[]): ToolsList {
  return parseToolsList(JSON.stringify({ tools }), 'tools.json');
}

const writes = (name: string, extra: Record<string, unknown> = {}): unknown => ({
  name,
  inputSchema: { type: 'object', properties: { note: {}, ticket_id: {} }, required: ['ticket_id'] },
  annotations: { readOnlyHint: false, destructiveHint: false },
  ...extra,
});

function report(set: PolicySet, tools: ToolsList) {
  return annotationWarnings(set, tools, mcpEndpoint(set, undefined, '/mcp'));
}

/** What the gate's classifier makes of a tools/call of `name` under `set`. */
function classify(set: PolicySet, name: string): string | null {
  const c = new Classifier(set);
  const candidates = c.candidates({ host: 'mcp.example.com', port: 443, method: 'POST', path: '/mcp' });
  return c.select(candidates, toolsCallBody(name))?.tool.id ?? null;
}

function configMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(EffectgateError);
    expect((err as EffectgateError).code).toBe('EG_ERR_CONFIG_INVALID');
    return (err as Error).message;
  }
  throw new Error('expected EG_ERR_CONFIG_INVALID');
}

describe('parseToolsList', () => {
  it('reads a bare tools/list result and a JSON-RPC response alike', () => {
    const tools = [writes('create_ticket'), { name: 'ping' }];
    const bare = parseToolsList(JSON.stringify({ tools }), 'a.json');
    const response = parseToolsList(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools } }), 'b.json');
    expect(response).toEqual(bare);
    expect(bare.tools.map((t) => t.name)).toEqual(['create_ticket', 'ping']);
    expect(bare.tools[0]!.required).toEqual(['ticket_id']);
    expect(bare.tools[0]!.properties).toEqual(['note', 'ticket_id']);
    expect(bare.nextCursor).toBeNull();
    expect(parseToolsList('{"tools":[],"nextCursor":"p2"}', 'c.json').nextCursor).toBe('p2');
  });

  it('takes the MCP spec defaults for absent (or non-boolean) hints and says which were given', () => {
    const [none, partial] = list(
      { name: 'none' },
      { name: 'partial', annotations: { destructiveHint: false, readOnlyHint: 'yes', title: 'Partial' } },
    ).tools;
    expect(none!.hints).toEqual({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: false,
      openWorldHint: true,
    });
    expect(none!.hints).toEqual(MCP_DEFAULT_HINTS);
    expect(none!.givenHints).toEqual([]);
    expect(partial!.hints).toEqual({ ...MCP_DEFAULT_HINTS, destructiveHint: false });
    expect(partial!.givenHints).toEqual(['destructiveHint']);
    expect(partial!.title).toBe('Partial');
  });

  it('refuses what is not a tools/list document, naming the source', () => {
    expect(configMessage(() => parseToolsList('{', 'x.json'))).toMatch(/^x\.json: not JSON/);
    expect(configMessage(() => parseToolsList('[]', 'x.json'))).toMatch(/^x\.json: expected a JSON object/);
    expect(configMessage(() => parseToolsList('{"result":{}}', 'x.json'))).toMatch(
      /^x\.json: expected a tools\/list/,
    );
    expect(
      configMessage(() =>
        parseToolsList('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}', 'x.json'),
      ),
    ).toMatch(/^x\.json: is a JSON-RPC error response \(code -32601/);
    expect(configMessage(() => list({ name: '' }))).toMatch(/^tools\.json: tools\[0\]\.name/);
    expect(configMessage(() => list({ name: 'a' }, { name: 'a' }))).toMatch(
      /tools\[1\]\.name "a" repeats tools\[0\]/,
    );
  });
});

describe('mcpEndpoint', () => {
  it('defaults to the one host the jsonrpc tools name, and needs --mcp-host otherwise', () => {
    const one = parsePolicyFiles([policies(CREATE_WITH_DEDUPE)]);
    expect(mcpEndpoint(one, undefined, '/mcp')).toEqual({
      host: 'mcp.example.com',
      port: 443,
      hostText: 'mcp.example.com',
      path: '/mcp',
    });
    expect(mcpEndpoint(one, 'MCP.Example.com:8443', '/rpc')).toMatchObject({
      host: 'mcp.example.com',
      port: 8443,
    });
    const other = mcpTool('other.create', { '$.method': 'tools/call' }).map((l) =>
      l.replace('mcp.example.com', 'tools.example.org'),
    );
    const two = parsePolicyFiles([policies(CREATE_WITH_DEDUPE, other)]);
    expect(configMessage(() => mcpEndpoint(two, undefined, '/mcp'))).toMatch(
      /--mcp-host is required: .*several hosts: mcp\.example\.com, tools\.example\.org/,
    );
    const none = parsePolicyFiles([{ file: 'p.yaml', text: lines('version: 1', 'tools: []') }]);
    expect(configMessage(() => mcpEndpoint(none, undefined, '/mcp'))).toMatch(/--mcp-host is required/);
    expect(configMessage(() => mcpEndpoint(one, '*.example.com', '/mcp'))).toMatch(/not a pattern/);
    expect(configMessage(() => mcpEndpoint(one, undefined, 'mcp'))).toMatch(/--mcp-path/);
  });
});

describe('annotationWarnings', () => {
  const set = parsePolicyFiles([policies(CREATE_WITH_DEDUPE, CLOSE_NO_DEDUPE)]);

  it('warns about unclassified and no-dedupe tools, not about classified-with-dedupe or read-only ones', () => {
    const r = report(
      set,
      list(writes('create_ticket'), writes('close_ticket'), writes('delete_ticket'), {
        name: 'list_tickets',
        annotations: { readOnlyHint: true },
      }),
    );
    expect(r.readOnly).toEqual(['list_tickets']);
    expect(r.checked).toEqual(['create_ticket', 'close_ticket', 'delete_ticket']);
    expect(r.warnings.map((w) => [w.tool, w.reason, w.classifiedBy?.id ?? null])).toEqual([
      ['close_ticket', 'no_dedupe', 'mcp.close_ticket'],
      ['delete_ticket', 'unclassified', null],
    ]);
    expect(r.warnings[1]!.annotations).toEqual({ ...MCP_DEFAULT_HINTS, destructiveHint: false, title: null });
  });

  it('treats a tool without annotations as one that may destroy', () => {
    const [w] = report(set, list({ name: 'purge', inputSchema: { properties: { scope: {} } } })).warnings;
    expect(w!.reason).toBe('unclassified');
    expect(w!.annotations).toMatchObject(MCP_DEFAULT_HINTS);
    expect(w!.suggestion).toContain('effect: destroy');
    expect(w!.suggestion).toContain('key: [$.body.params.arguments.scope]');
    expect(w!.suggestion).toMatch(/readOnlyHint false \(default\), destructiveHint true \(default\)/);
  });

  it('suggests a classification that parses back and classifies the same call, with its key', () => {
    const r = report(set, list(writes('delete_ticket', { annotations: { destructiveHint: true } })));
    const suggestion = r.warnings[0]!.suggestion;
    expect(suggestion).toMatch(/untrusted hints/);
    expect(suggestion).toMatch(/review the dedupe key and window/);
    const withIt = parsePolicyFiles([
      policies(CREATE_WITH_DEDUPE, CLOSE_NO_DEDUPE),
      { file: 'suggested.yaml', text: `version: 1\ntools:\n${suggestion}` },
    ]);
    const tool = withIt.tools.find((t) => t.id === 'mcp.delete_ticket')!;
    expect(tool.effect).toBe('destroy');
    expect(tool.verdict.protocol).toBe('jsonrpc');
    expect(tool.dedupe!.key.map((k) => k.expression)).toEqual(['$.body.params.arguments.ticket_id']);
    expect(tool.dedupe!.windowMs).toBe(3_600_000);
    expect(classify(withIt, 'delete_ticket')).toBe('mcp.delete_ticket');
    expect(report(withIt, list(writes('delete_ticket'))).warnings).toEqual([]);
  });

  it('keeps an awkward server-chosen name exact in YAML and out of comments', () => {
    const name = 'weird: name #1\n\u202e"x".y';
    const r = report(set, list({ name, inputSchema: { properties: { 'a.b': {} } }, annotations: {} }));
    const suggestion = r.warnings[0]!.suggestion;
    expect(suggestion).not.toMatch(/[\u202e]/);
    const withIt = parsePolicyFiles([
      policies(CREATE_WITH_DEDUPE),
      { file: 'suggested.yaml', text: `version: 1\ntools:\n${suggestion}` },
    ]);
    const tool = withIt.tools.find((t) => t.id.startsWith('mcp.weird'))!;
    expect(tool.id).toMatch(/^mcp\.[A-Za-z0-9_.:-]+$/);
    expect(tool.dedupe!.key.map((k) => k.expression)).toEqual(["$.body.params.arguments['a.b']"]);
    expect(classify(withIt, name)).toBe(tool.id);
  });

  it('suggests a dedupe block for the tool that singles out the call but has none', () => {
    const [w] = report(set, list(writes('close_ticket'))).warnings;
    expect(w!.suggestion).toMatch(/^ {4}# Add to tool mcp\.close_ticket \(mcp\.yaml:\d+\)/);
    // CLOSE_NO_DEDUPE is the last tool: the block pasted under it belongs to it.
    const fixed = parsePolicyFiles([
      {
        file: 'mcp.yaml',
        text: lines('version: 1', 'tools:', ...CREATE_WITH_DEDUPE, ...CLOSE_NO_DEDUPE) + w!.suggestion,
      },
    ]);
    expect(
      fixed.tools.find((t) => t.id === 'mcp.close_ticket')!.dedupe!.key.map((k) => k.expression),
    ).toEqual(['$.body.params.arguments.ticket_id']);
    expect(report(fixed, list(writes('close_ticket'))).warnings).toEqual([]);
  });

  it('suggests a tool of its own when a catch-all classifies the call', () => {
    const catchAll = mcpTool('mcp.other', {});
    const generic = parsePolicyFiles([policies(catchAll)]);
    const [w] = report(generic, list(writes('create_ticket'))).warnings;
    expect(w).toMatchObject({ reason: 'no_dedupe', classifiedBy: { id: 'mcp.other' } });
    expect(w!.suggestion).toContain('- id: mcp.create_ticket');
    const withIt = parsePolicyFiles([
      policies(catchAll),
      { file: 's.yaml', text: `version: 1\ntools:\n${w!.suggestion}` },
    ]);
    expect(classify(withIt, 'create_ticket')).toBe('mcp.create_ticket');
  });

  it('asks for the suggestion to come first when a body-conditioned tool classifies every call', () => {
    const anyCall = mcpTool('mcp.any_call', { '$.method': 'tools/call' });
    const generic = parsePolicyFiles([policies(anyCall)]);
    const [w] = report(generic, list(writes('create_ticket'))).warnings;
    expect(w!.suggestion).toMatch(/# Declare it before mcp\.any_call \(mcp\.yaml:3\)/);
    const suggested = { file: 'a-first.yaml', text: `version: 1\ntools:\n${w!.suggestion}` };
    expect(classify(parsePolicyFiles([suggested, policies(anyCall)]), 'create_ticket')).toBe(
      'mcp.create_ticket',
    );
  });

  it('picks a free id and falls back to the whole arguments object', () => {
    const taken = parsePolicyFiles([
      policies(
        mcpTool(
          'mcp.ping',
          { '$.method': 'tools/call', '$.params.name': 'pong' },
          '    dedupe: { key: [$], window: 1h }',
        ),
      ),
    ]);
    const [w] = report(taken, list({ name: 'ping' })).warnings;
    expect(w!.suggestion).toContain('- id: mcp.ping_2');
    expect(w!.suggestion).toContain('key: [$.body.params.arguments]');
    const withIt = parsePolicyFiles([
      { file: 'mcp.yaml', text: lines('version: 1', 'tools:') + w!.suggestion },
    ]);
    expect(classify(withIt, 'ping')).toBe('mcp.ping_2');
  });
});
