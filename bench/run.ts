/**
 * effectgate benchmark: direct vs ungoverned vs governed allow/duplicate on PGlite and PostgreSQL,
 * at 1 and 32 connections, through the real proxy binary. `npm run bench [-- --json]`.
 * Settings come from BENCH_* environment variables (bench/settings.ts); see bench/README.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Pool } from 'undici';
import { openStore } from '../src/store/index.js';
import {
  BENCH_AUTHORITY_KEY,
  killAllChildrenNow,
  type ListeningChild,
  spawnListening,
  stopAllChildren,
  stopChild,
} from './children.js';
import { cpuSnapshot, cpuUse } from './cpu-meter.js';
import {
  INTERCEPTOR_VARIANTS,
  interceptorScenario,
  measureDispatchLoop,
  openInProcessGate,
} from './interceptor.js';
import { runScenario } from './load.js';
import { measureReferences } from './references.js';
import {
  type BenchRow,
  evaluateTargets,
  formatChecks,
  formatRatios,
  formatRoundTrips,
  formatTable,
  type RoundTrips,
  type StoreCalls,
} from './report.js';
import {
  allowScenario,
  connectTunnelScenario,
  directScenario,
  duplicateScenario,
  FLOOR_LABELS,
  floorScenario,
  httpsAllowScenario,
  httpsDuplicateScenario,
  interceptNoMatchScenario,
  primeOverTls,
  primeRequest,
  type ScenarioName,
  type ScenarioSpec,
  type StoreKind,
  type TlsTarget,
  TUNNEL_HOST,
  ungovernedScenario,
} from './scenarios.js';
import { type BenchSettings, readSettings } from './settings.js';
import { measureStoreCalls } from './store-calls.js';
import { bulkLoad } from './store-growth.js';
import {
  type BenchDatabase,
  createBenchDatabase,
  measurePgliteQuery,
  measurePostgresRoundTrip,
  pgliteDir,
} from './stores.js';
import { type BenchTls, makeBenchTls } from './tls.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const POLICIES = resolve(ROOT, 'bench/policies');
const RESULTS = resolve(ROOT, 'bench/results/latest.json');
const GLOBAL_TIMEOUT_MS = 10 * 60_000;

const cfg = ((): BenchSettings => {
  try {
    return readSettings(process.env, process.argv);
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(2);
  }
})();
/** The proxy measured: this checkout's, or BENCH_PROXY_ROOT's (a base commit, built beforehand). */
const BIN = resolve(cfg.proxyRoot ?? ROOT, 'bin/effectgate.js');
const settings = cfg.load;
const connectionCounts = cfg.connections;
const stores = cfg.stores;
const only = (kind: ScenarioName): boolean => cfg.scenarios.includes(kind);
const TLS_SCENARIOS: readonly ScenarioName[] = [
  'intercept-nomatch',
  'https-allow',
  'https-duplicate',
  'connect-tunnel',
];
const needsTls = TLS_SCENARIOS.some(only);
/** A scenario during which other processes used more than this many cores is repeated. */
const NOISY_CORES = 0.25;
const runTag = Math.random().toString(36).slice(2, 8);

const cleanups: (() => Promise<void>)[] = [];
let cleaning: Promise<void> | null = null;

function cleanup(): Promise<void> {
  cleaning ??= (async (): Promise<void> => {
    await stopAllChildren();
    for (const c of cleanups.reverse()) await c().catch((e) => console.error(`bench: cleanup: ${e}`));
  })();
  return cleaning;
}

function abort(why: string, code: number): void {
  console.error(`bench: ${why}; stopping children and cleaning up`);
  const hard = setTimeout(() => process.exit(code), 20_000);
  hard.unref();
  void cleanup().finally(() => process.exit(code));
}

process.on('exit', killAllChildrenNow);
process.once('SIGINT', () => abort('interrupted', 130));
process.once('SIGTERM', () => abort('terminated', 143));
const globalTimer = setTimeout(
  () => abort(`global timeout (${GLOBAL_TIMEOUT_MS / 1000}s)`, 1),
  GLOBAL_TIMEOUT_MS,
);

