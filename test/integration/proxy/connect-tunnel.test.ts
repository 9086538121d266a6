import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createServer as createNetServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ProxyAgent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { clientHello } from '../../helpers/client-hello.js';
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

const run = promisify(execFile);

function tunnelAgent(proxyUrl: string, ca?: string): ProxyAgent {
  // proxyTunnel defaults to true: undici CONNECTs even for http:// targets.
  const agent = new ProxyAgent({ uri: proxyUrl, ...(ca === undefined ? {} : { requestTls: { ca } }) });
  defer(() => agent.close());
  return agent;
}

describe('forward proxy: CONNECT', () => {
  it('refuses a CONNECT to a port not allowed with 403 naming the flag, counts it and logs it', async () => {
    const warnings: string[] = [];
    const logger = {
      info: () => undefined,
      warn: (_o: object, msg: string) => warnings.push(msg),
      error: () => undefined,
    };
    const { port, proxy } = await startProxy({}, { allowConnectPorts: [443], logger });
    const client = await rawConnect(port);
    client.write('CONNECT 127.0.0.1:9443 HTTP/1.1\r\nHost: 127.0.0.1:9443\r\n\r\n');
    const text = await client.until(hasFullResponse);
    // The status line says why (clients that show only it), the body says it with a stable code.
    expect(text).toMatch(/^HTTP\/1\.1 403 CONNECT port not allowed\r\n/);
    expect(JSON.parse(responseBody(text))).toMatchObject({
      status: 403,
      code: 'EG_ERR_CONNECT_PORT_FORBIDDEN',
      title: 'CONNECT port not allowed',
      type: 'urn:effectgate:problem:connect_port_forbidden',
    });
    expect(text).toContain('127.0.0.1:9443 is neither');
    expect(text).toContain('--allow-connect-ports 443,9443');
    expect(proxy.counters().connectsRefusedPort).toBe(1);
    expect(warnings).toEqual(['CONNECT refused: port 9443 is not in --allow-connect-ports']);
  });

  it('routes the CONNECT, then each plain-HTTP request inside it (undici ProxyAgent default tunnelling)', async () => {
    const up = await upstream(reply(200, { tunnelled: true }));
    const { url, gate } = await startProxy({}, { allowConnectPorts: [up.port] });
    const res = await request(`${up.url}/inside?q=1`, { dispatcher: tunnelAgent(url) });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({ tunnelled: true });
    expect(up.requests[0]!.url).toBe('/inside?q=1');
    expect(gate.routed.map((h) => [h.method, h.host, h.port, h.path, h.query])).toEqual([
      ['CONNECT', '127.0.0.1', up.port, '/', ''],
      ['GET', '127.0.0.1', up.port, '/inside', 'q=1'],
    ]);
  });

  it('tunnels TLS end to end (undici with the upstream CA)', async () => {
    const tls = selfSignedCert();
    const up = await upstream(reply(200, { secure: true }), { tls });
    const { url } = await startProxy({}, { allowConnectPorts: [up.port] });
    const res = await request(`https://localhost:${up.port}/secure`, {
      dispatcher: tunnelAgent(url, tls.cert),
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({ secure: true });
    expect(up.requests[0]!.headers['host']).toBe(`localhost:${up.port}`);
  });

  it('tunnels TLS for curl -x', async () => {
    const tls = selfSignedCert();
    const up = await upstream(reply(200, { curl: 'tls' }), { tls });
    const { url } = await startProxy({}, { allowConnectPorts: [up.port] });
    const caFile = join(tmpdir(), `effectgate-test-ca-${process.pid}.pem`);
    writeFileSync(caFile, tls.cert);
    defer(() => rmSync(caFile, { force: true }));
    const { stdout } = await run('curl', [
      '-sS',
      '--max-time',
      '10',
      '--cacert',
      caFile,
      '-x',
      url,
      `https://localhost:${up.port}/c`,
    ]);
    expect(JSON.parse(stdout)).toEqual({ curl: 'tls' });
  });

  it('serves a request the client sent together with the CONNECT head', async () => {
    const up = await upstream(reply(200, { early: true }));
    const { port } = await startProxy({}, { allowConnectPorts: [up.port] });
    const client = await rawConnect(port);
    const authority = `127.0.0.1:${up.port}`;
    client.write(
      `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\nGET /early HTTP/1.1\r\nHost: ${authority}\r\nConnection: close\r\n\r\n`,
    );
    await client.until((t) => t.includes('{"early":true}'));
    expect(client.text).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n\r\nHTTP\/1\.1 200 OK/);
    expect(up.requests[0]!.url).toBe('/early');
  });

  it('refuses a port that is not allowed with 403 and closes', async () => {
    const up = await upstream(reply());
    const { port } = await startProxy();
    const client = await rawConnect(port);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\n\r\n`);
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 403 /);
    expect(client.text).toContain('application/problem+json');
    expect(JSON.parse(responseBody(client.text))).toMatchObject({ status: 403 });
    await client.waitClosed();
    expect(up.connections()).toBe(0);
  });

  it('answers 502 when the target cannot be reached', async () => {
    const up = await upstream();
    const deadPort = up.port;
    await up.close();
    const { port } = await startProxy({}, { allowConnectPorts: [deadPort] });
    const client = await rawConnect(port);
    client.write(`CONNECT 127.0.0.1:${deadPort} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 502 /);
    expect(JSON.parse(responseBody(client.text))).toMatchObject({
      detail: expect.stringContaining('ECONNREFUSED'),
    });
    await client.waitClosed();
  });

  it('answers 400 to a malformed CONNECT target', async () => {
    const { port } = await startProxy();
    const client = await rawConnect(port);
    client.write('CONNECT no-port-here HTTP/1.1\r\nHost: x\r\n\r\n');
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('cleans up both sides when either side goes away', async () => {
    const upstreamSockets: Socket[] = [];
    let upstreamClosed = 0;
    const target = createNetServer((s) => {
      upstreamSockets.push(s);
      s.on('error', () => {});
      s.on('close', () => {
        upstreamClosed += 1;
      });
      s.pipe(s);
    });
    await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
    defer(() => new Promise<void>((r) => target.close(() => r())).then(() => undefined));
    const targetPort = (target.address() as { port: number }).port;
    const { port } = await startProxy({}, { allowConnectPorts: [targetPort] });

    // Client goes away: the upstream side is closed. (A ClientHello first: the stream is relayed.)
    const hello = await clientHello('echo.example.test');
    const a = await rawConnect(port);
    a.write(
      Buffer.concat([Buffer.from(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: x\r\n\r\n`), hello]),
    );
    a.write('ping');
    await a.until((t) => t.endsWith('ping'));
    a.socket.destroy();
    await expect.poll(() => upstreamClosed, { timeout: 2_000 }).toBe(1);

    // Upstream goes away: the client side is closed.
    const b = await rawConnect(port);
    b.write(
      Buffer.concat([Buffer.from(`CONNECT 127.0.0.1:${targetPort} HTTP/1.1\r\nHost: x\r\n\r\n`), hello]),
    );
    b.write('pong');
    await b.until((t) => t.endsWith('pong'));
    upstreamSockets[1]!.destroy();
    await b.waitClosed();
  });

  it('close() cuts open tunnels instead of waiting for them', async () => {
    const up = await upstream(reply());
    const { port, proxy } = await startProxy({}, { allowConnectPorts: [up.port] });
    const client = await rawConnect(port);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.until((t) => t.includes('200 Connection Established'));
    const started = Date.now();
    await proxy.close();
    await client.waitClosed();
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
