import { networkInterfaces } from 'node:os';
import { canonicalHost, EGRESS_CLASS_RANGES, parseIp } from '../policy/index.js';

/** A bound listener: the address and port `server.address()` reports. */
export interface ListenerAddress {
  readonly address: string;
  readonly port: number;
}

const UNSPECIFIED = new Set(['0.0.0.0', '::']);

/**
 * The gate's own listeners (the proxy's `--listen`, the admin server's `--admin`): the `gate`
 * class of `egress.deny`. A listener on `0.0.0.0` or `::` is reached through every local address
 * on its port: loopback and every address of this machine's interfaces (read when asked, so an
 * address added after start counts too).
 */
export class GateListeners {
  #own: readonly ListenerAddress[] = [];
  #others: readonly ListenerAddress[] = [];

  /** The proxy's own bound address (added by `listen()`). */
  addOwn(listener: ListenerAddress): void {
    this.#own = Object.freeze([...this.#own, normalize(listener)]);
  }

  /** The gate's other listeners (the admin server), replacing any set before. */
  setOthers(listeners: readonly ListenerAddress[]): void {
    this.#others = Object.freeze(listeners.map(normalize));
  }

  /** True when connecting to `address` port `port` would reach one of the listeners. */
  has(address: string, port: number): boolean {
    const target = canonicalHost(address);
    let local: boolean | undefined;
    for (const l of [...this.#own, ...this.#others]) {
      if (l.port !== port) continue;
      if (l.address === target) return true;
      if (UNSPECIFIED.has(l.address)) {
        local ??= isLocalAddress(target);
        if (local) return true;
      }
    }
    return false;
  }
}

function normalize(listener: ListenerAddress): ListenerAddress {
  return Object.freeze({ address: canonicalHost(listener.address), port: listener.port });
}

function isLocalAddress(address: string): boolean {
  const ip = parseIp(address);
  if (ip === null) return false;
  if (UNSPECIFIED.has(address) || EGRESS_CLASS_RANGES.loopback.some((r) => r.contains(ip))) return true;
  for (const entries of Object.values(networkInterfaces())) {
    for (const e of entries ?? []) if (canonicalHost(e.address.split('%')[0] ?? '') === address) return true;
  }
  return false;
}
