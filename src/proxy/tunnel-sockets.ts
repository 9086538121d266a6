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

interface TunnelEntry {
  readonly authority: TunnelAuthority;
  readonly scope: Scope | undefined;
}

export class TunnelSockets {
  readonly #tunnels = new WeakMap<object, TunnelEntry>();

  /** `scope`: what the CONNECT's credential proved (agents file); `undefined` in sidecar mode. */
  add(socket: object, authority: TunnelAuthority, scope?: Scope): void {
    this.#tunnels.set(socket, { authority, scope });
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
