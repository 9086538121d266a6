/**
 * Agent credentials → scope (docs/design.md §4.2): with an agents file, every absolute-form request,
 * CONNECT and upgrade must carry `Proxy-Authorization`; the head's scope is the credential's, a
 * tunnel's requests inherit the CONNECT's, and no request header changes it.
 */
import { ProxyAgent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { loadAgentsFile } from '../../../src/config/index.js';
import { reply } from '../../helpers/upstream.js';
import {
  defer,
  hasFullResponse,
  rawConnect,
  rawProxyRequest,
  responseBody,
  startProxy,
  upstream,
  useCleanup,
  viaProxy,
} from './harness.js';

useCleanup();

const AGENTS = await loadAgentsFile(new URL('../../fixtures/agents/agents.yaml', import.meta.url).pathname);
const TRIAGE = { tenant: 'acme', area: 'support', agent: 'triage-bot' };
const BILLING = { tenant: 'globex', area: 'billing', agent: 'billing-bot' };
const basic = (id: string, secret: string): string =>
  `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

async function setup(govern = false) {
  const up = await upstream(reply(201, { ok: true }));
  const host = `127.0.0.1:${up.port}`;
  const proxy = await startProxy(govern ? { govern: [host] } : {}, {
    agents: AGENTS,
    allowConnectPorts: [up.port],
  });
  const withCreds = (id: string, secret: string): string => `http://${id}:${secret}@127.0.0.1:${proxy.port}`;
  return { up, proxy, withCreds };
}

function expect407(status: number, headers: Record<string, unknown>, body: string): void {
  expect(status).toBe(407);
  expect(headers['proxy-authenticate']).toBe('Basic realm="effectgate"');
  expect(headers['content-type']).toMatch(/problem\+json/);
  expect(JSON.parse(body).type).toContain('proxy_auth_required');
}

