/**
 * What the projection of operations, attempts and decisions costs, beside the hot path it relieves:
 * N allows (decide for a fresh key, then its outcome) through the real store from 32 concurrent
 * loops (group commit batches them), then the projector's rounds until it has caught up, each timed
 * on its own; and the same N allows with the gate's projector running every 200 ms during the load,
 * as a gate runs it. Per allow: hot µs (wall time of the load / N), catch-up µs, and the allows a
 * second with the projector running. On PGlite (`pglite:memory`, one worker thread: the wall time is
 * its CPU) or on a scratch database of a PostgreSQL admin URL. Loopback only; every loop bounded.
 *
 * `node --import tsx bench/projection-cost.ts [pglite | postgres admin url] [N]`
 */
import { EventProjector, openStore, type Store } from '../src/store/index.js';
import { confirmInput, reserveInput } from './store-calls.js';
import { createBenchDatabase } from './stores.js';

const where = process.argv[2] ?? 'pglite';
const n = Number(process.argv[3] ?? 3000);
const LOOPS = 32;

/** N allows from LOOPS concurrent loops; answers the wall time in ms. */
async function load(store: Store, tag: string): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: LOOPS }, async () => {
      for (let i = next++; i < n; i = next++) {
        const d = await store.decide(reserveInput(`${tag} ${i}`, `run-${tag}`));
        if (d.verdict !== 'allow') throw new Error(`expected allow, got ${d.verdict}`);
        await store.recordOutcome(confirmInput(d, `${tag} ${i}`));
      }
    }),
  );
  return performance.now() - started;
}

async function catchUp(store: Store): Promise<number> {
  const started = performance.now();
  for (let round = 0; round < 10_000; round++) {
    if (!(await store.projectEvents({ wait: true })).more) break;
  }
  return performance.now() - started;
}

const made = where === 'pglite' ? null : await createBenchDatabase(where);
if (made !== null && made.db === null) throw new Error(`projection-cost: ${made.skipped}`);
const url = made === null ? 'pglite:memory' : made.db!.url;
const store = await openStore({ url });
try {
  await load(store, 'warm');
  await catchUp(store);
  const hot = await load(store, 'quiet');
  const projection = await catchUp(store);
  const projector = new EventProjector({ store });
  projector.start();
  const busy = await load(store, 'busy');
  await projector.stop();
  await catchUp(store);
  const us = (ms: number): string => ((ms / n) * 1000).toFixed(0);
  console.log(`${where}, ${n} allows from ${LOOPS} loops:`);
  console.log(
    `  hot path alone          ${us(hot)} µs per allow (${((n / hot) * 1000).toFixed(0)} allows/s)`,
  );
  console.log(`  catch-up after it       ${us(projection)} µs per allow`);
  console.log(
    `  with the projector on   ${us(busy)} µs per allow (${((n / busy) * 1000).toFixed(0)} allows/s)`,
  );
} finally {
  await store.close();
  await made?.db?.drop();
}
