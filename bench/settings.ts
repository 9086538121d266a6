/**
 * Benchmark settings, from the environment:
 *
 * - BENCH_SECONDS: measured seconds per scenario (3); BENCH_WARMUP_MS: warm-up per scenario (500);
 *   BENCH_MAX_REQUESTS: cap on measured requests per scenario (250000).
 * - BENCH_CONNECTIONS (1,32), BENCH_STORES (pglite,postgres), BENCH_SCENARIOS
 *   (direct,ungoverned,hop,squid,allow,duplicate,interceptor-ungoverned,intercept-nomatch,https-allow,
 *   https-duplicate,connect-tunnel): what to run. `ungoverned` brings its references, the bare
 *   undici hop and squid, along (bench/references.ts); `hop` and `squid` name them alone.
 * - BENCH_PROXY_ROOT=<checkout>: start that checkout's `bin/effectgate.js` (its `dist/`, built
 *   beforehand) as the proxy instead of this one's, and build nothing: a base commit measured by
 *   the same bench, for interleaved before/after runs.
 * - BENCH_INTERCEPTOR_IN_FLIGHT (64): requests in flight in the in-process interceptor scenario.
 * - BENCH_PG_URL: loopback admin URL used to create and drop the per-run database
 *   (postgres://postgres@127.0.0.1:5432/test).
 * - BENCH_PGLITE=memory: run the proxy on pglite:memory instead of a temporary directory.
 * - BENCH_STORE_CALLS=0: skip the bare-client store call reference.
 * - BENCH_NOISY_RETRIES (2): repeat a scenario during which other processes used > 0.25 cores.
 * - BENCH_CPU_PROF=<dir>: write a .cpuprofile of each proxy child (see bench/profile-summary.ts).
 * - BENCH_PRELOAD_ALLOWS=<n>: bulk-load n past allows (2n events) into the PostgreSQL store first,
 *   so the scenarios meet a store in use rather than a fresh one (bench/store-growth.ts).
 * - BENCH_SKIP_BUILD=1: do not run `tsc -p tsconfig.build.json` first.
 */
import { resolve } from 'node:path';
import type { LoadSettings } from './load.js';
import { SCENARIO_NAMES, type ScenarioName, type StoreKind } from './scenarios.js';

export interface BenchSettings {
  readonly load: LoadSettings;
  readonly connections: readonly number[];
  readonly stores: readonly Exclude<StoreKind, 'none'>[];
  readonly scenarios: readonly ScenarioName[];
  /** Requests in flight in the in-process interceptor scenario. */
  readonly interceptorInFlight: number;
  readonly adminUrl: string;
  readonly pgliteMemory: boolean;
  readonly storeCalls: boolean;
  readonly noisyRetries: number;
  readonly profileDir: string | null;
  readonly build: boolean;
  readonly json: boolean;
  /** The checkout whose proxy is measured (BENCH_PROXY_ROOT); null: this one. */
  readonly proxyRoot: string | null;
  /** Past allows bulk-loaded into the PostgreSQL store before the proxy starts (0: a fresh store). */
  readonly preloadAllows: number;
}

function positive(env: NodeJS.ProcessEnv, name: string, dflt: number): number {
  const v = Number(env[name] ?? dflt);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`bench: ${name} must be a positive number`);
  return v;
}

function list<T extends string>(value: string | undefined, dflt: string, allowed: readonly T[]): T[] {
  const items = (value ?? dflt).split(',').map((s) => s.trim());
  for (const item of items)
    if (!allowed.includes(item as T)) throw new Error(`bench: "${item}" is not one of ${allowed.join(', ')}`);
  return items as T[];
}

export function readSettings(env: NodeJS.ProcessEnv, argv: readonly string[]): BenchSettings {
  const connections = (env['BENCH_CONNECTIONS'] ?? '1,32').split(',').map(Number);
  if (connections.some((c) => !Number.isInteger(c) || c < 1 || c > 1024))
    throw new Error('bench: BENCH_CONNECTIONS must be integers between 1 and 1024');
  return {
    load: {
      warmupMs: positive(env, 'BENCH_WARMUP_MS', 500),
      durationMs: positive(env, 'BENCH_SECONDS', 3) * 1000,
      maxRequests: Math.floor(positive(env, 'BENCH_MAX_REQUESTS', 250_000)),
    },
    connections,
    stores: list(env['BENCH_STORES'], 'pglite,postgres', ['pglite', 'postgres'] as const),
    scenarios: list(env['BENCH_SCENARIOS'], SCENARIO_NAMES.join(','), SCENARIO_NAMES),
    interceptorInFlight: Math.floor(positive(env, 'BENCH_INTERCEPTOR_IN_FLIGHT', 64)),
    adminUrl: env['BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test',
    pgliteMemory: env['BENCH_PGLITE'] === 'memory',
    storeCalls: env['BENCH_STORE_CALLS'] !== '0',
    noisyRetries: Math.max(0, Math.floor(Number(env['BENCH_NOISY_RETRIES'] ?? 2)) || 0),
    profileDir: env['BENCH_CPU_PROF'] ? resolve(env['BENCH_CPU_PROF']) : null,
    preloadAllows: Math.max(0, Math.floor(Number(env['BENCH_PRELOAD_ALLOWS'] ?? 0)) || 0),
    proxyRoot: env['BENCH_PROXY_ROOT'] ? resolve(env['BENCH_PROXY_ROOT']) : null,
    build: env['BENCH_SKIP_BUILD'] !== '1' && !env['BENCH_PROXY_ROOT'],
    json: argv.includes('--json'),
  };
}