function build(): void {
  if (!cfg.build) return;
  const tsc = resolve(ROOT, 'node_modules/typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, encoding: 'utf8' });
  // The store's SQL functions too (what `npm run build` copies): without them dist/ would run the
  // functions of whatever build came before, and a SQL change would be measured as no change.
  const sql = spawnSync(process.execPath, [resolve(ROOT, 'scripts/copy-sql.mjs')], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (sql.status !== 0)
    throw new Error(`bench: copying the SQL functions failed\n${sql.stdout}${sql.stderr}`);
  if (r.status === 0) return;
  const out = `${r.stdout}${r.stderr}`.trim().split('\n').slice(0, 20).join('\n');
  if (!existsSync(resolve(ROOT, 'dist/cli/index.js'))) throw new Error(`bench: build failed\n${out}`);
  console.log(`note: build reported errors (benchmarking whatever dist/ holds):\n${out}`);
}

function startProxy(
  store: Exclude<StoreKind, 'none'>,
  storeUrl: string,
  tls: { readonly material: BenchTls; readonly upstreamPort: number } | null,
): Promise<ListeningChild> {
  const https =
    tls === null
      ? []
      : [
          '--ca-dir',
          tls.material.caDir,
          '--upstream-ca',
          tls.material.upstreamCert,
          '--allow-connect-ports',
          String(tls.upstreamPort),
        ];
  const prof =
    cfg.profileDir === null
      ? []
      : [
          '--cpu-prof',
          `--cpu-prof-dir=${cfg.profileDir}`,
          `--cpu-prof-name=proxy-${store}-${runTag}.cpuprofile`,
        ];
  return spawnListening({
    name: `proxy (${store})`,
    args: [
      ...prof,
      BIN,
      'proxy',
      '--listen',
      '127.0.0.1:0',
      '--policies',
      POLICIES,
      '--store',
      storeUrl,
      ...https,
    ],
    // A gate on PostgreSQL needs an authority key from outside the database (docs/security.md).
    env: { EFFECTGATE_LOG_LEVEL: 'warn', EFFECTGATE_AUTHORITY_KEY: BENCH_AUTHORITY_KEY },
    listening: /listening on http:\/\/127\.0\.0\.1:(\d+)/,
  });
}

const rows: BenchRow[] = [];
function perRequestOf(
  totals: BenchRow['perRequest'],
  each: (x: number | null) => number | null,
): BenchRow['perRequest'] {
  if (totals === null) return null;
  return {
    proxyCpuUs: each(totals.proxyCpuUs),
    postgresCpuUs: each(totals.postgresCpuUs),
    walBytes: each(totals.walBytes),
  };
}

/**
 * BENCH_DB_SQL: statements (`;`-separated) run on the PostgreSQL bench database once the proxy has
 * migrated it, to measure a schema idea (an index dropped, a fillfactor) under load before writing
 * its migration. Printed with the results, so a figure is never read without it.
 */
async function applyExperiment(store: StoreKind, storeUrl: string): Promise<void> {
  const sql = process.env['BENCH_DB_SQL'];
  if (store !== 'postgres' || sql === undefined || sql.trim() === '') return;
  const client = new pg.Client({ connectionString: storeUrl });
  await client.connect();
  try {
    for (const statement of sql.split(';').filter((x) => x.trim() !== '')) {
      await client.query(statement);
      console.log(`experiment (BENCH_DB_SQL): ${statement.trim()}`);
    }
  } finally {
    await client.end();
  }
}

/** A connection to the bench's PostgreSQL for pg_stat_wal, when PostgreSQL is measured. */
let walClient: pg.Client | null = null;

async function walBytes(): Promise<number | null> {
  if (walClient === null) return null;
  const r = await walClient.query<{ b: string }>('select wal_bytes::text as b from pg_stat_wal');
  return r.rows[0] === undefined ? null : Number(r.rows[0].b);
}

/**
 * Repeats a scenario while something outside the benchmark used > NOISY_CORES; keeps the quietest.
 * `subjectPid`: the proxy under test, whose CPU per request is reported.
 */
async function measure(spec: ScenarioSpec, subjectPid?: number): Promise<void> {
  let best: BenchRow | null = null;
  for (let attempt = 0; attempt <= cfg.noisyRetries; attempt++) {
    const before = cpuSnapshot();
    // Totals over exactly the measured phase (snapshots taken around it), divided per request below.
    let start: { cpu: ReturnType<typeof cpuSnapshot>; wal: number | null } | null = null;
    let totals: BenchRow['perRequest'] = null;
    const r = await runScenario(spec, settings, async (at) => {
      if (at === 'start') {
        start = { cpu: cpuSnapshot(), wal: await walBytes() };
        return;
      }
      const s0 = start!;
      const used = cpuUse(s0.cpu, cpuSnapshot(), subjectPid);
      const wal = await walBytes();
      totals = {
        proxyCpuUs: used?.subjectCores == null ? null : used.subjectCores * used.seconds * 1e6,
        postgresCpuUs: used === null ? null : used.postgresCores * used.seconds * 1e6,
        walBytes: wal === null || s0.wal === null ? null : wal - s0.wal,
      };
    });
    const cpu = cpuUse(before, cpuSnapshot());
    const each = (x: number | null): number | null =>
      x === null || r.requests === 0 ? null : x / r.requests;
    const row: BenchRow = {
      ...r,
      kind: spec.kind,
      store: spec.store,
      label: spec.label ?? null,
      cpu,
      perRequest: perRequestOf(totals, each),
    };
    const err = r.errors > 0 ? `  ERRORS ${r.errors}` : '';
    const load =
      cpu === null ? '' : `, cpu ours ${cpu.oursCores.toFixed(2)} other ${cpu.otherCores.toFixed(2)}`;
    console.log(
      `  ${r.name} @${r.connections}: ${Math.round(r.rps)} req/s, p50 ${r.p50Ms.toFixed(3)} ms, p99 ${r.p99Ms.toFixed(3)} ms${load}${err}`,
    );
    if (best === null || (cpu?.otherCores ?? 0) < (best.cpu?.otherCores ?? 0)) best = row;
    if ((cpu?.otherCores ?? 0) <= NOISY_CORES) break;
    if (attempt < cfg.noisyRetries)
      console.log(`    (other processes used ${cpu?.otherCores.toFixed(2)} cores: repeating)`);
  }
  rows.push(best!);
}

/**
 * The in-process interceptor: closed loops through plain / no-op / gate Agents at
 * `interceptorInFlight`, then the interceptor alone against a no-op next dispatcher.
 */
async function measureInterceptor(upstreamPort: number): Promise<void> {
  console.log(`in-process interceptor (no proxy, ${cfg.interceptorInFlight} in flight, then alone):`);
  const { gate, close } = await openInProcessGate(POLICIES);
  try {
    for (const v of INTERCEPTOR_VARIANTS)
      await measure(interceptorScenario(v, gate, upstreamPort, cfg.interceptorInFlight));
    for (const v of INTERCEPTOR_VARIANTS) {
      const before = cpuSnapshot();
      const r = measureDispatchLoop(v, gate, upstreamPort, Math.min(settings.durationMs, 2000), 50_000_000);
      const cpu = cpuUse(before, cpuSnapshot());
      rows.push({ ...r, kind: 'interceptor-alone', store: 'none', label: r.name, cpu, perRequest: null });
      console.log(`  ${r.name}: ${(r.meanMs * 1000).toFixed(3)} µs per dispatch (${r.requests} dispatches)`);
    }
  } finally {
    await close();
  }
}

async function prime(proxyPort: number, upstreamPort: number, title: string): Promise<void> {
  const pool = new Pool(`http://127.0.0.1:${proxyPort}`, { connections: 1 });
  try {
    const res = await pool.request(primeRequest({ proxyPort, upstreamPort, connections: 1 }, runTag, title));
    const text = await res.body.text();
    const verdict = res.headers['effectgate-verdict'];
    if (res.statusCode !== 201 || verdict !== 'allow')
      throw new Error(`bench: priming the duplicate key got ${res.statusCode} ${verdict}: ${text}`);
  } finally {
    await pool.destroy();
  }
}

async function main(): Promise<void> {
  console.log(
    `effectgate bench: ${availableParallelism()} cpu(s) (${cpus()[0]?.model ?? '?'}), node ${process.version}, ` +
      `${settings.durationMs / 1000}s measured + ${settings.warmupMs}ms warm-up per scenario, connections ${connectionCounts.join('/')}`,
  );
  const loadAtStart = loadavg();
  console.log(
    `load average at start: ${loadAtStart.map((l) => l.toFixed(2)).join(' ')} (anything else running skews every figure)`,
  );
  if (cfg.proxyRoot !== null)
    console.log(`proxy measured: ${BIN} (BENCH_PROXY_ROOT; not built by the bench)`);
  build();
  const upstream = await spawnListening({
    name: 'upstream',
    args: ['--import', 'tsx', resolve(ROOT, 'bench/upstream-server.ts')],
    listening: /upstream listening on 127\.0\.0\.1:(\d+)/,
  });
  const notes: string[] = [];
  let database: BenchDatabase | null = null;
  if (stores.includes('postgres')) {
    const made = await createBenchDatabase(cfg.adminUrl);
    if (made.db === null) {
      notes.push(`PostgreSQL skipped: ${made.skipped}`);
      console.log(`note: PostgreSQL skipped: ${made.skipped}`);
    } else {
      const db = made.db;
      database = db;
      cleanups.push(() => db.drop());
      const client = new pg.Client({ connectionString: db.url });
      await client.connect();
      walClient = client;
      cleanups.push(() => client.end());
      if (cfg.preloadAllows > 0) {
        // A store in use, not a fresh one (bench/README.md "Cost as the store grows").
        await (await openStore({ url: db.url, migrate: true })).close();
        const t0 = performance.now();
        await bulkLoad(client, cfg.preloadAllows);
        // The floor's one table gets as many rows, so both meet a store in use.
        await client.query(
          `create table if not exists floor_keys (key_hash text primary key, state text not null,
             created_at timestamptz not null default now())`,
        );
        await client.query(
          `insert into floor_keys (key_hash, state) select 'sha256:past-' || g, 'confirmed'
           from generate_series(1, $1::int) g`,
          [cfg.preloadAllows],
        );
        await client.query('vacuum analyze floor_keys');
        console.log(
          `PostgreSQL store preloaded with ${cfg.preloadAllows} past allows in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
        );
      }
    }
  }
  const roundTrips: RoundTrips = {
    postgres: database === null ? null : await measurePostgresRoundTrip(database.url),
    pglite: stores.includes('pglite') ? await measurePgliteQuery() : null,
  };
  let calls: StoreCalls = { postgres: null, pglite: null };
  if (cfg.storeCalls) {
    const probeDir = stores.includes('pglite') ? await pgliteDir() : null;
    if (probeDir !== null) cleanups.push(() => probeDir.remove());
    calls = {
      postgres: database === null ? null : await measureStoreCalls('postgres', database.url),
      pglite: probeDir === null ? null : await measureStoreCalls('pglite', `pglite:${probeDir.dir}`),
    };
  }
  console.log(formatRoundTrips(roundTrips, calls));

  if (only('direct')) {
    console.log('direct (load generator -> upstream):');
    for (const c of connectionCounts) await measure(directScenario(upstream.port, c));
  }

  if (only('ungoverned') || only('hop') || only('squid'))
    await measureReferences({
      root: ROOT,
      upstreamPort: upstream.port,
      connections: connectionCounts,
      hop: only('ungoverned') || only('hop'),
      squid: only('ungoverned') || only('squid'),
      measure,
      note: (why) => notes.push(why),
    });

  if (only('interceptor-ungoverned')) await measureInterceptor(upstream.port);

  let tls: { readonly material: BenchTls; readonly upstreamPort: number } | null = null;
  if (needsTls) {
    const material = await makeBenchTls(BIN);
    cleanups.push(() => material.remove());
    const tlsUpstream = await spawnListening({
      name: 'https upstream',
      args: ['--import', 'tsx', resolve(ROOT, 'bench/upstream-server.ts')],
      // Also on TUNNEL_HOST (same port): the connect-tunnel scenario's destination, which no tool names.
      env: {
        BENCH_TLS_CERT: material.upstreamCert,
        BENCH_TLS_KEY: material.upstreamKey,
        BENCH_LISTEN_HOSTS: `127.0.0.1,${TUNNEL_HOST}`,
      },
      listening: /upstream listening on 127\.0\.0\.1:(\d+)/,
    });
    tls = { material, upstreamPort: tlsUpstream.port };
  }

  let ungovernedDone = false;
  let tlsUngovernedDone = false;
  for (const store of stores) {
    let storeUrl: string;
    if (store === 'postgres') {
      if (database === null) continue;
      storeUrl = database.url;
    } else if (cfg.pgliteMemory) {
      storeUrl = 'pglite:memory';
    } else {
      const tmp = await pgliteDir();
      cleanups.push(() => tmp.remove());
      storeUrl = `pglite:${tmp.dir}`;
    }
    const proxy = await startProxy(store, storeUrl, tls);
    await applyExperiment(store, storeUrl);
    console.log(`proxy on ${store} (port ${proxy.port}):`);
    const at = (connections: number): { proxyPort: number; upstreamPort: number; connections: number } => ({
      proxyPort: proxy.port,
      upstreamPort: upstream.port,
      connections,
    });
    const overTls = (connections: number): TlsTarget => ({
      proxyPort: proxy.port,
      tlsUpstreamPort: tls?.upstreamPort ?? 0,
      connections,
      ca: tls?.material.clientCa ?? [],
    });
    if (!ungovernedDone && only('ungoverned')) {
      for (const c of connectionCounts) await measure(ungovernedScenario(at(c)), proxy.process.pid);
      ungovernedDone = true;
    }
    if (!tlsUngovernedDone && tls !== null) {
      if (only('intercept-nomatch')) {
        for (const c of connectionCounts) await measure(interceptNoMatchScenario(overTls(c), false));
        for (const c of connectionCounts) await measure(interceptNoMatchScenario(overTls(c), true));
      }
      if (only('connect-tunnel'))
        for (const c of connectionCounts) await measure(connectTunnelScenario(overTls(c)));
      tlsUngovernedDone = true;
    }
    for (const trail of [null, 'chained', 'events'] as const) {
      if (store !== 'postgres' || !only(trail === null ? 'floor' : `floor-${trail}`)) continue;
      // The physical floor, measured next to the gate's allow in the same run; then the same floor
      // appending an event per round trip, chained or not (floor-proxy.ts, BENCH_FLOOR_TRAIL).
      const floor = await spawnListening({
        name: 'floor proxy',
        args: ['--import', 'tsx', resolve(ROOT, 'bench/floor-proxy.ts'), storeUrl],
        env: { BENCH_FLOOR_TRAIL: trail ?? '' },
        listening: /floor proxy listening on 127\.0\.0\.1:(\d+)/,
      });
      console.log(`${FLOOR_LABELS[trail ?? 'none']} on postgres (port ${floor.port}):`);
      for (const c of connectionCounts)
        await measure(
          floorScenario(
            { proxyPort: floor.port, upstreamPort: upstream.port, connections: c },
            runTag,
            trail,
          ),
          floor.process.pid,
        );
      await stopChild(floor.process);
    }
    if (only('allow'))
      for (const c of connectionCounts) await measure(allowScenario(at(c), store, runTag), proxy.process.pid);
    if (only('https-allow') && tls !== null)
      for (const c of connectionCounts) await measure(httpsAllowScenario(overTls(c), store, runTag));
    if (only('duplicate')) {
      const title = `bench ${runTag} the duplicate issue`;
      await prime(proxy.port, upstream.port, title);
      for (const c of connectionCounts)
        await measure(duplicateScenario(at(c), store, runTag, title), proxy.process.pid);
    }
    if (only('https-duplicate') && tls !== null) {
      const title = `bench ${runTag} the https duplicate issue`;
      await primeOverTls(overTls(1), runTag, title);
      for (const c of connectionCounts)
        await measure(httpsDuplicateScenario(overTls(c), store, runTag, title));
    }
    const warnings = proxy.stderr().trim();
    if (warnings !== '') console.log(`proxy (${store}) stderr tail:\n${warnings.slice(-2000)}`);
    await stopChild(proxy.process);
  }
  await stopChild(upstream.process);

  console.log('');
  console.log(formatTable(rows));
  console.log('');
  console.log(formatRoundTrips(roundTrips, calls));
  console.log(formatRatios(rows, roundTrips, calls));
  const checks = evaluateTargets(rows);
  console.log(formatChecks(checks));
  for (const n of notes) console.log(`note: ${n}`);
  const loadAtEnd = loadavg();
  console.log(
    `load average at start / end: ${loadAtStart.map((l) => l.toFixed(2)).join(' ')} / ${loadAtEnd.map((l) => l.toFixed(2)).join(' ')}`,
  );

  if (cfg.json) {
    const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
    const meta = {
      date: new Date().toISOString(),
      commit: git.stdout.trim() || null,
      workingTreeDirty:
        spawnSync('git', ['status', '--porcelain'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim() !== '',
      node: process.version,
      cpus: availableParallelism(),
      cpuModel: cpus()[0]?.model ?? null,
      memoryBytes: totalmem(),
      loadAverageAtStart: loadAtStart,
      loadAverageAtEnd: loadAtEnd,
      proxyRoot: cfg.proxyRoot,
      settings,
      connections: connectionCounts,
    };
    await mkdir(resolve(RESULTS, '..'), { recursive: true });
    await writeFile(
      RESULTS,
      `${JSON.stringify({ meta, roundTrips, storeCalls: calls, results: rows, checks, notes }, null, 2)}\n`,
    );
    console.log(`results written to ${RESULTS}`);
  }
}

main()
  .then(
    () => cleanup(),
    async (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exitCode = 1;
      await cleanup();
    },
  )
  .finally(() => clearTimeout(globalTimer));
