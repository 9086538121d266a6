/**
 * The proxy's resource limits (`ProxyLimits`): idle tunnels and connections are closed, a client
 * over its connection cap is refused quickly without starving other clients, and ordinary
 * traffic under the caps is unaffected. Other clients are other loopback addresses (127.0.0.2).
 */
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';
import { createServer as createNetServer, connect as netConnect, type Socket } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PROXY_LIMITS } from '../../../src/proxy/index.js';
import { neverAnswer, reply } from '../../helpers/upstream.js';
import {
  defer,
  hasFullResponse,
  RawClient,
  rawConnect,
  responseBody,
  startProxy,
  upstream,
  useCleanup,
  viaProxy,
} from './harness.js';

useCleanup();

/** A raw connection to the proxy from `localAddress` (another loopback address is another client). */
async function connectFrom(port: number, localAddress: string): Promise<RawClient> {
  const socket = netConnect({ port, host: '127.0.0.1', localAddress });
  await once(socket, 'connect');
  defer(() => {
    socket.destroy();
  });
  return new RawClient(socket);
}

/** A raw connection from `localAddress` with a request in flight to `stuck` (it never answers). */
async function busyFrom(port: number, localAddress: string, stuck: { url: string; requests: unknown[] }) {
  const client = await connectFrom(port, localAddress);
  const sent = stuck.requests.length;
  client.write(`GET ${stuck.url}/held HTTP/1.1\r\nHost: x\r\n\r\n`);
  await expect.poll(() => stuck.requests.length).toBe(sent + 1);
  return client;
}

/** A TCP destination that greets first (so its tunnel is relayed) and echoes. */
async function greeter(): Promise<{ port: number }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.write('220 hello\r\n');
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
  return { port: (server.address() as { port: number }).port };
}

