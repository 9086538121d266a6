/**
 * Everything the gate derives from one policy set, built together and swapped whole (hot
 * reload): the classifier, the governed host names' addresses, the route classifier,
 * the read-backs, what `propose()` reads, and the analysis workers that compiled the same texts.
 * A request is classified, keyed and recorded under the one generation that was current when
 * `handle()` started, so a reload can never give it half the old set and half the new one.
 *
 * A generation replaced by a reload is retired: it stops its address refreshes and its worker
 * threads once the last request that started under it is done (a count of users, not a timer).
 */
import { Classifier, type PolicySet, policySources } from '../policy/index.js';
import type { Scope } from '../store/index.js';
import { canonicalJson, sha256Ref } from './canonical-json.js';
import type { GateLogger } from './gate.js';
import { GovernedAddresses, governedLookup, type ResolveGovernedHosts } from './governed-addresses.js';
import type { BodyLimits } from './json-scan.js';
import { NamedAddresses } from './named-addresses.js';
import type { ProposalContext } from './proposal.js';
import { ProposalPool } from './proposal-pool.js';
import { ReadBacks } from './read-back.js';
import { RouteClassifier } from './route-classifier.js';

/** What a generation needs besides its policy set: the gate's own options, the same for every one. */
export interface GenerationSettings {
  readonly scope: Scope;
  readonly authorityKey: string | null;
  readonly bodyLimits: BodyLimits;
  readonly resolveGovernedHosts: ResolveGovernedHosts;
  /** 0: every body analysed on the event loop. */
  readonly analysisThreads: number;
  readonly logger: GateLogger;
}

/** What `Gate.reload` reports, and what an operator reads of the policies a gate serves now. */
export interface GenerationInfo {
  /** 1 for the set the gate started with, one more per applied reload. */
  readonly generation: number;
  /** `sha256:<hex>` of the policy texts (file names and contents), so two gates can be compared. */
  readonly digest: string;
  readonly tools: number;
}

export class PolicyGeneration {
  readonly number: number;
  readonly digest: string;
  readonly policies: PolicySet;
  readonly classifier: Classifier;
  /** Addresses of the host names tools govern, resolved in the background (never per request). */
  readonly addresses: GovernedAddresses;
  /** Addresses of request host names, looked up on demand when some tool names a host by address. */
  readonly named: NamedAddresses;
  /** Classification under every spelling: canonical host, resolved name, method override. */
  readonly routes: RouteClassifier;
  readonly readBacks: ReadBacks;
  /** What `propose()` reads besides the request. */
  readonly ctx: ProposalContext;
  /** Worker threads for large bodies; null when `analysisThreads` is 0 or the set has no sources. */
  readonly pool: ProposalPool | null;
  /** Requests that started under this generation and have not finished. */
  #users = 0;
  #retired: (() => void) | null = null;
  #stopped: Promise<void> | null = null;

  constructor(number: number, policies: PolicySet, settings: GenerationSettings) {
    this.number = number;
    this.policies = policies;
    this.digest = digestOf(policies);
    this.classifier = new Classifier(policies);
    const resolving = governedLookup(settings.resolveGovernedHosts, this.classifier.exactNames);
    this.addresses = new GovernedAddresses(resolving.names, {
      ...(resolving.lookup === undefined ? {} : { lookup: resolving.lookup }),
      onError: (name, err) =>
        settings.logger.warn(
          { host: name, err: err instanceof Error ? err.message : String(err) },
          'a governed host name does not resolve',
        ),
    });
    this.named = new NamedAddresses({
      addressesGovernedOn: this.classifier.addressesGovernedOn,
      mode: settings.resolveGovernedHosts,
    });
    const named = this.named;
    const addresses = this.addresses;
    // One reading of "the governed hosts this host also is": an address's governed names, or a
    // name's governed addresses.
    this.routes = new RouteClassifier(this.classifier, {
      namesFor: (host) => {
        const byAddress = addresses.namesFor(host);
        return byAddress.length > 0 ? byAddress : named.addressesOf(host);
      },
    });
    this.readBacks = new ReadBacks(policies.tools);
    this.ctx = Object.freeze({
      classifier: this.classifier,
      routes: this.routes,
      scope: settings.scope,
      authorityKey: settings.authorityKey,
      maxDuplicateSkips: policies.loopBreaker.maxDuplicateSkips,
      bodyLimits: settings.bodyLimits,
    });
    this.pool = analysisPool(policies, settings, this.ctx);
  }

  get info(): GenerationInfo {
    return { generation: this.number, digest: this.digest, tools: this.policies.tools.length };
  }

  /** Analysis workers running now (0 until a large body needs one, and after `stop()`). */
  get workers(): number {
    return this.pool?.workers ?? 0;
  }

  /** Starts resolving the governed names; resolves after the first round (bounded, see GovernedAddresses). */
  start(): Promise<void> {
    return this.addresses.start();
  }

  /** A request starts under this generation: it is not stopped until `release()`. */
  acquire(): void {
    this.#users += 1;
  }

  release(): void {
    this.#users -= 1;
    if (this.#users === 0) this.#retired?.();
  }

  /**
   * No new request will start under it: stops once the last one using it is done, and resolves
   * then (or when `stop()` is called first, as `close()` does).
   */
  retire(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#retired = () => {
        this.#retired = null;
        void this.stop().then(resolve, resolve);
      };
      if (this.#users === 0) this.#retired();
    });
  }

  /** Stops address refreshes and worker threads (idempotent); `close()` calls it whatever the users. */
  stop(): Promise<void> {
    if (this.#stopped === null) {
      this.addresses.stop();
      this.#stopped = this.pool === null ? Promise.resolve() : this.pool.close();
      // A retired generation stopped before its last user finished (close()): its waiter resolves too.
      this.#retired?.();
    }
    return this.#stopped;
  }
}

/** The texts a set was loaded from, or for a set composed by hand what it governs. */
function digestOf(policies: PolicySet): string {
  const sources = policySources(policies);
  if (sources !== null) return sha256Ref(canonicalJson(sources.map((s) => [s.file, s.text])));
  return sha256Ref(
    canonicalJson({
      default: policies.default,
      skips: policies.loopBreaker.maxDuplicateSkips,
      tools: policies.tools.map((t) => t.id),
      egress: [policies.egress.deny, policies.egress.allow],
    }),
  );
}

/**
 * The worker pool for large bodies, or null: none asked for, or a policy set the worker could not
 * compile the same copy of (one composed by hand rather than loaded): such a set is analysed on
 * the event loop, since a worker deciding on other policies would let requests out ungoverned.
 */
function analysisPool(
  policies: PolicySet,
  settings: GenerationSettings,
  ctx: ProposalContext,
): ProposalPool | null {
  const threads = settings.analysisThreads;
  if (threads === 0) return null;
  const sources = policySources(policies);
  if (sources === null) {
    settings.logger.warn(
      {},
      'the policy set was not made by loadPolicies or parsePolicyFiles, so large bodies are analysed on the event loop (no analysis worker)',
    );
    return null;
  }
  return new ProposalPool({
    sources,
    tools: policies.tools,
    threads,
    setup: {
      scope: ctx.scope,
      authorityKey: ctx.authorityKey,
      bodyLimits: ctx.bodyLimits,
      maxDuplicateSkips: ctx.maxDuplicateSkips,
    },
    onWorkerError: (err) =>
      settings.logger.error({ err: err.message }, 'body analysis worker failed; replacing it'),
  });
}
