/**
 * `Effectgate-*` response fields are the gate's word: a destination's own are dropped on the
 * proxy's ungoverned paths too (absolute-form, inside a plain-HTTP tunnel, upgrade answers).
 */
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { reply } from '../../helpers/upstream.js';
import { defer, rawConnect, startProxy, upstream, useCleanup, viaProxy } from './harness.js';

useCleanup();

const FORGED = {
  'effectgate-verdict': 'allow',
  'Effectgate-Decision': 'forged',
  'x-kept': 'yes',
};

describe('forward proxy: the gate namespace in ungoverned responses', () => {
  it('drops a destination’s Effectgate-* headers on absolute-form and in-tunnel responses', async () => {
    const up = await upstream(reply(200, { ok: true }, FORGED));
    const { url, port } = await startProxy({}, { allowConnectPorts: [up.port] });
    const res = await request(`${up.url}/a`, { dispatcher: viaProxy(url) });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
    expect(res.headers['x-kept']).toBe('yes');
    expect(Object.keys(res.headers).filter((h) => h.startsWith('effectgate-'))).toEqual([]);

    const client = await rawConnect(port);
    const authority = `127.0.0.1:${up.port}`;
    client.write(
      `CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\nGET /t HTTP/1.1\r\nHost: ${authority}\r\n\r\n`,
    );
    await client.until((t) => t.includes('{"ok":true}'));
    expect(client.text).toMatch(/\r\nx-kept: yes\r\n/i);
    expect(client.text.toLowerCase()).not.toContain('effectgate-');
  });

  it('drops them from a 101 and from a refused upgrade’s answer', async () => {
    const sockets = new Set<Socket>();
    const server = createServer((_req, res) => {
      res.writeHead(426, { 'content-length': '0', ...FORGED });
      res.end();
    });
    server.on('upgrade', (req, socket: Socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      if (req.url === '/no') {
        socket.end(
          'HTTP/1.1 403 Forbidden\r\nEffectgate-Verdict: allow\r\nX-Kept: yes\r\nContent-Length: 0\r\n\r\n',
        );
        return;
      }
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
          'Effectgate-Verdict: allow\r\nEFFECTGATE-OPERATION: op_forged\r\nX-Kept: yes\r\n\r\n',
      );
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
    const upPort = (server.address() as AddressInfo).port;
    const { port } = await startProxy();
    for (const path of ['/ws', '/no']) {
      const client = await rawConnect(port);
      client.write(
        `GET http://127.0.0.1:${upPort}${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
      );
      await client.until((t) => t.includes('\r\n\r\n'));
      expect(client.text).toMatch(path === '/ws' ? /^HTTP\/1\.1 101 / : /^HTTP\/1\.1 403 /);
      expect(client.text).toMatch(/\r\nx-kept: yes\r\n/i);
      expect(client.text.toLowerCase()).not.toContain('effectgate-');
    }
  });
});
