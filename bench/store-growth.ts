/**
 * Is the cost of a governed call flat as the store grows? For each size, a
 * scratch PostgreSQL database is migrated, bulk-loaded with that many past allows (one operation,
 * one attempt, one decision, one confirmed key and its two events each, with payloads of the real
 * events' size, spread over the 64 chains), vacuumed and analysed; then the real store calls are
 * timed from a bare client (bench/store-calls.ts: decide for a fresh key, recordOutcome, decide
 * for a confirmed key). The bulk rows are written by SQL (`generate_series`), not by the
 * functions, so they load in minutes; their hashes do not chain (the timed calls never verify
 * the chain, they append to its head). Loopback only; every loop is bounded.
 *
 * `node --import tsx bench/store-growth.ts [admin url] [past allows, comma-separated]`
 * e.g. `… postgres://postgres@127.0.0.1:5432/test 0,500000` (500k allows = 1M events).
 */
import pg from 'pg';
import { openStore } from '../src/store/index.js';
import { measureStoreCalls } from './store-calls.js';
import { createBenchDatabase } from './stores.js';

const adminUrl = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const BATCH = 100_000;

/** The payload padding that makes a bulk event as long as a real one (decision.allow ≈ 1.8 KB, outcome ≈ 0.8 KB). */
const ALLOW_PAD = 'x'.repeat(1500);
const OUTCOME_PAD = 'x'.repeat(520);

/** Rows `from`..`to` (inclusive) of every table, in one statement per table. */
const LOAD: readonly string[] = [
  `insert into operations (id, tool_id, tenant, area, agent, state, key_hash, key_values, idempotency_header,
     run_id, created_at, updated_at, unknown_rule)
   select 'op-' || g, 'bench.create_issue', 'acme', 'default', 'agent', 'succeeded', 'sha256:past-' || g,
     jsonb_build_array('acme', 'api', 'past issue ' || g), 'Idempotency-Key', 'past-run-' || (g / 100),
     now() - interval '1 day', now() - interval '1 day', 'hold'
   from generate_series($1::int, $2::int) g`,
  `insert into attempts (id, operation_id, number, decision_id, run_id, dispatch_state, remaining_attempts, request,
     status, response_fingerprint, destination_ref, replayed, duration_ms, started_at, finished_at)
   select 'at-' || g, 'op-' || g, 1, 'de-' || g, 'past-run-' || (g / 100), 'response_received', 2,
     jsonb_build_object('scheme', 'http', 'method', 'POST', 'host', '127.0.0.1', 'port', 80,
       'path', '/repos/acme/api/issues', 'route', 'POST 127.0.0.1 /repos/{owner}/{repo}/issues',
       'fingerprint', 'sha256:' || md5('f' || g) || md5('g' || g), 'authorityRef', null),
     201, 'sha256:' || md5('r' || g) || md5('s' || g), 'http://127.0.0.1/acme/api/issues/' || g, null, 1.5,
     now() - interval '1 day', now() - interval '1 day'
   from generate_series($1::int, $2::int) g`,
  `insert into decisions (id, run_id, tool_id, verdict, operation_id, attempt_id, key_hash, tenant, area, agent,
     explain, created_at)
   select 'de-' || g, 'past-run-' || (g / 100), 'bench.create_issue', 'allow', 'op-' || g, 'at-' || g,
     'sha256:past-' || g, 'acme', 'default', 'agent', 'POST 127.0.0.1 /repos/{owner}/{repo}/issues',
     now() - interval '1 day'
   from generate_series($1::int, $2::int) g`,
  `insert into dedupe_keys (key_hash, tenant, area, agent, tool_id, state, operation_id, run_id, attempt_id,
     attempt_number, created_at, confirmed_at, window_ends_at, destination_ref)
   select 'sha256:past-' || g, 'acme', 'default', 'agent', 'bench.create_issue', 'confirmed', 'op-' || g,
     'past-run-' || (g / 100), 'at-' || g, 1, now() - interval '1 day', now() - interval '1 day',
     now() - interval '1 hour', 'http://127.0.0.1/acme/api/issues/' || g
   from generate_series($1::int, $2::int) g`,
  // Two events per allow on the chain of its number (seq 2k+1 and 2k+2 of chain g % 64).
  `insert into events (chain, seq, type, operation_id, recorded_at, recorded_at_us, payload, prev_hash, hash)
   select g % 64, (g / 64) * 2 + e, case e when 1 then 'decision.allow' else 'attempt.outcome' end, 'op-' || g,
     now() - interval '1 day', (extract(epoch from now() - interval '1 day') * 1000000)::bigint,
     '{"input":{"operationId":"op-' || g || '"},"pad":"' || case e when 1 then '${ALLOW_PAD}' else '${OUTCOME_PAD}' end || '"}',
     md5('p' || g || e) || md5('q' || g || e), md5('h' || g || e) || md5('i' || g || e)
   from generate_series($1::int, $2::int) g, generate_series(1, 2) e`,
];

