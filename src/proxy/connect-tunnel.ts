/**
 * CONNECT handling (RFC 9110 §9.3.6). A tunnel is egress like any other request, so it goes
 * through the gate as well:
 *
 * 1. Before anything is connected, the gate routes a head for the authority (method `CONNECT`,
 *    path `/`); a refusal (`default: block`) is answered on the raw socket, its status line's
 *    reason phrase saying why. The port must be in `allowPorts` (443, 80, `--allow-connect-ports`)
 *    or one some tool names the host on: a tool's own port needs no flag, since that is where its
 *    HTTP goes, but such a tunnel only ever carries what the gate reads (plain HTTP, or TLS it
 *    intercepts); anything else there (the destination speaks first) is closed, never relayed.
 * 2. Once the tunnel is up, the client's first bytes say what it carries (docs/design.md §4.2, see
 *    `peekTunnel`; `tunnelCarries` decides what it gets). For TLS the whole ClientHello is read and its SNI is routed too, the same way
 *    the CONNECT authority was: the authority is only what the client asked the proxy for, the SNI
 *    is the host the session is for (`CONNECT 140.82.112.5:443` with SNI `api.github.com` is a
 *    session with api.github.com). Then, in this order:
 *    - the SNI is refused (`default: block`): the tunnel is closed;
 *    - the SNI names a governed host: with a local CA (`--ca-dir`) TLS is terminated with a leaf
 *      for the SNI host and the decrypted stream is served as `https://` requests to that host;
 *      without one the tunnel is closed, never relayed ungoverned;
 *    - the CONNECT host is governed: with a CA intercepted as the CONNECT host (a client that
 *      checks the certificate against another SNI name then aborts the handshake); without one
 *      closed, whatever the SNI says or if it says nothing;
 *    - otherwise TLS is relayed byte for byte, never decrypted.
 *    The `200` already went out, so a closed TLS tunnel gets a fatal `access_denied` alert (the
 *    client's TLS library reports it), a warning log line and a counter.
 *    Anything else is plain HTTP/1.1 (undici's `ProxyAgent` and `EnvHttpProxyAgent` tunnel
 *    `http://` URLs by default): it is served by the proxy's own node:http server, where the
 *    `ForwardHandler` targets the tunnel's authority (a `Host` naming another destination is
 *    refused, `parseTunnelTarget`), so each request is routed and governed exactly like an
 *    absolute-form one.
 * 3. A relayed tunnel silent both ways for `tunnelIdleTimeoutMs` is closed; so is one that says
 *    nothing decisive within `tunnelPeekTimeoutMs` (`ProxyLimits`).
 */
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { GateHandler, GateLogger, GateResponse, RouteDecision } from '../engine/index.js';
import {
  codedProblem,
  destinationRefusedResponse,
  errorCode,
  formatAuthority,
  isTimeoutCode,
  normalizeHead,
  normalizeHost,
  upstreamFailedResponse,
} from '../engine/index.js';
import type { Scope } from '../store/index.js';
import type { CertificateAuthority } from './certificate-authority.js';
import type { ConnectionActivity } from './connection-admission.js';
import { type DestinationGuard, DestinationRefusedError } from './destination-guard.js';
import { interceptTls } from './intercept-tls.js';
import { type Authority, parseAuthority } from './parse-target.js';
import type { ProxyAuthenticator } from './proxy-auth.js';
import type { ProxyCounters } from './proxy-counters.js';
import type { ProxyLimits } from './proxy-limits.js';
import { type Carries, type TunnelRouting, tunnelCarries } from './tunnel-carries.js';
import { type Peeked, peekTunnel } from './tunnel-peek.js';
import type { TunnelClient, TunnelSockets } from './tunnel-sockets.js';
import { writeRawResponse } from './write-raw-response.js';