function getVia(port: number, localAddress: string, target: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, localAddress, path: target, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('forward proxy: limits', () => {
  it('has one frozen set of documented defaults', () => {
    expect(Object.isFrozen(DEFAULT_PROXY_LIMITS)).toBe(true);
    expect(DEFAULT_PROXY_LIMITS.maxConnectionsPerClient).toBeLessThanOrEqual(
      DEFAULT_PROXY_LIMITS.maxConnections,
    );
  });

  it('closes a relayed tunnel idle for tunnelIdleTimeoutMs, not one in use', async () => {
    const target = await greeter();
    const { port, proxy } = await startProxy(
      {},
      { allowConnectPorts: [target.port], limits: { tunnelIdleTimeoutMs: 300 } },
    );
    const busy = await rawConnect(port);
    const idle = await rawConnect(port);
    for (const client of [busy, idle]) {
      client.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
      await client.until((t) => t.endsWith('220 hello\r\n'));
    }
    const started = Date.now();
    for (let i = 0; i < 8; i += 1) {
      busy.write(`ping ${i}\r\n`);
      await busy.until((t) => t.endsWith(`ping ${i}\r\n`));
      await new Promise((r) => setTimeout(r, 100));
    }
    await idle.waitClosed(2_000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(busy.closed).toBe(false);
    expect(proxy.counters().tunnelsIdleClosed).toBe(1);
  });

  it('closes a tunnel that sends nothing within tunnelPeekTimeoutMs', async () => {
    const up = await upstream(reply());
    const { port, proxy } = await startProxy(
      {},
      { allowConnectPorts: [up.port], limits: { tunnelPeekTimeoutMs: 200 } },
    );
    const client = await rawConnect(port);
    client.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.until((t) => t.includes('Established\r\n\r\n'));
    await client.waitClosed(2_000);
    expect(proxy.counters().tunnelsPeekTimedOut).toBe(1);
    await expect.poll(() => proxy.openConnections()).toBe(0);
  });

  it('closes an idle keep-alive connection, and one that never sends a request', async () => {
    const up = await upstream(reply(200, { ok: true }));
    const { port } = await startProxy({}, { limits: { keepAliveTimeoutMs: 200, headersTimeoutMs: 300 } });
    const kept = await rawConnect(port);
    kept.write(`GET ${up.url}/a HTTP/1.1\r\nHost: x\r\n\r\n`);
    await kept.until(hasFullResponse);
    await kept.waitClosed(2_000);
    const silent = await rawConnect(port);
    await silent.waitClosed(3_000);
    expect(silent.text).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('refuses a client over its connection cap (503) without starving another client', async () => {
    const up = await upstream(reply(200, { ok: true }));
    const { port, proxy } = await startProxy({}, { limits: { maxConnectionsPerClient: 3 } });
    // Started after the proxy, so closed before it: the proxy's close waits for requests to it.
    const stuck = await upstream(neverAnswer());
    // Each held connection has a request in flight: none is idle, none may be closed for room.
    const held: RawClient[] = [];
    for (let i = 0; i < 3; i += 1) held.push(await busyFrom(port, '127.0.0.1', stuck));
    await expect.poll(() => proxy.openConnections()).toBe(3);

    const over = await connectFrom(port, '127.0.0.1');
    over.write(`GET ${up.url}/over HTTP/1.1\r\nHost: x\r\n\r\n`);
    await over.until(hasFullResponse);
    expect(over.text).toMatch(/^HTTP\/1\.1 503 /);
    expect(over.text).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(JSON.parse(responseBody(over.text))).toMatchObject({
      type: 'urn:effectgate:problem:too_many_connections',
      status: 503,
    });
    await over.waitClosed();

    // Another client is served as usual, several times over.
    for (let i = 0; i < 5; i += 1) expect(await getVia(port, '127.0.0.2', `${up.url}/other`)).toBe(200);
    expect(up.requests.map((r) => r.url)).not.toContain('/over');

    // A connection given back makes room again.
    held.pop()!.socket.destroy();
    await expect.poll(() => proxy.openConnections()).toBe(2);
    expect(await getVia(port, '127.0.0.1', `${up.url}/again`)).toBe(200);
    expect(proxy.counters().connectionsRefusedPerClient).toBe(1);
  });

  it('refuses new connections over the global cap, whoever they come from', async () => {
    const { port, proxy } = await startProxy({}, { limits: { maxConnections: 2 } });
    const stuck = await upstream(neverAnswer());
    await busyFrom(port, '127.0.0.1', stuck);
    await busyFrom(port, '127.0.0.2', stuck);
    await expect.poll(() => proxy.openConnections()).toBe(2);
    const third = await connectFrom(port, '127.0.0.3');
    await third.until(hasFullResponse);
    expect(third.text).toMatch(/^HTTP\/1\.1 503 /);
    expect(proxy.counters().connectionsRefusedGlobal).toBe(1);
  });

  it('counts a CONNECT tunnel serving HTTP as one connection; ordinary traffic is unaffected', async () => {
    const up = await upstream(reply(200, { ok: true }));
    const { url, port, proxy } = await startProxy(
      {},
      { allowConnectPorts: [up.port], limits: { maxConnectionsPerClient: 4 } },
    );
    const tunnel = await rawConnect(port);
    const authority = `127.0.0.1:${up.port}`;
    tunnel.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    await tunnel.until((t) => t.includes('Established\r\n\r\n'));
    for (let i = 0; i < 3; i += 1) {
      tunnel.write(`GET /t${i} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
      await tunnel.until((t) => t.split('{"ok":true}').length === i + 2);
    }
    expect(proxy.openConnections()).toBe(1);
    // Under the cap, 40 requests in a row through undici's keep-alive pool (it opens two).
    const agent = viaProxy(url);
    for (let i = 0; i < 40; i += 1) {
      const res = await request(`${up.url}/seq/${i}`, { dispatcher: agent });
      expect(res.statusCode).toBe(200);
      await res.body.dump();
    }
    expect(up.requests).toHaveLength(43);
    expect(proxy.openConnections()).toBeLessThanOrEqual(3);
    const counters = proxy.counters();
    expect(counters.connectionsRefusedPerClient + counters.connectionsRefusedGlobal).toBe(0);
  });

  it('at the per-client cap closes the oldest connections still sending their head, so a complete request is served', async () => {
    const up = await upstream(reply(200, { ok: true }));
    const cap = 16;
    const { port, proxy } = await startProxy({}, { limits: { maxConnectionsPerClient: cap } });
    const slow: RawClient[] = [];
    for (let i = 0; i < cap + 8; i += 1) {
      const client = await connectFrom(port, '127.0.0.1');
      client.write(`GET ${up.url}/slow/${i} HTTP/1.1\r\nHost: x\r\n`);
      slow.push(client);
      // Each is admitted before the next one connects, so which is oldest is well defined.
      if (i < cap) await expect.poll(() => proxy.openConnections()).toBe(i + 1);
      else await slow[i - cap]!.waitClosed();
    }
    expect(proxy.openConnections()).toBe(cap);

    expect(await getVia(port, '127.0.0.1', `${up.url}/real`)).toBe(200);
    await slow[8]!.waitClosed();
    expect(slow.map((c) => c.closed)).toEqual(slow.map((_, i) => i <= 8));
    // A closed one is told why: it had sent no complete request, so nothing was sent.
    expect(slow[0]!.text).toMatch(/^HTTP\/1\.1 503 /);
    expect(JSON.parse(responseBody(slow[0]!.text))).toMatchObject({
      type: 'urn:effectgate:problem:too_many_connections',
    });
    expect(up.requests.map((r) => r.url)).toEqual(['/real']);
    expect(proxy.counters()).toMatchObject({ connectionsClosedIdle: 9, connectionsRefusedPerClient: 0 });
  });

  it('at a cap closes a tunnel that said nothing, never one in use', async () => {
    const target = await greeter();
    const up = await upstream(reply(200, { ok: true }));
    const { port, proxy } = await startProxy(
      {},
      { allowConnectPorts: [target.port, up.port], limits: { maxConnectionsPerClient: 2 } },
    );
    const relayed = await connectFrom(port, '127.0.0.1');
    relayed.write(`CONNECT 127.0.0.1:${target.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await relayed.until((t) => t.endsWith('220 hello\r\n'));
    const silent = await connectFrom(port, '127.0.0.1');
    silent.write(`CONNECT 127.0.0.1:${up.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await silent.until((t) => t.includes('Established\r\n\r\n'));

    expect(await getVia(port, '127.0.0.1', `${up.url}/real`)).toBe(200);
    await silent.waitClosed();
    relayed.write('still here\r\n');
    await relayed.until((t) => t.endsWith('still here\r\n'));
    expect(proxy.counters().connectionsClosedIdle).toBe(1);
  });

  it('at the global cap closes a connection kept alive between requests, never one with a request in flight', async () => {
    const up = await upstream(reply(200, { ok: true }));
    const { port, proxy } = await startProxy({}, { limits: { maxConnections: 2 } });
    const stuck = await upstream(neverAnswer());
    const kept = await connectFrom(port, '127.0.0.1');
    kept.write(`GET ${up.url}/first HTTP/1.1\r\nHost: x\r\n\r\n`);
    await kept.until(hasFullResponse);
    const inFlight = await busyFrom(port, '127.0.0.2', stuck);

    expect(await getVia(port, '127.0.0.3', `${up.url}/third`)).toBe(200);
    await kept.waitClosed();
    expect(inFlight.closed).toBe(false);
    expect(proxy.counters()).toMatchObject({ connectionsClosedIdle: 1, connectionsRefusedGlobal: 0 });
  });
});
