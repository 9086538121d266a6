/**
 * The ungoverned path against its references in the same run (bench/references.ts): the bare
 * undici hop and squid. Targets: at 32 connections at least 1.8× squid's throughput and 0.75× the
 * hop's; at 1 connection a p99 within 1.5× the hop's.
 */
import type { BenchRow, Check } from './report.js';
import type { ScenarioKind } from './scenarios.js';

const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : '-');
const NOISY_CORES = 0.25;

function row(rows: readonly BenchRow[], kind: ScenarioKind, conns: number): BenchRow | null {
  return rows.find((r) => r.kind === kind && r.connections === conns) ?? null;
}

function other(r: BenchRow | null): number | null {
  return r?.cpu && r.cpu.otherCores > NOISY_CORES ? r.cpu.otherCores : null;
}

export function referenceRatios(rows: readonly BenchRow[]): string[] {
  const lines: string[] = [];
  for (const c of [1, 32]) {
    const u = row(rows, 'ungoverned', c);
    if (u === null) continue;
    for (const [kind, name] of [
      ['hop', 'undici hop'],
      ['squid', 'squid'],
    ] as const) {
      const ref = row(rows, kind, c);
      if (ref === null) continue;
      lines.push(
        `  @${c}: ungoverned / ${name}: throughput ${fmt(u.rps / ref.rps)}x; p50 ${fmt(u.p50Ms, 3)} vs ${fmt(ref.p50Ms, 3)} ms, ` +
          `p99 ${fmt(u.p99Ms, 3)} vs ${fmt(ref.p99Ms, 3)} ms (${fmt(u.p99Ms / ref.p99Ms)}x)` +
          (u.perRequest?.proxyCpuUs != null && ref.perRequest?.proxyCpuUs != null
            ? `; proxy cpu ${fmt(u.perRequest.proxyCpuUs, 0)} vs ${fmt(ref.perRequest.proxyCpuUs, 0)} µs/req`
            : ''),
      );
    }
  }
  return lines;
}

export function referenceTargets(rows: readonly BenchRow[], checks: Check[]): void {
  const ratio = (
    what: string,
    a: BenchRow | null,
    b: BenchRow | null,
    value: (r: BenchRow) => number,
    bound: number,
    atMost: boolean,
    unit: string,
  ): void => {
    const x = a === null || b === null ? null : value(a) / value(b);
    checks.push({
      what,
      figure:
        x === null || a === null || b === null
          ? 'skipped'
          : `${fmt(x)}x (${fmt(value(a), unit === 'ms' ? 3 : 0)} vs ${fmt(value(b), unit === 'ms' ? 3 : 0)} ${unit})`,
      target: `${atMost ? '<=' : '>='} ${fmt(bound)}x`,
      met: x === null ? null : (atMost ? x <= bound : x >= bound) && a!.errors === 0,
      disturbedBy: other(a) ?? other(b),
    });
  };
  const u32 = row(rows, 'ungoverned', 32);
  const u1 = row(rows, 'ungoverned', 1);
  ratio('ungoverned @32 / squid, req/s', u32, row(rows, 'squid', 32), (r) => r.rps, 1.8, false, 'req/s');
  ratio('ungoverned @32 / undici hop, req/s', u32, row(rows, 'hop', 32), (r) => r.rps, 0.75, false, 'req/s');
  ratio('ungoverned @1 / undici hop, p99', u1, row(rows, 'hop', 1), (r) => r.p99Ms, 1.5, true, 'ms');
}
