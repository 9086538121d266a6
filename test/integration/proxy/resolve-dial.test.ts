/**
 * `--resolve` at every dial point of the proxy: an absolute-form request, plain HTTP inside a
 * CONNECT tunnel and a WebSocket upgrade to `api.example.test:80` are dialled at a loopback
 * stand-in, which is asked under the host's own name; the egress policy judges the address
 * actually dialled.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { ProxyAgent, request } from 'undici';
import { describe, expect, it } from 'vitest';
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
} from './harness.js';

useCleanup();

const HOST = 'api.example.test';
const to = (port: number, address = '127.0.0.1') => new Map([[`${HOST}:80`, { host: address, port }]]);

describe('--resolve: where the proxy dials', () => {
  it('absolute form: dialled at the stand-in, routed and asked as the host', async () => {
    const up = await upstream(reply(200, { hello: true }));
    const { port, gate } = await startProxy({}, { resolve: to(up.port) });
    const res = await rawProxyRequest(port, `http://${HOST}/hello`, { host: HOST });
    expect(res.status).toBe(200);
    expect(res.body).toBe('{"hello":true}');
    expect(up.requests[0]!.headers['host']).toBe(HOST);
    expect(gate.routed.map((h) => [h.host, h.port])).toEqual([[HOST, 80]]);
  });

  it('plain HTTP inside a CONNECT tunnel (undici ProxyAgent defaults): the same', async () => {
    const up = await upstream(reply(201, { created: true }));
    const { url, gate } = await startProxy({ govern: [HOST] }, { resolve: to(up.port) });
    const agent = new ProxyAgent(url);
    defer(() => agent.close());
    const res = await request(`http://${HOST}/items`, {
      dispatcher: agent,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"title":"x"}',
    });
    expect(res.statusCode).toBe(201);
    await res.body.dump();
    expect(up.requests[0]!.headers['host']).toBe(HOST);
    expect(gate.handled[0]).toMatchObject({ host: HOST, port: 80, method: 'POST' });
  });

  it('a WebSocket upgrade: dialled at the stand-in, Host is the host', async () => {
    const upgrades: IncomingHttpHeaders[] = [];
    const sockets = new Set<Socket>();
    const server = createServer();
    server.on('upgrade', (req, socket: Socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      upgrades.push(req.headers);
      socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    defer(
      () =>
        new Promise<void>((r) => {
          for (const s of sockets) s.destroy();
          server.close(() => r());
        }),
    );
    const { port } = await startProxy({}, { resolve: to((server.address() as AddressInfo).port) });
    const client = await rawConnect(port);
    client.write(
      `GET http://${HOST}/ws HTTP/1.1\r\nHost: ${HOST}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
    );
    await client.until((t) => t.includes('\r\n\r\n'));
    expect(client.text).toMatch(/^HTTP\/1\.1 101 /);
    expect(upgrades[0]!['host']).toBe(HOST);
  });

  it('checks egress on the address dialled: a stand-in address the policy denies is refused', async () => {
    const { port, proxy } = await startProxy({}, { resolve: to(80, '169.254.169.254') });
    const res = await rawProxyRequest(port, `http://${HOST}/latest/meta-data`, { host: HOST });
    expect(res.status).toBe(403);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'EG_ERR_DESTINATION_REFUSED' });
    expect(res.body).toContain('169.254.169.254');
    const client = await rawConnect(port);
    client.write(`CONNECT ${HOST}:80 HTTP/1.1\r\nHost: ${HOST}:80\r\n\r\n`);
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 403 Destination refused\r\n/);
    expect(JSON.parse(responseBody(client.text))).toMatchObject({ code: 'EG_ERR_DESTINATION_REFUSED' });
    expect(proxy.counters().destinationsRefused).toBe(2);
  });
});