export interface ConnectTunnelOptions {
  readonly gate: GateHandler;
  /** Destination ports a client may open a tunnel to. */
  readonly allowPorts: readonly number[];
  /** How long to wait for the destination's TCP handshake. */
  readonly connectTimeoutMs: number;
  /** Where a tunnel carrying plain HTTP is recorded with its authority. */
  readonly tunnels: TunnelSockets;
  /** Serves plain HTTP/1.1 read from `socket` (the proxy's own node:http server). */
  readonly serveHttp: (socket: Duplex) => void;
  /** The local CA: TLS to a governed host is intercepted with it. Absent: all TLS is relayed. */
  readonly ca?: CertificateAuthority | undefined;
  /**
   * Agents file credentials: the CONNECT itself must carry them, and every request inside the
   * tunnel inherits the scope they prove. Absent: sidecar mode.
   */
  readonly auth?: ProxyAuthenticator | undefined;
  readonly limits: Pick<ProxyLimits, 'tunnelPeekTimeoutMs' | 'tunnelIdleTimeoutMs'>;
  readonly counters: ProxyCounters;
  readonly logger?: GateLogger | undefined;
  /** The `egress` policy, checked on the resolved address before the tunnel connects. */
  readonly guard?: DestinationGuard | undefined;
  /**
   * The connection caps: told when a tunnel waits for its client's first bytes (it may be closed
   * for room, like a connection still sending its head) and when it relays (it may not).
   */
  readonly activity?: ConnectionActivity | undefined;
}

export const DEFAULT_CONNECT_PORTS: readonly number[] = [443, 80];

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

/**
 * A fatal `access_denied` alert (RFC 8446 §6), sent in the clear before closing a TLS tunnel the
 * gate refuses after its `200`: the client's TLS library names the refusal instead of a bare reset.
 */
const TLS_ACCESS_DENIED = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49]);

type TunnelState = 'connecting' | 'peeking' | 'relaying' | 'serving';

export class ConnectTunnel {
  readonly #gate: GateHandler;
  readonly #allowPorts: ReadonlySet<number>;
  readonly #connectTimeoutMs: number;
  readonly #tunnels: TunnelSockets;
  readonly #serveHttp: (socket: Duplex) => void;
  readonly #ca: CertificateAuthority | undefined;
  readonly #auth: ProxyAuthenticator | undefined;
  readonly #limits: ConnectTunnelOptions['limits'];
  readonly #counters: ProxyCounters;
  readonly #logger: GateLogger | undefined;
  readonly #guard: DestinationGuard | undefined;
  readonly #activity: ConnectionActivity | undefined;

  constructor(options: ConnectTunnelOptions) {
    this.#guard = options.guard;
    this.#activity = options.activity;
    this.#gate = options.gate;
    this.#allowPorts = new Set(options.allowPorts);
    this.#connectTimeoutMs = options.connectTimeoutMs;
    this.#tunnels = options.tunnels;
    this.#serveHttp = options.serveHttp;
    this.#ca = options.ca;
    this.#auth = options.auth;
    this.#limits = options.limits;
    this.#counters = options.counters;
    this.#logger = options.logger;
  }

  /** The server's `connect` listener: `client` is the raw client socket, `head` bytes already read. */
  handle(req: IncomingMessage, client: Duplex, head: Buffer): void {
    // node:http removed its own error listener when it handed the socket over.
    client.on('error', () => client.destroy());
    if (this.#tunnels.authorityOf(client) !== undefined) {
      const detail = 'CONNECT is not accepted inside a CONNECT tunnel.';
      refuse(client, this.#gate.refuse(null, 'bad_request', detail));
      return;
    }
    let scope: Scope | undefined;
    if (this.#auth !== undefined) {
      const proved = this.#auth.authenticate(req.headers);
      if (!proved.ok) {
        refuse(client, proved.response);
        return;
      }
      scope = proved.scope;
    }
    const parsed = parseAuthority(req.url ?? '', null);
    if (!parsed.ok) {
      refuse(client, this.#gate.refuse(null, 'bad_request', parsed.reason));
      return;
    }
    const { host, port } = parsed.value;
    // `govern` means some tool names the host: its TLS may be intercepted. `refuse` (a
    // `default: block` policy): nothing is connected. Otherwise the tunnel opens and whatever
    // HTTP it carries is routed request by request. The SNI, once read, is asked the same way.
    const route = (name: string): RouteDecision =>
      this.#gate.route(
        normalizeHead({
          scheme: port === 443 ? 'https' : 'http',
          method: 'CONNECT',
          host: name,
          port,
          pathAndQuery: '/',
          headers: req.headers,
        }),
      );
    // A port beyond --allow-connect-ports is still open to a host a tool names on it: that is
    // where the tool's HTTP goes (undici tunnels `http://` URLs by default), and only what the
    // gate can read goes through it (`toolPort`).
    const portAllowed = this.#allowPorts.has(port);
    const decide = (): void => {
      const decision = route(host);
      // A refusal of the host says more than one of the port: no flag would let it through.
      if (decision.kind === 'refuse') {
        refuse(client, decision.response);
        return;
      }
      if (!portAllowed && decision.kind !== 'govern') {
        this.#refusePort(client, host, port);
        return;
      }
      this.#open(
        client,
        head,
        { authority: { host: normalizeHost(host), port }, decision, route, toolPort: !portAllowed },
        { scope, peer: req.socket.remoteAddress },
      );
    };
    // A name the gate must resolve before it can tell whether a tool governs it (a tool names a
    // host by address on this port): decided once the answer is in, never before.
    const pending = this.#gate.prepare?.(host, port) ?? null;
    if (pending === null) decide();
    else void pending.then(decide, decide);
  }

