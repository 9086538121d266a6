/**
 * Closed-loop load generator: one undici `Pool` (N connections, no pipelining) and N workers that
 * each loop request → await response → next. Every loop is bounded by a deadline and a request
 * cap. Latency (send → response body fully read) goes into a preallocated Float64Array.
 */
import { type Dispatcher, Pool } from 'undici';

/** What a correct answer looks like; anything else counts as an error. */
export interface Expectation {
  readonly status: number;
  /** Required `effectgate-verdict` header, or `null` for "must be absent". */
  readonly verdict: string | null;
}

export interface LoadScenario {
  readonly name: string;
  readonly connections: number;
  /** `http://127.0.0.1:PORT` of the proxy (absolute-form paths) or the upstream (origin-form). */
  readonly origin: string;
  /** Builds request number `seq`; `seq` is unique across the whole benchmark run. */
  readonly request: (seq: number) => Dispatcher.RequestOptions;
  readonly expect: Expectation;
  /**
   * The dispatcher to load instead of a `Pool` on `origin` (e.g. an `Agent` with an interceptor, or
   * a `ProxyAgent`); requests then carry their own `origin`. Destroyed after the scenario.
   */
  readonly dispatcher?: () => Dispatcher;
}

export interface LoadSettings {
  readonly warmupMs: number;
  readonly durationMs: number;
  /** Upper bound on measured requests per scenario (also the latency buffer size). */
  readonly maxRequests: number;
}

export interface ScenarioResult {
  readonly name: string;
  readonly connections: number;
  readonly requests: number;
  readonly errors: number;
  readonly seconds: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly meanMs: number;
  /** CPU time of the bench process (load generator, and any in-process gate) per measured request, µs. */
  readonly selfCpuUsPerRequest: number;
  /** The first wrong answer or exception, for the report. */
  readonly firstError: string | null;
}

interface Phase {
  readonly deadline: number;
  readonly cap: number;
  readonly latencies: Float64Array | null;
  issued: number;
  errors: number;
  firstError: string | null;
}

let nextSeq = 0;

/** Hands out sequence numbers that are unique for the whole process. */
export function takeSeq(): number {
  return nextSeq++;
}

/**
 * Runs the warm-up, then the measured phase. `around` runs right before and right after the
 * measured phase (outside its clock), for figures that must cover exactly the measured requests
 * (CPU of other processes, WAL bytes).
 */
export async function runScenario(
  scenario: LoadScenario,
  settings: LoadSettings,
  around?: (at: 'start' | 'end') => Promise<void>,
): Promise<ScenarioResult> {
  const pool: Dispatcher =
    scenario.dispatcher === undefined
      ? new Pool(scenario.origin, {
          connections: scenario.connections,
          pipelining: 1,
          keepAliveTimeout: 30_000,
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        })
      : scenario.dispatcher();
  try {
    const warm = newPhase(settings.warmupMs, settings.maxRequests, null);
    await runPhase(pool, scenario, warm);
    const latencies = new Float64Array(settings.maxRequests);
    await around?.('start');
    const measured = newPhase(settings.durationMs, settings.maxRequests, latencies);
    const started = performance.now();
    const cpu0 = process.cpuUsage();
    await runPhase(pool, scenario, measured);
    const cpu = process.cpuUsage(cpu0);
    const seconds = (performance.now() - started) / 1000;
    await around?.('end');
    const n = Math.min(measured.issued, settings.maxRequests);
    const sorted = latencies.subarray(0, n).sort();
    let sum = 0;
    for (let i = 0; i < n; i++) sum += sorted[i]!;
    return {
      name: scenario.name,
      connections: scenario.connections,
      requests: n,
      errors: measured.errors + warm.errors,
      seconds,
      rps: n / seconds,
      p50Ms: percentile(sorted, 0.5),
      p99Ms: percentile(sorted, 0.99),
      meanMs: n === 0 ? Number.NaN : sum / n,
      selfCpuUsPerRequest: n === 0 ? Number.NaN : (cpu.user + cpu.system) / n,
      firstError: warm.firstError ?? measured.firstError,
    };
  } finally {
    await pool.destroy();
  }
}

function newPhase(durationMs: number, cap: number, latencies: Float64Array | null): Phase {
  return {
    deadline: performance.now() + durationMs,
    cap,
    latencies,
    issued: 0,
    errors: 0,
    firstError: null,
  };
}

async function runPhase(pool: Dispatcher, scenario: LoadScenario, phase: Phase): Promise<void> {
  const workers: Promise<void>[] = [];
  for (let i = 0; i < scenario.connections; i++) workers.push(worker(pool, scenario, phase));
  await Promise.all(workers);
}

async function worker(pool: Dispatcher, scenario: LoadScenario, phase: Phase): Promise<void> {
  const { status, verdict } = scenario.expect;
  for (;;) {
    if (performance.now() >= phase.deadline || phase.issued >= phase.cap) return;
    const index = phase.issued++;
    const options = scenario.request(takeSeq());
    const t0 = performance.now();
    let wrong: string | null = null;
    try {
      const res = await pool.request(options);
      const got = res.headers['effectgate-verdict'];
      const gotVerdict = typeof got === 'string' ? got : null;
      if (res.statusCode !== status || gotVerdict !== verdict) {
        const text = await res.body.text();
        wrong = `status ${res.statusCode}, verdict ${gotVerdict ?? '(none)'}: ${text.slice(0, 300)}`;
      } else {
        await res.body.dump();
      }
    } catch (err) {
      wrong = `request failed: ${err instanceof Error ? err.message : String(err)}`;
    }
    const elapsed = performance.now() - t0;
    if (phase.latencies !== null) phase.latencies[index] = elapsed;
    if (wrong !== null) {
      phase.errors++;
      phase.firstError ??= wrong;
      // A dead proxy answers instantly: do not spin through the rest of the phase.
      if (phase.errors > 1000 && phase.errors > phase.issued / 2) return;
    }
  }
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

/** Percentile helper for other measurements (e.g. the store round trip). */
export function percentileOf(samples: Float64Array, q: number): number {
  return percentile(samples.slice().sort(), q);
}
