import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { UpstreamRequest } from '../../../src/engine/types.js';
import {
  commitThenDestroy,
  echo,
  neverAnswer,
  reply,
  selfSignedCert,
  startUpstream,
} from '../../helpers/upstream.js';
import { cleanups, client, upstreamRequest, upstreamWith } from './upstream-harness.js';

function request(port: number, overrides: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return upstreamRequest(port, {
    pathAndQuery: '/items?x=1',
    headers: { 'content-type': 'application/json', 'x-custom': 'kept', 'idempotency-key': 'k-1' },
    ...overrides,
  });
}

/** A raw server whose request handler does whatever the test wants with the response. */
async function rawServer(handler: Parameters<typeof createServer>[1]): Promise<number> {
  const server: Server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  return (server.address() as AddressInfo).port;
}

describe('upstream client send()', () => {
  it('sends the exact headers plus content-length and buffers the response', async () => {
    const up = await upstreamWith(reply(201, { id: 7 }, { 'x-reply': 'yes' }));
    const result = await client().send(request(up.port));
    expect(result).toMatchObject({ kind: 'response', status: 201 });
    if (result.kind !== 'response') throw new Error('unreachable');
    expect(JSON.parse(Buffer.from(result.body).toString())).toEqual({ id: 7 });
    expect(result.headers['x-reply']).toBe('yes');
    expect(result.headers['connection']).toBeUndefined();
    expect(result.headers['keep-alive']).toBeUndefined();

    const seen = up.requests[0]!;
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/items?x=1');
    expect(seen.body.toString()).toBe('{"title":"hello"}');
    expect(seen.headers['content-length']).toBe('17');
    expect(seen.headers['transfer-encoding']).toBeUndefined();
    expect(seen.headers['host']).toBe(`127.0.0.1:${up.port}`);
    expect(seen.headers['x-custom']).toBe('kept');
    expect(seen.headers['idempotency-key']).toBe('k-1');
  });

  it('replaces a wrong content-length and drops hop-by-hop and Expect headers', async () => {
    const up = await upstreamWith(echo());
    const result = await client().send(
      request(up.port, {
        headers: {
          'content-length': '999',
          connection: 'x-hop',
          'x-hop': '1',
          expect: '100-continue',
          te: 'trailers',
        },
      }),
    );
    expect(result.kind).toBe('response');
    const seen = up.requests[0]!.headers;
    expect(seen['content-length']).toBe('17');
    expect(seen['x-hop']).toBeUndefined();
    expect(seen['expect']).toBeUndefined();
    expect(seen['te']).toBeUndefined();
  });

  it('strips hop-by-hop response headers, including Connection-named ones', async () => {
    const port = await rawServer((_req, res) => {
      res.writeHead(200, {
        connection: 'X-Upstream-Hop',
        'x-upstream-hop': 'secret',
        'keep-alive': 'timeout=5',
      });
      res.end('ok');
    });
    const result = await client().send(request(port, { method: 'GET', body: new Uint8Array(0) }));
    if (result.kind !== 'response') throw new Error(`unexpected ${JSON.stringify(result)}`);
    expect(result.headers['x-upstream-hop']).toBeUndefined();
    expect(result.headers['keep-alive']).toBeUndefined();
    expect(Buffer.from(result.body).toString()).toBe('ok');
  });

  it('does not follow redirects', async () => {
    const up = await upstreamWith(reply(302, { moved: true }, { location: '/elsewhere' }));
    const result = await client().send(request(up.port));
    expect(result).toMatchObject({ kind: 'response', status: 302, headers: { location: '/elsewhere' } });
    expect(up.requests.map((r) => r.url)).toEqual(['/items?x=1']);
  });

  it('classifies ECONNREFUSED as not_sent', async () => {
    const up = await startUpstream();
    const port = up.port;
    await up.close();
    expect(await client().send(request(port))).toEqual({
      kind: 'failure',
      dispatchState: 'not_sent',
      timedOut: false,
      error: 'ECONNREFUSED',
    });
  });

  it('classifies an unknown host as not_sent', async () => {
    const result = await client().send(request(80, { host: 'no-such-host.invalid' }));
    expect(result).toMatchObject({ kind: 'failure', dispatchState: 'not_sent', timedOut: false });
    expect(['ENOTFOUND', 'EAI_AGAIN']).toContain(result.kind === 'failure' ? result.error : '');
  });

  it('classifies a connect timeout (TLS handshake never answered) as not_sent and timed out', async () => {
    // A TCP server that accepts and stays silent: the TLS handshake, part of connecting, never ends.
    const silent = createNetServer((socket) => socket.on('error', () => {}));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const sockets: Socket[] = [];
    silent.on('connection', (s) => sockets.push(s));
    cleanups.push(
      () =>
        new Promise<void>((r) => {
          for (const s of sockets) s.destroy();
          silent.close(() => r());
        }),
    );
    const port = (silent.address() as AddressInfo).port;
    const result = await client({ connectTimeoutMs: 200 }).send(request(port, { scheme: 'https' }));
    expect(result).toEqual({
      kind: 'failure',
      dispatchState: 'not_sent',
      timedOut: true,
      error: 'UND_ERR_CONNECT_TIMEOUT',
    });
  });

  it('classifies a server that reads the request then destroys the socket as sent_no_response', async () => {
    const up = await upstreamWith(commitThenDestroy());
    const result = await client().send(request(up.port));
    expect(result).toMatchObject({ kind: 'failure', dispatchState: 'sent_no_response', timedOut: false });
    expect(up.requests).toHaveLength(1);
  });

  it('classifies a server that never answers as sent_no_response, timed out', async () => {
    const up = await upstreamWith(neverAnswer());
    const started = Date.now();
    const result = await client({ headersTimeoutMs: 200 }).send(request(up.port));
    expect(result).toEqual({
      kind: 'failure',
      dispatchState: 'sent_no_response',
      timedOut: true,
      error: 'UND_ERR_HEADERS_TIMEOUT',
    });
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('classifies a stalled response body as sent_no_response, timed out', async () => {
    const port = await rawServer((_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('partial');
    });
    const result = await client({ bodyTimeoutMs: 200 }).send(request(port));
    expect(result).toEqual({
      kind: 'failure',
      dispatchState: 'sent_no_response',
      timedOut: true,
      error: 'UND_ERR_BODY_TIMEOUT',
    });
  });

  it('fails a response over maxResponseBytes as sent_no_response (declared and streamed)', async () => {
    const big = Buffer.alloc(2048, 'x');
    const declared = await rawServer((_req, res) => {
      res.writeHead(200, { 'content-length': String(big.length) });
      res.end(big);
    });
    const chunked = await rawServer((_req, res) => {
      res.writeHead(200);
      res.write(big.subarray(0, 1000));
      res.end(big.subarray(1000));
    });
    const c = client({ maxResponseBytes: 1024 });
    const expected = {
      kind: 'failure',
      dispatchState: 'sent_no_response',
      timedOut: false,
      error: 'response_too_large',
    };
    expect(await c.send(request(declared))).toEqual(expected);
    expect(await c.send(request(chunked))).toEqual(expected);
  });

  it('reuses kept-alive connections', async () => {
    const up = await upstreamWith(reply());
    const c = client();
    // Back to back, undici's pool may open a second connection while the first is being released.
    for (let i = 0; i < 6; i++) expect((await c.send(request(up.port))).kind).toBe('response');
    expect(up.connections()).toBeLessThanOrEqual(2);
  });

  it('speaks HTTPS, classifying an untrusted certificate as not_sent', async () => {
    const tls = selfSignedCert();
    const up = await upstreamWith(reply(200, { secure: true }), { tls });
    const untrusted = await client().send(request(up.port, { scheme: 'https' }));
    expect(untrusted).toMatchObject({ kind: 'failure', dispatchState: 'not_sent', timedOut: false });
    expect(up.requests).toHaveLength(0);

    const trusted = await client({ ca: tls.cert }).send(request(up.port, { scheme: 'https' }));
    expect(trusted).toMatchObject({ kind: 'response', status: 200 });
  });

  it('classifies an invalid header as not_sent (refused before dispatch)', async () => {
    const up = await upstreamWith(reply());
    const result = await client().send(request(up.port, { headers: { 'x-bad': 'a\r\nb' } }));
    expect(result).toMatchObject({ kind: 'failure', dispatchState: 'not_sent' });
    expect(up.requests).toHaveLength(0);
  });
});
