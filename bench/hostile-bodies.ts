/**
 * Hostile governed bodies against ungoverned latency (issue 10 item 5): the real proxy, started from
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
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { BODY_LIMITS } from '../src/engine/json-scan.js';
import { killAllChildrenNow, type ListeningChild, spawnListening, stopAllChildren } from './children.js';
import { cpuSnapshot, cpuUse } from './cpu-meter.js';
import { type LoadSettings, runScenario, type ScenarioResult } from './load.js';
import { ISSUES_PATH, issueBody, UNGOVERNED_PATH } from './scenarios.js';
import { createBenchDatabase, pgliteDir } from './stores.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const POLICIES = resolve(ROOT, 'bench/policies');
const MIB = 1024 * 1024;
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? '5');
const PG_URL = process.env['BENCH_PG_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const HOSTILE_CLIENTS = 4;
/** Pause of each hostile client between two bodies (BENCH_HOSTILE_PAUSE_MS; 0 = closed loops flat out). */
const PAUSE_MS = Number(process.env['BENCH_HOSTILE_PAUSE_MS'] ?? '0');
/** Hard stop for the whole run, whatever hangs. */
const GLOBAL_TIMEOUT_MS = 5 * 60_000;
const LOAD: LoadSettings = { warmupMs: 500, durationMs: SECONDS * 1000, maxRequests: 200_000 };

/** `{"title":…,"a":[[[…]]]}` of about `bytes` bytes: nesting as deep as the bytes allow. */
function deepBody(bytes: number): string {
  const depth = Math.floor((bytes - 32) / 2);
  return `{"title":"deep","a":${'['.repeat(depth)}${']'.repeat(depth)}}`;
}

/** `{"title":…,"k0":0,"k1":0,…}` of about `bytes` bytes, or with exactly `members` members. */
function wideBody(bytes: number, members = Number.POSITIVE_INFINITY): string {
  const parts: string[] = [];
  let length = 32;
  for (let i = 0; i < members; i++) {
    const part = `"k${i}":0`;
    if (length + part.length + 1 > bytes) break;
    parts.push(part);
    length += part.length + 1;
  }
  return `{"title":"wide","body":${JSON.stringify('x'.repeat(Math.max(0, bytes - length - 2)))},${parts.join(',')}}`;
}

interface HostileStats {
  readonly requests: number;
  readonly meanMs: number;
  readonly statuses: Readonly<Record<string, number>>;
}

/** Four closed loops sending `body` to the governed route until `stop` resolves. */
async function hostileLoad(
  proxyPort: number,
  upstreamPort: number,
  body: string,
  stop: Promise<void>,
): Promise<HostileStats> {
  const pool = new Pool(`http://127.0.0.1:${proxyPort}`, { connections: HOSTILE_CLIENTS, pipelining: 1 });
  let stopped = false;
  void stop.then(() => {
    stopped = true;
  });
  const statuses: Record<string, number> = {};
  let requests = 0;
  let total = 0;
  const loop = async (): Promise<void> => {
    // Bounded in count as well as time.
    for (let i = 0; !stopped && i < 10_000; i++) {
      const t0 = performance.now();
      try {
        const res = await pool.request({
          method: 'POST',
          path: `http://127.0.0.1:${upstreamPort}${ISSUES_PATH}`,
          headers: { host: `127.0.0.1:${upstreamPort}`, 'content-type': 'application/json' },
          body,
        });
        await res.body.dump();
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      } catch (err) {
        const k = `error ${err instanceof Error ? err.message : String(err)}`;
        statuses[k] = (statuses[k] ?? 0) + 1;
      }
      requests++;
      total += performance.now() - t0;
      if (PAUSE_MS > 0) await new Promise((r) => setTimeout(r, PAUSE_MS));
    }
  };
  await Promise.all(Array.from({ length: HOSTILE_CLIENTS }, loop));
  await pool.destroy();
  return { requests, meanMs: requests === 0 ? Number.NaN : total / requests, statuses };
}

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

