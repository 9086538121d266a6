/**
 * Shared setup for proxy integration tests: a proxy on 127.0.0.1:0 in front of a FakeGate, raw
 * socket helpers for what ordinary clients refuse to send, and cleanup bookkeeping.
 */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import { ProxyAgent } from 'undici';
import { afterEach } from 'vitest';
import { createProxyServer, type ProxyServer, type ProxyServerOptions } from '../../../src/proxy/index.js';
import {
  startUpstream,
  type Upstream,
  type UpstreamHandler,
  type UpstreamOptions,
} from '../../helpers/upstream.js';
import { FakeGate, type FakeGateOptions } from './fake-gate.js';

const cleanups: (() => Promise<void> | void)[] = [];

/** Registers the afterEach hook that closes everything a test opened (call once per file). */
export function useCleanup(): void {
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });
}

export function defer(fn: () => Promise<void> | void): void {
  cleanups.push(fn);
}

export interface RunningProxy {
  readonly proxy: ProxyServer;
  readonly gate: FakeGate;
  readonly url: string;
  readonly port: number;
  /** Client connections the proxy accepted. */
  readonly connections: () => number;
}

export async function startProxy(
  gateOptions: FakeGateOptions = {},
  options: Omit<ProxyServerOptions, 'gate'> = {},
): Promise<RunningProxy> {
  const gate = new FakeGate(gateOptions);
  const proxy = createProxyServer({ gate, ...options });
  let connections = 0;
  proxy.server.on('connection', () => {
    connections += 1;
  });
  const addr = await proxy.listen('127.0.0.1', 0);
  defer(() => proxy.close());
  return {
    proxy,
    gate,
    url: `http://127.0.0.1:${addr.port}`,
    port: addr.port,
    connections: () => connections,
  };
}

export async function upstream(handler?: UpstreamHandler, options?: UpstreamOptions): Promise<Upstream> {
  const up = await startUpstream(handler, options);
  defer(() => up.close());
  return up;
}

/** Opens a raw TCP connection to `port`, collecting everything received. */
export async function rawConnect(port: number): Promise<RawClient> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const client = new RawClient(socket);
  defer(() => {
    socket.destroy();
  });
  return client;
}

export class RawClient {
  readonly socket: Socket;
  #received = Buffer.alloc(0);
  #closed = false;
  readonly #waiters: (() => void)[] = [];

  constructor(socket: Socket) {
    this.socket = socket;
    socket.on('data', (d: Buffer) => {
      this.#received = Buffer.concat([this.#received, d]);
      this.#wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.#closed = true;
      this.#wake();
    });
  }

  get text(): string {
    return this.#received.toString('latin1');
  }

  get closed(): boolean {
    return this.#closed;
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Resolves once the received text satisfies `predicate` (or rejects on close/timeout). */
  async until(predicate: (text: string) => boolean, timeoutMs = 5_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate(this.text)) {
      if (this.#closed) throw new Error(`connection closed; received: ${JSON.stringify(this.text)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; received: ${JSON.stringify(this.text)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.text;
  }

  /** Resolves when the peer closed the connection. */
  async waitClosed(timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.#closed) {
      if (Date.now() > deadline) throw new Error('connection still open');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.#waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  #wake(): void {
    for (const w of this.#waiters.splice(0)) w();
  }
}

/** The body of a complete HTTP/1.1 response held in `text` (content-length framed). */
export function responseBody(text: string): string {
  const i = text.indexOf('\r\n\r\n');
  return i === -1 ? '' : text.slice(i + 4);
}

/** True once `text` holds a full content-length framed response. */
export function hasFullResponse(text: string): boolean {
  const i = text.indexOf('\r\n\r\n');
  if (i === -1) return false;
  const m = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, i));
  return m === null || text.length - (i + 4) >= Number(m[1]);
}

/** undici through the proxy with absolute-form requests (no CONNECT for http:// URLs). */
export function viaProxy(proxyUrl: string, token?: string): ProxyAgent {
  const agent = new ProxyAgent({
    uri: proxyUrl,
    proxyTunnel: false,
    ...(token === undefined ? {} : { token }),
  });
  defer(() => agent.close());
  return agent;
}

/** node:http straight to the proxy, so the test controls every header on the wire. */
export function rawProxyRequest(
  proxyPort: number,
  target: string,
  headers: Record<string, string>,
  method = 'GET',
  body?: Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: proxyPort, method, path: target, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}
