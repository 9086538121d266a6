/**
 * The addresses the host names that tools govern resolve to, so that a request addressed by IP is
 * still the named host's: a tool on `localhost` must not be walked past by `127.0.0.1`
 * (docs/design.md §4.1 "Spellings").
 *
 * Resolution never sits on a request's path: names are looked up in the background, at start and
 * then every `ttlMs`, and a request only reads a Map. At most one lookup per name is in flight,
 * and one round per TTL. Only exact names can be resolved: `*.example.com` stands for names the
 * gate cannot enumerate, so an address that only a wildcard's subdomain resolves to is not
 * recognised (name such a host exactly, or by its address, to govern it by address).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { canonicalHost } from '../policy/index.js';

/** `dns.promises.lookup(name, { all: true })`, or a stand-in in tests. */
export type LookupAll = (name: string) => Promise<readonly { readonly address: string }[]>;

/**
 * Which governed names are resolved: `all` (the default), `loopback` (only `localhost` and
 * `*.localhost`, answered without DNS as RFC 6761 reserves them: what the test suite uses, so it
 * never sends a DNS query off the machine) or `off`. `EFFECTGATE_RESOLVE_GOVERNED_HOSTS` sets it.
 */
export type ResolveGovernedHosts = 'all' | 'loopback' | 'off';

const LOOPBACK_ANSWER: readonly { readonly address: string }[] = Object.freeze([
  { address: '127.0.0.1' },
  { address: '::1' },
]);

/** The names to resolve and how, for a `ResolveGovernedHosts` mode. */
export function governedLookup(
  mode: ResolveGovernedHosts,
  names: readonly string[],
): { readonly names: readonly string[]; readonly lookup?: LookupAll } {
  if (mode === 'off') return { names: [] };
  if (mode === 'all') return { names };
  const local = names.filter((n) => n === 'localhost' || n.endsWith('.localhost'));
  return { names: local, lookup: async () => LOOPBACK_ANSWER };
}

export interface GovernedAddressesOptions {
  /** Time between refresh rounds, and how long a round's answer is trusted; default 30 s. */
  readonly ttlMs?: number;
  /**
   * How long the last good answer is kept while a name's lookups fail; default four TTLs. An
   * address that no longer belongs to the name is governed a little longer, never less.
   */
  readonly staleMs?: number;
  /** How long `start()` waits for the first round before the gate serves anyway; default 2 s. */
  readonly firstRoundMs?: number;
  readonly lookup?: LookupAll;
  /** Told about names that do not resolve (once per change, not on every round). */
  readonly onError?: (name: string, err: unknown) => void;
}

const NO_NAMES: readonly string[] = Object.freeze([]);

interface Resolved {
  readonly addresses: readonly string[];
  readonly at: number;
}

export class GovernedAddresses {
  readonly #names: readonly string[];
  readonly #ttlMs: number;
  readonly #staleMs: number;
  readonly #firstRoundMs: number;
  readonly #lookup: LookupAll;
  readonly #onError: (name: string, err: unknown) => void;
  readonly #resolved = new Map<string, Resolved>();
  readonly #inFlight = new Set<string>();
  readonly #failing = new Set<string>();
  /** Canonical address → the governed names it belongs to, rebuilt after each answer. */
  #byAddress = new Map<string, readonly string[]>();
  #timer: NodeJS.Timeout | null = null;
  #firstRound: Promise<void> | null = null;
  #stopped = false;

  constructor(names: readonly string[], options: GovernedAddressesOptions = {}) {
    this.#names = Object.freeze([...new Set(names)]);
    this.#ttlMs = options.ttlMs ?? 30_000;
    this.#staleMs = options.staleMs ?? this.#ttlMs * 4;
    this.#firstRoundMs = options.firstRoundMs ?? 2_000;
    this.#lookup = options.lookup ?? ((name) => dnsLookup(name, { all: true, verbatim: true }));
    this.#onError = options.onError ?? (() => undefined);
  }

  /**
   * Starts resolving (idempotent) and resolves when the first round is done, or after
   * `firstRoundMs` if DNS is slow: the gate then serves, and the answers land when they come.
   */
  start(): Promise<void> {
    if (this.#firstRound !== null) return this.#firstRound;
    if (this.#names.length === 0 || this.#stopped) {
      this.#firstRound = Promise.resolve();
      return this.#firstRound;
    }
    const round = this.#round();
    this.#timer = setInterval(() => void this.#round(), this.#ttlMs);
    this.#timer.unref();
    let bound: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      bound = setTimeout(resolve, this.#firstRoundMs);
      bound.unref();
    });
    this.#firstRound = Promise.race([round, timeout]).finally(() => clearTimeout(bound));
    return this.#firstRound;
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** The governed names `address` (canonical IP literal) belongs to; empty for any other host. */
  namesFor(address: string): readonly string[] {
    return this.#byAddress.get(address) ?? NO_NAMES;
  }

  async #round(): Promise<void> {
    await Promise.all(this.#names.map((name) => this.#resolve(name)));
  }

  async #resolve(name: string): Promise<void> {
    if (this.#inFlight.has(name) || this.#stopped) return;
    this.#inFlight.add(name);
    try {
      const answers = await this.#lookup(name);
      const addresses = [...new Set(answers.map((a) => canonicalHost(a.address)))];
      this.#resolved.set(name, { addresses, at: Date.now() });
      this.#failing.delete(name);
    } catch (err) {
      if (!this.#failing.has(name)) this.#onError(name, err);
      this.#failing.add(name);
      const last = this.#resolved.get(name);
      if (last !== undefined && Date.now() - last.at > this.#staleMs) this.#resolved.delete(name);
    } finally {
      this.#inFlight.delete(name);
    }
    this.#rebuild();
  }

  #rebuild(): void {
    const next = new Map<string, string[]>();
    for (const name of this.#names) {
      for (const address of this.#resolved.get(name)?.addresses ?? []) {
        const names = next.get(address);
        if (names === undefined) next.set(address, [name]);
        else names.push(name);
      }
    }
    // Swapped whole: a request never sees a half-built map.
    this.#byAddress = next;
  }
}
