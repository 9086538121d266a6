import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { echo, reply } from '../../helpers/upstream.js';
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

describe('forward proxy: refusals and failures', () => {
  it('answers 502 problem+json when the upstream is unreachable', async () => {
    const up = await upstream();
    const deadUrl = up.url;
    await up.close();
    const { url } = await startProxy();
    const res = await request(`${deadUrl}/gone`, { dispatcher: viaProxy(url) });
    expect(res.statusCode).toBe(502);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(await res.body.json()).toMatchObject({
      status: 502,
      type: 'urn:effectgate:problem:upstream_failed',
    });
  });

  it('answers 400 problem+json to an origin-form request', async () => {
    const { port, gate } = await startProxy();
    const res = await rawProxyRequest(port, '/not-absolute', { host: 'example.com' });
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(res.body)).toMatchObject({ type: 'urn:effectgate:problem:bad_request' });
    expect(gate.refusals[0]!.problem).toBe('bad_request');
    expect(gate.routed).toHaveLength(0);
  });

  it('answers 400 to an https:// absolute-form request (clients must CONNECT)', async () => {
    const { port, gate } = await startProxy();
    const res = await rawProxyRequest(port, 'https://example.com/x', {});
    expect(res.status).toBe(400);
    expect(gate.refusals[0]!.detail).toContain('CONNECT');
  });

  it('answers 400 and closes on a malformed request', async () => {
    const { port } = await startProxy();
    const client = await rawConnect(port);
    client.write('THIS IS NOT HTTP\r\n\r\n');
    await client.until(hasFullResponse);
    expect(client.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(responseBody(client.text))).toMatchObject({ status: 400 });
    await client.waitClosed();
  });

  it('survives a client that disconnects mid-body, and keeps serving', async () => {
    const up = await upstream(echo());
    const { port, url } = await startProxy();
    const client = await rawConnect(port);
    client.write(
      `POST ${up.url}/partial HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n${'x'.repeat(1000)}`,
    );
    await new Promise((r) => setTimeout(r, 50));
    client.socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const res = await request(`${up.url}/after`, {
      dispatcher: viaProxy(url),
      method: 'POST',
      body: 'still here',
    });
    expect(await res.body.text()).toBe('still here');
    // The half-sent request never completed upstream: undici aborted it with the client.
    expect(up.requests.map((r) => r.url)).toEqual(['/after']);
  });

  it('aborts the upstream when the client goes away mid-response, leaking no socket', async () => {
    let upstreamClosed = false;
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => res.write('tick|'), 10);
      res.on('close', () => {
        clearInterval(timer);
        upstreamClosed = true;
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    defer(() => new Promise<void>((r) => server.close(() => r())).then(() => undefined));
    defer(() => server.closeAllConnections());
    const port = (server.address() as AddressInfo).port;
    const { port: proxyPort, proxy } = await startProxy();
    const client = await rawConnect(proxyPort);
    client.write(`GET http://127.0.0.1:${port}/endless HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.until((t) => t.split('tick|').length > 2);
    client.socket.destroy();
    await expect.poll(() => upstreamClosed, { timeout: 2_000 }).toBe(true);
    await expect
      .poll(() => new Promise<number>((r) => proxy.server.getConnections((_e, n) => r(n))), {
        timeout: 2_000,
      })
      .toBe(0);
  });

  it('cuts the client connection when the upstream resets mid-response', async () => {
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-length': '1000' });
      res.write('partial');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    defer(() => new Promise<void>((r) => server.close(() => r())).then(() => undefined));
    const port = (server.address() as AddressInfo).port;
    const { port: proxyPort, url } = await startProxy();
    const client = await rawConnect(proxyPort);
    client.write(`GET http://127.0.0.1:${port}/reset HTTP/1.1\r\nHost: x\r\n\r\n`);
    await client.waitClosed();
    expect(client.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(client.text).toContain('partial');
    // The proxy is still alive.
    const up = await upstream(reply());
    const res = await request(`${up.url}/alive`, { dispatcher: viaProxy(url) });
    expect(res.statusCode).toBe(200);
    await res.body.dump();
  });
});
