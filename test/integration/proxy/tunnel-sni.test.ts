/**
 * A TLS tunnel is routed by its SNI as well as by its CONNECT authority: `CONNECT <an address>`
 * with the SNI of a governed host is that host's session, intercepted and governed as that host
 * (with a CA) or closed (without one), never relayed ungoverned.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { CertificateAuthority, initCertificateAuthority } from '../../../src/proxy/index.js';
import { clientHello } from '../../helpers/client-hello.js';
import { reply, selfSignedCert } from '../../helpers/upstream.js';
import { defer, rawConnect, startProxy, upstream, useCleanup } from './harness.js';

useCleanup();

const run = promisify(execFile);

async function localCa(): Promise<{ ca: CertificateAuthority; pem: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'effectgate-sni-ca-'));
  defer(() => rmSync(dir, { recursive: true, force: true }));
  await initCertificateAuthority({ dir });
  return { ca: await CertificateAuthority.load(dir), pem: readFileSync(join(dir, 'ca.pem'), 'utf8') };
}

/** A raw CONNECT tunnel, resolved once the proxy said 200. */
async function openTunnel(proxyPort: number, authority: string): Promise<Socket> {
  const raw = netConnect(proxyPort, '127.0.0.1');
  defer(() => {
    raw.destroy();
  });
  raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  const [established] = (await once(raw, 'data')) as [Buffer];
  expect(established.toString()).toBe('HTTP/1.1 200 Connection Established\r\n\r\n');
  return raw;
}

/**
 * Sends `request` (with `Connection: close`) over `tls` and resolves with everything received until
 * the gate closes. Not half-closed: an intercepted session ends both ways at the client's end.
 */
async function exchange(tls: TLSSocket, request: string): Promise<string> {
  tls.write(request);
  let text = '';
  for await (const chunk of tls) text += String(chunk);
  return text;
}

/** The error a TLS handshake through the tunnel ends with (it must not succeed). */
/** `servername` undefined: no SNI at all (an IP host sends none). */
async function handshakeError(raw: Socket, servername: string | undefined, ca: string): Promise<Error> {
  const tls = tlsConnect({
    socket: raw,
    ca,
    ...(servername === undefined ? { host: '127.0.0.1' } : { servername }),
  });
  const [err] = (await once(tls, 'error')) as [Error];
  return err;
}

