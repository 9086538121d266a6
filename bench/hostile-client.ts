/**
 * The hostile side of `hostile-bodies.ts`, in its own process so that pushing 4 × 1 MB bodies never
 * shares an event loop with the client that measures ungoverned latency. Four closed loops send one
 * body (named by BENCH_HOSTILE_SHAPE, built by `hostileBody`) to BENCH_HOSTILE_PATH on the upstream
 * through the proxy; prints `hostile ready` once the first answer is back, and one JSON line of
 * statistics when stdin closes (or after the hard bound of 10,000 bodies per loop, or 2 minutes).
 */
import { Pool } from 'undici';
import { HOSTILE_CLIENTS, hostileBody } from './hostile-shapes.js';

const proxyPort = Number(process.env['BENCH_PROXY_PORT']);
const upstreamPort = Number(process.env['BENCH_UPSTREAM_PORT']);
const path = process.env['BENCH_HOSTILE_PATH'] ?? '/';
const pauseMs = Number(process.env['BENCH_HOSTILE_PAUSE_MS'] ?? '0');
const body = hostileBody(process.env['BENCH_HOSTILE_SHAPE'] ?? '');
const HARD_STOP_MS = 120_000;

let stopped = false;
process.stdin.on('end', () => {
  stopped = true;
});
process.stdin.resume();
const hardStop = setTimeout(() => {
  stopped = true;
}, HARD_STOP_MS);

const pool = new Pool(`http://127.0.0.1:${proxyPort}`, { connections: HOSTILE_CLIENTS, pipelining: 1 });
const statuses: Record<string, number> = {};
let requests = 0;
let total = 0;
let ready = false;

async function loop(): Promise<void> {
  for (let i = 0; !stopped && i < 10_000; i++) {
    const t0 = performance.now();
    try {
      const res = await pool.request({
        method: 'POST',
        path: `http://127.0.0.1:${upstreamPort}${path}`,
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
    if (!ready) {
      ready = true;
      process.stdout.write('hostile ready\n');
    }
    if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
  }
}

await Promise.all(Array.from({ length: HOSTILE_CLIENTS }, loop));
clearTimeout(hardStop);
await pool.destroy();
process.stdout.write(
  `${JSON.stringify({ requests, meanMs: requests === 0 ? null : total / requests, statuses })}\n`,
);
process.exit(0);
