/**
 * `egress` (docs/design.md §4.1) through the real proxy: destinations are checked on the resolved
 * address before connecting. Only loopback is ever connected to; 169.254.169.254 is refused
 * before any socket exists (the answer is the gate's 403, immediately, and counted).
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGate, type Gate } from '../../../src/engine/index.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';
import { createProxyServer, type ProxyServer } from '../../../src/proxy/index.js';
import { openStore, type Store } from '../../../src/store/index.js';
import { reply, startUpstream, type Upstream } from '../../helpers/upstream.js';
import { rawProxyRequest } from './harness.js';

let store: Store;
let upstream: Upstream;
const gates: Gate[] = [];
const proxies: ProxyServer[] = [];
let admin: Server;
let adminHits = 0;

beforeAll(async () => {
  upstream = await startUpstream(reply(201, { ok: true }));
  store = await openStore({ url: 'pglite:memory' });
  admin = createServer((_req, res) => {
    adminHits += 1;
    res.end('admin');
  });
  await new Promise<void>((resolve) => admin.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  for (const p of proxies) await p.close();
  for (const g of gates) await g.close();
  await store?.close();
  await upstream?.close();
  await new Promise((resolve) => admin?.close(resolve));
});

async function proxyWith(egress: string): Promise<{ proxy: ProxyServer; port: number }> {
  const policies = parsePolicyFiles([
    {
      file: 'egress.yaml',
      text: `version: 1\n${egress}\ntools:\n  - id: t.create\n    match: { hosts: [127.0.0.1], method: POST, path: /items }\n    effect: create\n    dedupe: { key: [$.body.title], window: 1h, wait: 0s }\n`,
    },
  ]);
  const gate = await createGate({ policies, store, scope: { tenant: 'acme', area: 'egress', agent: 'bot' } });
  gates.push(gate);
  const proxy = createProxyServer({ gate });
  proxies.push(proxy);
  const port = (await proxy.listen('127.0.0.1', 0)).port;
  proxy.setGateAddresses([admin.address() as AddressInfo]);
  return { proxy, port };
}

let runs = 0;
const post = (port: number, target: string, title: string) =>
  rawProxyRequest(
    port,
    target,
    { 'content-type': 'application/json', 'effectgate-run': `egress-${++runs}` },
    'POST',
    Buffer.from(JSON.stringify({ title })),
  );

function rawConnect(port: number, authority: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`),
    );
    let text = '';
    socket.on('data', (c: Buffer) => {
      text += c.toString();
      if (text.includes('\r\n\r\n')) socket.destroy();
    });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
    socket.setTimeout(2_000, () => socket.destroy());
  });
}

describe('default egress: deny [link_local, gate]', () => {
  let proxy: ProxyServer;
  let port: number;
  beforeAll(async () => {
    ({ proxy, port } = await proxyWith(''));
  });

  it('still reaches loopback upstreams, governed or not', async () => {
    expect((await rawProxyRequest(port, `http://127.0.0.1:${upstream.port}/x`, {})).status).toBe(201);
    expect((await rawProxyRequest(port, `http://localhost:${upstream.port}/x`, {})).status).toBe(201);
    expect((await post(port, `http://127.0.0.1:${upstream.port}/items`, 'default-ok')).status).toBe(201);
  });

  it('refuses the gate’s own admin listener and its own proxy port', async () => {
    const adminPort = (admin.address() as AddressInfo).port;
    const viaAdmin = await rawProxyRequest(port, `http://127.0.0.1:${adminPort}/metrics`, {});
    expect(viaAdmin.status).toBe(403);
    expect(JSON.parse(viaAdmin.body)).toMatchObject({ code: 'EG_ERR_DESTINATION_REFUSED' });
    expect((await rawProxyRequest(port, `http://localhost:${adminPort}/metrics`, {})).status).toBe(403);
    expect((await rawProxyRequest(port, `http://127.0.0.1:${port}/`, {})).status).toBe(403);
    expect(adminHits).toBe(0);
  });

  it('answers 169.254.169.254 with 403 before connecting', async () => {
    const before = proxy.counters().destinationsRefused;
    const started = performance.now();
    const res = await rawProxyRequest(port, 'http://169.254.169.254/latest/meta-data/', {});
    // A connect attempt would time out (or fail) instead of this immediate refusal.
    expect(performance.now() - started).toBeLessThan(500);
    expect(res.status).toBe(403);
    const body = JSON.parse(res.body) as { code: string; detail: string };
    expect(body.code).toBe('EG_ERR_DESTINATION_REFUSED');
    expect(body.detail).toMatch(/169\.254\.169\.254 is a link-local address/);
    expect(proxy.counters().destinationsRefused).toBe(before + 1);
    const mapped = await rawProxyRequest(port, 'http://[::ffff:169.254.169.254]/', {});
    expect(mapped.status).toBe(403);
  });

  it('answers a WebSocket upgrade to a denied address with 403 before connecting', async () => {
    const ws = {
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
    };
    const res = await rawProxyRequest(port, 'http://169.254.169.254/socket', ws);
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'EG_ERR_DESTINATION_REFUSED' });
  });

  it('answers a CONNECT to a denied address with 403 before the 200', async () => {
    const text = await rawConnect(port, '169.254.169.254:443');
    expect(text).toMatch(/^HTTP\/1\.1 403/);
    expect(text).not.toMatch(/200 Connection Established/);
  });
});

describe('deny: [loopback]', () => {
  it('refuses a loopback upstream, ungoverned (403) and governed (403, not_sent)', async () => {
    const { port, proxy } = await proxyWith('egress: { deny: [loopback] }');
    const seen = upstream.requests.length;
    const plain = await rawProxyRequest(port, `http://127.0.0.1:${upstream.port}/x`, {});
    expect(plain.status).toBe(403);
    expect((await rawProxyRequest(port, `http://localhost:${upstream.port}/x`, {})).status).toBe(403);
    const governed = await post(port, `http://127.0.0.1:${upstream.port}/items`, 'loopback-denied');
    expect(governed.status).toBe(403);
    expect(JSON.parse(governed.body)).toMatchObject({
      code: 'EG_ERR_DESTINATION_REFUSED',
      dispatch_state: 'not_sent',
      operation_state: 'failed',
    });
    expect(upstream.requests.length).toBe(seen);
    expect(proxy.counters().destinationsRefused).toBeGreaterThanOrEqual(3);
    // CONNECT to a name resolving to loopback: refused in the socket's lookup.
    expect(await rawConnect(port, `localhost:443`)).toMatch(/^HTTP\/1\.1 403/);
    // A WebSocket upgrade to a name resolving to loopback: refused in the upgrade's own lookup, so
    // it never connects (the client is cut rather than answered 403 on this path: http-proxy-3
    // makes that connection).
    const ws = {
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
    };
    const connections = upstream.connections();
    const upgraded = await rawProxyRequest(port, `http://localhost:${upstream.port}/socket`, ws).then(
      (r) => r.status,
      () => 'cut',
    );
    expect([403, 'cut']).toContain(upgraded);
    expect(upstream.connections()).toBe(connections);
  });

  it('allow: [127.0.0.1/32] exempts it', async () => {
    const { port } = await proxyWith('egress: { deny: [loopback], allow: [127.0.0.1/32] }');
    expect((await rawProxyRequest(port, `http://127.0.0.1:${upstream.port}/x`, {})).status).toBe(201);
    expect((await post(port, `http://127.0.0.1:${upstream.port}/items`, 'loopback-allowed')).status).toBe(
      201,
    );
  });
});
