/**
 * An upgrade keeps its scheme: a WebSocket upgrade read inside an intercepted HTTPS tunnel goes to
 * the destination over TLS (verified with the proxy's upstream CA), never in the clear. And a
 * destination's upgrade answer never speaks in the gate's `Effectgate-*` namespace.
 */
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { describe, expect, it } from 'vitest';
import type { GateRequestHead, RouteDecision } from '../../../src/engine/types.js';
import {
  CertificateAuthority,
  createProxyServer,
  initCertificateAuthority,
} from '../../../src/proxy/index.js';
import { selfSignedCert } from '../../helpers/upstream.js';
import { FakeGate } from './fake-gate.js';
import { defer, useCleanup } from './harness.js';

useCleanup();

/** Governs CONNECTs to `host` (so its TLS is intercepted) but no request inside: the upgrade passes. */
class ConnectOnlyGate extends FakeGate {
  readonly #host: string;

  constructor(host: string) {
    super();
    this.#host = host;
  }

  override route(head: GateRequestHead): RouteDecision {
    this.routed.push(head);
    if (head.method === 'CONNECT' && head.host === this.#host) return { kind: 'govern', maxBodyBytes: 1024 };
    return { kind: 'pass' };
  }
}

interface SeenUpgrade {
  readonly url: string;
  readonly encrypted: boolean;
  readonly headers: Record<string, string | string[] | undefined>;
}

/** A TLS WebSocket-style server: answers 101 (with a forged gate header) and echoes bytes. */
async function startTlsUpgradeServer(): Promise<{ port: number; seen: SeenUpgrade[] }> {
  const seen: SeenUpgrade[] = [];
  const sockets = new Set<Socket>();
  const server = createHttpsServer(selfSignedCert(), (_req, res) => {
    res.writeHead(426, { 'content-length': '0' });
    res.end();
  });
  server.on('upgrade', (req, socket: Socket, head: Buffer) => {
    sockets.add(socket);
    socket.on('error', () => {});
    seen.push({
      url: req.url ?? '',
      encrypted: (socket as TLSSocket).encrypted === true,
      headers: req.headers,
    });
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Accept: fake\r\nEffectgate-Verdict: allow\r\nX-Kept: yes\r\n\r\n',
    );
    if (head.length > 0) socket.write(head);
    socket.pipe(socket);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  defer(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  );
  return { port: (server.address() as AddressInfo).port, seen };
}

describe('forward proxy: upgrades inside intercepted HTTPS', () => {
  it('sends the upgrade over TLS (wss), with its headers, and drops the destination’s gate headers', async () => {
    const up = await startTlsUpgradeServer();
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-upgrade-ca-'));
    defer(() => rmSync(dir, { recursive: true, force: true }));
    await initCertificateAuthority({ dir });
    const pem = readFileSync(join(dir, 'ca.pem'), 'utf8');
    const gate = new ConnectOnlyGate('localhost');
    const proxy = createProxyServer({
      gate,
      allowConnectPorts: [up.port],
      ca: await CertificateAuthority.load(dir),
      upstream: { ca: selfSignedCert().cert },
    });
    const { port } = await proxy.listen('127.0.0.1', 0);
    defer(() => proxy.close());

    const authority = `localhost:${up.port}`;
    const raw = netConnect(port, '127.0.0.1');
    defer(() => {
      raw.destroy();
    });
    raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    await once(raw, 'data');
    const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: pem });
    await once(tls, 'secureConnect');
    let text = '';
    tls.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    tls.write(
      `GET /ws?room=1 HTTP/1.1\r\nHost: ${authority}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n' +
        'Authorization: Bearer s3cret\r\nEffectgate-Run: r1\r\n\r\n',
    );
    await expect.poll(() => text.includes('\r\n\r\n')).toBe(true);
    expect(text).toMatch(/^HTTP\/1\.1 101 Switching Protocols/);
    expect(text).toMatch(/\r\nx-kept: yes\r\n/i);
    expect(text.toLowerCase()).not.toContain('effectgate-');
    tls.write('frame-1');
    await expect.poll(() => text.endsWith('frame-1')).toBe(true);

    const seen = up.seen[0]!;
    expect(seen.encrypted).toBe(true);
    expect(seen.url).toBe('/ws?room=1');
    expect(seen.headers['authorization']).toBe('Bearer s3cret');
    expect(seen.headers['upgrade']).toBe('websocket');
    expect(seen.headers['host']).toBe(authority);
    expect(seen.headers['effectgate-run']).toBeUndefined();
    expect(gate.routed.map((h) => h.method)).toEqual(['CONNECT', 'GET']);
    expect(gate.routed[1]).toMatchObject({ scheme: 'https', host: 'localhost', port: up.port });
  });

  it('does not send the upgrade to a destination whose certificate it cannot verify', async () => {
    const up = await startTlsUpgradeServer();
    const dir = mkdtempSync(join(tmpdir(), 'effectgate-upgrade-ca-'));
    defer(() => rmSync(dir, { recursive: true, force: true }));
    await initCertificateAuthority({ dir });
    const pem = readFileSync(join(dir, 'ca.pem'), 'utf8');
    // No upstream CA: the destination's self-signed certificate is not trusted.
    const proxy = createProxyServer({
      gate: new ConnectOnlyGate('localhost'),
      allowConnectPorts: [up.port],
      ca: await CertificateAuthority.load(dir),
    });
    const { port } = await proxy.listen('127.0.0.1', 0);
    defer(() => proxy.close());
    const authority = `localhost:${up.port}`;
    const raw = netConnect(port, '127.0.0.1');
    defer(() => {
      raw.destroy();
    });
    raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    await once(raw, 'data');
    const tls = tlsConnect({ socket: raw, servername: 'localhost', ca: pem });
    await once(tls, 'secureConnect');
    let text = '';
    tls.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
    });
    tls.write(
      `GET /ws HTTP/1.1\r\nHost: ${authority}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer s3cret\r\n\r\n',
    );
    await expect.poll(() => text.includes('\r\n\r\n')).toBe(true);
    expect(text).toMatch(/^HTTP\/1\.1 502 /);
    expect(up.seen).toHaveLength(0);
  });
});
