import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { defer, hasFullResponse, rawConnect, startProxy, useCleanup } from './harness.js';

useCleanup();

interface UpgradeServer {
  readonly port: number;
  readonly upgrades: { url: string; headers: IncomingHttpHeaders }[];
}

/** A minimal WebSocket-style server: answers 101 on raw sockets, then echoes bytes. */
async function startUpgradeServer(): Promise<UpgradeServer> {
  const upgrades: UpgradeServer['upgrades'] = [];
  const sockets = new Set<Socket>();
  const server = createServer((_req, res) => {
    res.writeHead(426, { 'content-length': '0' });
    res.end();
  });
  server.on('upgrade', (req, socket: Socket, head: Buffer) => {
    sockets.add(socket);
    socket.on('error', () => {});
    upgrades.push({ url: req.url ?? '', headers: req.headers });
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: fake\r\n\r\n',
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
  return { port: (server.address() as AddressInfo).port, upgrades };
}

function upgradeRequest(target: string, extra = ''): string {
  return (
    `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
    `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`
  );
}

describe('forward proxy: upgrade pass-through', () => {
  it('relays a WebSocket-style upgrade and then bytes both ways', async () => {
    const up = await startUpgradeServer();
    const { port } = await startProxy();
    const client = await rawConnect(port);
    client.write(
      upgradeRequest(
        `http://127.0.0.1:${up.port}/ws?room=1`,
        'Proxy-Authorization: Basic c2VjcmV0\r\nEffectgate-Run: r1\r\nX-App: kept\r\n',
      ),
    );
    await client.until((t) => t.includes('\r\n\r\n'));
    expect(client.text).toMatch(/^HTTP\/1\.1 101 Switching Protocols/);
    client.write('frame-1');
    await client.until((t) => t.endsWith('frame-1'));
    client.write('frame-2');
    await client.until((t) => t.endsWith('frame-2'));

    const seen = up.upgrades[0]!;
    expect(seen.url).toBe('/ws?room=1');
    expect(seen.headers['upgrade']).toBe('websocket');
    expect(seen.headers['sec-websocket-key']).toBe('dGhlIHNhbXBsZSBub25jZQ==');
    expect(seen.headers['host']).toBe(`127.0.0.1:${up.port}`);
    expect(seen.headers['x-app']).toBe('kept');
    expect(seen.headers['proxy-authorization']).toBeUndefined();
    expect(seen.headers['effectgate-run']).toBeUndefined();
  });

  it('relays a WebSocket upgrade sent in origin-form inside a CONNECT tunnel', async () => {
    const up = await startUpgradeServer();
    const { port } = await startProxy({}, { allowConnectPorts: [up.port] });
    const client = await rawConnect(port);
    const authority = `127.0.0.1:${up.port}`;
    client.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    await client.until((t) => t.includes('Connection Established\r\n\r\n'));
    client.write(upgradeRequest('/ws/./chat?room=2').replace('Host: x', `Host: ${authority}`));
    await client.until((t) => t.includes('101 Switching Protocols'));
    client.write('frame-1');
    await client.until((t) => t.endsWith('frame-1'));
    expect(up.upgrades[0]!.url).toBe('/ws/chat?room=2');
    expect(up.upgrades[0]!.headers['host']).toBe(authority);
  });

  it('refuses to upgrade a governed route', async () => {
    const up = await startUpgradeServer();
    const { port } = await startProxy({ govern: ['127.0.0.1'] });
    const client = await rawConnect(port);
    client.write(upgradeRequest(`http://127.0.0.1:${up.port}/ws`));
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(up.upgrades).toHaveLength(0);
  });

  it('refuses a non-WebSocket upgrade with 400', async () => {
    const up = await startUpgradeServer();
    const { port } = await startProxy();
    const client = await rawConnect(port);
    client.write(
      `GET http://127.0.0.1:${up.port}/ HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n`,
    );
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 400 /);
  });

  it('answers 502 when the upgrade target is unreachable', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const deadPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const { port } = await startProxy();
    const client = await rawConnect(port);
    client.write(upgradeRequest(`http://127.0.0.1:${deadPort}/ws`));
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 502 /);
    await client.waitClosed();
  });
});
