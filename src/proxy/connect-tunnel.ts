/**
 * CONNECT handling (RFC 9110 §9.3.6). A tunnel is egress like any other request, so it goes
 * through the gate as well:
 *
 * 1. Before anything is connected, the gate routes a head for the authority (method `CONNECT`,
 *    path `/`); a refusal (`default: block`) is answered on the raw socket.
 * 2. Once the tunnel is up, the client's first bytes say what it carries (DESIGN.md §4.2). A TLS
 *    handshake is relayed byte for byte, unless the proxy has a local CA (`--ca-dir`) and some tool
 *    names the host: then TLS is terminated with a leaf for the host and the decrypted stream is
 *    served like plain HTTP, as `https://` requests. Anything else is plain HTTP/1.1 (undici's `ProxyAgent`
 *    and `EnvHttpProxyAgent` tunnel `http://` URLs by default): it is served by the proxy's own
 *    node:http server, where the `ForwardHandler` targets the tunnel's authority, so each request
 *    is routed and governed exactly like an absolute-form one.
 */
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { GateHandler } from '../engine/index.js';
import {
  errorCode,
  isTimeoutCode,
  normalizeHead,
  normalizeHost,
  problemResponse,
  upstreamFailedResponse,
} from '../engine/index.js';
import type { Scope } from '../store/index.js';
import type { CertificateAuthority } from './certificate-authority.js';
import { interceptTls } from './intercept-tls.js';
import { type Authority, parseAuthority } from './parse-target.js';
import type { ProxyAuthenticator } from './proxy-auth.js';
import type { TunnelSockets } from './tunnel-sockets.js';
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
}

export const DEFAULT_CONNECT_PORTS: readonly number[] = [443, 80];

const ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

/** First byte of a TLS record carrying a handshake (RFC 8446 §5.1, ContentType handshake = 22). */
const TLS_HANDSHAKE = 0x16;

type TunnelState = 'connecting' | 'peeking' | 'relaying' | 'serving';
type Carries = 'relaying' | 'serving' | 'intercepting';

export class ConnectTunnel {
  readonly #gate: GateHandler;
  readonly #allowPorts: ReadonlySet<number>;
  readonly #connectTimeoutMs: number;
  readonly #tunnels: TunnelSockets;
  readonly #serveHttp: (socket: Duplex) => void;
  readonly #ca: CertificateAuthority | undefined;
  readonly #auth: ProxyAuthenticator | undefined;

  constructor(options: ConnectTunnelOptions) {
    this.#gate = options.gate;
    this.#allowPorts = new Set(options.allowPorts);
    this.#connectTimeoutMs = options.connectTimeoutMs;
    this.#tunnels = options.tunnels;
    this.#serveHttp = options.serveHttp;
    this.#ca = options.ca;
    this.#auth = options.auth;
  }

  /** The server's `connect` listener: `client` is the raw client socket, `head` bytes already read. */
  handle(req: IncomingMessage, client: Duplex, head: Buffer): void {
    // node:http removed its own error listener when it handed the socket over.
    client.on('error', () => client.destroy());
    if (this.#tunnels.authorityOf(client) !== undefined) {
      const detail = 'CONNECT is not accepted inside a CONNECT tunnel.';
      writeRawResponse(client, this.#gate.refuse(null, 'bad_request', detail));
      return;
    }
    let scope: Scope | undefined;
    if (this.#auth !== undefined) {
      const proved = this.#auth.authenticate(req.headers);
      if (!proved.ok) {
        writeRawResponse(client, proved.response);
        return;
      }
      scope = proved.scope;
    }
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
    // `govern` means some tool names the host: its TLS may be intercepted. `refuse` (a
    // `default: block` policy): nothing is connected. Otherwise the tunnel opens and whatever
    // HTTP it carries is routed request by request.
    const decision = this.#gate.route(
      normalizeHead({
        scheme: port === 443 ? 'https' : 'http',
        method: 'CONNECT',
        host,
        port,
        pathAndQuery: '/',
        headers: req.headers,
      }),
    );
    if (decision.kind === 'refuse') {
      writeRawResponse(client, decision.response);
      return;
    }
    const intercept = decision.kind === 'govern' && this.#ca !== undefined;
    this.#open(client, head, { host: normalizeHost(host), port }, intercept, scope);
  }

