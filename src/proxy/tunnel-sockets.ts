/**
 * Which client sockets are CONNECT tunnels carrying HTTP (plain, or decrypted from an intercepted
 * TLS tunnel: scheme `https`), to which authority, and with which authenticated scope. The
 * `ConnectTunnel` records a socket before handing it to the proxy's node:http server; the
 * `ForwardHandler` and `UpgradeTunnel` look the request's socket up to turn an origin-form target
 * into the tunnel's absolute one, and requests inside the tunnel inherit the scope the CONNECT
 * authenticated (their own `Proxy-Authorization`, if any, changes nothing). Weakly held: a closed
 * tunnel is forgotten with its socket.
 */
import type { Scope } from '../store/index.js';
import type { TunnelAuthority } from './parse-target.js';

/** Who opened a tunnel: what its CONNECT's credential proved, and from which address. */
export interface TunnelClient {
  /** `undefined` in sidecar mode. */
  readonly scope: Scope | undefined;
  /** The CONNECT's peer address: with the scope, it names the run of requests that name none. */
  readonly peer: string | undefined;
}

interface TunnelEntry extends TunnelClient {
  readonly authority: TunnelAuthority;
  /**
   * The client connection the tunnel runs on (the one the connection caps admitted): the socket
   * itself for plain HTTP, the raw socket under a decrypted TLS one.
   */
  readonly carrier: object;
}

export class TunnelSockets {
  readonly #tunnels = new WeakMap<object, TunnelEntry>();

  add(socket: object, authority: TunnelAuthority, who: TunnelClient, carrier: object = socket): void {
    this.#tunnels.set(socket, { authority, scope: who.scope, peer: who.peer, carrier });
  }

  /** The client connection `socket` runs on: its carrier for a tunnel, else `socket` itself. */
  connectionOf(socket: object): object {
    return this.#tunnels.get(socket)?.carrier ?? socket;
  }

  /** The CONNECT authority `socket` was opened for; `undefined` for an ordinary connection. */
  authorityOf(socket: object | null | undefined): TunnelAuthority | undefined {
    return socket == null ? undefined : this.#tunnels.get(socket)?.authority;
  }

  /** The tunnel with its scope; `undefined` for an ordinary connection. */
  tunnelOf(socket: object | null | undefined): TunnelEntry | undefined {
    return socket == null ? undefined : this.#tunnels.get(socket);
  }
}
