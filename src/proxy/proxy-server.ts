/**
 * The forward proxy's node:http front: wiring only. Every new connection is first admitted by the
 * `ConnectionAdmission` (the connection caps); requests go to the `ForwardHandler`, CONNECT to
 * the `ConnectTunnel`, upgrades to the `UpgradeTunnel`; verdicts come from the `GateHandler`. A
 * CONNECT tunnel carrying plain HTTP (or intercepted HTTPS, decrypted) comes back to this same
 * server as a new connection (already admitted: a tunnel is one client connection). Limits and
 * their defaults: `proxy-limits.ts`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AgentRegistry } from '../config/index.js';
import type { GateHandler, GateLogger, GateResponse } from '../engine/index.js';
import { codedProblem, problemResponse } from '../engine/index.js';
import type { EgressPolicy } from '../policy/index.js';
import type { CertificateAuthority } from './certificate-authority.js';
import { ConnectTunnel, DEFAULT_CONNECT_PORTS } from './connect-tunnel.js';
import { ConnectionAdmission } from './connection-admission.js';
import { readDescriptorLimit } from './descriptor-limit.js';
import { DestinationGuard, type DialTarget } from './destination-guard.js';
import { ForwardHandler } from './forward-handler.js';
import { GateListeners, type ListenerAddress } from './gate-listeners.js';
import { ProxyAuthenticator } from './proxy-auth.js';
import { ProxyCounters, type ProxyCountersSnapshot } from './proxy-counters.js';
import { fitLimits, type ProxyLimits } from './proxy-limits.js';
import { TunnelSockets } from './tunnel-sockets.js';
import { UpgradeTunnel } from './upgrade-tunnel.js';
import { createUpstreamClient, type UpstreamClientOptions } from './upstream-client.js';
import { writeRawResponse } from './write-raw-response.js';

export interface ProxyServerOptions {
  readonly gate: GateHandler;
  readonly upstream?: UpstreamClientOptions;
  /** Ports CONNECT may reach. Default `[443, 80]`. */
  readonly allowConnectPorts?: readonly number[];
  /**
   * `--resolve`: `host:port` (canonical host) → the address and port dialled instead, by every dial
   * point (requests, tunnels, upgrades). Absent: every host is dialled where its name resolves.
   */
  readonly resolve?: ReadonlyMap<string, DialTarget>;
  /**
   * Timeouts and connection caps; each absent one is `DEFAULT_PROXY_LIMITS`'s. The caps are then
   * fitted under `descriptorLimit` (`resolveLimits`).
   */
  readonly limits?: Partial<ProxyLimits>;
  /**
   * The process's open-file limit the connection caps must fit under. Default: read once here
   * (`readDescriptorLimit`); `null`: none known, the caps stay as configured.
   */
  readonly descriptorLimit?: number | null;
  /** Where refusals the proxy makes on its own (caps, closed tunnels) are logged. Absent: not logged. */
  readonly logger?: GateLogger;
  /** The local CA (`--ca-dir`): HTTPS to hosts some tool names is intercepted and governed. */
  readonly ca?: CertificateAuthority;
  /**
   * The agents file (`--agents`): every request, CONNECT and upgrade must carry one of its
   * credentials in `Proxy-Authorization` (else 407), and its scope is the credential's. Absent: the
   * gate's own scope (sidecar mode).
   */
  readonly agents?: AgentRegistry;
  /**
   * The policies' `egress` block: destination addresses never connected to, checked on the
   * resolved address of every request and tunnel. Absent: the gate's own policy set's when `gate`
   * has one (a `Gate` does), else the default (`deny: [link_local, gate]`).
   */
  readonly egress?: EgressPolicy;
}

