import { type Scope, uuidv7 } from '../store/index.js';

/**
 * Every derived run id starts so, and no client may name a run so (`Effectgate-Run`, the
 * interceptor's `run`): a client that read another client's derived id from a 409's `source`
 * could otherwise join that run and halt it with its own duplicates.
 */
export const DERIVED_RUN_PREFIX = 'auto-';

/** True when `run` is a run id only the gate may make. */
export function isDerivedRun(run: string): boolean {
  return run.startsWith(DERIVED_RUN_PREFIX);
}

/**
 * One spelling per client address: an IPv4 client on a dual-stack listener shows up as
 * `::ffff:10.0.0.7`, the same client as `10.0.0.7`.
 */
export function clientAddress(address: string | null): string {
  if (address === null) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function keyOf(scope: Scope, client: string | null): string {
  return `${scope.tenant}\u0000${scope.area}\u0000${scope.agent}\u0000${clientAddress(client)}`;
}

/** Defaults of {@link RunIdentity}; `createGate` validates overrides. */
export const RUN_DEFAULTS = Object.freeze({
  /**
   * A derived run ends after this long without a governed request from its client. Long enough
   * that an agent thinking, or waiting for an approval, keeps its run; short enough that a shared
   * proxy's next job is a new run. A loop proposes again within seconds, so this never lets one
   * escape the loop breaker.
   */
  idleMs: 15 * 60_000,
  /** Clients remembered at once; past it the longest idle is forgotten (its next request starts a new run). */
  maxClients: 10_000,
});

export interface RunIdentityOptions {
  /** The run of every request without `Effectgate-Run` (`--run-id`, `createGate({ runId })`): never derived. */
  readonly fixed: string | null;
  readonly idleMs: number;
  readonly maxClients?: number;
  /** Clock in ms (tests). */
  readonly now?: () => number;
  /** Called when a derived run starts (the proxy logs it, so an operator can tell whose run it is). */
  readonly onNewRun?: (run: string, scope: Scope, client: string | null) => void;
}

interface Derived {
  readonly id: string;
  lastSeen: number;
}

/**
 * Names the run of a governed request that sends no `Effectgate-Run`. The loop
 * breaker halts runs, so a run must be what one agent does: with one run per gate process, every
 * client of a shared proxy shared it and one client's loop halted them all until a restart.
 *
 * Derived from what the gate knows and no request header can forge: the request's scope (the
 * credential in agents mode, the sidecar's own agent otherwise) and the client's network address,
 * never its connection, so an agent that opens a new connection per call is still one run and a
 * looping one is still halted. After `idleMs` without a governed request from that client and
 * scope, the next one starts a new run (its duplicate counts start again). A halt outlives both
 * the idle bound and a restart: the store keeps, with a derived run, the gate's instance id
 * (stable across restarts) and the client address, and a halted one halts that client's later
 * derived runs on this gate until it is released (eg_decide step a). Not across gates: an address
 * is unique only as one gate sees it (every sidecar sees its agent at 127.0.0.1, every in-process
 * gate has none). Replicas behind a load balancer each derive their own runs.
 *
 * @example
 *   const runs = new RunIdentity({ fixed: null, idleMs: RUN_DEFAULTS.idleMs });
 *   runs.runOf({ tenant: 'acme', area: 'support', agent: 'triage' }, '10.0.0.7'); // 'auto-0193…'
 */
export class RunIdentity {
  readonly #fixed: string | null;
  readonly #idleMs: number;
  readonly #maxClients: number;
  readonly #now: () => number;
  readonly #onNewRun: RunIdentityOptions['onNewRun'];
  /** In least recently seen order (a hit is moved to the end), so the oldest is first to forget. */
  readonly #derived = new Map<string, Derived>();

  constructor(options: RunIdentityOptions) {
    this.#fixed = options.fixed;
    this.#idleMs = options.idleMs;
    this.#maxClients = options.maxClients ?? RUN_DEFAULTS.maxClients;
    this.#now = options.now ?? Date.now;
    this.#onNewRun = options.onNewRun;
  }

  /** The fixed run, or `null` when runs are derived. */
  get fixed(): string | null {
    return this.#fixed;
  }

  /**
   * The run a client is in now, without starting or extending one (an agent's read-back names it
   * in the trail; reading is not proposing). `null` when it has none.
   */
  peek(scope: Scope, client: string | null): string | null {
    if (this.#fixed !== null) return this.#fixed;
    const seen = this.#derived.get(keyOf(scope, client));
    return seen !== undefined && this.#now() - seen.lastSeen < this.#idleMs ? seen.id : null;
  }

  /** The run of a request of `scope` from `client` (its address; `null` in process) that names none. */
  runOf(scope: Scope, client: string | null): string {
    if (this.#fixed !== null) return this.#fixed;
    const now = this.#now();
    const key = keyOf(scope, client);
    const seen = this.#derived.get(key);
    if (seen !== undefined) {
      this.#derived.delete(key);
      if (now - seen.lastSeen < this.#idleMs) {
        seen.lastSeen = now;
        this.#derived.set(key, seen);
        return seen.id;
      }
    }
    this.#forgetIdle(now);
    const run: Derived = { id: `${DERIVED_RUN_PREFIX}${uuidv7()}`, lastSeen: now };
    this.#derived.set(key, run);
    this.#onNewRun?.(run.id, scope, client);
    return run.id;
  }

  /** Drops the idle entries at the front, then the oldest while full. Bounded by the map's size. */
  #forgetIdle(now: number): void {
    for (const [key, run] of this.#derived) {
      if (now - run.lastSeen < this.#idleMs && this.#derived.size < this.#maxClients) break;
      this.#derived.delete(key);
    }
  }
}