  /**
   * Connects first, so an unreachable destination is still answered with a 502 instead of a
   * tunnel that dies. A tunnel that turns out to carry plain HTTP drops this connection again: its
   * requests are dispatched by the forward handler's pools.
   */
  #open(
    client: Duplex,
    head: Buffer,
    authority: Authority,
    intercept: boolean,
    scope: Scope | undefined,
  ): void {
    const upstream: Socket = connect({ host: authority.host, port: authority.port });
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
      this.#peek(client, head, upstream, intercept, (carries) => {
        if (carries === 'relaying') {
          state = carries;
          relay(client, upstream);
          return;
        }
        state = 'serving';
        upstream.destroy();
        if (carries === 'intercepting') {
          this.#intercept(client, authority, scope);
          return;
        }
        this.#tunnels.add(client, { ...authority, scheme: 'http' }, scope);
        this.#serveHttp(client);
      });
    });
    upstream.on('error', (err) => {
      if (state === 'connecting') {
        const code = errorCode(err);
        writeRawResponse(client, upstreamFailedResponse(code, isTimeoutCode(code)));
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

  /**
   * Serves the decrypted stream like plain HTTP; the upstream connection was only a reachability
   * check, each request being dispatched over TLS by the forward handler's pools.
   */
  #intercept(client: Duplex, authority: Authority, scope: Scope | undefined): void {
    const ca = this.#ca;
    if (ca === undefined) return;
    interceptTls(client, authority.host, ca).then(
      (tls) => {
        this.#tunnels.add(tls, { ...authority, scheme: 'https' }, scope);
        this.#serveHttp(tls);
      },
      // A leaf that cannot be issued leaves nothing to answer in: the client sees the tunnel close.
      () => client.destroy(),
    );
  }

  /**
   * Waits for the first bytes of the tunnel (the bytes sent with the CONNECT head count) and puts
   * them back (`unshift`) for whoever reads the stream next, then says what the tunnel carries.
   * HTTP is client-first: a destination that speaks first (SMTP, MySQL on an allowed port) is
   * not an HTTP server, and its tunnel is relayed.
   */
  #peek(
    client: Duplex,
    head: Buffer,
    upstream: Socket,
    intercept: boolean,
    decide: (carries: Carries) => void,
  ): void {
    if (head.length > 0) {
      client.unshift(head);
      decide(carriesOf(head, intercept));
      return;
    }
    const stop = (): void => {
      client.off('data', onClient);
      client.off('end', onClientEnd);
      upstream.off('data', onUpstream);
      client.pause();
      upstream.pause();
    };
    const onClient = (chunk: Buffer): void => {
      stop();
      client.unshift(chunk);
      decide(carriesOf(chunk, intercept));
    };
    const onUpstream = (chunk: Buffer): void => {
      stop();
      upstream.unshift(chunk);
      decide('relaying');
    };
    // Closed without a single byte: there is nothing to relay nor to serve.
    const onClientEnd = (): void => {
      stop();
      client.destroy();
    };
    client.on('data', onClient);
    client.once('end', onClientEnd);
    upstream.on('data', onUpstream);
  }
}

/**
 * TLS is relayed byte for byte, unread, unless `intercept` (a local CA and a host some tool
 * names): hosts no tool names are never decrypted.
 */
function carriesOf(first: Buffer, intercept: boolean): Carries {
  if (first[0] === TLS_HANDSHAKE) return intercept ? 'intercepting' : 'relaying';
  return 'serving';
}

/** Byte-for-byte relay both ways, with backpressure and half-close. */
function relay(client: Duplex, upstream: Socket): void {
  client.pipe(upstream);
  upstream.pipe(client);
}