async function startProxy(storeUrl: string): Promise<ListeningChild> {
  const cli = resolve(ROOT, 'src/cli/index.ts');
  const argv = ['proxy', '--listen', '127.0.0.1:0', '--policies', POLICIES, '--store', storeUrl];
  // From the sources (through tsx), so the figures are those of this working tree, not of dist/.
  const script = `import(${JSON.stringify(cli)}).then((m) => m.main(${JSON.stringify(argv)})).then((c) => { if (typeof c === 'number') process.exitCode = c; });`;
  return spawnListening({
    name: 'proxy',
    args: ['--import', 'tsx', '--input-type=module', '-e', script],
    env: { EFFECTGATE_LOG_LEVEL: 'warn' },
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
      : `\n    hostile: ${h.requests} requests, mean ${h.meanMs.toFixed(1)} ms, proxy CPU ≈${hostileCpuMs(p, base).toFixed(2)} ms per hostile request, answers ${JSON.stringify(h.statuses)}`;
  return `  ${p.label.padEnd(50)} ${String(r.requests).padStart(6)} req  p50 ${r.p50Ms.toFixed(3)} ms  p99 ${r.p99Ms.toFixed(3)} ms${ratio}${errors}${other}${hostile}`;
}

/** Proxy CPU per hostile request: the phase's, less what its ungoverned requests cost alone. */
function hostileCpuMs(p: Phase, base: Phase | null): number {
  const perUngoverned = base === null ? 0 : base.proxyCpuMs / base.result.requests;
  return (p.proxyCpuMs - perUngoverned * p.result.requests) / (p.hostile?.requests ?? 1);
}

/** Ungoverned load, alone or next to four hostile loops sending `body`. */
async function phase(
  label: string,
  proxy: ListeningChild,
  upstreamPort: number,
  body: string | null,
): Promise<Phase> {
  let release!: () => void;
  const stop = new Promise<void>((r) => {
    release = r;
  });
  const before = cpuSnapshot();
  const cpu0 = cpuMsOf(proxy.process.pid);
  const hostile = body === null ? null : hostileLoad(proxy.port, upstreamPort, body, stop);
  const result = await ungoverned(proxy.port, upstreamPort);
  release();
  const h = hostile === null ? undefined : await hostile;
  const proxyCpuMs = cpuMsOf(proxy.process.pid) - cpu0;
  const otherCores = cpuUse(before, cpuSnapshot())?.otherCores ?? null;
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
    const proxy = await startProxy(storeUrl);
    const shapes: readonly (readonly [string, string])[] = [
      // Control: as many bytes, trivial shape. What is left is moving 1 MB through the proxy.
      ['1 MB flat string (control)', JSON.stringify({ title: 'flat', body: 'x'.repeat(MIB - 1024) })],
      ['1 MB deeply nested', deepBody(MIB - 1024)],
      ['1 MB wide (many members)', wideBody(MIB - 1024)],
      // Just under the node limit (each member is a name and a value): what still gets parsed.
      [
        '1 MB wide, just under the node limit',
        wideBody(MIB - 1024, Math.floor(BODY_LIMITS.maxNodes / 2) - 3),
      ],
    ];
    console.log(
      `hostile bodies: ${SECONDS}s per phase, ungoverned at 1 connection, ${HOSTILE_CLIENTS} hostile clients in closed loops (pause ${PAUSE_MS} ms); limits ${JSON.stringify(BODY_LIMITS)}; store ${made.db === null ? 'PGlite' : 'PostgreSQL'}`,
    );
    const base = await phase('ungoverned alone', proxy, upstream.port, null);
    console.log(row(base, null));
    for (const [label, body] of shapes) {
      console.log(row(await phase(`ungoverned + 4 × ${label}`, proxy, upstream.port, body), base));
    }
    console.log(row(await phase('ungoverned alone again', proxy, upstream.port, null), base));
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
process.on('exit', killAllChildrenNow);
main().then(
  () => clearTimeout(timer),
  (err) => {
    console.error(err);
    clearTimeout(timer);
    process.exitCode = 1;
  },
);