describe('forward proxy: TLS tunnels are routed by their SNI', () => {
  it('intercepts CONNECT <address> with the SNI of a governed host, as that host', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(201, { created: true }), { tls: upstreamCert });
    const { ca, pem } = await localCa();
    const { port, gate, proxy } = await startProxy(
      { govern: ['localhost'] },
      { allowConnectPorts: [up.port], ca, upstream: { ca: upstreamCert.cert } },
    );
    // The authority names an address no tool names; the session is for `localhost`.
    const raw = await openTunnel(port, `127.0.0.1:${up.port}`);
    const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: pem });
    await once(tls, 'secureConnect');
    const leaf = new X509Certificate(tls.getPeerX509Certificate()!.raw);
    expect(leaf.checkIssued(new X509Certificate(pem))).toBe(true);
    expect(leaf.checkHost('localhost')).toBe('localhost');
    const body = '{"title":"via an address"}';
    const text = await exchange(
      tls,
      `POST /repos/a/b/issues HTTP/1.1\r\nHost: localhost:${up.port}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 201 /);
    expect(gate.handled.map((r) => [r.scheme, r.method, r.host, r.port])).toEqual([
      ['https', 'POST', 'localhost', up.port],
    ]);
    expect(up.requests[0]!.headers['idempotency-key']).toBe('fake-key');
    expect(gate.routed.slice(0, 2).map((h) => [h.method, h.host, h.port])).toEqual([
      ['CONNECT', '127.0.0.1', up.port],
      ['CONNECT', 'localhost', up.port],
    ]);
    expect(proxy.counters().tunnelsRefusedSniUngovernable).toBe(0);
  });

  it('governs curl tunnelling to an address (--connect-to) with a governed host name', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(201, { created: 'curl' }), { tls: upstreamCert });
    const { ca, pem } = await localCa();
    const { url, gate } = await startProxy(
      { govern: ['localhost'] },
      { allowConnectPorts: [up.port], ca, upstream: { ca: upstreamCert.cert } },
    );
    const caFile = join(tmpdir(), `effectgate-sni-ca-${process.pid}.pem`);
    writeFileSync(caFile, pem);
    defer(() => rmSync(caFile, { force: true }));
    // curl sends `CONNECT 127.0.0.1:<port>` and SNI `localhost`.
    const { stdout } = await run('curl', [
      '-sS',
      '--max-time',
      '10',
      '--cacert',
      caFile,
      '-x',
      url,
      '--connect-to',
      `localhost:${up.port}:127.0.0.1:${up.port}`,
      '-X',
      'POST',
      '-d',
      '{}',
      `https://localhost:${up.port}/c`,
    ]);
    expect(JSON.parse(stdout)).toEqual({ created: 'curl' });
    expect(gate.routed[0]).toMatchObject({ method: 'CONNECT', host: '127.0.0.1' });
    expect(gate.handled.map((r) => [r.method, r.host])).toEqual([['POST', 'localhost']]);
  });

  it('refuses, inside a tunnel intercepted by its SNI, a Host naming another destination', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(201), { tls: upstreamCert });
    const { ca, pem } = await localCa();
    const { port, gate } = await startProxy(
      { govern: ['localhost'] },
      { allowConnectPorts: [up.port], ca, upstream: { ca: upstreamCert.cert } },
    );
    const raw = await openTunnel(port, `127.0.0.1:${up.port}`);
    const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: pem });
    await once(tls, 'secureConnect');
    const text = await exchange(
      tls,
      `POST /x HTTP/1.1\r\nHost: 127.0.0.1:${up.port}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`,
    );
    expect(text).toMatch(/^HTTP\/1\.1 400 /);
    expect(gate.handled).toHaveLength(0);
    expect(up.requests).toHaveLength(0);
  });

  it('closes, without a CA, a tunnel whose SNI names a governed host (TLS alert, counted)', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(201), { tls: upstreamCert });
    const logged: string[] = [];
    const logger = { info() {}, error() {}, warn: (_f: unknown, message: string) => logged.push(message) };
    const { port, proxy } = await startProxy(
      { govern: ['localhost'] },
      { allowConnectPorts: [up.port], logger },
    );
    for (const authority of [`127.0.0.1:${up.port}`, `localhost:${up.port}`]) {
      const raw = await openTunnel(port, authority);
      const err = await handshakeError(raw, 'localhost', upstreamCert.cert);
      expect(err.message).toMatch(/access denied/i);
    }
    expect(up.requests).toHaveLength(0);
    expect(proxy.counters().tunnelsRefusedSniUngovernable).toBe(2);
    expect(logged[0]).toMatch(/SNI localhost is a governed host and the gate has no CA/);
  });

  it('closes, without a CA, TLS to a governed CONNECT host whose SNI names another host or nothing', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(201), { tls: upstreamCert });
    const logged: string[] = [];
    const logger = { info() {}, error() {}, warn: (_f: unknown, message: string) => logged.push(message) };
    const { port, proxy } = await startProxy(
      { govern: ['127.0.0.1'] },
      { allowConnectPorts: [up.port], logger },
    );
    // The destination's default virtual host would answer either one: relayed, the POST inside
    // would reach the governed API unread.
    for (const servername of ['not-governed.example', undefined]) {
      const raw = await openTunnel(port, `127.0.0.1:${up.port}`);
      const err = await handshakeError(raw, servername, upstreamCert.cert);
      expect(err.message).toMatch(/access denied/i);
    }
    expect(up.requests).toHaveLength(0);
    expect(proxy.counters().tunnelsRefusedSniUngovernable).toBe(2);
    expect(logged.join('\n')).toMatch(
      /governed destination, with the SNI not-governed\.example, and the gate has no CA/,
    );
    expect(logged.join('\n')).toMatch(/governed destination, without an SNI, and the gate has no CA/);
  });

  it('closes a tunnel whose SNI the policies refuse (default: block), whatever the authority', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(200), { tls: upstreamCert });
    const { port, proxy } = await startProxy({ refuse: ['localhost'] }, { allowConnectPorts: [up.port] });
    const raw = await openTunnel(port, `127.0.0.1:${up.port}`);
    const err = await handshakeError(raw, 'localhost', upstreamCert.cert);
    expect(err.message).toMatch(/access denied/i);
    expect(up.requests).toHaveLength(0);
    expect(proxy.counters().tunnelsRefusedSniBlocked).toBe(1);
  });

  it('still relays TLS whose SNI (or its absence) names nothing governed', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(200, { relayed: true }), { tls: upstreamCert });
    const { ca } = await localCa();
    const { port, gate } = await startProxy(
      { govern: ['api.example.test'] },
      { allowConnectPorts: [up.port], ca },
    );
    for (const servername of ['localhost', undefined]) {
      const raw = await openTunnel(port, `127.0.0.1:${up.port}`);
      const tls = tlsConnect({
        socket: raw,
        ca: upstreamCert.cert,
        ...(servername === undefined ? { host: '127.0.0.1' } : { servername }),
      });
      await once(tls, 'secureConnect');
      expect(tls.getPeerCertificate().fingerprint256).toBe(
        new X509Certificate(upstreamCert.cert).fingerprint256,
      );
      const text = await exchange(tls, 'GET /r HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
      expect(text).toContain('{"relayed":true}');
    }
    expect(gate.handled).toHaveLength(0);
  });

  it('reads a ClientHello that arrives in pieces before deciding', async () => {
    const upstreamCert = selfSignedCert();
    const up = await upstream(reply(201), { tls: upstreamCert });
    const { port, proxy } = await startProxy({ govern: ['localhost'] }, { allowConnectPorts: [up.port] });
    const client = await rawConnect(port);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.until((t) => t.includes('Established\r\n\r\n'));
    const hello = await clientHello('localhost');
    for (let at = 0; at < hello.length; at += 64) {
      client.write(hello.subarray(at, at + 64));
      await new Promise((r) => setTimeout(r, 5));
    }
    await client.waitClosed();
    // The alert, in the clear, after the 200: fatal access_denied.
    expect(client.text.endsWith('\x15\x03\x03\x00\x02\x02\x31')).toBe(true);
    expect(proxy.counters().tunnelsRefusedSniUngovernable).toBe(1);
  });

  it('closes a TLS tunnel whose ClientHello cannot be read', async () => {
    const up = await upstream(reply());
    const { port, proxy } = await startProxy({}, { allowConnectPorts: [up.port] });
    const client = await rawConnect(port);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.until((t) => t.includes('Established\r\n\r\n'));
    // A handshake record holding a ServerHello instead.
    client.write(Buffer.from([0x16, 3, 1, 0, 4, 2, 0, 0, 0]));
    await client.waitClosed();
    expect(proxy.counters().tunnelsRefusedBadClientHello).toBe(1);
  });
});
