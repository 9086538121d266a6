/**
 * The store alone under concurrency (group commit): C loops, each making governed
 * allows (decide for a fresh key, then recordOutcome) through the real store for S seconds, then
 * prints allows per second, PostgreSQL CPU per allow (from /proc) and what group commit did
 * (batches, calls in them, fallbacks). No proxy: this separates the store protocol's cost from
 * the gate's. Loopback only; bounded by S.
 *
 * `node --import tsx bench/store-concurrency.ts [postgres admin url | pglite] [C=32] [S=5]`
 */
import { openStore } from '../src/store/index.js';
import { cpuSnapshot, cpuUse } from './cpu-meter.js';
import { confirmInput, reserveInput } from './store-calls.js';
import { createBenchDatabase } from './stores.js';

const target = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const concurrency = Number(process.argv[3] ?? 32);
const seconds = Number(process.argv[4] ?? 5);

const made = target === 'pglite' ? null : await createBenchDatabase(target);
if (made !== null && made.db === null) throw new Error(`store-concurrency: ${made.skipped}`);
const store = await openStore({ url: made?.db?.url ?? 'pglite:memory' });
try {
  let allows = 0;
  const stopAt = Date.now() + seconds * 1000;
  const before = cpuSnapshot();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      for (let i = 0; Date.now() < stopAt; i++) {
        const title = `loop ${loop} call ${i} ${t0}`;
        const d = await store.decide(reserveInput(title, `run-${loop}`));
        if (d.verdict !== 'allow') throw new Error(`store-concurrency: ${d.verdict}, not allow`);
        await store.recordOutcome(confirmInput(d, title));
        allows++;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  const use = cpuUse(before, cpuSnapshot());
  const pg =
    use === null || store.kind === 'pglite'
      ? 'n/a (in process)'
      : `${Math.round((use.postgresCores * use.seconds * 1e6) / allows)} µs`;
  const gc = store.stats.groupCommit;
  console.log(
    `${store.kind} @${concurrency}: ${Math.round(allows / elapsed)} allows/s over ${elapsed.toFixed(1)} s; ` +
      `PostgreSQL CPU per allow ${pg}; cores used ${use?.oursCores.toFixed(2) ?? 'n/a'}; ` +
      `group commit: ${gc.batches} batches carrying ${gc.batchedCalls} of ${store.stats.roundTrips} calls, ${gc.fallbacks} fallbacks`,
  );
} finally {
  await store.close();
  await made?.db?.drop();
}
