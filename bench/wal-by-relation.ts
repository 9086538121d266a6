/**
 * Where a governed allow's WAL goes, by relation: runs N allows (decide for a fresh key, then
 * recordOutcome) and N duplicates through the real store on a scratch database, and reads the WAL
 * they wrote back with pg_walinspect (PostgreSQL 15+, contrib), grouped by the relation each
 * record's first block belongs to (table or index). Records of no relation of this database
 * (commits, other databases' writes) are one line, "other": on a quiet machine they are this
 * run's commits. Sequential, one connection, loopback only.
 *
 * The hot path writes no operation or attempt row (and no decision row): a third phase is the
 * projector's rounds that make the `decisions`, `operations` and `attempts` rows of the first two
 * phases' calls, as the gate's projector runs them (a batch of up to its limit a round), counted
 * per allow. A fourth and fifth measure the rows alone (eg_project_rows.sql) for the same allows:
 * both tables emptied (outside the measured window), then made again from the allows' events, once
 * in calls of up to 500 events (a projector that finds an allow's two events in one round) and
 * once one event per call (each row written twice, the worst it can do).
 *
 * `node --import tsx bench/wal-by-relation.ts [postgres admin url] [N]`
 */
import pg from 'pg';
import { openStore } from '../src/store/index.js';
import { confirmInput, reserveInput, runAllows, runDuplicates } from './store-calls.js';
import { createBenchDatabase } from './stores.js';

const adminUrl = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const n = Number(process.argv[3] ?? 1000);

const made = await createBenchDatabase(adminUrl);
if (made.db === null) throw new Error(`wal-by-relation: ${made.skipped}`);
const db = made.db;
const admin = new pg.Client({ connectionString: db.url });
await admin.connect();
try {
  await admin.query('create extension if not exists pg_walinspect');
  const dbOid = (
    await admin.query<{ oid: string }>('select oid::text from pg_database where datname = current_database()')
  ).rows[0]!.oid;
  const lsn = async (): Promise<string> =>
    (await admin.query<{ l: string }>('select pg_current_wal_insert_lsn()::text as l')).rows[0]!.l;
  const phase = async (
    what: string,
    run: (store: Awaited<ReturnType<typeof openStore>>) => Promise<void>,
    // The projection phases: no warm-up, their own count of calls, and a step before the window.
    options: { readonly calls: number; readonly before: () => Promise<void> } | null = null,
  ): Promise<void> => {
    const store = await openStore({ url: db.url });
    await options?.before();
    // Warm: plans cached, first-touch full-page images of the tables' first pages written.
    for (let i = 0; options === null && i < 100; i++) {
      const d = await store.decide(reserveInput(`warm ${what} ${i}`, 'warm'));
      if (d.verdict !== 'allow') throw new Error(d.verdict);
      await store.recordOutcome(confirmInput(d, `warm ${what} ${i}`));
    }
    const start = await lsn();
    await run(store);
    const end = await lsn();
    await store.close();
    // relfilenode → relation name; the rel triple is spcOid/dbOid/relfilenode.
    const rows = await admin.query<{ rel: string | null; records: string; bytes: string; fpi: string }>(
      `with r as (
         select record_length + fpi_length as len, fpi_length,
                substring(block_ref from 'rel \\d+/(\\d+)/(\\d+)') as db,
                substring(block_ref from 'rel \\d+/\\d+/(\\d+)')::oid as node
           from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn))
       select case when r.db = $3 then coalesce(c.relname, 'relfilenode ' || r.node) end as rel,
              count(*)::text as records, sum(len)::text as bytes, sum(fpi_length)::text as fpi
         from r left join pg_class c on c.relfilenode = r.node and r.db = $3
        group by 1 order by sum(len) desc`,
      [start, end, dbOid],
    );
    let total = 0;
    for (const r of rows.rows) total += Number(r.bytes);
    const calls = options?.calls ?? n;
    console.log(`${calls} ${what}: WAL ${(total / calls).toFixed(0)} B each`);
    console.log('  relation                               records/call   B/call   of which full-page images');
    for (const r of rows.rows) {
      console.log(
        `  ${(r.rel ?? 'other (commits, other databases)').padEnd(38)} ${(Number(r.records) / calls).toFixed(2).padStart(12)} ${(Number(r.bytes) / calls).toFixed(0).padStart(8)} ${(Number(r.fpi) / calls).toFixed(0).padStart(10)}`,
      );
    }
  };
  await phase('allows (decide + recordOutcome)', (store) => runAllows(store, n));
  await phase('duplicates (decide)', (store) => runDuplicates(store, n));
  await phase(
    "allows projected by the projector (decisions, operations, attempts; warm-ups included, and the duplicates' decision rows)",
    async (store) => {
      // Bounded: each round takes a batch of events, at most 10,000 rounds.
      for (let round = 0; round < 10_000; round++) {
        if (!(await store.projectEvents({ wait: false })).more) return;
      }
    },
    // Each of the two phases above warmed up with 100 allows of its own.
    { calls: n + 200, before: async () => {} },
  );
  // Every allow so far (warm-ups included) made again by the projection, into emptied tables.
  const allows = Number(
    (await admin.query<{ n: string }>('select count(*)::text as n from attempts')).rows[0]!.n,
  );
  const empty = async (): Promise<void> => {
    await admin.query(`begin; set local session_replication_role = replica;
      delete from attempts; delete from operations; commit`);
    await admin.query('vacuum attempts, operations');
  };
  const project = async (perCall: number): Promise<void> => {
    const positions = (
      await admin.query<{ p: string }>(
        'select pos::text as p from events where operation_id is not null order by pos',
      )
    ).rows.map((r) => r.p);
    // Bounded: each call takes at least one event.
    for (let from = 0; from < positions.length; from += perCall) {
      await admin.query('select eg_project_rows($1::bigint[])', [positions.slice(from, from + perCall)]);
    }
  };
  const projected = { calls: allows, before: empty };
  await phase(
    'allows projected (warm-ups included), up to 500 events per call',
    () => project(500),
    projected,
  );
  await phase('allows projected (warm-ups included), one event per call', () => project(1), projected);
} finally {
  await admin.end();
  await db.drop();
}
