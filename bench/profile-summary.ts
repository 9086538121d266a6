/**
 * Summarizes a V8 `.cpuprofile` (e.g. from `BENCH_CPU_PROF=dir npm run bench`): where the busy
 * time went by component (node core, undici, pg, kysely, PGlite WASM, effectgate, GC), the top
 * self-time functions, and the top effectgate functions by inclusive time.
 *
 *   node --import tsx bench/profile-summary.ts <file.cpuprofile> [top=20]
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const IDLE = new Set(['(idle)', '(root)']);

function component(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') return functionName === '(garbage collector)' ? 'GC' : functionName || '(native)';
  if (url.startsWith('wasm://')) return 'PGlite (WASM)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1]!;
  if (url.startsWith('node:')) return url.startsWith('node:internal') ? 'node core (internal)' : url;
  if (url.includes('/dist/')) return 'effectgate';
  return 'other';
}

function label(frame: CallFrame): string {
  const file = frame.url.replace(/^.*\/(node_modules|dist)\//, '$1/').replace(/^file:\/\//, '');
  return `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
}

function top(map: Map<string, number>, total: number, n: number): string[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(
      ([k, v]) =>
        `  ${((100 * v) / total).toFixed(1).padStart(5)}%  ${(v / 1000).toFixed(0).padStart(7)} ms  ${k}`,
    );
}

export function summarize(profile: CpuProfile, n = 20): string {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const c of node.children ?? []) parent.set(c, node.id);
  }
  const self = new Map<string, number>();
  const components = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i + 1] ?? 0;
    const node = byId.get(profile.samples[i]!)!;
    if (IDLE.has(node.callFrame.functionName)) {
      idle += dt;
      continue;
    }
    busy += dt;
    self.set(label(node.callFrame), (self.get(label(node.callFrame)) ?? 0) + dt);
    const comp = component(node.callFrame);
    components.set(comp, (components.get(comp) ?? 0) + dt);
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!.callFrame;
      if (component(f) !== 'effectgate') continue;
      const l = label(f);
      if (seen.has(l)) continue;
      seen.add(l);
      inclusive.set(l, (inclusive.get(l) ?? 0) + dt);
    }
  }
  const total = busy + idle;
  return [
    `busy ${(busy / 1000).toFixed(0)} ms of ${(total / 1000).toFixed(0)} ms sampled (${((100 * busy) / total).toFixed(1)}% of one core); percentages are of busy time`,
    'by component (self time):',
    ...top(components, busy, n),
    'top functions (self time):',
    ...top(self, busy, n),
    'top effectgate functions (inclusive time):',
    ...top(inclusive, busy, n),
  ].join('\n');
}

const file = process.argv[2];
if (file !== undefined && import.meta.url === `file://${process.argv[1]}`) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  console.log(summarize(profile, Number(process.argv[3] ?? 20)));
}
