/**
 * Hostile governed bodies against ungoverned latency: the real proxy, started from
 * the working tree's sources, measures ungoverned p50/p99 at one connection alone, then while four
 * clients keep 1 MB hostile JSON bodies in flight to a governed route (deeply nested; wide with many
 * members; wide just under the gate's node limit). The gate has one event loop: whatever a governed
 * body costs in synchronous work is latency every other request waits out.
 *
 * `node --import tsx bench/hostile-bodies.ts` (about 40 s). Loopback only; PostgreSQL from
 * BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/test, a fresh database dropped
 * afterwards), else an embedded PGlite directory. BENCH_SECONDS sets the measured seconds per phase,
 * BENCH_HOSTILE_PAUSE_MS a pause of each hostile client between bodies (default 0: flat out). The
 * "flat string" control row has the same bytes and a trivial shape: on a small machine, moving
 * 4 × 1 MB through the proxy flat out is itself the floor, whatever the gate does with them.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BODY_LIMITS } from '../src/engine/json-scan.js';
import {
  BENCH_AUTHORITY_KEY,
  killAllChildrenNow,
  type ListeningChild,
  spawnListening,
  stopAllChildren,
  stopChild,
} from './children.js';
import { cpuSnapshot, cpuUse } from './cpu-meter.js';
import { HOSTILE_CLIENTS, HOSTILE_SHAPES } from './hostile-shapes.js';
import { type LoadSettings, runScenario, type ScenarioResult } from './load.js';
import { ISSUES_PATH, issueBody, UNGOVERNED_PATH } from './scenarios.js';
import { createBenchDatabase, pgliteDir } from './stores.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const POLICIES = resolve(ROOT, 'bench/policies');
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? '5');
const PG_URL = process.env['BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
/** Pause of each hostile client between two bodies (BENCH_HOSTILE_PAUSE_MS; 0 = closed loops flat out). */
const PAUSE_MS = Number(process.env['BENCH_HOSTILE_PAUSE_MS'] ?? '0');
/** Hard stop for the whole run, whatever hangs. */
const GLOBAL_TIMEOUT_MS = 5 * 60_000;
/** The gate configurations compared: what `--analysis-threads` changes. */
const GATE_CONFIGS: readonly (readonly [string, readonly string[]])[] = [
  ['every body analysed on the event loop (--analysis-threads 0)', ['--analysis-threads', '0']],
  ['bodies of 16 KiB and more analysed on a worker (default, --analysis-threads 1)', []],
];
const LOAD: LoadSettings = { warmupMs: 500, durationMs: SECONDS * 1000, maxRequests: 200_000 };

interface HostileStats {
  readonly requests: number;
  readonly meanMs: number | null;
  readonly statuses: Readonly<Record<string, number>>;
}

/**
 * Four closed loops sending the `shape` body to `path`, in a child process (`hostile-client.ts`),
 * so that moving their megabytes never delays the client that measures. Resolves once the first
 * hostile answer is back; `stop()` ends the loops and resolves with their statistics.
 */
async function hostileLoad(
  proxyPort: number,
  upstreamPort: number,
  shape: string,
  path: string,
): Promise<{ stop(): Promise<HostileStats> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', resolve(ROOT, 'bench/hostile-client.ts')], {
    env: {
      ...process.env,
      BENCH_PROXY_PORT: String(proxyPort),
      BENCH_UPSTREAM_PORT: String(upstreamPort),
      BENCH_HOSTILE_PATH: path,
      BENCH_HOSTILE_SHAPE: shape,
      BENCH_HOSTILE_PAUSE_MS: String(PAUSE_MS),
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  hostileChildren.add(child);
  child.once('exit', () => hostileChildren.delete(child));
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  await new Promise<void>((ready, fail) => {
    const timer = setTimeout(() => fail(new Error('hostile client did not start')), 60_000);
    const check = (): void => {
      if (!out.includes('hostile ready')) return;
      clearTimeout(timer);
      ready();
    };
    child.stdout.on('data', check);
    void exited.then((code) => fail(new Error(`hostile client exited (${code}) before it was ready`)));
  });
  return {
    async stop(): Promise<HostileStats> {
      child.stdin.end();
      const code = await exited;
      const last = out.trim().split('\n').at(-1) ?? '';
      if (code !== 0 || !last.startsWith('{')) throw new Error(`hostile client failed (${code}): ${out}`);
      return JSON.parse(last) as HostileStats;
    },
  };
}

const hostileChildren = new Set<ChildProcess>();

/** CPU milliseconds (user + system) the process `pid` has used so far; NaN off Linux. */
function cpuMsOf(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10; // utime, stime in 1/100 s
  } catch {
    return Number.NaN;
  }
}

