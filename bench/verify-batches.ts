/**
 * What `audit verify` reads to check a log whose batches each took several checkpoints: `batches`
 * batches of `perBatch` events (real `eg_append_event` calls, one transaction each), each sealed
 * `perCheckpoint` events a checkpoint, as a sealer catching up after an outage seals them. Prints
 * the time of one `verifySealedLog` and the rows of `events` it fetched (pg_stat_user_tables:
 * index tuple fetches plus sequential reads), which grow with the log when each checkpoint's
 * events are read again where it ended, and faster when a read runs past its batch's end.
 *
 * `node --import tsx bench/verify-batches.ts [postgres admin url] [batches] [perBatch] [perCheckpoint]`
 */
import pg from 'pg';
import {
  AuditSealer,
  generateNoteKey,
  newAuditKeyName,
  openStore,
  parseSignerKey,
  parseVerifierKey,
  verifySealedLog,
} from '../src/store/index.js';
import { createBenchDatabase } from './stores.js';

const adminUrl = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const batches = Number(process.argv[3] ?? 40);
const perBatch = Number(process.argv[4] ?? 5000);
const perCheckpoint = Number(process.argv[5] ?? 1000);

const made = await createBenchDatabase(adminUrl);
if (made.db === null) throw new Error(`verify-batches: ${made.skipped}`);
const db = made.db;
const store = await openStore({ url: db.url });
const client = new pg.Client({ connectionString: db.url });
await client.connect();
try {
  const key = generateNoteKey(newAuditKeyName());
  const sealer = new AuditSealer({ store, signer: parseSignerKey(key.signerKey), maxEvents: perCheckpoint });
  await sealer.seal();
  // Bounded: `batches` transactions, each sealed by at most 100 rounds of seal().
  for (let k = 0; k < batches; k++) {
    await client.query(
      `select count(eg_append_event('bench-' || $1::int || '-' || g, 'bench.event', null, json_build_object('n', g)::text))
       from generate_series(1, $2::int) g`,
      [k, perBatch],
    );
    for (let i = 0; i < 100; i++) if ((await sealer.seal()) === 0) break;
  }
  const fetched = async (): Promise<number> => {
    await client.query('select pg_stat_clear_snapshot()');
    const { rows } = await client.query<{ n: string }>(
      `select (coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0))::text as n
       from pg_stat_user_tables where relname = 'events'`,
    );
    return Number(rows[0]!.n);
  };
  const before = await fetched();
  const started = performance.now();
  const report = await verifySealedLog(store, parseVerifierKey(key.verifierKey));
  const ms = Math.round(performance.now() - started);
  // The statistics reach the view after the backend reports them (at most every second or so).
  await new Promise((r) => setTimeout(r, 1500));
  console.log(
    JSON.stringify({
      ok: report.ok,
      events: report.latest?.size ?? 0,
      checkpoints: report.checkpoints,
      verifyMs: ms,
      eventRowsFetched: (await fetched()) - before,
    }),
  );
} finally {
  await client.end();
  await store.close();
  await db.drop();
}
