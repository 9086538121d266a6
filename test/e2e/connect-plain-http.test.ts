/**
 * CONNECT through the real `effectgate proxy` binary on an embedded store: plain HTTP inside a
 * tunnel (undici's default for `http://` URLs) is governed exactly like absolute-form requests, on
 * the port a tool names with no `--allow-connect-ports`,
 * TLS inside a tunnel to a host no tool names is relayed untouched (to a governed one, which this
 * proxy has no CA to read, refused), and `default: block` refuses tunnels to hosts no tool names
 * before anything reaches them.
 */
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { type Dispatcher, EnvHttpProxyAgent, ProxyAgent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProxyProcess, startProxyProcess } from '../helpers/proxy-process.js';
import {
  type RecordedRequest,
  reply,
  selfSignedCert,
  startUpstream,
  type Upstream,
} from '../helpers/upstream.js';

const POLICIES = new URL('../fixtures/e2e-policies/', import.meta.url).pathname;
const BLOCK_POLICIES = new URL('../fixtures/e2e-policies-block/', import.meta.url).pathname;

interface Sent {
  readonly status: number;
  readonly verdict: unknown;
  readonly json: Record<string, unknown>;
}

async function createIssue(base: string, dispatcher: Dispatcher, title: string): Promise<Sent> {
  const res = await request(`${base}/repos/acme/api/issues`, {
    method: 'POST',
    dispatcher,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ title }),
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    verdict: res.headers['effectgate-verdict'],
    json: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}

/** Opens a raw CONNECT tunnel and resolves once the proxy said 200. */
async function openTunnel(proxyPort: number, authority: string): Promise<Socket> {
  const socket = netConnect(proxyPort, '127.0.0.1');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  const [first] = (await once(socket, 'data')) as [Buffer];
  expect(first.toString()).toBe('HTTP/1.1 200 Connection Established\r\n\r\n');
  return socket;
}

/** Collects what `socket` receives; `until()` resolves with it once `done` holds or it closes. */
function collect(socket: Socket): {
  until: (done: (text: string) => boolean) => Promise<string>;
  clear: () => void;
} {
  let text = '';
  let wake = (): void => {};
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    wake();
  });
  socket.on('close', () => wake());
  socket.on('error', () => {});
  return {
    clear: () => {
      text = '';
    },
    until: (done) =>
      new Promise<string>((resolve) => {
        wake = () => {
          if (done(text) || socket.destroyed) resolve(text);
        };
        wake();
      }),
  };
}