function ungoverned(proxyPort: number, upstreamPort: number): Promise<ScenarioResult> {
  const body = issueBody('ungoverned request through the proxy');
  return runScenario(
    {
      name: 'ungoverned',
      connections: 1,
      origin: `http://127.0.0.1:${proxyPort}`,
      request: () => ({
        method: 'POST',
        path: `http://127.0.0.1:${upstreamPort}${UNGOVERNED_PATH}`,
        headers: { host: `127.0.0.1:${upstreamPort}`, 'content-type': 'application/json' },
        body,
      }),
      expect: { status: 201, verdict: null },
    },
    LOAD,
  );
}

async function startProxy(storeUrl: string, extra: readonly string[]): Promise<ListeningChild> {
  const cli = resolve(ROOT, 'src/cli/index.ts');
  const argv = ['proxy', '--listen', '127.0.0.1:0', '--policies', POLICIES, '--store', storeUrl, ...extra];
  // From the sources (through tsx), so the figures are those of this working tree, not of dist/.
  const script = `import(${JSON.stringify(cli)}).then((m) => m.main(${JSON.stringify(argv)})).then((c) => { if (typeof c === 'number') process.exitCode = c; });`;
  return spawnListening({
    name: 'proxy',
    args: ['--import', 'tsx', '--input-type=module', '-e', script],
    // A gate on PostgreSQL needs an authority key from outside the database (docs/security.md).
    env: { EFFECTGATE_LOG_LEVEL: 'warn', EFFECTGATE_AUTHORITY_KEY: BENCH_AUTHORITY_KEY },
    listening: /listening on http:\/\/127\.0\.0\.1:(\d+)/,
  });
}

interface Phase {
  readonly label: string;
  readonly result: ScenarioResult;
  readonly hostile?: HostileStats;
  /** CPU the proxy process used during the phase, ms. */
  readonly proxyCpuMs: number;
  /** Cores used by processes outside the bench: large values mean the figures are noise. */
  readonly otherCores: number | null;
}

function row(p: Phase, base: Phase | null): string {
  const r = p.result;
  const ratio = base === null ? '' : `  p99 ×${(r.p99Ms / base.result.p99Ms).toFixed(2)} of baseline`;
  const errors = r.errors > 0 ? `  ERRORS ${r.errors} (${r.firstError})` : '';
  const other = p.otherCores === null ? '' : `, other processes ${p.otherCores.toFixed(2)} cores`;
  const h = p.hostile;
  const hostile =
    h === undefined
      ? ''
      : `\n    hostile: ${h.requests} requests, mean ${(h.meanMs ?? Number.NaN).toFixed(1)} ms, proxy CPU ≈${hostileCpuMs(p, base).toFixed(2)} ms per hostile request, answers ${JSON.stringify(h.statuses)}`;
  return `  ${p.label.padEnd(50)} ${String(r.requests).padStart(6)} req  p50 ${r.p50Ms.toFixed(3)} ms  p99 ${r.p99Ms.toFixed(3)} ms${ratio}${errors}${other}${hostile}`;
}

