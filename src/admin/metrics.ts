/**
 * Prometheus metrics of one gate, served by the admin server on `GET /metrics`. The engine reports
 * through the small `GateMetrics` interface; this module is the only place that knows prom-client.
 *
 * Every admin server has its own registry (never prom-client's global one), so several gates or
 * tests in one process never collide. The process metrics (CPU, memory, event loop lag, GC) are
 * one set per process, made once and registered into each registry.
 *
 * Label values are verdicts, tool ids (bounded by the policy set), outcomes and operation states:
 * never a key value, a run id, a credential or anything from a request's content.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { DeferredOutcomeEvent, GateMetrics, UpstreamOutcome } from '../engine/index.js';
import { type ReconciliationResult, type Store, VERDICTS, type Verdict } from '../store/index.js';

/** Prefix of every metric, the process metrics included. */
export const METRICS_PREFIX = 'effectgate_';

/** Seconds. A governed upstream call: from a fast local API to the longest dispatch deadline. */
export const UPSTREAM_BUCKETS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];
/** Seconds. What the gate adds: one or two store round trips (sub-millisecond) up to reservation waits. */
export const OVERHEAD_BUCKETS: readonly number[] = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
/** Seconds. Waits on another run's reservation are bounded by the tool's `dedupe.wait` (default 2 s). */
export const RESERVATION_WAIT_BUCKETS: readonly number[] = [
  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30,
];

const OUTCOMES: readonly UpstreamOutcome[] = ['succeeded', 'failed', 'unknown', 'open', 'accepted'];
const RECONCILIATIONS: readonly ReconciliationResult[] = ['match', 'none', 'multiple', 'inconclusive'];

/** What became of a policy reload: served from now on, or refused with the previous set kept. */
export type PolicyReloadResult = 'applied' | 'refused';

export interface PrometheusMetricsOptions {
  /** Where the unresolved-operation gauges are counted, at scrape time. */
  readonly store: Pick<Store, 'countOperations' | 'stats'>;
  /** How long scrapes reuse the last count, so a scrape storm cannot hammer the store (5 s). */
  readonly storeCacheMs?: number;
  /** A count slower than this marks the store down for the scrape instead of holding it (2 s). */
  readonly storeTimeoutMs?: number;
  /** Include the process metrics (default true). */
  readonly processMetrics?: boolean;
}

/** The label children of one tool, made once so recording is a property lookup, not a label hash. */
interface ToolSeries {
  readonly decisions: Readonly<Record<Verdict, Counter.Internal>>;
  readonly upstream: Readonly<Record<UpstreamOutcome, Histogram.Internal<'tool' | 'outcome'>>>;
  readonly reconciliations: Readonly<Record<ReconciliationResult, Counter.Internal>>;
  readonly waits: Counter.Internal;
}

/**
 * `GateMetrics` over prom-client, plus the store gauges collected at scrape time. Pass the same
 * object to `createGate({ metrics })` and `createAdminServer({ metrics })`.
 */
export class PrometheusMetrics implements GateMetrics {
  readonly registry: Registry;
  readonly #store: Pick<Store, 'countOperations' | 'stats'>;
  readonly #cacheMs: number;
  readonly #timeoutMs: number;
  readonly #decisions: Counter<'verdict' | 'tool'>;
  readonly #upstream: Histogram<'tool' | 'outcome'>;
  readonly #overhead: Readonly<Record<Verdict, Histogram.Internal<'verdict'>>>;
  readonly #waits: Counter<'tool'>;
  readonly #waitSeconds: Histogram<never>;
  readonly #reconciliations: Counter<'tool' | 'result'>;
  readonly #unresolved: Gauge<'state'>;
  readonly #deferred: Readonly<Record<DeferredOutcomeEvent, Counter.Internal>>;
  readonly #pendingOutcomes: Gauge<never>;
  readonly #storeUp: Gauge<never>;
  readonly #policyReloads: Readonly<Record<PolicyReloadResult, Counter.Internal>>;
  /** The policy generation serving now (`Gate.generation`), read at scrape time; none without a gate. */
  #generation: (() => number) | null = null;
  /** The proxy's own counts (`ProxyServer.counters()`), read at scrape time; none without a proxy. */
  #proxyCounts: (() => Readonly<Record<string, number>>) | null = null;
  readonly #byTool = new Map<string, ToolSeries>();
  #countedAt = Number.NEGATIVE_INFINITY;
  #counting: Promise<void> | null = null;

