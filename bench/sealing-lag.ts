/**
 * How far the sealed log lags the events, and what sealing costs the hot path. The real store
 * calls (allow then confirm, bench/store-calls.ts's proposal, a fresh key each) run from
 * `concurrency` concurrent callers for `seconds`, first with no sealer, then with the gate's
 * sealer (src/store/audit-sealer.ts, every `intervalMs`) on its own store connection, as a gate
 * runs it. Every 50 ms a probe reads how many committed events no checkpoint covers yet and how
 * old the oldest is; the lag is that age. Prints calls/s without and with the sealer, the lag's
 * p50/p99/max, and the checkpoints written; and how long sealing a backlog takes: the first
 * phase's (the log's first seal, by chain), and one more phase's written with the sealer stopped
 * (by snapshot). Loopback only; every loop is bounded by time.
 *
 * `node --import tsx bench/sealing-lag.ts [pg admin url | pglite] [seconds] [concurrency] [intervalMs]`
 * e.g. `… postgres://postgres@127.0.0.1:5432/test 10 16 250`
 */
import {
  AuditSealer,
  generateNoteKey,
  newAuditKeyName,
  openStore,
  parseSignerKey,
  type Store,
  uuidv7,
} from '../src/store/index.js';
import { percentileOf } from './load.js';
import { confirmInput, reserveInput } from './store-calls.js';
import { benchStoreUrl } from './stores.js';

const target = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const seconds = Number(process.argv[3] ?? 10);
const concurrency = Number(process.argv[4] ?? 16);
const intervalMs = Number(process.argv[5] ?? 250);

async function load(store: Store, ms: number): Promise<number> {
  const until = performance.now() + ms;
  let calls = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const title = `lag ${uuidv7()}`;
        const r = await store.decide(reserveInput(title, `bench-lag-${uuidv7()}`));
        if (r.verdict !== 'allow') throw new Error(`bench: expected allow, got ${r.verdict}`);
        await store.recordOutcome(confirmInput(r, title));
        calls += 1;
      }
    }),
  );
  return calls / (ms / 1000);
}

/** Seals what is there, timed: events sealed, checkpoints, ms. */
async function timedSeal(
  store: Store,
  sealer: AuditSealer,
): Promise<{ events: number; checkpoints: number; ms: number }> {
  const from = (await store.latestCheckpoint())?.size ?? 0;
  const started = performance.now();
  const checkpoints = await sealer.seal();
  const ms = Math.round(performance.now() - started);
  return { events: ((await store.latestCheckpoint())?.size ?? 0) - from, checkpoints, ms };
}

async function main(): Promise<void> {
  const { url, drop } = await benchStoreUrl(target);
  const store = await openStore({ url });
  // PGlite is one connection in one process: the sealer shares it, as a gate on it does.
  const sealerStore = url === 'pglite:memory' ? store : await openStore({ url, migrate: false });
  try {
    await load(store, 1_000); // warm-up
    const without = await load(store, seconds * 1000);
    const sealer = new AuditSealer({
      store: sealerStore,
      signer: parseSignerKey(generateNoteKey(newAuditKeyName()).signerKey),
      intervalMs,
    });
    // The backlog of the first phase: the log's first seal, by chain.
    const firstSeal = await timedSeal(store, sealer);
    const before = (await store.latestCheckpoint())?.size ?? 0;
    const firstCheckpoint = await store.latestCheckpoint();
    sealer.start();
    const lags: number[] = [];
    let probing = true;
    const probe = (async (): Promise<void> => {
      while (probing) {
        const latest = await store.latestCheckpoint();
        const unsealed = await store.unsealedEvents(latest);
        lags.push(unsealed.oldestAt === null ? 0 : Math.max(0, Date.now() - Date.parse(unsealed.oldestAt)));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const withSealer = await load(store, seconds * 1000);
    probing = false;
    await probe;
    await sealer.stop();
    const latest = await store.latestCheckpoint();
    const checkpoints = (await store.readCheckpoints(firstCheckpoint?.size ?? null, 1_000_000)).length;
    // A backlog by snapshot: a log sealed by snapshot, then written with no sealer running.
    await load(store, seconds * 1000);
    const laterSeal = await timedSeal(store, sealer);
    lags.sort((a, b) => a - b);
    console.log(
      JSON.stringify(
        {
          store: url.startsWith('pglite') ? 'pglite' : 'postgres',
          seconds,
          concurrency,
          intervalMs,
          callsPerSecondWithoutSealer: Math.round(without),
          callsPerSecondWithSealer: Math.round(withSealer),
          sealingLagMs: {
            samples: lags.length,
            p50: percentileOf(Float64Array.from(lags), 0.5),
            p99: percentileOf(Float64Array.from(lags), 0.99),
            max: lags[lags.length - 1] ?? null,
          },
          checkpointsWritten: checkpoints,
          eventsSealed: (latest?.size ?? 0) - before,
          backlogByChain: firstSeal,
          backlogBySnapshot: laterSeal,
        },
        null,
        2,
      ),
    );
  } finally {
    if (sealerStore !== store) await sealerStore.close();
    await store.close();
    await drop();
  }
}

await main();