  /** 403 for a port neither allowed nor named by a tool: said where a person will look. */
  #refusePort(client: Duplex, host: string, port: number): void {
    const allowed = [...this.#allowPorts].join(', ');
    const detail = `Tunnels may only be opened to ports ${allowed}, or to a host on a port a tool names; ${formatAuthority(host, port)} is neither. Nothing was connected. To allow the port, start the gate with --allow-connect-ports ${allowed},${port}.`;
    this.#counters.increment('connectsRefusedPort');
    this.#logger?.warn(
      { connect: formatAuthority(host, port), allowed, counter: 'connectsRefusedPort' },
      `CONNECT refused: port ${port} is not in --allow-connect-ports`,
    );
    refuse(
      client,
      codedProblem('EG_ERR_CONNECT_PORT_FORBIDDEN', { title: 'CONNECT port not allowed', detail }),
    );
  }

  /**
   * Connects first, so an unreachable destination is still answered with a 502 instead of a
   * tunnel that dies. A tunnel that turns out to carry plain HTTP drops this connection again: its
   * requests are dispatched by the forward handler's pools.
   */
  #open(client: Duplex, head: Buffer, routing: TunnelRouting, who: TunnelClient): void {
    const { authority } = routing;
    // An IP literal is never looked up: checked here, before a socket exists; a name is checked
    // in the socket's own lookup, on the addresses it connects to.
    // `--resolve` may send the authority elsewhere: that address is the one checked and dialled.
    const dial = this.#guard?.dialTarget(authority.host, authority.port) ?? authority;
    const refused = this.#guard?.refuseLiteral(dial.host, dial.port) ?? null;
    if (refused !== null) {
      refuse(client, destinationRefusedResponse(refused.reason));
      return;
    }
    const upstream: Socket = connect({
      host: dial.host,
      port: dial.port,
      ...(this.#guard === undefined ? {} : { lookup: this.#guard.lookup(dial.port) }),
    });
    let state: TunnelState = 'connecting';
    upstream.setTimeout(this.#connectTimeoutMs, () => {
      if (state === 'connecting') {
        upstream.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' }));
      }
    });
    upstream.once('connect', () => {
      state = 'peeking';
      upstream.setTimeout(0);
      upstream.setNoDelay(true);
      if (client.destroyed) {
        upstream.destroy();
        return;
      }
      client.write(ESTABLISHED);
      // The CONNECT is answered; until the client says something decisive the tunnel is idle.
      this.#activity?.idle(client);
      peekTunnel(client, head, upstream, this.#limits.tunnelPeekTimeoutMs, (peeked) => {
        // An SNI the gate must resolve first (a tool names a host by address on this port) is
        // decided once its answer is in, as the CONNECT's own authority was.
        const sni =
          peeked.kind === 'tls' && peeked.serverName !== null ? normalizeHost(peeked.serverName) : null;
        const pending = sni === null ? null : (this.#gate.prepare?.(sni, routing.authority.port) ?? null);
        const go = (): void => {
          const carries = tunnelCarries(peeked, routing, this.#ca !== undefined);
          switch (carries.kind) {
            case 'relay':
              state = 'relaying';
              this.#activity?.busy(client);
              // Every byte either way is a read or a write on `upstream`: its timer is the tunnel's.
              upstream.setTimeout(this.#limits.tunnelIdleTimeoutMs, () => {
                this.#counters.increment('tunnelsIdleClosed');
                upstream.destroy();
                client.destroy();
              });
              relay(client, upstream);
              return;
            case 'close':
              this.#close(client, upstream, peeked, routing, carries);
              return;
            case 'intercept':
              state = 'serving';
              upstream.destroy();
              this.#intercept(client, carries.authority, who);
              return;
            case 'serve':
              state = 'serving';
              upstream.destroy();
              this.#tunnels.add(client, { ...authority, scheme: 'http' }, who);
              this.#serveHttp(client);
              return;
          }
        };
        if (pending === null) go();
        else void pending.then(go, go);
      });
    });
    upstream.on('error', (err) => {
      if (state === 'connecting' && err instanceof DestinationRefusedError) {
        refuse(client, destinationRefusedResponse(err.reason));
      } else if (state === 'connecting') {
        const code = errorCode(err);
        refuse(client, upstreamFailedResponse(code, isTimeoutCode(code)));
      } else if (state !== 'serving') {
        client.destroy();
      }
    });
    // Whichever side goes away first takes the other with it; a clean end was already relayed by
    // pipe() (half-close), so only what is left gets cut.
    client.once('close', () => upstream.destroy());
    upstream.once('close', () => {
      if (state === 'connecting' || state === 'serving') return;
      if (client.writableEnded) {
        client.once('finish', () => client.destroy());
        if (client.writableFinished) client.destroy();
      } else {
        client.destroy();
      }
    });
  }

  /** Closes a tunnel refused after its `200`: a TLS alert when it carries TLS, a log line, a count. */
  #close(client: Duplex, upstream: Socket, peeked: Peeked, routing: TunnelRouting, carries: Carries): void {
    upstream.destroy();
    if (carries.kind !== 'close' || carries.counter === null) {
      client.destroy();
      return;
    }
    this.#counters.increment(carries.counter);
    this.#logger?.warn(
      {
        connect: formatAuthority(routing.authority.host, routing.authority.port),
        sni: peeked.kind === 'tls' ? peeked.serverName : null,
        counter: carries.counter,
      },
      `tunnel closed: ${carries.reason}`,
    );
    // A clean close (FIN, not a reset): with a TLS alert when it carries TLS.
    const tls = peeked.kind === 'tls' || peeked.kind === 'bad_tls';
    if (tls || peeked.kind === 'server_first') {
      if (tls) client.end(TLS_ACCESS_DENIED);
      else client.end();
      // Whatever the client still sends is read and dropped; the socket goes soon either way.
      client.resume();
      const timer = setTimeout(() => client.destroy(), 1_000);
      timer.unref();
      client.once('close', () => clearTimeout(timer));
      return;
    }
    client.destroy();
  }

  /**
   * Serves the decrypted stream like plain HTTP; the upstream connection was only a reachability
   * check, each request being dispatched over TLS by the forward handler's pools.
   */
  #intercept(client: Duplex, authority: Authority, who: TunnelClient): void {
    const ca = this.#ca;
    if (ca === undefined) return;
    interceptTls(client, authority.host, ca).then(
      (tls) => {
        this.#tunnels.add(tls, { ...authority, scheme: 'https' }, who, client);
        this.#serveHttp(tls);
      },
      // A leaf that cannot be issued leaves nothing to answer in: the client sees the tunnel close.
      () => client.destroy(),
    );
  }
}

/** A CONNECT answered before its `200`: the status line says why (see `writeRawResponse`). */
function refuse(client: Duplex, response: GateResponse): void {
  writeRawResponse(client, response, { titleAsReason: true });
}

/** Byte-for-byte relay both ways, with backpressure and half-close. */
function relay(client: Duplex, upstream: Socket): void {
  client.pipe(upstream);
  upstream.pipe(client);
}
