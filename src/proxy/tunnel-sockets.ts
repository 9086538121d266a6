/**
 * Which client sockets are CONNECT tunnels carrying HTTP (plain, or decrypted from an intercepted
 * TLS tunnel: scheme `https`), and to which authority. The
 * `ConnectTunnel` records a socket before handing it to the proxy's node:http server; the
 * `ForwardHandler` and `UpgradeTunnel` look the request's socket up to turn an origin-form target
 * into the tunnel's absolute one. Weakly held: a closed tunnel is forgotten with its socket.
 */
import type { TunnelAuthority } from './parse-target.js';

export class TunnelSockets {
  readonly #authorities = new WeakMap<object, TunnelAuthority>();

  add(socket: object, authority: TunnelAuthority): void {
    this.#authorities.set(socket, authority);
  }

  /** The CONNECT authority `socket` was opened for; `undefined` for an ordinary connection. */
  authorityOf(socket: object | null | undefined): TunnelAuthority | undefined {
    return socket == null ? undefined : this.#authorities.get(socket);
  }
}
