/**
 * The forward proxy's node:http front: wiring only. Requests go to the `ForwardHandler`, CONNECT to
 * the `ConnectTunnel`, upgrades to the `UpgradeTunnel`; verdicts come from the `GateHandler`. A
 * CONNECT tunnel carrying plain HTTP (or intercepted HTTPS, decrypted) comes back to this same
 * server as a new connection.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AgentRegistry } from '../config/index.js';
import type { GateHandler, GateResponse } from '../engine/index.js';
import { problemResponse } from '../engine/index.js';
import type { CertificateAuthority } from './certificate-authority.js';
import { ConnectTunnel, DEFAULT_CONNECT_PORTS } from './connect-tunnel.js';
import { ForwardHandler } from './forward-handler.js';
import { ProxyAuthenticator } from './proxy-auth.js';
import { TunnelSockets } from './tunnel-sockets.js';
import { UpgradeTunnel } from './upgrade-tunnel.js';
import { createUpstreamClient, type UpstreamClientOptions } from './upstream-client.js';
import { writeRawResponse } from './write-raw-response.js';

export interface ProxyServerTimeouts {
  /** Time for a client to send a complete request head. Default 30 s. */
  readonly headersTimeoutMs?: number;
  /** Time for a client to send a complete request (head and body). Default 5 min. */
  readonly requestTimeoutMs?: number;
  /** How long an idle client connection is kept. Default 5 s. */
  readonly keepAliveTimeoutMs?: number;
}

export interface ProxyServerOptions {
  readonly gate: GateHandler;
  readonly upstream?: UpstreamClientOptions;
  /** Ports CONNECT may reach. Default `[443, 80]`. */
  readonly allowConnectPorts?: readonly number[];
  readonly timeouts?: ProxyServerTimeouts;
  /** The local CA (`--ca-dir`): HTTPS to hosts some tool names is intercepted and governed. */
  readonly ca?: CertificateAuthority;
  /**
   * The agents file (`--agents`): every request, CONNECT and upgrade must carry one of its
   * credentials in `Proxy-Authorization` (else 407), and its scope is the credential's. Absent: the
   * gate's own scope (sidecar mode).
   */
  readonly agents?: AgentRegistry;
}

export interface ProxyServer {
  readonly server: Server;
  listen(host: string, port: number): Promise<AddressInfo>;
  /** Stops listening, cuts every client connection and tunnel, then closes the upstream pools. */
  close(): Promise<void>;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

export function createProxyServer(options: ProxyServerOptions): ProxyServer {
  const { gate } = options;
  const upstream = createUpstreamClient(options.upstream);
  const tunnels = new TunnelSockets();
  const auth = options.agents === undefined ? undefined : new ProxyAuthenticator(options.agents, gate);
  const forward = new ForwardHandler({ gate, upstream, tunnels, auth });
  const timeouts = options.timeouts ?? {};

  const server = createServer({
    headersTimeout: timeouts.headersTimeoutMs ?? 30_000,
    requestTimeout: timeouts.requestTimeoutMs ?? 300_000,
    keepAliveTimeout: timeouts.keepAliveTimeoutMs ?? 5_000,
  });
  const tunnel = new ConnectTunnel({
    gate,
    allowPorts: options.allowConnectPorts ?? DEFAULT_CONNECT_PORTS,
    connectTimeoutMs: options.upstream?.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    tunnels,
    ca: options.ca,
    auth,
    serveHttp: (socket) => {
      // The tunnel's first bytes were put back into `socket`; node:http parses from there on, with
      // the same listeners, timeouts and keep-alive as any client connection.
      server.emit('connection', socket);
      socket.resume();
    },
  });
  const upgrade = new UpgradeTunnel(gate, tunnels, auth);
  server.on('request', (req, res) => forward.handle(req, res));
  server.on('checkContinue', (req, res) => forward.handle(req, res, true));
  server.on('connect', (req, socket, head) => tunnel.handle(req, socket, head));
  server.on('upgrade', (req, socket, head) => upgrade.handle(req, socket, head));
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A response already on its way cannot be followed by another one (node:http's own rule).
    const inFlight = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    writeRawResponse(socket, clientErrorResponse(gate, err.code));
  });

  // node:http forgets sockets handed to `connect`/`upgrade`; close() must still cut them.
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  let closing: Promise<void> | undefined;
  return {
    server,
    listen: (host, port) =>
      new Promise<AddressInfo>((resolve, reject) => {
        const onError = (err: Error): void => reject(err);
        server.once('error', onError);
        server.listen(port, host, () => {
          server.off('error', onError);
          resolve(server.address() as AddressInfo);
        });
      }),
    close: () => {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        for (const socket of sockets) socket.destroy();
        await closed;
        upgrade.close();
        await upstream.close();
      })();
      return closing;
    },
  };
}

function clientErrorResponse(gate: GateHandler, code: string | undefined): GateResponse {
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return problemResponse({
      status: 408,
      problem: 'request_timeout',
      title: 'Request timeout',
      detail: 'The request was not received in time.',
    });
  }
  if (code === 'HPE_HEADER_OVERFLOW') {
    return problemResponse({
      status: 431,
      problem: 'headers_too_large',
      title: 'Request header fields too large',
      detail: 'The request head is larger than the gate accepts.',
      code: 'EG_ERR_BAD_REQUEST',
    });
  }
  return gate.refuse(null, 'bad_request', `The request is not valid HTTP/1.1 (${code ?? 'parse error'}).`);
}
