/**
 * Several gates on one PostgreSQL: for each gate count (1, 2 and 4 by default) a fresh database,
 * that many real proxies (`node bin/effectgate.js proxy`, each its own process and instance id) on
 * it, and two phases:
 *
 * - **throughput**: the bench's governed allow (a new key per request, ~1 KB JSON) spread over the
 *   gates by one undici `BalancedPool`, the same total connections whatever the count; req/s, p50,
 *   p99, and the CPU per allow of PostgreSQL and of the gates together;
 * - **race**: K keys, each sent by every gate R times at once; a destination in this process counts
 *   what arrives. Correct is every key arriving exactly once, exactly one `201 allow` per key, and
 *   the store holding one operation and one attempt per key.
 *
 * On one 2-core machine the gates, PostgreSQL and the load generator share the cores, so more gates
 * cannot give more throughput here: the figures say what a replica costs and that the guarantee
 * holds across them, not how a cluster scales.
 *
 * `node --import tsx bench/many-gates.ts [postgres admin url]` after `npm run build`;
 * BENCH_GATE_COUNTS (1,2,4), BENCH_CONNECTIONS (32, total), BENCH_SECONDS (5), BENCH_RACE_KEYS
 * (50), BENCH_RACE_REPEATS (4). Loopback only; every loop is bounded.
 */
import { existsSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { BalancedPool, Pool } from 'undici';
import { openStore } from '../src/store/index.js';
import {
  BENCH_AUTHORITY_KEY,
  killAllChildrenNow,
  type ListeningChild,
  spawnListening,
  stopAllChildren,
  stopChild,
} from './children.js';
import { cpuSnapshot } from './cpu-meter.js';
import { runScenario } from './load.js';
import { allowScenario, ISSUES_PATH, issueBody } from './scenarios.js';
import { createBenchDatabase } from './stores.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = resolve(ROOT, 'bin/effectgate.js');
const POLICIES = resolve(ROOT, 'bench/policies');
const adminUrl = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const numbers = (name: string, fallback: string): number[] =>
  (process.env[name] ?? fallback)
    .split(',')
    .map(Number)
    .filter((x) => Number.isInteger(x) && x > 0);
const gateCounts = numbers('BENCH_GATE_COUNTS', '1,2,4').slice(0, 8);
const connections = numbers('BENCH_CONNECTIONS', '32')[0] ?? 32;
const seconds = numbers('BENCH_SECONDS', '5')[0] ?? 5;
const raceKeys = Math.min(numbers('BENCH_RACE_KEYS', '50')[0] ?? 50, 1000);
const raceRepeats = Math.min(numbers('BENCH_RACE_REPEATS', '4')[0] ?? 4, 16);
const HZ = 100;

if (!existsSync(resolve(ROOT, 'dist/store/functions/eg_decide.sql'))) {
  throw new Error('many-gates: run `npm run build` first (the proxies run dist/)');
}
process.once('SIGINT', () => {
  killAllChildrenNow();
  process.exit(130);
});

/** The race's destination: counts POSTs per title; answers like the bench upstream. */
async function countingDestination(): Promise<{
  port: number;
  counts: Map<string, number>;
  close(): Promise<void>;
}> {
  const counts = new Map<string, number>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const title = String(
        (JSON.parse(Buffer.concat(chunks).toString() || '{}') as { title?: unknown }).title,
      );
      counts.set(title, (counts.get(title) ?? 0) + 1);
      const body = '{"html_url":"http://127.0.0.1/acme/api/issues/1","number":1}';
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': String(body.length) });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    counts,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function startGates(count: number, storeUrl: string): Promise<ListeningChild[]> {
  const gates: ListeningChild[] = [];
  for (let i = 0; i < count; i++) {
    gates.push(
      await spawnListening({
        name: `gate ${i + 1}/${count}`,
        args: [BIN, 'proxy', '--listen', '127.0.0.1:0', '--policies', POLICIES, '--store', storeUrl],
        env: {
          EFFECTGATE_LOG_LEVEL: 'warn',
          EFFECTGATE_AUTHORITY_KEY: BENCH_AUTHORITY_KEY,
          EFFECTGATE_INSTANCE_ID: `bench-gate-${i + 1}`,
        },
        listening: /listening on http:\/\/127\.0\.0\.1:(\d+)/,
      }),
    );
  }
  return gates;
}

interface Row {
  gates: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  pgUs: number;
  gatesUs: number;
  otherCores: number;
  race: string;
}

async function race(gates: readonly ListeningChild[], storeUrl: string): Promise<string> {
  const dest = await countingDestination();
  const pools = gates.map((g) => new Pool(`http://127.0.0.1:${g.port}`, { connections: raceRepeats * 4 }));
  try {
    const answers = new Map<string, string[]>();
    const sends: Promise<void>[] = [];
    for (let k = 0; k < raceKeys; k++) {
      const title = `race ${k}`;
      answers.set(title, []);
      for (const pool of pools) {
        for (let r = 0; r < raceRepeats; r++) {
          sends.push(
            pool
              .request({
                method: 'POST',
                path: `http://127.0.0.1:${dest.port}${ISSUES_PATH}`,
                headers: { host: `127.0.0.1:${dest.port}`, 'content-type': 'application/json' },
                body: issueBody(title),
              })
              .then(async (res) => {
                await res.body.dump();
                answers
                  .get(title)!
                  .push(`${res.statusCode} ${String(res.headers['effectgate-verdict'] ?? '')}`);
              }),
          );
        }
      }
    }
    await Promise.all(sends);
    const problems: string[] = [];
    for (const [title, got] of answers) {
      const arrived = dest.counts.get(title) ?? 0;
      const allowed = got.filter((a) => a === '201 allow').length;
      if (arrived !== 1 || allowed !== 1) problems.push(`${title}: arrived ${arrived}, ${allowed} allow`);
    }
    const db = new pg.Client({ connectionString: storeUrl });
    await db.connect();
    try {
      const r = await db.query<{ ops: string; attempts: string }>(
        `select (select count(*) from operations where key_values ->> 2 like 'race %')::text as ops,
                (select count(*) from attempts a join operations o on o.id = a.operation_id
                  where o.key_values ->> 2 like 'race %')::text as attempts`,
      );
      const { ops, attempts } = r.rows[0]!;
      if (Number(ops) !== raceKeys || Number(attempts) !== raceKeys)
        problems.push(`store: ${ops} operations, ${attempts} attempts for ${raceKeys} keys`);
    } finally {
      await db.end();
    }
    const sent = raceKeys * gates.length * raceRepeats;
    return problems.length === 0
      ? `ok: ${raceKeys} keys × ${gates.length} gates × ${raceRepeats}: ${sent} requests, each key performed once`
      : `FAILED: ${problems.slice(0, 5).join('; ')}${problems.length > 5 ? ` (+${problems.length - 5})` : ''}`;
  } finally {
    await Promise.all(pools.map((p) => p.destroy()));
    await dest.close();
  }
}

const rows: Row[] = [];
const upstream = await spawnListening({
  name: 'upstream',
  args: ['--import', 'tsx', resolve(ROOT, 'bench/upstream-server.ts')],
  listening: /upstream listening on 127\.0\.0\.1:(\d+)/,
});
try {
  for (const count of gateCounts) {
    const made = await createBenchDatabase(adminUrl);
    if (made.db === null) throw new Error(`many-gates: ${made.skipped}`);
    const db = made.db;
    try {
      // Migrated once up front, so the gates' starts measure nothing but a start.
      await (await openStore({ url: db.url, migrate: true })).close();
      const gates = await startGates(count, db.url);
      const origins = gates.map((g) => `http://127.0.0.1:${g.port}`);
      const spec = allowScenario(
        { proxyPort: gates[0]!.port, upstreamPort: upstream.port, connections },
        'postgres',
        `gates-${count}`,
      );
      let before = cpuSnapshot();
      let after = before;
      const result = await runScenario(
        {
          ...spec,
          name: `governed allow, ${count} gate(s)`,
          dispatcher: () =>
            new BalancedPool(origins, {
              connections: Math.max(1, Math.ceil(connections / count)),
              pipelining: 1,
            }),
        },
        { warmupMs: 500, durationMs: seconds * 1000, maxRequests: 2_000_000 },
        async (at) => {
          if (at === 'start') before = cpuSnapshot();
          else after = cpuSnapshot();
        },
      );
      let pgJ = 0;
      let gateJ = 0;
      let machineJ = 0;
      let oursJ = 0;
      if (before !== null && after !== null) {
        machineJ = after.machine - before.machine;
        for (const [pid, j] of after.ours) {
          const used = j - (before.ours.get(pid) ?? 0);
          oursJ += used;
          if (after.postgres.has(pid)) pgJ += used;
          if (gates.some((g) => g.process.pid === pid)) gateJ += used;
        }
      }
      const perAllow = (j: number): number =>
        result.requests === 0 ? Number.NaN : (j / HZ / result.requests) * 1e6;
      const window = before === null || after === null ? 1 : (after.at - before.at) / 1000;
      const outcome = await race(gates, db.url);
      rows.push({
        gates: count,
        rps: result.rps,
        p50Ms: result.p50Ms,
        p99Ms: result.p99Ms,
        errors: result.errors,
        pgUs: perAllow(pgJ),
        gatesUs: perAllow(gateJ),
        otherCores: Math.max(0, machineJ - oursJ) / HZ / window,
        race: outcome,
      });
      if (result.firstError !== null) console.log(`  first error (${count} gate(s)): ${result.firstError}`);
      await Promise.all(gates.map((g) => stopChild(g.process)));
    } finally {
      await db.drop();
    }
  }
} finally {
  await stopChild(upstream.process);
  await stopAllChildren();
}

console.log(`\ngoverned allow on one PostgreSQL, ${connections} connections in all, ${seconds} s each\n`);
console.log('gates   req/s   p50 ms   p99 ms  errors  pg µs/allow  gates µs/allow  other cores  race');
for (const r of rows) {
  console.log(
    `${String(r.gates).padStart(5)} ${r.rps.toFixed(0).padStart(7)} ${r.p50Ms.toFixed(2).padStart(8)} ${r.p99Ms.toFixed(2).padStart(8)} ${String(r.errors).padStart(7)} ${r.pgUs.toFixed(0).padStart(12)} ${r.gatesUs.toFixed(0).padStart(15)} ${r.otherCores.toFixed(2).padStart(12)}  ${r.race}`,
  );
}
if (rows.some((r) => r.errors > 0 || !r.race.startsWith('ok'))) process.exitCode = 1;
