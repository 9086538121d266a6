/**
 * The `egress` policy applied where the proxy connects (docs/design.md §4.1): on the address the
 * socket is about to connect to, after name resolution, so nothing can change between the check
 * and the connect (no TOCTOU). A name is checked inside the socket's own `lookup`, every address
 * it resolved to (one denied address refuses the name: which one a connect would take is not
 * this gate's to guess); an IP literal, which `net.connect` never looks up, is checked before the
 * socket is created. A refusal fails the connect with a `DestinationRefusedError`: nothing was
 * written, so a governed attempt ends `not_sent`.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import type { GateLogger } from '../engine/index.js';
import { canonicalHost, DEFAULT_EGRESS, type EgressPolicy } from '../policy/index.js';
import type { GateListeners } from './gate-listeners.js';
import type { ProxyCounters } from './proxy-counters.js';

export const DESTINATION_REFUSED_CODE = 'EG_ERR_DESTINATION_REFUSED';

/** A connect the egress policy refused; `reason` says which address and which rule. */
export class DestinationRefusedError extends Error {
  readonly code = DESTINATION_REFUSED_CODE;
  readonly reason: string;

  constructor(reason: string) {
    super(`destination refused: ${reason}`);
    this.name = 'DestinationRefusedError';
    this.reason = reason;
  }
}

/** Where the gate dials a `host:port` (`--resolve`): an address literal and its port. */
export interface DialTarget {
  readonly host: string;
  readonly port: number;
}

export interface DestinationGuardOptions {
  readonly egress?: EgressPolicy | undefined;
  /**
   * `--resolve`: `host:port` (canonical host) → where it is dialled instead. The egress policy is
   * checked on that address; everything else (routing, `Host`, the TLS name, the trail) keeps the
   * host.
   */
  readonly resolve?: ReadonlyMap<string, DialTarget> | undefined;
  readonly listeners: GateListeners;
  readonly counters: ProxyCounters;
  readonly logger?: GateLogger | undefined;
}

export class DestinationGuard {
  readonly #egress: EgressPolicy;
  readonly #listeners: GateListeners;
  readonly #counters: ProxyCounters;
  readonly #logger: GateLogger | undefined;
  readonly #resolve: ReadonlyMap<string, DialTarget>;
  readonly #isGate = (address: string, port: number): boolean => this.#listeners.has(address, port);

  constructor(options: DestinationGuardOptions) {
    this.#egress = options.egress ?? DEFAULT_EGRESS;
    this.#listeners = options.listeners;
    this.#counters = options.counters;
    this.#logger = options.logger;
    this.#resolve = options.resolve ?? new Map();
  }

  /**
   * Where `host:port` is dialled: the `--resolve` entry for it, else itself. Every dial point asks
   * this first, then checks what it returns (`refuseLiteral`, `lookup`).
   */
  dialTarget(host: string, port: number): DialTarget {
    if (this.#resolve.size === 0) return { host, port };
    return this.#resolve.get(`${canonicalHost(host)}:${port}`) ?? { host, port };
  }

  /**
   * For a host that is an IP literal: the refusal, checked before any socket exists (`null`
   * when allowed, or when `host` is a name: its addresses are checked by `lookup`).
   */
  refuseLiteral(host: string, port: number): DestinationRefusedError | null {
    const h = canonicalHost(host);
    if (isIP(h) === 0) return null;
    return this.#check(h, h, port);
  }

  /** A `net.connect` `lookup` for `port` that refuses a denied resolved address. */
  lookup(port: number): LookupFunction {
    return (hostname, options, callback) => {
      dnsLookup(hostname, { ...options, all: true } as LookupAllOptions, (err, addresses) => {
        if (err) {
          callback(err, '', 0);
          return;
        }
        for (const a of addresses) {
          const refused = this.#check(hostname, a.address, port);
          if (refused !== null) {
            callback(refused as unknown as NodeJS.ErrnoException, '', 0);
            return;
          }
        }
        if ((options as { all?: boolean }).all === true) {
          (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
          return;
        }
        const first = addresses[0];
        if (first === undefined) {
          callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
          return;
        }
        callback(null, first.address, first.family);
      });
    };
  }

  #check(host: string, address: string, port: number): DestinationRefusedError | null {
    const reason = this.#egress.refusal({ host, address, port }, this.#isGate);
    if (reason === null) return null;
    this.#counters.increment('destinationsRefused');
    this.#logger?.warn(
      { host, address, port, counter: 'destinationsRefused' },
      `destination refused: ${reason}`,
    );
    return new DestinationRefusedError(reason);
  }
}
