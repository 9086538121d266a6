import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { echo, reply } from '../../helpers/upstream.js';
import { defer, rawConnect, rawProxyRequest, startProxy, upstream, useCleanup, viaProxy } from './harness.js';

useCleanup();

const run = promisify(execFile);

describe('forward proxy: ungoverned pass-through', () => {
  it('relays an absolute-form request and its answer (undici ProxyAgent)', async () => {
    const up = await upstream(reply(201, { created: true }, { 'x-upstream': 'yes' }));
    const { url, gate } = await startProxy();
    const res = await request(`${up.url}/things?a=1&b=2`, { dispatcher: viaProxy(url), method: 'GET' });
    expect(res.statusCode).toBe(201);
    expect(res.headers['x-upstream']).toBe('yes');
    expect(await res.body.json()).toEqual({ created: true });
    expect(up.requests).toHaveLength(1);
    expect(up.requests[0]!.url).toBe('/things?a=1&b=2');
    expect(up.requests[0]!.headers['host']).toBe(`127.0.0.1:${up.port}`);
    expect(gate.routed[0]).toMatchObject({
      method: 'GET',
      host: '127.0.0.1',
      path: '/things',
      query: 'a=1&b=2',
    });
    expect(gate.handled).toHaveLength(0);
  });

  it('streams a 5 MB body both ways unchanged', async () => {
    const up = await upstream(echo());
    const { url } = await startProxy();
    const body = Buffer.alloc(5 * 1024 * 1024);
    for (let i = 0; i < body.length; i += 4) body.writeUInt32LE((i * 2654435761) >>> 0, i);
    const res = await request(`${up.url}/upload`, {
      dispatcher: viaProxy(url),
      method: 'PUT',
      body,
      headers: { 'content-type': 'application/octet-stream' },
    });
    const back = Buffer.from(await res.body.arrayBuffer());
    const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
    expect(res.statusCode).toBe(200);
    expect(up.requests[0]!.body.length).toBe(body.length);
    expect(sha(up.requests[0]!.body)).toBe(sha(body));
    expect(back.length).toBe(body.length);
    expect(sha(back)).toBe(sha(body));
  });

  it('streams without buffering: each side sees the first chunk before the other side ends', async () => {
    let releaseResponse: () => void = () => {};
    let firstRequestChunk: () => void = () => {};
    const sawFirstChunk = new Promise<void>((r) => {
      firstRequestChunk = r;
    });
    const server = createServer((req, res) => {
      req.once('data', () => firstRequestChunk());
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('first|');
      new Promise<void>((r) => {
        releaseResponse = r;
      }).then(() => res.end('last'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    defer(() => new Promise<void>((r) => server.close(() => r())).then(() => undefined));
    defer(() => server.closeAllConnections());
    const port = (server.address() as AddressInfo).port;
    const { port: proxyPort } = await startProxy();

    const client = await rawConnect(proxyPort);
    client.write(
      `POST http://127.0.0.1:${port}/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello|\r\n`,
    );
    // The upstream got the first request chunk while the client has not finished its body.
    await sawFirstChunk;
    // The client got the first response chunk while the upstream has not finished its answer.
    await client.until((t) => t.includes('first|'));
    expect(client.text).not.toContain('last');
    releaseResponse();
    client.write('0\r\n\r\n');
    await client.until((t) => t.includes('last'));
  });

  it('never forwards hop-by-hop, Connection-named, Proxy-Authorization or Effectgate-* headers', async () => {
    const up = await upstream(reply());
    const { port, gate } = await startProxy();
    const res = await rawProxyRequest(port, `${up.url}/h`, {
      connection: 'keep-alive, X-Hop-Named',
      'x-hop-named': 'secret',
      'keep-alive': 'timeout=5',
      te: 'trailers',
      'proxy-connection': 'keep-alive',
      'proxy-authorization': 'Basic dHJpYWdlLWJvdDpzZWNyZXQ=',
      'effectgate-run': 'run-42',
      'effectgate-step': '3',
      'effectgate-operation': 'op-1',
      'x-end-to-end': 'kept',
      authorization: 'Bearer for-upstream',
    });
    expect(res.status).toBe(200);
    const seen = up.requests[0]!;
    const names = seen.rawHeaderNames.map((n) => n.toLowerCase());
    for (const banned of [
      'x-hop-named',
      'keep-alive',
      'te',
      'proxy-connection',
      'proxy-authorization',
      'effectgate-run',
      'effectgate-step',
      'effectgate-operation',
    ]) {
      expect(names).not.toContain(banned);
    }
    expect(seen.headers['x-end-to-end']).toBe('kept');
    expect(seen.headers['authorization']).toBe('Bearer for-upstream');
    expect(gate.routed[0]!.context).toMatchObject({ run: 'run-42', step: '3', operation: 'op-1' });
  });

  it('consumes Proxy-Authorization sent by undici ProxyAgent (token)', async () => {
    const up = await upstream(reply());
    const { url, proxy } = await startProxy();
    const atProxy: (string | undefined)[] = [];
    proxy.server.prependListener('request', (req) => atProxy.push(req.headers['proxy-authorization']));
    const res = await request(`${up.url}/auth`, { dispatcher: viaProxy(url, 'Bearer agent-secret') });
    await res.body.dump();
    expect(atProxy).toEqual(['Bearer agent-secret']);
    expect(up.requests[0]!.headers['proxy-authorization']).toBeUndefined();
  });

  it('strips hop-by-hop response headers named by the upstream', async () => {
    const up = await upstream(
      reply(200, { ok: 1 }, { connection: 'X-Upstream-Hop', 'x-upstream-hop': 'secret' }),
    );
    const { port } = await startProxy();
    const res = await rawProxyRequest(port, `${up.url}/r`, {});
    expect(res.status).toBe(200);
    expect(res.headers['x-upstream-hop']).toBeUndefined();
    expect(JSON.parse(res.body)).toEqual({ ok: 1 });
  });

  it('returns a redirect as is, without following it', async () => {
    const up = await upstream(reply(302, { moved: true }, { location: '/elsewhere' }));
    const { url } = await startProxy();
    const res = await request(`${up.url}/from`, { dispatcher: viaProxy(url) });
    await res.body.dump();
    expect(res.statusCode).toBe(302);
    expect(res.headers['location']).toBe('/elsewhere');
    expect(up.requests.map((r) => r.url)).toEqual(['/from']);
  });

  it('works with curl -x', async () => {
    const up = await upstream(reply(200, { via: 'curl' }));
    const { url, gate } = await startProxy();
    const { stdout } = await run('curl', [
      '-sS',
      '--max-time',
      '10',
      '-x',
      url,
      '-H',
      'Effectgate-Run: curl-run',
      '-H',
      'X-Custom: 1',
      `${up.url}/curl?x=1`,
    ]);
    expect(JSON.parse(stdout)).toEqual({ via: 'curl' });
    expect(up.requests[0]!.url).toBe('/curl?x=1');
    expect(up.requests[0]!.headers['effectgate-run']).toBeUndefined();
    expect(up.requests[0]!.headers['x-custom']).toBe('1');
    expect(gate.routed[0]!.context.run).toBe('curl-run');
  });

  it('keeps the client connection alive across requests', async () => {
    const up = await upstream(reply());
    const { url, connections } = await startProxy();
    const dispatcher = viaProxy(url);
    for (let i = 0; i < 5; i++) {
      const res = await request(`${up.url}/k${i}`, { dispatcher });
      await res.body.dump();
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(up.requests).toHaveLength(5);
    expect(connections()).toBe(1);
  });
});
