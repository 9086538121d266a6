/**
 * Printing the results: the figures table, the round-trip references, the model ratios and the
 * targets with met/missed next to each figure.
 */
import type { CpuUse } from './cpu-meter.js';
import type { ScenarioResult } from './load.js';
import { referenceRatios, referenceTargets } from './reference-report.js';
import type { ScenarioKind, StoreKind } from './scenarios.js';
import type { StoreCallTimes } from './store-calls.js';
import type { RoundTrip } from './stores.js';

export interface BenchRow extends ScenarioResult {
  readonly kind: ScenarioKind;
  readonly store: StoreKind;
  /** The table's scenario column, when not derived from `kind`. */
  readonly label: string | null;
  /** CPU cores used during the scenario (warm-up + measured), ours vs the rest of the machine. */
  readonly cpu: CpuUse | null;
  /** Costs per measured request, from snapshots around the measured phase alone; null off Linux. */
  readonly perRequest: PerRequest | null;
}

export interface PerRequest {
  /** CPU of the proxy process (the gate, or the floor prototype; PGlite runs inside it), µs. */
  readonly proxyCpuUs: number | null;
  /** CPU of every PostgreSQL server process, µs (the machine's cluster: other databases count too). */
  readonly postgresCpuUs: number | null;
  /** WAL bytes PostgreSQL wrote (`pg_stat_wal`, cluster-wide). */
  readonly walBytes: number | null;
}

export interface Check {
  readonly what: string;
  readonly figure: string;
  readonly target: string;
  /** `null` when the figure is missing (scenario skipped). */
  readonly met: boolean | null;
  /** Cores other processes used during the scenario, when that is enough to distort it. */
  readonly disturbedBy: number | null;
}

const NOISY_CORES = 0.25;
const disturbance = (row: BenchRow | null): number | null =>
  row?.cpu && row.cpu.otherCores > NOISY_CORES ? row.cpu.otherCores : null;

export interface RoundTrips {
  readonly postgres: RoundTrip | null;
  readonly pglite: RoundTrip | null;
}

export interface StoreCalls {
  readonly postgres: StoreCallTimes | null;
  readonly pglite: StoreCallTimes | null;
}

const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : '-');
const fmtRps = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');

