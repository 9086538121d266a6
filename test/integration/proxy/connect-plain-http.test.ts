/**
 * CONNECT does not bypass the gate: the tunnel itself is routed, plain HTTP inside it is served by
 * the forward handler (routed and governed per request), TLS inside it is relayed untouched.
 */
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { createServer as createNetServer, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { EnvHttpProxyAgent, ProxyAgent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { reply, selfSignedCert } from '../../helpers/upstream.js';
import {
  defer,
  hasFullResponse,
  rawConnect,
  responseBody,
  startProxy,
  upstream,
  useCleanup,
} from './harness.js';

useCleanup();

/** undici with its default settings: `http://` URLs go through a CONNECT tunnel. */
function tunnelAgent(proxyUrl: string, connections?: number): ProxyAgent {
  const agent = new ProxyAgent(connections === undefined ? proxyUrl : { uri: proxyUrl, connections });
  defer(() => agent.close());
  return agent;
}

function post(
  url: string,
  dispatcher: ProxyAgent | EnvHttpProxyAgent,
  title: string,
): ReturnType<typeof request> {
  return request(url, {
    dispatcher,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ title }),
  });
}

/** A raw TCP destination; `onConnection` does what the test needs with each socket. */
async function netTarget(
  onConnection: (socket: Socket) => void,
): Promise<{ port: number; closed: () => number }> {
  const sockets = new Set<Socket>();
  let closed = 0;
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => {
      closed += 1;
    });
    onConnection(socket);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  defer(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  );
  return { port: (server.address() as { port: number }).port, closed: () => closed };
}

async function openTunnel(proxyPort: number, authority: string): Promise<ReturnType<typeof rawConnect>> {
  const client = await rawConnect(proxyPort);
  client.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  await client.until((t) => t.includes('\r\n\r\n'));
  expect(client.text.startsWith('HTTP/1.1 200 Connection Established\r\n\r\n')).toBe(true);
  return client;
}