/** Proxy CPU per hostile request: the phase's, less what its ungoverned requests cost alone. */
function hostileCpuMs(p: Phase, base: Phase | null): number {
  const perUngoverned = base === null ? 0 : base.proxyCpuMs / base.result.requests;
  return (p.proxyCpuMs - perUngoverned * p.result.requests) / (p.hostile?.requests ?? 1);
}

/** Ungoverned load, alone or next to four hostile loops sending `shape` to `path`. */
async function phase(
  label: string,
  proxy: ListeningChild,
  upstreamPort: number,
  hostileOf: { readonly shape: string; readonly path: string } | null,
): Promise<Phase> {
  const hostile =
    hostileOf === null ? null : await hostileLoad(proxy.port, upstreamPort, hostileOf.shape, hostileOf.path);
  const before = cpuSnapshot();
  const cpu0 = cpuMsOf(proxy.process.pid);
  const result = await ungoverned(proxy.port, upstreamPort);
  const proxyCpuMs = cpuMsOf(proxy.process.pid) - cpu0;
  const otherCores = cpuUse(before, cpuSnapshot())?.otherCores ?? null;
  const h = hostile === null ? undefined : await hostile.stop();
  return { label, result, proxyCpuMs, otherCores, ...(h === undefined ? {} : { hostile: h }) };
}

async function main(): Promise<void> {
  const cleanups: (() => Promise<void>)[] = [];
  try {
    const upstream = await spawnListening({
      name: 'upstream',
      args: ['--import', 'tsx', resolve(ROOT, 'bench/upstream-server.ts')],
      listening: /upstream listening on 127\.0\.0\.1:(\d+)/,
    });
    const made = await createBenchDatabase(PG_URL);
    let storeUrl: string;
    if (made.db !== null) {
      const db = made.db;
      cleanups.push(() => db.drop());
      storeUrl = db.url;
    } else {
      const dir = await pgliteDir();
      cleanups.push(() => dir.remove());
      storeUrl = `pglite:${dir.dir}`;
      console.log(`note: ${made.skipped}; using PGlite`);
    }
    console.log(
      `hostile bodies: ${SECONDS}s per phase, ungoverned at 1 connection, ${HOSTILE_CLIENTS} hostile clients in closed loops in their own process (pause ${PAUSE_MS} ms); limits ${JSON.stringify(BODY_LIMITS)}; store ${made.db === null ? 'PGlite' : 'PostgreSQL'}`,
    );
    // The same gate twice: every body analysed on the event loop, then large ones on the worker.
    for (const [title, extra] of GATE_CONFIGS) {
      console.log(`\n${title}`);
      const proxy = await startProxy(storeUrl, extra);
      const base = await phase('ungoverned alone', proxy, upstream.port, null);
      console.log(row(base, null));
      // Control: the same megabytes to a route no tool governs, streamed through. What is left is
      // the cost of moving 4 × 1 MB through the proxy on this machine, whatever the gate does.
      const control = { shape: 'flat', path: UNGOVERNED_PATH };
      const label = 'ungoverned + 4 × 1 MB flat, ungoverned (control)';
      console.log(row(await phase(label, proxy, upstream.port, control), base));
      for (const [shape, name] of Object.entries(HOSTILE_SHAPES)) {
        const hostile = { shape, path: ISSUES_PATH };
        console.log(row(await phase(`ungoverned + 4 × ${name}`, proxy, upstream.port, hostile), base));
      }
      console.log(row(await phase('ungoverned alone again', proxy, upstream.port, null), base));
      await stopChild(proxy.process);
    }
  } finally {
    await stopAllChildren();
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}

const timer = setTimeout(() => {
  console.error('hostile-bodies: global timeout');
  killAllChildrenNow();
  process.exit(1);
}, GLOBAL_TIMEOUT_MS);
process.on('exit', () => {
  killAllChildrenNow();
  for (const c of hostileChildren) c.kill('SIGKILL');
});
main().then(
  () => clearTimeout(timer),
  (err) => {
    console.error(err);
    clearTimeout(timer);
    process.exitCode = 1;
  },
);
