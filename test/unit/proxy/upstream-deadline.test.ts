/**
 * `UpstreamRequest.deadlineMs`: the whole exchange is cut when it runs out, and the failure says
 * whether anything can have reached the destination.
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { delay, reply, selfSignedCert } from '../../helpers/upstream.js';
import { cleanups, client, upstreamRequest, upstreamWith } from './upstream-harness.js';

const request = upstreamRequest;

async function listen(
  server: Server | ReturnType<typeof createNetServer>,
  sockets: Set<Socket>,
): Promise<number> {
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  );
  return (server.address() as AddressInfo).port;
}

const EXPIRED = { kind: 'failure', timedOut: true, error: 'deadline_exceeded' } as const;

describe('upstream client send() with deadlineMs', () => {
  it('cuts a slow answer: sent_no_response, timed out, long before the other timeouts', async () => {
    const up = await upstreamWith(delay(5_000, reply(201)));
    const started = Date.now();
    const result = await client().send(request(up.port, { deadlineMs: 200 }));
    expect(result).toEqual({ ...EXPIRED, dispatchState: 'sent_no_response' });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(up.requests).toHaveLength(1);
  });

  it('cuts a body that keeps dripping (the body timeout never fires)', async () => {
    const sockets = new Set<Socket>();
    const server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const timer = setInterval(() => res.write('.'), 30);
      res.once('close', () => clearInterval(timer));
    });
    const port = await listen(server, sockets);
    const started = Date.now();
    const result = await client({ bodyTimeoutMs: 1_000 }).send(request(port, { deadlineMs: 300 }));
    expect(result).toEqual({ ...EXPIRED, dispatchState: 'sent_no_response' });
    expect(Date.now() - started).toBeLessThan(1_000);
    // The dispatch was destroyed, not left running: the upstream sees its connection go.
    await expect.poll(() => sockets.size, { timeout: 2_000 }).toBe(0);
  });

  it('is not_sent when nothing was written yet, and nothing is written afterwards', async () => {
    // A relay that holds each connection for 600 ms before joining it to a real HTTPS upstream:
    // the TLS handshake (part of connecting) ends well after the 150 ms deadline.
    const tls = selfSignedCert();
    const up = await upstreamWith(reply(201), { tls });
    const sockets = new Set<Socket>();
    const relay = createNetServer((socket) => {
      socket.pause();
      const timer = setTimeout(() => {
        const onward = connect(up.port, '127.0.0.1');
        onward.on('error', () => socket.destroy());
        socket.on('close', () => onward.destroy());
        socket.pipe(onward).pipe(socket);
      }, 600);
      socket.once('close', () => clearTimeout(timer));
    });
    const port = await listen(relay, sockets);
    const result = await client({ ca: tls.cert }).send(
      request(port, { scheme: 'https', host: 'localhost', deadlineMs: 150 }),
    );
    expect(result).toEqual({ ...EXPIRED, dispatchState: 'not_sent' });
    await new Promise((r) => setTimeout(r, 1_200));
    expect(up.requests).toHaveLength(0);
  });

  it('does not interfere with an answer that comes in time', async () => {
    const up = await upstreamWith(reply(201, { ok: 1 }));
    const c = client();
    const result = await c.send(request(up.port, { deadlineMs: 2_000 }));
    expect(result).toMatchObject({ kind: 'response', status: 201 });
    // Nothing fires later on the settled exchange (the timer was cleared).
    await new Promise((r) => setTimeout(r, 50));
    expect((await c.send(request(up.port))).kind).toBe('response');
  });
});
