/**
 * A tool chosen by its body (`match.body`, an MCP `tools/call`) is never skipped because the gate
 * cannot read the body: a compressed, UTF-16, NaN-bearing or not-UTF-8 body, or
 * a JSON-RPC batch, that a destination could still read is refused 415 EG_ERR_BODY_UNREADABLE, and
 * one that matches only with member names read without letter case 422, instead of being relayed
 * unclassified, so the same call is never performed twice.
 */
import { gzipSync } from 'node:zlib';
import { ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';

const policies = parsePolicyFiles([
  {
    file: 'attack.yaml',
    text: `
version: 1
tools:
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

let store: Store;
let upstream: Upstream;
let gate: Gate;
let proxy: ProxyServer;
let agent: ProxyAgent;
let n = 0;

beforeAll(async () => {
  store = await openStore({ url: 'pglite:memory' });
  upstream = await startUpstream(reply(200, { jsonrpc: '2.0', id: 1, result: { content: [] } }));
  gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'mcp', agent: 'bot' } });
  proxy = createProxyServer({ gate });
  const addr = await proxy.listen('127.0.0.1', 0);
  agent = new ProxyAgent({ uri: `http://127.0.0.1:${addr.port}`, proxyTunnel: false });
});
afterAll(async () => {
  await agent?.close();
  await proxy?.close();
  await gate?.close();
  await upstream?.close();
  await store?.close();
});

const call = (subject: string): Record<string, unknown> => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'create_ticket', arguments: { subject } },
});

async function post(
  body: string | Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; sent: number; verdict: unknown }> {
  const before = upstream.requests.length;
  const res = await request(`${upstream.url}/mcp`, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json', 'effectgate-run': `r${++n}`, ...headers },
    body,
  });
  await res.body.text();
  return {
    status: res.statusCode,
    sent: upstream.requests.length - before,
    verdict: res.headers['effectgate-verdict'],
  };
}

/** First the plain call (governed), then `spelled` of the same call: the second must not go out. */
async function secondSpelling(
  subject: string,
  spelled: (c: Record<string, unknown>) => [Buffer | string, Record<string, string>?],
) {
  const first = await post(JSON.stringify(call(subject)));
  expect(first.sent).toBe(1);
  // Control: the plain repeat is governed (nothing sent).
  const plain = await post(JSON.stringify(call(subject)));
  expect(plain.sent).toBe(0);
  const [body, headers] = spelled(call(subject));
  return post(body, headers);
}

describe('body-condition tools walked past by a body the gate cannot read', () => {
  it('Content-Encoding: gzip (Express body-parser inflates by default)', async () => {
    const r = await secondSpelling('gzip', (c) => [
      gzipSync(JSON.stringify(c)),
      { 'content-encoding': 'gzip' },
    ]);
    expect(r.sent).toBe(0);
  });

  it('UTF-16LE JSON (body-parser honours charset=utf-16le; Flask json.loads auto-detects UTF-16)', async () => {
    const r = await secondSpelling('utf16', (c) => [
      Buffer.from(JSON.stringify(c), 'utf16le'),
      { 'content-type': 'application/json; charset=utf-16le' },
    ]);
    expect(r.sent).toBe(0);
  });

  it('NaN in an unrelated member (Python json / Flask accept it; JSON.parse does not)', async () => {
    const r = await secondSpelling('nan', (c) => [
      JSON.stringify(c).replace('"jsonrpc"', '"x":NaN,"jsonrpc"'),
    ]);
    expect(r.sent).toBe(0);
  });

  it('invalid UTF-8 byte in an unrelated string (Go encoding/json reads it as U+FFFD)', async () => {
    const r = await secondSpelling('badutf8', (c) => {
      const text = JSON.stringify({ pad: 'X', ...c });
      const buf = Buffer.from(text);
      buf[buf.indexOf('X')] = 0xff;
      return [buf];
    });
    expect(r.sent).toBe(0);
  });

  it('"Name" instead of "name" (Go encoding/json matches member names case-insensitively)', async () => {
    const r = await secondSpelling('gocase', (c) => [
      JSON.stringify(c).replace('"name":"create_ticket"', '"Name":"create_ticket"'),
    ]);
    expect(r.sent).toBe(0);
  });

  it('a JSON-RPC batch of one (JSON-RPC 2.0 §6; MCP 2025-03-26 transports accept batches)', async () => {
    const r = await secondSpelling('batch', (c) => [JSON.stringify([c])]);
    expect(r.sent).toBe(0);
  });
});