describe('CONNECT through the proxy binary (pglite)', () => {
  let upstream: Upstream;
  let proxy: ProxyProcess;
  let dir: string;
  const agents: Dispatcher[] = [];

  beforeAll(async () => {
    upstream = await startUpstream(reply(201, { html_url: 'https://issues.example.test/1' }));
    dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-connect-'));
    proxy = await startProxyProcess(['--policies', POLICIES, '--store', `pglite:${join(dir, 'store')}`]);
  });

  afterAll(async () => {
    for (const a of agents) await a.close();
    await proxy?.stop();
    await upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const issuesTitled = (title: string): RecordedRequest[] =>
    upstream.requests.filter((r) => r.body.toString().includes(`"${title}"`));

  it('undici ProxyAgent with its default (tunnelling) settings is governed: allow, then duplicate', async () => {
    const agent = new ProxyAgent(proxy.url);
    agents.push(agent);
    const first = await createIssue(upstream.url, agent, 'Tunnelled via ProxyAgent');
    expect(first.status).toBe(201);
    expect(first.verdict).toBe('allow');
    const second = await createIssue(upstream.url, agent, 'Tunnelled via ProxyAgent');
    expect(second.status).toBe(409);
    expect(second.verdict).toBe('duplicate');
    expect(second.json).toMatchObject({ verdict: 'duplicate', tool: 'test.create_issue' });
    expect(issuesTitled('Tunnelled via ProxyAgent')).toHaveLength(1);
    expect(issuesTitled('Tunnelled via ProxyAgent')[0]!.headers['idempotency-key']).toBeDefined();
  });

  it('EnvHttpProxyAgent (HTTP_PROXY given through its options) is governed the same way', async () => {
    const agent = new EnvHttpProxyAgent({ httpProxy: proxy.url, httpsProxy: proxy.url, noProxy: '' });
    agents.push(agent);
    const first = await createIssue(upstream.url, agent, 'Tunnelled via EnvHttpProxyAgent');
    expect(first).toMatchObject({ status: 201, verdict: 'allow' });
    const second = await createIssue(upstream.url, agent, 'Tunnelled via EnvHttpProxyAgent');
    expect(second).toMatchObject({ status: 409, verdict: 'duplicate' });
    expect(issuesTitled('Tunnelled via EnvHttpProxyAgent')).toHaveLength(1);
  });

  it('keeps one tunnel alive across two governed requests', async () => {
    const authority = `127.0.0.1:${upstream.port}`;
    const socket = await openTunnel(proxy.port, authority);
    const received = collect(socket);
    try {
      const body = JSON.stringify({ title: 'Two in one tunnel' });
      const post = `POST /repos/acme/api/issues HTTP/1.1\r\nHost: ${authority}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      socket.write(post);
      const first = await received.until((t) => t.includes('\r\n\r\n') && t.endsWith('}'));
      expect(first).toMatch(/^HTTP\/1\.1 201 /);
      expect(first).toMatch(/\r\nconnection: keep-alive\r\n/i);
      received.clear();
      socket.write(post);
      const second = await received.until((t) => t.includes('\r\n\r\n') && t.endsWith('}'));
      expect(second).toMatch(/^HTTP\/1\.1 409 /);
      expect(second).toMatch(/\r\neffectgate-verdict: duplicate\r\n/i);
      expect(issuesTitled('Two in one tunnel')).toHaveLength(1);
    } finally {
      socket.destroy();
    }
  });

  it('relays TLS to a host no tool names byte for byte, and refuses TLS to a governed one it cannot read', async () => {
    const cert = selfSignedCert();
    const secure = await startUpstream(reply(200, { secure: true }), { tls: cert });
    // 127.0.0.2: an address no tool names (localhost is 127.0.0.1 to the gate, which tools name).
    const elsewhere = await startUpstream(reply(200, { secure: true }), { tls: cert, host: '127.0.0.2' });
    const tlsProxy = await startProxyProcess([
      '--policies',
      POLICIES,
      '--store',
      `pglite:${join(dir, 'store-tls')}`,
      // Only the port no tool names: 127.0.0.1 is governed on any port.
      '--allow-connect-ports',
      String(elsewhere.port),
      '--admin',
      '127.0.0.1:0',
    ]);
    try {
      // 127.0.0.1 is governed, and this proxy has no CA to read TLS to it: refused, TLS alert.
      const governed = await openTunnel(tlsProxy.port, `127.0.0.1:${secure.port}`);
      const refused = tlsConnect({ socket: governed, servername: 'localhost', ca: cert.cert });
      const [err] = (await once(refused, 'error')) as [Error];
      expect(err.message).toMatch(/access denied/i);
      // Counted where an operator looks: the admin server's /metrics.
      const metrics = await (await fetch(`${tlsProxy.adminUrl}/metrics`)).text();
      expect(metrics).toContain('effectgate_proxy_events_total{event="tunnels_refused_sni_ungovernable"} 1');
      // 127.0.0.2 is an address no tool names: relayed, byte for byte.
      const raw = await openTunnel(tlsProxy.port, `127.0.0.2:${elsewhere.port}`);
      // No SNI (an IP literal): a name in it would be routed too, and localhost is 127.0.0.1.
      const tls = tlsConnect({ socket: raw, host: '127.0.0.2', ca: cert.cert });
      await once(tls, 'secureConnect');
      expect(tls.getPeerCertificate().fingerprint256).toBe(new X509Certificate(cert.cert).fingerprint256);
      tls.end('GET /secure HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      let text = '';
      for await (const chunk of tls) text += String(chunk);
      expect(text).toMatch(/^HTTP\/1\.1 200 /);
      expect(text).toContain('{"secure":true}');
      expect(elsewhere.requests.map((r) => r.url)).toEqual(['/secure']);
    } finally {
      await tlsProxy.stop();
      await secure.close();
      await elsewhere.close();
    }
  });
});

describe('CONNECT with default: block (proxy binary, pglite)', () => {
  it('refuses a tunnel to a host no tool names, before any byte reaches it', async () => {
    // 127.0.0.2: an address no tool names (localhost would be 127.0.0.1, which a tool names).
    const target = await startUpstream(reply(), { host: '127.0.0.2' });
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-connect-block-'));
    const proxy = await startProxyProcess([
      '--policies',
      BLOCK_POLICIES,
      '--store',
      `pglite:${join(dir, 'store')}`,
    ]);
    const socket = netConnect(proxy.port, '127.0.0.1');
    try {
      socket.write(`CONNECT 127.0.0.2:${target.port} HTTP/1.1\r\nHost: 127.0.0.2:${target.port}\r\n\r\n`);
      const text = await collect(socket).until(() => false);
      expect(text).toMatch(/^HTTP\/1\.1 403 [^\r]+\r\n/);
      expect(text).toMatch(/\r\ncontent-type: application\/problem\+json/i);
      const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
      expect(body).toMatchObject({ status: 403, verdict: 'block' });
      expect(String(body['detail'])).toContain('127.0.0.2');
      expect(target.connections()).toBe(0);
    } finally {
      socket.destroy();
      await proxy.stop();
      await target.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