describe('forward proxy: plain HTTP inside CONNECT is governed', () => {
  it('undici ProxyAgent (default tunnelling): the request reaches gate.handle()', async () => {
    const up = await upstream(reply(201, { created: true }));
    const { url, gate } = await startProxy({ govern: ['127.0.0.1'] }, { allowConnectPorts: [up.port] });
    const res = await post(`${up.url}/repos/acme/api/issues`, tunnelAgent(url), 'Disk full');
    expect(res.statusCode).toBe(201);
    expect(res.headers['effectgate-verdict']).toBe('allow');
    await res.body.dump();
    expect(gate.handled).toHaveLength(1);
    expect(gate.handled[0]).toMatchObject({ method: 'POST', host: '127.0.0.1', port: up.port });
    expect(gate.handled[0]!.path).toBe('/repos/acme/api/issues');
    expect(up.requests[0]!.headers['idempotency-key']).toBe('fake-key');
  });

  it('EnvHttpProxyAgent (httpProxy given as an option): governed as well', async () => {
    const up = await upstream(reply(201, { created: true }));
    const { url, gate } = await startProxy({ govern: ['127.0.0.1'] }, { allowConnectPorts: [up.port] });
    const agent = new EnvHttpProxyAgent({ httpProxy: url, httpsProxy: url, noProxy: '' });
    defer(() => agent.close());
    const res = await post(`${up.url}/repos/acme/api/issues`, agent, 'Env');
    expect(res.statusCode).toBe(201);
    await res.body.dump();
    expect(gate.routed.map((h) => h.method)).toEqual(['CONNECT', 'POST']);
    expect(gate.handled).toHaveLength(1);
  });

  it('keeps the tunnel alive for several governed requests (undici)', async () => {
    const up = await upstream(reply(201, { created: true }));
    const { url, gate } = await startProxy({ govern: ['127.0.0.1'] }, { allowConnectPorts: [up.port] });
    // One connection per origin, so reuse is certain (back to back, undici's pool may otherwise
    // open a second tunnel while the first is being released).
    const agent = tunnelAgent(url, 1);
    for (const title of ['one', 'two', 'three']) {
      const res = await post(`${up.url}/repos/acme/api/issues`, agent, title);
      expect(res.statusCode).toBe(201);
      await res.body.dump();
    }
    expect(gate.routed.filter((h) => h.method === 'CONNECT')).toHaveLength(1);
    expect(gate.handled.map((r) => JSON.parse(Buffer.from(r.body).toString()).title)).toEqual([
      'one',
      'two',
      'three',
    ]);
    expect(up.requests).toHaveLength(3);
  });

  it('serves several requests on one tunnel, one after the other and pipelined', async () => {
    const up = await upstream(reply(201, { created: true }));
    const { port, gate } = await startProxy({ govern: ['127.0.0.1'] }, { allowConnectPorts: [up.port] });
    const authority = `127.0.0.1:${up.port}`;
    const client = await openTunnel(port, authority);
    const issue = (title: string): string => {
      const body = JSON.stringify({ title });
      return `POST /repos/a/b/issues HTTP/1.1\r\nHost: ${authority}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    };
    client.write(issue('first'));
    await client.until((t) => t.split('HTTP/1.1 201').length === 2);
    client.write(issue('second') + issue('third'));
    await client.until((t) => t.split('HTTP/1.1 201').length === 4);
    expect(client.closed).toBe(false);
    expect(gate.handled).toHaveLength(3);
    expect(up.requests.map((r) => JSON.parse(r.body.toString()).title)).toEqual(['first', 'second', 'third']);
  });

  it('classifies and forwards the normalized path', async () => {
    const up = await upstream(reply());
    const { port, gate } = await startProxy({}, { allowConnectPorts: [up.port] });
    const authority = `127.0.0.1:${up.port}`;
    const client = await openTunnel(port, authority);
    client.write(`GET /x/../repos/%7eme/%69ssues%2Fa?q=%7e HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    await client.until((t) => hasFullResponse(t.slice(t.indexOf('\r\n\r\n') + 4)));
    expect(gate.routed[1]).toMatchObject({ path: '/repos/~me/issues%2Fa', query: 'q=%7e' });
    expect(up.requests[0]!.url).toBe('/repos/~me/issues%2Fa?q=%7e');
  });

  it('refuses a Host that names another destination than the CONNECT (400), sends nothing', async () => {
    const up = await upstream(reply());
    const { port, gate } = await startProxy({ govern: ['127.0.0.1'] }, { allowConnectPorts: [up.port] });
    const client = await openTunnel(port, `127.0.0.1:${up.port}`);
    client.write(
      `POST /repos/a/b/issues HTTP/1.1\r\nHost: localhost:${up.port}\r\nContent-Length: 2\r\n\r\n{}`,
    );
    await client.until((t) => t.includes('HTTP/1.1 400'));
    expect(gate.refusals[0]).toMatchObject({ problem: 'bad_request' });
    expect(gate.refusals[0]!.detail).toContain(`opened to 127.0.0.1:${up.port}`);
    expect(gate.handled).toHaveLength(0);
    expect(up.requests).toHaveLength(0);
  });

  it('accepts absolute-form for the tunnel authority, refuses it for another one', async () => {
    const up = await upstream(reply(200, { abs: true }));
    const { port } = await startProxy({}, { allowConnectPorts: [up.port] });
    const client = await openTunnel(port, `127.0.0.1:${up.port}`);
    client.write(`GET http://127.0.0.1:${up.port}/abs HTTP/1.1\r\nHost: whatever\r\n\r\n`);
    await client.until((t) => t.includes('{"abs":true}'));
    client.write(`GET http://localhost:${up.port}/other HTTP/1.1\r\nHost: whatever\r\n\r\n`);
    await client.until((t) => t.includes('HTTP/1.1 400'));
    expect(up.requests.map((r) => r.url)).toEqual(['/abs']);
  });

  it('refuses CONNECT inside a tunnel', async () => {
    const up = await upstream(reply());
    const { port } = await startProxy({}, { allowConnectPorts: [up.port] });
    const client = await openTunnel(port, `127.0.0.1:${up.port}`);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
    await client.until((t) => t.includes('HTTP/1.1 400'));
    await client.waitClosed();
  });
});

describe('forward proxy: CONNECT to a port a tool names, not in allowConnectPorts', () => {
  it('undici ProxyAgent with no options is governed: the port needs no flag', async () => {
    const up = await upstream(reply(201, { created: true }));
    const { url, gate, proxy } = await startProxy({ govern: ['127.0.0.1'] });
    const res = await post(`${up.url}/repos/acme/api/issues`, tunnelAgent(url), 'No flag');
    expect(res.statusCode).toBe(201);
    await res.body.dump();
    expect(gate.routed.map((h) => [h.method, h.port])).toEqual([
      ['CONNECT', up.port],
      ['POST', up.port],
    ]);
    expect(gate.handled).toHaveLength(1);
    expect(proxy.counters().connectsRefusedPort).toBe(0);
  });

  it('closes cleanly a tunnel whose destination speaks first, relaying none of it', async () => {
    const target = await netTarget((socket) => socket.write('220 hello\r\n'));
    const { port, proxy } = await startProxy({ govern: ['127.0.0.1'] });
    const client = await openTunnel(port, `127.0.0.1:${target.port}`);
    let ended = false;
    client.socket.once('end', () => {
      ended = true;
    });
    await client.waitClosed();
    // A FIN after the 200, not a reset, and not a byte of the destination's banner.
    expect(ended).toBe(true);
    expect(client.text).toBe('HTTP/1.1 200 Connection Established\r\n\r\n');
    expect(proxy.counters().tunnelsRefusedUnreadable).toBe(1);
    await expect.poll(() => target.closed(), { timeout: 2_000 }).toBe(1);
  });

  it('still refuses the port for a host no tool names, with the reason in the status line', async () => {
    const up = await upstream(reply());
    const { port } = await startProxy({ govern: ['api.example.test'] });
    const client = await rawConnect(port);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 403 CONNECT port not allowed\r\n/);
    expect(JSON.parse(responseBody(client.text))).toMatchObject({ code: 'EG_ERR_CONNECT_PORT_FORBIDDEN' });
    expect(up.connections()).toBe(0);
  });
});

