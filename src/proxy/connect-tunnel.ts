/**
 * CONNECT handling (RFC 9110 §9.3.6): opens a TCP connection to `host:port` and relays bytes both
 * ways without looking at them.
 *
 * Seam for TLS interception of governed hosts (DESIGN.md §4.2): `handle()` decides what to do with
 * an accepted tunnel in one place (`#open`); an interceptor will answer `200` itself, peek at the
 * first byte (TLS or plain HTTP) and serve the inner requests through the forward handler instead
 * of relaying them.
 */
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { GateHandler } from '../engine/index.js';
import { normalizeHost, problemResponse, upstreamFailedResponse } from '../engine/index.js';
import { errorCode } from './classify-failure.js';
import { parseAuthority } from './parse-target.js';
import { writeRawResponse } from './write-raw-response.js';

export interface ConnectTunnelOptions {
  readonly gate: GateHandler;
  /** Destination ports a client may open a tunnel to. */
  readonly allowPorts: readonly number[];
  /** How long to wait for the destination's TCP handshake. */
  readonly connectTimeoutMs: number;
}

export const DEFAULT_CONNECT_PORTS: readonly number[] = [443, 80];

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

export class ConnectTunnel {
  readonly #gate: GateHandler;
  readonly #allowPorts: ReadonlySet<number>;
  readonly #connectTimeoutMs: number;

  constructor(options: ConnectTunnelOptions) {
    this.#gate = options.gate;
    this.#allowPorts = new Set(options.allowPorts);
    this.#connectTimeoutMs = options.connectTimeoutMs;
  }

  /** The server's `connect` listener: `client` is the raw client socket, `head` bytes already read. */
  handle(req: IncomingMessage, client: Duplex, head: Buffer): void {
    // node:http removed its own error listener when it handed the socket over.
    client.on('error', () => client.destroy());
    const parsed = parseAuthority(req.url ?? '', null);
    if (!parsed.ok) {
      writeRawResponse(client, this.#gate.refuse(null, 'bad_request', parsed.reason));
      return;
    }
    const { host, port } = parsed.value;
    if (!this.#allowPorts.has(port)) {
      const detail = `Tunnels may only be opened to ports ${[...this.#allowPorts].join(', ')}; ${port} is not allowed.`;
      writeRawResponse(
        client,
        problemResponse({
          status: 403,
          problem: 'connect_port_forbidden',
          title: 'CONNECT port not allowed',
          detail,
        }),
      );
      return;
    }
    this.#open(client, head, normalizeHost(host), port);
  }

  #open(client: Duplex, head: Buffer, host: string, port: number): void {
    const upstream: Socket = connect({ host, port });
    let established = false;
    upstream.setTimeout(this.#connectTimeoutMs, () => {
      if (!established) upstream.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' }));
    });
    upstream.once('connect', () => {
      established = true;
      upstream.setTimeout(0);
      upstream.setNoDelay(true);
      if (client.destroyed) {
        upstream.destroy();
        return;
      }
      client.write(ESTABLISHED);
      if (head.length > 0) upstream.write(head);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    upstream.on('error', (err) => {
      if (established) {
        client.destroy();
        return;
      }
      const code = errorCode(err);
      writeRawResponse(client, upstreamFailedResponse(code, code === 'ETIMEDOUT'));
    });
    // Whichever side goes away first takes the other with it; a clean end was already relayed by
    // pipe() (half-close), so only what is left gets cut.
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => {
      if (!established) return;
      if (client.writableEnded) {
        client.once('finish', () => client.destroy());
        if (client.writableFinished) client.destroy();
      } else {
        client.destroy();
      }
    });
  }
}
