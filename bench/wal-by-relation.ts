/**
 * Where a governed allow's WAL goes, by relation: runs N allows (decide for a fresh key, then
 * recordOutcome) and N duplicates through the real store on a scratch database, and reads the WAL
 * they wrote back with pg_walinspect (PostgreSQL 15+, contrib), grouped by the relation each
 * record's first block belongs to (table or index). Records of no relation of this database
 * (commits, other databases' writes) are one line, "other": on a quiet machine they are this
 * run's commits. Sequential, one connection, loopback only.
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
  ): Promise<void> => {
    const store = await openStore({ url: db.url });
    // Warm: plans cached, first-touch full-page images of the tables' first pages written.
    for (let i = 0; i < 100; i++) {
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
    console.log(`${n} ${what}: WAL ${(total / n).toFixed(0)} B each`);
    console.log('  relation                               records/call   B/call   of which full-page images');
    for (const r of rows.rows) {
      console.log(
        `  ${(r.rel ?? 'other (commits, other databases)').padEnd(38)} ${(Number(r.records) / n).toFixed(2).padStart(12)} ${(Number(r.bytes) / n).toFixed(0).padStart(8)} ${(Number(r.fpi) / n).toFixed(0).padStart(10)}`,
      );
    }
  };
  await phase('allows (decide + recordOutcome)', (store) => runAllows(store, n));
  await phase('duplicates (decide)', (store) => runDuplicates(store, n));
} finally {
  await admin.end();
  await db.drop();
}