  constructor(options: PrometheusMetricsOptions) {
    this.#store = options.store;
    this.#cacheMs = options.storeCacheMs ?? 5_000;
    this.#timeoutMs = options.storeTimeoutMs ?? 2_000;
    const registry = new Registry();
    const registers = [registry];
    this.#decisions = new Counter({
      name: `${METRICS_PREFIX}decisions_total`,
      help: "Governed decisions, by verdict and tool id; would_* verdicts are shadow mode's: what enforce mode would have answered, the request sent anyway.",
      labelNames: ['verdict', 'tool'],
      registers,
    });
    this.#upstream = new Histogram({
      name: `${METRICS_PREFIX}upstream_duration_seconds`,
      help: 'Time of governed dispatches to the destination, by tool id and outcome (by the tool outcome contract; a timeout is unknown).',
      labelNames: ['tool', 'outcome'],
      buckets: [...UPSTREAM_BUCKETS],
      registers,
    });
    const overhead = new Histogram({
      name: `${METRICS_PREFIX}gate_overhead_seconds`,
      help: 'Time the gate added to a governed request (whole handling minus the governed upstream dispatch: store round trips, reservation waits, reconciliation lookups), by verdict.',
      labelNames: ['verdict'],
      buckets: [...OVERHEAD_BUCKETS],
      registers,
    });
    this.#overhead = byName(VERDICTS, (v) => overhead.labels(v));
    this.#waits = new Counter({
      name: `${METRICS_PREFIX}reservation_waits_total`,
      help: "Proposals that waited on another run's pending reservation of the same key, by tool id.",
      labelNames: ['tool'],
      registers,
    });
    this.#waitSeconds = new Histogram({
      name: `${METRICS_PREFIX}reservation_wait_seconds`,
      help: "How long proposals waited on another run's pending reservation.",
      buckets: [...RESERVATION_WAIT_BUCKETS],
      registers,
    });
    this.#reconciliations = new Counter({
      name: `${METRICS_PREFIX}reconciliations_total`,
      help: 'Reconciliation lookups after an unknown outcome, by tool id and result (match, none, multiple, inconclusive).',
      labelNames: ['tool', 'result'],
      registers,
    });
    const deferred = new Counter({
      name: `${METRICS_PREFIX}deferred_outcomes_total`,
      help: 'Outcomes the store could not take at once: queued for retries, written later, or dropped (outbox full, gate stopping, refused); a dropped one reads as sent_no_response once its reservation expires.',
      labelNames: ['event'],
      registers,
    });
    this.#deferred = byName(['queued', 'written', 'dropped'] as const, (e) => deferred.labels(e));
    this.#pendingOutcomes = new Gauge({
      name: `${METRICS_PREFIX}pending_outcomes`,
      help: 'Outcomes of this gate waiting in its outbox for the store (0 when every outcome is written).',
      registers,
    });
    const refresh = (): Promise<void> => this.#refreshStoreGauges();
    this.#unresolved = new Gauge({
      name: `${METRICS_PREFIX}unresolved_operations`,
      help: 'Operations in the store (all scopes, the same on every gate sharing it) whose outcome is not settled: unknown, or open. Counted at scrape time, cached a few seconds; keeps its last value while the store is down.',
      labelNames: ['state'],
      registers,
      collect: refresh,
    });
    this.#storeUp = new Gauge({
      name: `${METRICS_PREFIX}store_up`,
      help: 'Whether the last count of unresolved operations reached the store (1) or not (0).',
      registers,
      collect: refresh,
    });
    const store = this.#store;
    new Counter({
      name: `${METRICS_PREFIX}store_group_commit_total`,
      help: "What group commit did with this gate's hot-path store calls: batches (round trips carrying several calls), batched_calls (the calls in them), fallbacks (batches the store rolled back, a deadlock between gates or one call's error, whose calls went again one by one).",
      labelNames: ['event'],
      registers,
      collect(): void {
        const gc = store.stats.groupCommit;
        this.reset();
        this.labels('batches').inc(gc.batches);
        this.labels('batched_calls').inc(gc.batchedCalls);
        this.labels('fallbacks').inc(gc.fallbacks);
      },
    });
    const reloads = new Counter({
      name: `${METRICS_PREFIX}policy_reloads_total`,
      help: 'Policy reloads asked for (SIGHUP, --watch), by result: applied, or refused (an invalid set, or a changed egress block; the previous set kept serving).',
      labelNames: ['result'],
      registers,
    });
    this.#policyReloads = byName(['applied', 'refused'] as const, (r) => reloads.labels(r));
    // Both series from the start, at 0: an alert on `increase(...{result="refused"}[5m])` needs one.
    for (const r of ['applied', 'refused'] as const) this.#policyReloads[r].inc(0);
    const generation = (): number | null => this.#generation?.() ?? null;
    new Gauge({
      name: `${METRICS_PREFIX}policy_generation`,
      help: 'The policy generation serving requests: 1 for the set the gate started with, one more per applied reload (the log line "policies reloaded" carries its digest).',
      registers,
      collect(): void {
        const g = generation();
        if (g !== null) this.set(g);
      },
    });
    const proxy = (): Readonly<Record<string, number>> | null => this.#proxyCounts?.() ?? null;
    new Counter({
      name: `${METRICS_PREFIX}proxy_events_total`,
      help: 'What the forward proxy refused or cut on its own, before the engine (connection caps, tunnel checks and timeouts, egress refusals), by event.',
      labelNames: ['event'],
      registers,
      collect(): void {
        const counts = proxy();
        if (counts === null) return;
        this.reset();
        for (const [name, value] of Object.entries(counts)) this.labels(snakeCase(name)).inc(value);
      },
    });
    this.registry =
      options.processMetrics === false ? registry : Registry.merge([registry, processMetrics()]);
  }

  /**
   * Reads the proxy's own counts at each scrape (`effectgate_proxy_events_total`): refusals the
   * engine never sees, so its metrics cannot count them.
   *
   * @example metrics.countProxy(() => proxy.counters())
   */
  countProxy(read: () => Readonly<Record<string, number>>): void {
    this.#proxyCounts = read;
  }

  /** Reads the gate's policy generation at each scrape (`effectgate_policy_generation`). */
  showGeneration(read: () => number): void {
    this.#generation = read;
  }

  /** Counts one policy reload (`effectgate_policy_reloads_total`). */
  policyReload(result: PolicyReloadResult): void {
    this.#policyReloads[result].inc();
  }

  decision(verdict: Verdict, tool: string, overheadMs: number): void {
    this.#series(tool).decisions[verdict].inc();
    this.#overhead[verdict].observe(overheadMs > 0 ? overheadMs / 1000 : 0);
  }

  upstream(tool: string, outcome: UpstreamOutcome, ms: number): void {
    this.#series(tool).upstream[outcome].observe(ms > 0 ? ms / 1000 : 0);
  }

  reservationWait(tool: string, ms: number): void {
    this.#series(tool).waits.inc();
    this.#waitSeconds.observe(ms > 0 ? ms / 1000 : 0);
  }

  reconciliation(tool: string, result: ReconciliationResult): void {
    this.#series(tool).reconciliations[result].inc();
  }

  deferredOutcome(event: DeferredOutcomeEvent): void {
    this.#deferred[event].inc();
    if (event === 'queued') this.#pendingOutcomes.inc();
    else this.#pendingOutcomes.dec();
  }

  /** The exposition text (what `GET /metrics` answers) and its content type. */
  async scrape(): Promise<{ readonly contentType: string; readonly text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }

  #series(tool: string): ToolSeries {
    let series = this.#byTool.get(tool);
    if (series === undefined) {
      series = {
        decisions: byName(VERDICTS, (v) => this.#decisions.labels(v, tool)),
        upstream: byName(OUTCOMES, (o) => this.#upstream.labels(tool, o)),
        reconciliations: byName(RECONCILIATIONS, (r) => this.#reconciliations.labels(tool, r)),
        waits: this.#waits.labels(tool),
      };
      this.#byTool.set(tool, series);
    }
    return series;
  }

  /** One count per cache period, shared by concurrent scrapes and by both gauges of one scrape. */
  #refreshStoreGauges(): Promise<void> {
    if (this.#counting !== null) return this.#counting;
    if (performance.now() - this.#countedAt < this.#cacheMs) return Promise.resolve();
    this.#counting = this.#count().finally(() => {
      this.#countedAt = performance.now();
      this.#counting = null;
    });
    return this.#counting;
  }

  async #count(): Promise<void> {
    try {
      const counts = await withTimeout(this.#store.countOperations(), this.#timeoutMs);
      this.#unresolved.set({ state: 'unknown' }, counts.unknown ?? 0);
      this.#unresolved.set({ state: 'open' }, counts.open ?? 0);
      this.#storeUp.set(1);
    } catch {
      // The scrape still answers: the unresolved gauges keep their last values, store_up says why.
      this.#storeUp.set(0);
    }
  }
}

export function createPrometheusMetrics(options: PrometheusMetricsOptions): PrometheusMetrics {
  return new PrometheusMetrics(options);
}

let processRegistry: Registry | null = null;

/** The process metrics, made once per process (their GC and event-loop observers are per process too). */
function processMetrics(): Registry {
  if (processRegistry === null) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, prefix: METRICS_PREFIX });
  }
  return processRegistry;
}

function byName<K extends string, V>(names: readonly K[], make: (name: K) => V): Readonly<Record<K, V>> {
  const out = {} as Record<K, V>;
  for (const name of names) out[name] = make(name);
  return out;
}

/** `connectionsRefusedGlobal` → `connections_refused_global`, as Prometheus label values read. */
function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
