/**
 * A long backlog by snapshot: a log already sealed and projected by snapshot, then `events` events
 * written with no sealer and no projector running (a gate stopped, or run without its audit key,
 * for a long time), in transactions of 1,000. Times how the projection catches up (rounds of its
 * usual limit, as the gate's projector runs them) and how the sealer seals it (checkpoints of its
 * usual 4,096 events). Each is one batch taken over many rounds: a round that read the rest of its
 * batch again would cost the square of the backlog.
 *
 * `node --import tsx bench/backlog-rounds.ts [postgres admin url] [events]`
 */
import pg from 'pg';
import {
  AuditSealer,
  generateNoteKey,
  newAuditKeyName,
  openStore,
  parseSignerKey,
  uuidv7,
} from '../src/store/index.js';
import { confirmInput, reserveInput } from './store-calls.js';
import { createBenchDatabase } from './stores.js';

const adminUrl = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const events = Number(process.argv[3] ?? 200_000);
const PER_TRANSACTION = 1000;

const made = await createBenchDatabase(adminUrl);
if (made.db === null) throw new Error(`backlog-rounds: ${made.skipped}`);
const db = made.db;
const store = await openStore({ url: db.url });
const writer = new pg.Client({ connectionString: db.url });
await writer.connect();
try {
  const sealer = new AuditSealer({
    store,
    signer: parseSignerKey(generateNoteKey(newAuditKeyName()).signerKey),
  });
  // Sealed and projected by snapshot before the backlog.
  const allow = async (): Promise<void> => {
    const title = `backlog ${uuidv7()}`;
    const r = await store.decide(reserveInput(title, `bench-backlog-${uuidv7()}`));
    if (r.verdict !== 'allow') throw new Error(`bench: expected allow, got ${r.verdict}`);
    await store.recordOutcome(confirmInput(r, title));
  };
  await allow();
  await sealer.seal();
  await allow();
  await sealer.seal();
  await store.projectEvents({ wait: true });
  // Bounded: events / PER_TRANSACTION transactions.
  for (let from = 1; from <= events; from += PER_TRANSACTION) {
    await writer.query(
      `select eg_append_event('backlog-' || g, 'bench.backlog', null, json_build_object('n', g)::text)
       from generate_series($1::int, $2::int) g`,
      [from, Math.min(events, from + PER_TRANSACTION - 1)],
    );
  }
  let started = performance.now();
  let rounds = 0;
  // Bounded: a round takes at least one event while there are more.
  for (; rounds < 1_000_000; ) {
    rounds += 1;
    if (!(await store.projectEvents({ wait: true })).more) break;
  }
  const projectionMs = Math.round(performance.now() - started);
  started = performance.now();
  const checkpoints = await sealer.seal();
  const sealMs = Math.round(performance.now() - started);
  console.log(
    JSON.stringify(
      {
        events,
        projection: { ms: projectionMs, rounds, eventsPerSecond: Math.round((events / projectionMs) * 1000) },
        seal: { ms: sealMs, checkpoints, eventsPerSecond: Math.round((events / sealMs) * 1000) },
      },
      null,
      2,
    ),
  );
} finally {
  await writer.end();
  await store.close();
  await db.drop();
}