export function formatTable(rows: readonly BenchRow[]): string {
  const head = [
    'scenario',
    'store',
    'conns',
    'req/s',
    'p50 ms',
    'p99 ms',
    'mean ms',
    'requests',
    'errors',
    'cpu ours',
    'cpu other',
    'gen µs/req',
    'proxy µs/req',
    'pg µs/req',
    'WAL B/req',
  ];
  const body = rows.map((r) => [
    r.label ??
      (r.kind === 'allow' ? 'governed allow' : r.kind === 'duplicate' ? 'governed duplicate' : r.kind),
    r.store === 'none' ? '-' : r.store,
    String(r.connections),
    fmtRps(r.rps),
    fmt(r.p50Ms, 3),
    fmt(r.p99Ms, 3),
    fmt(r.meanMs, 3),
    String(r.requests),
    String(r.errors),
    r.cpu === null ? '-' : fmt(r.cpu.oursCores),
    r.cpu === null ? '-' : fmt(r.cpu.otherCores),
    fmt(r.selfCpuUsPerRequest, r.kind === 'interceptor-alone' ? 3 : 1),
    r.perRequest?.proxyCpuUs == null ? '-' : fmt(r.perRequest.proxyCpuUs, 0),
    r.perRequest?.postgresCpuUs == null || r.store !== 'postgres' ? '-' : fmt(r.perRequest.postgresCpuUs, 0),
    r.perRequest?.walBytes == null || r.store !== 'postgres' ? '-' : fmt(r.perRequest.walBytes, 0),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: readonly string[]): string =>
    cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  const sep = widths.map((w) => '-'.repeat(w)).join('  ');
  const errors = rows
    .filter((r) => r.firstError !== null)
    .map((r) => `  first error in ${r.name} @${r.connections}: ${r.firstError}`);
  const legend =
    'cpu ours/other: cores used by the benchmark (load generator, proxy, upstream, PostgreSQL) / by anything else on the machine\n' +
    'gen µs/req: CPU of the bench process itself per request (load generator; in-process rows: also the interceptor; "alone" rows: per dispatch)\n' +
    'proxy / pg µs/req, WAL B/req: per measured request, the proxy process (PGlite included), every PostgreSQL process, and pg_stat_wal (cluster-wide)\n' +
    '"interceptor alone" rows: synchronous dispatches to a no-op next dispatcher; req/s = dispatches/s, mean ms = time per dispatch';
  return [line(head), sep, ...body.map(line), legend, ...errors].join('\n');
}

export function formatRoundTrips(rt: RoundTrips, calls: StoreCalls): string {
  const lines = ['store references (sequential, one connection, measured before the load):'];
  for (const r of [rt.postgres, rt.pglite]) {
    if (r !== null)
      lines.push(`  ${r.what}: p50 ${fmt(r.p50Ms, 3)} ms, p99 ${fmt(r.p99Ms, 3)} ms (${r.samples} queries)`);
  }
  for (const c of [calls.postgres, calls.pglite]) {
    if (c === null) continue;
    lines.push(
      `  ${c.store} store calls, bare client (p50/p99 ms): decide(allow) ${fmt(c.decideAllowP50Ms, 3)}/${fmt(c.decideAllowP99Ms, 3)}, ` +
        `recordOutcome ${fmt(c.recordOutcomeP50Ms, 3)}/${fmt(c.recordOutcomeP99Ms, 3)}, ` +
        `decide(duplicate) ${fmt(c.decideDuplicateP50Ms, 3)}/${fmt(c.decideDuplicateP99Ms, 3)} (${c.samples} each)`,
    );
  }
  return lines.join('\n');
}

function find(
  rows: readonly BenchRow[],
  kind: ScenarioKind,
  store: StoreKind,
  conns: number,
): BenchRow | null {
  return rows.find((r) => r.kind === kind && r.store === store && r.connections === conns) ?? null;
}

/** The model ratios: proxy hop over direct, and governed latency over hop + store round trips. */
export function formatRatios(rows: readonly BenchRow[], rt: RoundTrips, calls: StoreCalls): string {
  const lines = ['ratios:'];
  for (const c of [1, 32]) {
    const d = find(rows, 'direct', 'none', c);
    const u = find(rows, 'ungoverned', 'none', c);
    if (d && u)
      lines.push(
        `  @${c}: ungoverned/direct throughput ${fmt(u.rps / d.rps)}x; proxy hop adds ${fmt(u.p50Ms - d.p50Ms, 3)} ms p50`,
      );
  }
  lines.push(...referenceRatios(rows));
  const alone = (label: string): BenchRow | null =>
    rows.find((r) => r.kind === 'interceptor-alone' && r.label?.endsWith(label)) ?? null;
  const bare = alone('bare next dispatch');
  const noop = alone('noop interceptor');
  const gated = alone('gateInterceptor');
  if (bare && noop && gated)
    lines.push(
      `  interceptor alone: gateInterceptor adds ${fmt((gated.meanMs - bare.meanMs) * 1000, 3)} µs per ungoverned dispatch, a no-op interceptor ${fmt((noop.meanMs - bare.meanMs) * 1000, 3)} µs`,
    );
  const inProc = (v: string): BenchRow | null =>
    rows.find((r) => r.kind === 'interceptor-ungoverned' && r.label?.endsWith(v)) ?? null;
  const plain = inProc('plain Agent');
  const noopLoop = inProc('noop interceptor');
  const gateLoop = inProc('gateInterceptor');
  if (plain && noopLoop && gateLoop)
    lines.push(
      `  in-process @${plain.connections}: bench cpu per request plain ${fmt(plain.selfCpuUsPerRequest, 1)} / noop ${fmt(noopLoop.selfCpuUsPerRequest, 1)} / gate ${fmt(gateLoop.selfCpuUsPerRequest, 1)} µs ` +
        `(gate - plain ${fmt(gateLoop.selfCpuUsPerRequest - plain.selfCpuUsPerRequest, 1)} µs, noise about ±1-2 µs); throughput gate/plain ${fmt(gateLoop.rps / plain.rps)}x`,
    );
  for (const c of [1, 32]) {
    const u = find(rows, 'ungoverned', 'none', c);
    const ka = find(rows, 'intercept-nomatch', 'none', c);
    const nc = find(rows, 'intercept-nomatch-newconn', 'none', c);
    const tun = find(rows, 'connect-tunnel', 'none', c);
    if (u && ka)
      lines.push(
        `  @${c}: intercepted HTTPS (no tool) / plain-HTTP ungoverned throughput ${fmt(ka.rps / u.rps)}x; p50 +${fmt(ka.p50Ms - u.p50Ms, 3)} ms`,
      );
    if (ka && nc)
      lines.push(
        `  @${c}: new CONNECT + TLS per request costs ${fmt(nc.p50Ms - ka.p50Ms, 3)} ms p50 over keep-alive`,
      );
    if (ka && tun)
      lines.push(`  @${c}: tunnelled / intercepted (no tool) throughput ${fmt(tun.rps / ka.rps)}x`);
    for (const store of ['postgres', 'pglite'] as const) {
      for (const [plainKind, tlsKind] of [
        ['allow', 'https-allow'],
        ['duplicate', 'https-duplicate'],
      ] as const) {
        const p = find(rows, plainKind, store, c);
        const h = find(rows, tlsKind, store, c);
        if (p && h)
          lines.push(
            `  ${store} @${c}: ${plainKind} over https / over http: throughput ${fmt(h.rps / p.rps)}x, p50 ${fmt(h.p50Ms, 3)} vs ${fmt(p.p50Ms, 3)} ms`,
          );
      }
    }
  }
  lines.push(...floorRatios(rows));
  const u1 = find(rows, 'ungoverned', 'none', 1);
  for (const store of ['postgres', 'pglite'] as const) {
    const trip = rt[store];
    const a = find(rows, 'allow', store, 1);
    const dup = find(rows, 'duplicate', store, 1);
    if (!u1 || !trip || !a || !dup) continue;
    const allowModel = u1.p50Ms + 2 * trip.p50Ms;
    const dupModel = u1.p50Ms + trip.p50Ms;
    const unit = store === 'postgres' ? 'round trip' : 'PGlite select-1 cost';
    lines.push(
      `  ${store} @1: allow p50 ${fmt(a.p50Ms, 3)} ms vs ungoverned p50 + 2 x ${unit} = ${fmt(allowModel, 3)} ms -> ${fmt(a.p50Ms / allowModel)}x`,
      `  ${store} @1: duplicate p50 ${fmt(dup.p50Ms, 3)} ms vs ungoverned p50 + 1 x ${unit} = ${fmt(dupModel, 3)} ms -> ${fmt(dup.p50Ms / dupModel)}x`,
    );
    const c = calls[store];
    if (c === null) continue;
    const allowReal = u1.p50Ms + c.decideAllowP50Ms + c.recordOutcomeP50Ms;
    const dupReal = u1.p50Ms + c.decideDuplicateP50Ms;
    lines.push(
      `  ${store} @1: allow p50 vs ungoverned p50 + real decide + recordOutcome = ${fmt(allowReal, 3)} ms -> ${fmt(a.p50Ms / allowReal)}x (gate adds ${fmt(a.p50Ms - allowReal, 3)} ms beyond hop + store)`,
      `  ${store} @1: duplicate p50 vs ungoverned p50 + real decide = ${fmt(dupReal, 3)} ms -> ${fmt(dup.p50Ms / dupReal)}x (gate adds ${fmt(dup.p50Ms - dupReal, 3)} ms beyond hop + store)`,
    );
  }
  return lines.join('\n');
}

/** Governed PostgreSQL figures over the floor prototype's: throughput, latency, CPU, WAL. */
function floorRatios(rows: readonly BenchRow[]): string[] {
  const lines: string[] = [];
  // The targets are against the plain floor; the floors with events are the least a trail costs
  // on top of it, chained as written or sealed afterwards (floor-proxy.ts), for comparison only.
  const floors = ['floor', 'floor-chained', 'floor-events'] as const;
  for (const [c, floorKind] of [1, 32].flatMap((n) => floors.map((k) => [n, k] as const))) {
    const floor = find(rows, floorKind, 'postgres', c);
    if (floor === null) continue;
    for (const kind of ['allow', 'duplicate'] as const) {
      const r = find(rows, kind, 'postgres', c);
      if (r === null) continue;
      const per = (f: (p: PerRequest) => number | null): string => {
        const a = r.perRequest === null ? null : f(r.perRequest);
        const b = floor.perRequest === null ? null : f(floor.perRequest);
        return a === null || b === null || b === 0 ? '-' : `${fmt(a / b)}x (${fmt(a, 0)} vs ${fmt(b, 0)})`;
      };
      lines.push(
        `  postgres @${c}: ${kind} / ${floor.label ?? 'floor'}: throughput ${fmt(r.rps / floor.rps)}x, p50 ${fmt(r.p50Ms / floor.p50Ms)}x (${fmt(r.p50Ms, 3)} vs ${fmt(floor.p50Ms, 3)} ms); ` +
          `per request: proxy cpu ${per((p) => p.proxyCpuUs)} µs, postgres cpu ${per((p) => p.postgresCpuUs)} µs, WAL ${per((p) => p.walBytes)} B`,
      );
    }
  }
  return lines;
}

/**
 * The goals. Throughput, latency and CPU are measured against figures of the same run (the floor
 * prototype, squid, the bare undici hop, the bare dispatch), so that a slower or busier machine
 * moves both sides alike. Two are absolute: WAL per allow (bytes do not move with the machine's
 * speed) and PGlite's throughput (no reference runs next to it).
 */
export function evaluateTargets(rows: readonly BenchRow[]): Check[] {
  const checks: Check[] = [];
  floorTargets(rows, checks);
  const pglite = find(rows, 'allow', 'pglite', 32);
  checks.push({
    what: 'governed allow pglite @32',
    figure: pglite ? `${fmtRps(pglite.rps)} req/s` : 'skipped',
    target: `>= ${fmtRps(1_500)} req/s`,
    met: pglite ? pglite.rps >= 1_500 && pglite.errors === 0 : null,
    disturbedBy: disturbance(pglite),
  });
  referenceTargets(rows, checks);
  const alone = (label: string): BenchRow | null =>
    rows.find((r) => r.kind === 'interceptor-alone' && r.label?.endsWith(label)) ?? null;
  const bare = alone('bare next dispatch');
  const noop = alone('noop interceptor');
  const gated = alone('gateInterceptor');
  const overheadUs = bare && gated ? (gated.meanMs - bare.meanMs) * 1000 : null;
  const noopUs = bare && noop ? (noop.meanMs - bare.meanMs) * 1000 : null;
  checks.push({
    what: 'gateInterceptor over bare dispatch, ungoverned (alone)',
    figure: overheadUs === null ? 'skipped' : `${fmt(overheadUs, 3)} µs/req`,
    target: `<= 2 µs per request${noopUs === null ? '' : ` (a no-op undici interceptor: ${fmt(noopUs, 3)} µs)`}`,
    met: overheadUs === null ? null : overheadUs <= 2,
    disturbedBy: disturbance(gated),
  });
  return checks;
}

/** WAL PostgreSQL may write per governed allow (the cluster's pg_stat_wal, per measured request). */
const WAL_PER_ALLOW_BYTES = 2048;

/** The governed PostgreSQL path against the floor prototype (floor-proxy.ts) measured in the same run. */
function floorTargets(rows: readonly BenchRow[], checks: Check[]): void {
  const ratio = (
    what: string,
    row: BenchRow | null,
    floor: BenchRow | null,
    value: (r: BenchRow) => number | null,
    bound: number,
    atMost: boolean,
    unit: string,
  ): void => {
    const a = row === null ? null : value(row);
    const b = floor === null ? null : value(floor);
    const x = a === null || b === null || b === 0 ? null : a / b;
    checks.push({
      what,
      figure:
        x === null
          ? 'skipped'
          : `${fmt(x)}x (${fmt(a!, unit === 'ms' ? 3 : 0)} vs ${fmt(b!, unit === 'ms' ? 3 : 0)} ${unit})`,
      target: `${atMost ? '<=' : '>='} ${fmt(bound)}x the floor`,
      met: x === null ? null : (atMost ? x <= bound : x >= bound) && row!.errors === 0,
      disturbedBy: disturbance(row) ?? disturbance(floor),
    });
  };
  const f1 = find(rows, 'floor', 'postgres', 1);
  const f32 = find(rows, 'floor', 'postgres', 32);
  const a1 = find(rows, 'allow', 'postgres', 1);
  const a32 = find(rows, 'allow', 'postgres', 32);
  const d32 = find(rows, 'duplicate', 'postgres', 32);
  ratio('allow postgres @32 / floor, req/s', a32, f32, (r) => r.rps, 0.7, false, 'req/s');
  ratio('allow postgres @1 / floor, p50', a1, f1, (r) => r.p50Ms, 1.4, true, 'ms');
  ratio('duplicate postgres @32 / floor allow, req/s', d32, f32, (r) => r.rps, 1.0, false, 'req/s');
  ratio(
    'allow postgres @32 / floor, PostgreSQL CPU per allow',
    a32,
    f32,
    (r) => r.perRequest?.postgresCpuUs ?? null,
    1.5,
    true,
    'µs',
  );
  const wal = a32?.perRequest?.walBytes ?? null;
  checks.push({
    what: 'allow postgres @32, WAL per allow',
    figure: wal === null ? 'skipped' : `${fmtRps(wal)} B`,
    target: `<= ${fmtRps(WAL_PER_ALLOW_BYTES)} B (2 KB)`,
    met: wal === null ? null : wal <= WAL_PER_ALLOW_BYTES && a32!.errors === 0,
    disturbedBy: disturbance(a32),
  });
  ratio(
    'allow postgres @32 / floor, proxy CPU per allow',
    a32,
    f32,
    (r) => r.perRequest?.proxyCpuUs ?? null,
    1.5,
    true,
    'µs',
  );
}

export function formatChecks(checks: readonly Check[]): string {
  const w = Math.max(...checks.map((c) => c.what.length));
  const f = Math.max(...checks.map((c) => c.figure.length));
  const lines = checks.map((c) => {
    const mark = c.met === null ? 'n/a   ' : c.met ? 'MET   ' : 'MISSED';
    const noisy =
      c.disturbedBy === null ? '' : `   [disturbed: other processes used ${fmt(c.disturbedBy)} cores]`;
    return `  ${mark}  ${c.what.padEnd(w)}  ${c.figure.padStart(f)}   target ${c.target}${noisy}`;
  });
  return ['targets:', ...lines].join('\n');
}
