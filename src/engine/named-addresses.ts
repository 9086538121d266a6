/**
 * The addresses a request's host *name* resolves to, when some tool names its host by *address*:
 * a tool on `10.0.0.5` must not be walked past by `api.internal`, a name that resolves to it.
 * (The other direction, a request addressed by IP to a host a tool names, is `GovernedAddresses`.)
 *
 * Names are looked up on demand, only for requests on a port where some tool names an address,
 * and cached for `ttlMs`; a request whose name is not cached is governed (buffered) and waits for
 * the lookup before it is classified (`Gate`), so none is classified before its addresses are
 * known. Policies that name no host by address never look anything up.
 *
 * The proxy resolves the name again when it connects; an answer that changed in between (DNS
 * rebinding by someone who controls the name) is not caught here: name the host, not its address,
 * to govern it whatever it resolves to.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { canonicalHost, isIpLiteral } from '../policy/index.js';
import type { LookupAll, ResolveGovernedHosts } from './governed-addresses.js';

export interface NamedAddressesOptions {
  /** Whether some tool names a host by address on `port` (the classifier's index). */
  readonly addressesGovernedOn: (port: number) => boolean;
  readonly mode: ResolveGovernedHosts;
  readonly lookup?: LookupAll;
  /** How long an answer is used; default 30 s. */
  readonly ttlMs?: number;
  /** A lookup that takes longer is taken as no answer; default 2 s. */
  readonly timeoutMs?: number;
  /** Names remembered at most (oldest forgotten first); default 10,000. */
  readonly maxNames?: number;
}

interface Answer {
  readonly addresses: readonly string[];
  readonly at: number;
}

const NONE: readonly string[] = Object.freeze([]);

export class NamedAddresses {
  readonly #o: NamedAddressesOptions;
  readonly #lookup: LookupAll;
  readonly #ttlMs: number;
  readonly #timeoutMs: number;
  readonly #maxNames: number;
  readonly #answers = new Map<string, Answer>();
  readonly #inFlight = new Map<string, Promise<void>>();

  constructor(options: NamedAddressesOptions) {
    this.#o = options;
    this.#ttlMs = options.ttlMs ?? 30_000;
    this.#timeoutMs = options.timeoutMs ?? 2_000;
    this.#maxNames = options.maxNames ?? 10_000;
    this.#lookup =
      options.lookup ??
      (options.mode === 'loopback'
        ? async (name) => (isLocalhost(name) ? LOOPBACK : [])
        : (name) => dnsLookup(name, { all: true, verbatim: true }));
  }

  /** Whether `host` (canonical) must be looked up before a request to it can be classified. */
  pending(host: string, port: number): boolean {
    // Cheapest first: most policy sets name no host by address, and then nothing else is read.
    if (!this.#o.addressesGovernedOn(port) || this.#o.mode === 'off' || isIpLiteral(host)) return false;
    const answer = this.#answers.get(host);
    return answer === undefined || Date.now() - answer.at > this.#ttlMs;
  }

  /** Looks `host` up (one lookup per name in flight), bounded by the timeout; never rejects. */
  resolve(host: string): Promise<void> {
    const running = this.#inFlight.get(host);
    if (running !== undefined) return running;
    const done = this.#resolve(host).finally(() => this.#inFlight.delete(host));
    this.#inFlight.set(host, done);
    return done;
  }

  /** The canonical addresses `host` resolved to (empty when unknown or an IP literal). */
  addressesOf(host: string): readonly string[] {
    return this.#answers.get(host)?.addresses ?? NONE;
  }

  async #resolve(host: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<readonly { address: string }[]>((resolve) => {
      timer = setTimeout(() => resolve([]), this.#timeoutMs);
      timer.unref();
    });
    let answers: readonly { address: string }[];
    try {
      answers = await Promise.race([this.#lookup(host), timeout]);
    } catch {
      // A name that does not resolve cannot be connected to either: nothing to govern.
      answers = [];
    } finally {
      clearTimeout(timer);
    }
    const addresses = Object.freeze([...new Set(answers.map((a) => canonicalHost(a.address)))]);
    this.#answers.delete(host);
    this.#answers.set(host, { addresses, at: Date.now() });
    if (this.#answers.size > this.#maxNames) {
      const oldest = this.#answers.keys().next().value;
      if (oldest !== undefined) this.#answers.delete(oldest);
    }
  }
}

const LOOPBACK: readonly { readonly address: string }[] = Object.freeze([
  { address: '127.0.0.1' },
  { address: '::1' },
]);

function isLocalhost(name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost');
}