/**
 * Writes `allows` past allows into a migrated store (see the header), points every chain's head
 * after its last bulk event, and vacuums and analyses, so the planner sees a store in use.
 */
export async function bulkLoad(client: pg.Client, allows: number): Promise<void> {
  for (let from = 1; from <= allows; from += BATCH) {
    const to = Math.min(allows, from + BATCH - 1);
    for (const statement of LOAD) await client.query(statement, [from, to]);
  }
  await client.query(
    `update chain_head h set last_seq = m.seq, last_hash = m.hash
     from (select distinct on (chain) chain, seq, hash from events order by chain, seq desc) m
     where h.id = m.chain and m.seq > h.last_seq`,
  );
  await client.query('vacuum analyze');
}

interface Row {
  readonly allows: number;
  readonly events: number;
  readonly loadSeconds: number;
  readonly sizeMb: number;
  readonly calls: Awaited<ReturnType<typeof measureStoreCalls>>;
}

async function measureAt(allows: number): Promise<Row> {
  const made = await createBenchDatabase(adminUrl);
  if (made.db === null) throw new Error(`store-growth: ${made.skipped}`);
  const db = made.db;
  const client = new pg.Client({ connectionString: db.url });
  try {
    // Migrated first, so the bulk load meets the real schema (and the empty chains it starts).
    await (await openStore({ url: db.url, migrate: true })).close();
    await client.connect();
    const t0 = performance.now();
    await bulkLoad(client, allows);
    const loadSeconds = (performance.now() - t0) / 1000;
    const size = await client.query<{ mb: string }>(
      'select (pg_database_size(current_database()) / 1048576)::text as mb',
    );
    const events = await client.query<{ n: string }>('select count(*)::text as n from events');
    // The same start for every size: no dirty buffers of the load (or of a dropped database)
    // being flushed under the timed calls.
    await client.query('checkpoint');
    await new Promise((r) => setTimeout(r, 1_000));
    const calls = await measureStoreCalls('postgres', db.url, 2_000);
    return {
      allows,
      events: Number(events.rows[0]!.n),
      loadSeconds,
      sizeMb: Number(size.rows[0]!.mb),
      calls,
    };
  } finally {
    await client.end().catch(() => {});
    await db.drop();
  }
}

async function main(): Promise<void> {
  const sizes = (process.argv[3] ?? '0,500000').split(',').map((s) => Math.max(0, Math.floor(Number(s))));
  // A throwaway round first: the first timed calls of a process also time its JIT warming up.
  await measureAt(0);
  const rows: Row[] = [];
  for (const allows of sizes) {
    const row = await measureAt(allows);
    rows.push(row);
    console.log(
      `${row.events.toLocaleString('en-US')} events (${row.allows.toLocaleString('en-US')} past allows, ${row.sizeMb} MB, loaded in ${row.loadSeconds.toFixed(0)} s): ` +
        `decide(allow) p50 ${row.calls.decideAllowP50Ms.toFixed(3)} / p99 ${row.calls.decideAllowP99Ms.toFixed(3)} ms, ` +
        `recordOutcome ${row.calls.recordOutcomeP50Ms.toFixed(3)} / ${row.calls.recordOutcomeP99Ms.toFixed(3)} ms, ` +
        `decide(duplicate) ${row.calls.decideDuplicateP50Ms.toFixed(3)} / ${row.calls.decideDuplicateP99Ms.toFixed(3)} ms`,
    );
  }
  const base = rows[0];
  for (const r of rows.slice(1)) {
    if (base === undefined) break;
    console.log(
      `${r.events.toLocaleString('en-US')} events / ${base.events.toLocaleString('en-US')}: decide(allow) p50 ${(r.calls.decideAllowP50Ms / base.calls.decideAllowP50Ms).toFixed(2)}x, ` +
        `recordOutcome ${(r.calls.recordOutcomeP50Ms / base.calls.recordOutcomeP50Ms).toFixed(2)}x, decide(duplicate) ${(r.calls.decideDuplicateP50Ms / base.calls.decideDuplicateP50Ms).toFixed(2)}x (target: within 1.2x)`,
    );
  }
}

if (process.argv[1]?.endsWith('store-growth.ts')) await main();
