/**
 * `Upgrade` requests (WebSocket) through the forward proxy, relayed by http-proxy-3 without
 * buffering. Only ungoverned traffic is relayed: a governed route's effects cannot be read out of
 * an opaque frame stream, so such an upgrade is refused.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { GateHandler } from '../engine/index.js';
import { errorCode, formatAuthority, isTimeoutCode, upstreamFailedResponse } from '../engine/index.js';
import { resolveRequest } from './forward-handler.js';
import type { ProxyAuthenticator } from './proxy-auth.js';
import type { TunnelSockets } from './tunnel-sockets.js';
import { writeRawResponse } from './write-raw-response.js';

export class UpgradeTunnel {
  readonly #gate: GateHandler;
  readonly #proxy: ProxyServer;
  readonly #tunnels: TunnelSockets;
  readonly #auth: ProxyAuthenticator | undefined;

  constructor(gate: GateHandler, tunnels: TunnelSockets, auth?: ProxyAuthenticator) {
    this.#gate = gate;
    this.#tunnels = tunnels;
    this.#auth = auth;
    this.#proxy = createProxyServer({ ws: true, changeOrigin: true, xfwd: false });
    // http-proxy-3 rethrows errors nobody listens to; socket errors reach here after the upgrade.
    this.#proxy.on('error', (_err: Error, _req: unknown, target: unknown) => {
      if (isDuplex(target)) target.destroy();
    });
  }

  /** The server's `upgrade` listener. */
  handle(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const resolved = resolveRequest(this.#gate, req, socket, this.#tunnels, this.#auth);
    if (!resolved.ok) {
      writeRawResponse(socket, resolved.response);
      return;
    }
    const { head: gateHead, pathAndQuery } = resolved;
    const decision = this.#gate.route(gateHead);
    if (decision.kind === 'refuse') {
      writeRawResponse(socket, decision.response);
      return;
    }
    const protocol = req.headers.upgrade?.trim() ?? '';
    if (decision.kind === 'govern' || req.method !== 'GET' || protocol.toLowerCase() !== 'websocket') {
      const detail =
        decision.kind === 'govern'
          ? `Requests to ${gateHead.host}${gateHead.path} are governed and cannot be upgraded to ${protocol}.`
          : `Only WebSocket upgrades (GET with Upgrade: websocket) are relayed, not ${req.method} ${protocol}.`;
      writeRawResponse(socket, this.#gate.refuse(gateHead, 'bad_request', detail));
      return;
    }
    // Forward the normalized end-to-end headers plus the upgrade request itself (RFC 9110 §7.8):
    // hop-by-hop, Proxy-* and Effectgate-* fields are already gone.
    const headers: IncomingHttpHeaders = { ...gateHead.headers, connection: 'Upgrade', upgrade: protocol };
    req.headers = headers;
    req.url = pathAndQuery;
    const target = `http://${formatAuthority(gateHead.host, gateHead.port)}`;
    this.#proxy.ws(req, socket, head, { target }, (err: Error) => {
      // Before the 101 went out the client can still be told; after, cutting is all that is left.
      if ((socket as Partial<{ bytesWritten: number }>).bytesWritten === 0) {
        const code = errorCode(err);
        writeRawResponse(socket, upstreamFailedResponse(code, isTimeoutCode(code)));
      } else {
        socket.destroy();
      }
    });
  }

  close(): void {
    this.#proxy.close();
  }
}

function isDuplex(value: unknown): value is Duplex {
  return typeof value === 'object' && value !== null && typeof (value as Duplex).destroy === 'function';
}