describe('forward proxy: CONNECT routing and relaying', () => {
  it('answers the gate refusal (default block) before connecting anything', async () => {
    const up = await upstream(reply());
    const { port, gate } = await startProxy(
      { govern: ['127.0.0.1'], refuse: ['localhost'] },
      { allowConnectPorts: [up.port] },
    );
    const client = await rawConnect(port);
    client.write(`CONNECT localhost:${up.port} HTTP/1.1\r\nHost: localhost:${up.port}\r\n\r\n`);
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 403 /);
    expect(JSON.parse(responseBody(client.text))).toEqual({ verdict: 'block' });
    await client.waitClosed();
    expect(gate.routed[0]).toMatchObject({ method: 'CONNECT', host: 'localhost', port: up.port, path: '/' });
    expect(up.connections()).toBe(0);
  });

  it('relays TLS to a host no tool names byte for byte: the client sees the destination certificate', async () => {
    const cert = selfSignedCert();
    const up = await upstream(reply(200, { secure: true }), { tls: cert });
    const { port, gate } = await startProxy(
      { govern: ['api.example.test'] },
      { allowConnectPorts: [up.port] },
    );
    const raw = netConnect(port, '127.0.0.1');
    defer(() => {
      raw.destroy();
    });
    raw.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
    const [established] = (await once(raw, 'data')) as [Buffer];
    expect(established.toString()).toBe('HTTP/1.1 200 Connection Established\r\n\r\n');
    const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: cert.cert });
    await once(tls, 'secureConnect');
    expect(tls.getPeerCertificate().fingerprint256).toBe(new X509Certificate(cert.cert).fingerprint256);
    tls.end('GET /secure HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    let text = '';
    for await (const chunk of tls) text += String(chunk);
    expect(text).toContain('{"secure":true}');
    // The CONNECT authority, then the SNI (another name, not governed): relayed, never decrypted.
    expect(gate.routed.map((h) => [h.method, h.host])).toEqual([
      ['CONNECT', '127.0.0.1'],
      ['CONNECT', 'localhost'],
    ]);
    expect(gate.handled).toHaveLength(0);
  });

  it('relays a destination that speaks first (not HTTP)', async () => {
    const target = await netTarget((socket) => {
      socket.write('220 hello\r\n');
      socket.pipe(socket);
    });
    const { port } = await startProxy({}, { allowConnectPorts: [target.port] });
    const client = await openTunnel(port, `127.0.0.1:${target.port}`);
    await client.until((t) => t.endsWith('220 hello\r\n'));
    client.write('EHLO me\r\n');
    await client.until((t) => t.endsWith('EHLO me\r\n'));
  });

  it('closes the destination when the client leaves before sending a byte', async () => {
    const target = await netTarget(() => {});
    const { port } = await startProxy({}, { allowConnectPorts: [target.port] });
    const client = await openTunnel(port, `127.0.0.1:${target.port}`);
    client.socket.end();
    await expect.poll(() => target.closed(), { timeout: 2_000 }).toBe(1);
  });
});