describe('proxy authentication with an agents file', () => {
  it('answers 407 with Proxy-Authenticate to an absolute-form request without credentials', async () => {
    const { up, proxy } = await setup();
    // undici turns the proxy's 407 into an error, even for absolute-form requests.
    await expect(request(`${up.url}/x`, { dispatcher: viaProxy(proxy.url) })).rejects.toThrow(/\(407\)/);
    const res = await rawProxyRequest(proxy.port, `${up.url}/x`, {});
    expect407(res.status, res.headers, res.body);
    expect(proxy.gate.routed).toHaveLength(0);
    expect(up.requests).toHaveLength(0);
  });

  it.each([
    ['a wrong secret', basic('triage-bot', 'billing-secret-2')],
    ['an unknown id', basic('nobody', 'triage-secret-1')],
    ['no colon', `Basic ${Buffer.from('triage-bot').toString('base64')}`],
    ['a wrong Bearer', 'Bearer triage-bot'],
    ['an unknown scheme', 'Digest triage-secret-1'],
    ['no scheme', 'triage-secret-1'],
  ])('answers 407 to %s', async (_what, credential) => {
    const { up, proxy } = await setup();
    const res = await rawProxyRequest(proxy.port, `${up.url}/x`, { 'proxy-authorization': credential });
    expect407(res.status, res.headers, res.body);
    expect(up.requests).toHaveLength(0);
  });

  it('takes the scope from Basic credentials in the proxy URL and never forwards them', async () => {
    const { up, proxy, withCreds } = await setup(true);
    const res = await request(`${up.url}/repos/a/b/issues`, {
      dispatcher: viaProxy(withCreds('triage-bot', 'triage-secret-1')),
      method: 'POST',
      // Headers cannot choose a scope.
      headers: { 'effectgate-tenant': 'evil', 'effectgate-scope': 'evil', scope: 'evil' },
      body: '{}',
    });
    expect(res.statusCode).toBe(201);
    await res.body.text();
    expect(proxy.gate.handled[0]?.scope).toEqual(TRIAGE);
    expect(up.requests[0]?.headers['proxy-authorization']).toBeUndefined();
  });

  it('takes the scope from a Bearer secret', async () => {
    const { up, proxy } = await setup();
    const res = await request(`${up.url}/x`, { dispatcher: viaProxy(proxy.url, 'Bearer billing-secret-2') });
    expect(res.statusCode).toBe(201);
    await res.body.text();
    expect(proxy.gate.routed[0]?.scope).toEqual(BILLING);
    expect(up.requests[0]?.headers['proxy-authorization']).toBeUndefined();
  });

  it('authenticates every request of a keep-alive connection on its own', async () => {
    const { up, proxy } = await setup();
    const ok = await rawProxyRequest(proxy.port, `${up.url}/a`, {
      'proxy-authorization': basic('billing-bot', 'billing-secret-2'),
    });
    expect(ok.status).toBe(201);
    const refused = await rawProxyRequest(proxy.port, `${up.url}/b`, {});
    expect(refused.status).toBe(407);
    expect(up.requests).toHaveLength(1);
  });

  it('answers 407 to a CONNECT without credentials, on the raw socket', async () => {
    const { up, proxy } = await setup();
    const client = await rawConnect(proxy.port);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
    const text = await client.until(hasFullResponse);
    expect(text).toMatch(/^HTTP\/1\.1 407 /);
    expect(text).toMatch(/\r\nproxy-authenticate: Basic realm="effectgate"\r\n/i);
    expect(JSON.parse(responseBody(text)).type).toContain('proxy_auth_required');
    await client.waitClosed();
    expect(up.connections()).toBe(0);
  });

  it('gives requests inside an authenticated tunnel the CONNECT scope, whatever they carry', async () => {
    const { up, proxy } = await setup(true);
    const client = await rawConnect(proxy.port);
    client.write(
      `CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nProxy-Authorization: ${basic('triage-bot', 'triage-secret-1')}\r\n\r\n`,
    );
    await client.until((t) => t.includes('\r\n\r\n'));
    expect(client.text).toMatch(/^HTTP\/1\.1 200 /);
    // Another agent's credential inside the tunnel changes nothing (and is never forwarded).
    client.write(
      `POST /repos/a/b/issues HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nProxy-Authorization: Bearer billing-secret-2\r\nContent-Length: 2\r\n\r\n{}`,
    );
    await client.until((t) => /HTTP\/1\.1 201 /.test(t));
    expect(proxy.gate.handled[0]?.scope).toEqual(TRIAGE);
    expect(up.requests[0]?.headers['proxy-authorization']).toBeUndefined();
  });

  it('works with undici tunnelling through the proxy URL credentials', async () => {
    const { up, proxy, withCreds } = await setup(true);
    const agent = new ProxyAgent(withCreds('billing-bot', 'billing-secret-2'));
    defer(() => agent.close());
    const res = await request(`${up.url}/repos/a/b/issues`, {
      dispatcher: agent,
      method: 'POST',
      body: '{}',
    });
    expect(res.statusCode).toBe(201);
    await res.body.text();
    expect(proxy.gate.handled[0]?.scope).toEqual(BILLING);
    const refused = new ProxyAgent(proxy.url);
    defer(() => refused.close());
    await expect(request(`${up.url}/x`, { dispatcher: refused })).rejects.toThrow(/407/);
  });

  it('answers 407 to an upgrade without credentials', async () => {
    const { up, proxy } = await setup();
    const client = await rawConnect(proxy.port);
    client.write(
      `GET ${up.url}/ws HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
    );
    const text = await client.until(hasFullResponse);
    expect(text).toMatch(/^HTTP\/1\.1 407 /);
    expect(text).toMatch(/\r\nproxy-authenticate: Basic realm="effectgate"\r\n/i);
    expect(up.requests).toHaveLength(0);
  });
});

describe('sidecar mode (no agents file)', () => {
  it('sets no per-request scope and ignores Proxy-Authorization', async () => {
    const up = await upstream(reply(200));
    const proxy = await startProxy();
    const res = await rawProxyRequest(proxy.port, `${up.url}/x`, {
      'proxy-authorization': 'Bearer whatever',
    });
    expect(res.status).toBe(200);
    expect(proxy.gate.routed[0]?.scope).toBeUndefined();
    expect(up.requests[0]?.headers['proxy-authorization']).toBeUndefined();
  });
});