export interface ProxyServer {
  readonly server: Server;
  /** The limits in force: the configured ones, the caps fitted under `descriptorLimit`. */
  readonly limits: ProxyLimits;
  /** The open-file limit the caps were fitted under; `null` when none was known. */
  readonly descriptorLimit: number | null;
  listen(host: string, port: number): Promise<AddressInfo>;
  /**
   * Stops listening and closes idle connections; requests in flight may finish for up to `graceMs`
   * (default 0); then cuts every client connection and tunnel and closes the upstream pools.
   */
  close(graceMs?: number): Promise<void>;
  /** What the proxy refused or cut on its own so far (caps, tunnel checks, idle timeouts). */
  counters(): ProxyCountersSnapshot;
  /** Client connections held now (the number the caps count). */
  openConnections(): number;
  /**
   * The gate's other listeners (the admin server), for `egress.deny: gate`; the proxy's own
   * bound address is added by `listen()`. Replaces what an earlier call set.
   */
  setGateAddresses(addresses: readonly ListenerAddress[]): void;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

export function createProxyServer(options: ProxyServerOptions): ProxyServer {
  const { gate } = options;
  const counters = new ProxyCounters();
  const listeners = new GateListeners();
  const guard = new DestinationGuard({
    egress: options.egress ?? policiesOf(gate)?.egress,
    resolve: options.resolve,
    listeners,
    counters,
    logger: options.logger,
  });
  const upstream = createUpstreamClient({ ...options.upstream, guard, logger: options.logger });
  const tunnels = new TunnelSockets();
  const auth = options.agents === undefined ? undefined : new ProxyAuthenticator(options.agents, gate);
  const forward = new ForwardHandler({ gate, upstream, tunnels, auth });
  const descriptorLimit =
    options.descriptorLimit === undefined ? readDescriptorLimit() : options.descriptorLimit;
  const limits = fitLimits(options.limits, descriptorLimit, options.logger);
  const admission = new ConnectionAdmission(limits, counters, options.logger);

  const server = createServer({
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // How often node:http looks for connections past their head/request timeout (default 30 s,
    // which lets a connection that never sends a byte live twice its headers timeout).
    connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
  });
  // The caps act before node:http reads a byte: its own `connection` listener (the one installed
  // by createServer) runs only for admitted connections. Tunnel sockets handed back by
  // `serveHttp` were admitted as the CONNECT's connection and are not counted twice.
  const httpListeners = server.listeners('connection') as ((socket: Duplex) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    if (tunnels.tunnelOf(socket) === undefined && !admission.admit(socket)) return;
    for (const listener of httpListeners) listener.call(server, socket);
  });
  const tunnel = new ConnectTunnel({
    gate,
    allowPorts: options.allowConnectPorts ?? DEFAULT_CONNECT_PORTS,
    connectTimeoutMs: options.upstream?.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    tunnels,
    ca: options.ca,
    auth,
    limits,
    counters,
    logger: options.logger,
    guard,
    activity: admission,
    serveHttp: (socket) => {
      // The tunnel's first bytes were put back into `socket`; node:http parses from there on, with
      // the same listeners, timeouts and keep-alive as any client connection.
      server.emit('connection', socket);
      socket.resume();
    },
  });
  const upgrade = new UpgradeTunnel({
    gate,
    tunnels,
    auth,
    upstreamCa: options.upstream?.ca,
    tunnelIdleTimeoutMs: limits.tunnelIdleTimeoutMs,
    counters,
    guard,
  });
  // Requests whose response has not finished: a graceful close lets them end first (bounded).
  let active = 0;
  let idle: (() => void) | null = null;
  // A connection with a request in progress is never closed to make room at a cap; one closed for
  // room before its head was complete is dropped if the head completes after all.
  const begin = (socket: Duplex): object | null => {
    const connection = tunnels.connectionOf(socket);
    if (admission.busy(connection)) return connection;
    socket.destroy();
    return null;
  };
  const serve = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): void => {
    const connection = begin(req.socket);
    if (connection === null) return;
    active += 1;
    // One listener per request for both: the caps' idle mark and the graceful close's count.
    res.once('close', () => {
      admission.idle(connection);
      active -= 1;
      if (active === 0) idle?.();
    });
    forward.handle(req, res, expectsContinue);
  };
  server.on('request', (req, res) => serve(req, res, false));
  server.on('checkContinue', (req, res) => serve(req, res, true));
  // A CONNECT is idle again once answered (`ConnectTunnel`); an upgrade stays busy until it closes.
  server.on('connect', (req, socket, head) => {
    if (begin(socket) !== null) tunnel.handle(req, socket, head);
  });
  server.on('upgrade', (req, socket, head) => {
    if (begin(socket) !== null) upgrade.handle(req, socket, head);
  });
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
    limits,
    descriptorLimit,
    listen: (host, port) =>
      new Promise<AddressInfo>((resolve, reject) => {
        const onError = (err: Error): void => reject(err);
        server.once('error', onError);
        server.listen(port, host, () => {
          server.off('error', onError);
          const bound = server.address() as AddressInfo;
          listeners.addOwn(bound);
          resolve(bound);
        });
      }),
    close: (graceMs = 0) => {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        // Graceful: no new connections, idle keep-alive ones closed now, requests in flight (a
        // governed call at its destination) answered if they end within `graceMs`; then every
        // socket and tunnel is cut.
        server.closeIdleConnections();
        if (graceMs > 0 && active > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, graceMs);
            idle = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        for (const socket of sockets) socket.destroy();
        await closed;
        upgrade.close();
        await upstream.close();
      })();
      return closing;
    },
    counters: () => counters.snapshot(),
    openConnections: () => admission.open,
    setGateAddresses: (addresses) => listeners.setOthers(addresses),
  };
}

/** The policy set of a `Gate` (a bare `GateHandler` has none). */
function policiesOf(gate: GateHandler): { readonly egress?: EgressPolicy } | undefined {
  const policies = (gate as { readonly policies?: unknown }).policies;
  return typeof policies === 'object' && policies !== null
    ? (policies as { readonly egress?: EgressPolicy })
    : undefined;
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
    return codedProblem('EG_ERR_BAD_REQUEST', {
      variant: 'headers_too_large',
      title: 'Request header fields too large',
      detail: 'The request head is larger than the gate accepts.',
    });
  }
  return gate.refuse(null, 'bad_request', `The request is not valid HTTP/1.1 (${code ?? 'parse error'}).`);
}
