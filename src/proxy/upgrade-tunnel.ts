/**
 * `Upgrade` requests (WebSocket) through the forward proxy, relayed by http-proxy-3 without
 * buffering. Only ungoverned traffic is relayed: a governed route's effects cannot be read out of
 * an opaque frame stream, so such an upgrade is refused.
 *
 * The upstream leg keeps the client's scheme: an upgrade read inside an intercepted TLS tunnel
 * goes out over TLS (`wss`), verified against the system roots plus the proxy's upstream CA, never
 * in the clear. The destination's `101` (or non-upgrade answer) loses any `Effectgate-*` field:
 * that namespace is the gate's word. An upgraded connection silent both ways for
 * `tunnelIdleTimeoutMs` is closed.
 */
import {
  type ClientRequest,
  Agent as HttpAgent,
  type IncomingHttpHeaders,
  type IncomingMessage,
} from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { rootCertificates } from 'node:tls';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import type { GateHandler } from '../engine/index.js';
import {
  destinationRefusedResponse,
  errorCode,
  formatAuthority,
  isGateHeader,
  isTimeoutCode,
  rawWithoutGateHeaders,
  upstreamFailedResponse,
} from '../engine/index.js';
import { type DestinationGuard, DestinationRefusedError } from './destination-guard.js';
import { resolveRequest } from './forward-handler.js';
import type { ProxyAuthenticator } from './proxy-auth.js';
import type { ProxyCounters } from './proxy-counters.js';
import type { TunnelSockets } from './tunnel-sockets.js';
import { writeRawResponse } from './write-raw-response.js';

export interface UpgradeTunnelOptions {
  readonly gate: GateHandler;
  readonly tunnels: TunnelSockets;
  readonly auth?: ProxyAuthenticator | undefined;
  /** Extra trust anchors (PEM) for `wss` upstreams, added to the system roots (`--upstream-ca`). */
  readonly upstreamCa?: string | Buffer | undefined;
  readonly tunnelIdleTimeoutMs: number;
  readonly counters: ProxyCounters;
  /** The egress policy: an upgrade's destination is checked like any request's, before connecting. */
  readonly guard?: DestinationGuard | undefined;
}

export class UpgradeTunnel {
  readonly #gate: GateHandler;
  readonly #proxy: ProxyServer;
  readonly #tunnels: TunnelSockets;
  readonly #auth: ProxyAuthenticator | undefined;
  readonly #ca: string | undefined;
  readonly #guard: DestinationGuard | undefined;

  constructor(options: UpgradeTunnelOptions) {
    this.#gate = options.gate;
    this.#tunnels = options.tunnels;
    this.#auth = options.auth;
    this.#guard = options.guard;
    // Node's `ca` replaces the system roots; they are added back, as for the forward path.
    this.#ca =
      options.upstreamCa === undefined
        ? undefined
        : [...rootCertificates, String(options.upstreamCa)].join('\n');
    this.#proxy = createProxyServer({ ws: true, changeOrigin: true, xfwd: false });
    // http-proxy-3 rethrows errors nobody listens to; socket errors reach here after the upgrade.
    this.#proxy.on('error', (_err: Error, _req: unknown, target: unknown) => {
      if (isDuplex(target)) target.destroy();
    });
    const idleMs = options.tunnelIdleTimeoutMs;
    this.#proxy.on('proxyReqWs', (proxyReq: ClientRequest, _req: IncomingMessage, socket: Socket) => {
      let proxySocket: Socket | undefined;
      // Prepended: before http-proxy-3's own listeners copy the destination's head to the client.
      proxyReq.prependListener('upgrade', (res: IncomingMessage, upstream: Socket) => {
        dropGateHeaders(res);
        proxySocket = upstream;
      });
      proxyReq.prependListener('response', dropGateHeaders);
      // The client socket sees every byte either way (http-proxy-3 cleared its timeout just
      // before this event); its silence is the connection's, waiting for the 101 included.
      socket.setTimeout(idleMs, () => {
        options.counters.increment('tunnelsIdleClosed');
        proxySocket?.destroy();
        socket.destroy();
      });
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
    // `--resolve` may send the host elsewhere: dialled and checked there, while the `Host` header
    // (and with it the TLS name node's https agent sends and verifies) keeps the host's.
    const dial = this.#guard?.dialTarget(gateHead.host, gateHead.port) ?? gateHead;
    const redirected = dial.host !== gateHead.host || dial.port !== gateHead.port;
    if (redirected) {
      const defaultPort = gateHead.scheme === 'https' ? 443 : 80;
      headers.host =
        gateHead.port === defaultPort
          ? formatAuthority(gateHead.host, gateHead.port).replace(/:\d+$/, '')
          : formatAuthority(gateHead.host, gateHead.port);
    }
    req.headers = headers;
    req.url = pathAndQuery;
    const target = `${gateHead.scheme}://${formatAuthority(dial.host, dial.port)}`;
    const tls =
      gateHead.scheme === 'https'
        ? { secure: true, ...(this.#ca === undefined ? {} : { ca: this.#ca }) }
        : {};
    // The egress policy, as for every request and tunnel: an address literal is checked now, a
    // name in the connection's own lookup (no window between check and connect).
    const refused = this.#guard?.refuseLiteral(dial.host, dial.port) ?? null;
    if (refused !== null) {
      writeRawResponse(socket, destinationRefusedResponse(refused.reason));
      return;
    }
    const lookup = this.#guard?.lookup(dial.port);
    const agent =
      lookup === undefined
        ? undefined
        : gateHead.scheme === 'https'
          ? new HttpsAgent({ lookup, keepAlive: false, ...(this.#ca === undefined ? {} : { ca: this.#ca }) })
          : new HttpAgent({ lookup, keepAlive: false });
    this.#proxy.ws(
      req,
      socket,
      head,
      // `changeOrigin` (the proxy's default) would name the dialled address in `Host`.
      {
        target,
        ...tls,
        ...(agent === undefined ? {} : { agent }),
        ...(redirected ? { changeOrigin: false } : {}),
      },
      (err: Error) => {
        // Before the 101 went out the client can still be told; after, cutting is all that is left.
        if (
          (socket as Partial<{ bytesWritten: number }>).bytesWritten === 0 &&
          err instanceof DestinationRefusedError
        ) {
          writeRawResponse(socket, destinationRefusedResponse(err.reason));
        } else if ((socket as Partial<{ bytesWritten: number }>).bytesWritten === 0) {
          const code = errorCode(err);
          writeRawResponse(socket, upstreamFailedResponse(code, isTimeoutCode(code)));
        } else {
          socket.destroy();
        }
      },
    );
  }

  close(): void {
    this.#proxy.close();
  }
}

/** The destination's response head without `Effectgate-*` fields (node caches `headers` once read). */
function dropGateHeaders(res: IncomingMessage): void {
  for (const name of Object.keys(res.headers)) if (isGateHeader(name)) delete res.headers[name];
  res.rawHeaders = rawWithoutGateHeaders(res.rawHeaders);
}

function isDuplex(value: unknown): value is Duplex {
  return typeof value === 'object' && value !== null && typeof (value as Duplex).destroy === 'function';
}
