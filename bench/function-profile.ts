/**
 * Where PostgreSQL spends a governed allow, per SQL function: runs N allows (decide for a
 * fresh key, then recordOutcome), N duplicates and N allows of a keyless tool (with a projector
 * running beside them) through the real store on a scratch database
 * with `track_functions = all`, then prints `pg_stat_user_functions` (calls, total and self time
 * per call) and the WAL bytes and records per call from `pg_stat_wal` (cluster-wide: run it on a
 * quiet machine). Sequential, one connection, loopback only.
 *
 * `node --import tsx bench/function-profile.ts [postgres admin url] [N]`
 */
import pg from 'pg';
import { EventProjector, openStore } from '../src/store/index.js';
import { cpuSnapshot, cpuUse } from './cpu-meter.js';
import { confirmInput, reserveInput, runAllows, runDuplicates, runKeylessAllows } from './store-calls.js';
import { createBenchDatabase } from './stores.js';

const adminUrl = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/test';
const n = Number(process.argv[3] ?? 2000);
interface TableRow {
  relname: string;
  scans: string;
  ins: string;
  upd: string;
  hot: string;
}
interface FunctionRow {
  funcname: string;
  calls: string;
  total_time: number;
  self_time: number;
}

const made = await createBenchDatabase(adminUrl);
if (made.db === null) throw new Error(`function-profile: ${made.skipped}`);
const db = made.db;
const admin = new pg.Client({ connectionString: db.url });
await admin.connect();
try {
  await admin.query(`alter database ${new URL(db.url).pathname.slice(1)} set track_functions = 'all'`);
  const wal = async (): Promise<[number, number]> => {
    const r = await admin.query<{ b: string; r: string }>(
      'select wal_bytes::text as b, wal_records::text as r from pg_stat_wal',
    );
    return [Number(r.rows[0]!.b), Number(r.rows[0]!.r)];
  };
  // A backend reports its statistics when it is idle for a while or exits: each phase closes its
  // store before the figures are read.
  // BENCH_PROFILE_SQL: statements (`;`-separated) run on the scratch database after it is migrated,
  // to measure a schema idea (an index dropped, a fillfactor) before writing its migration.
  const experiment = process.env['BENCH_PROFILE_SQL'];
  if (experiment !== undefined && experiment.trim() !== '') {
    const migrated = await openStore({ url: db.url });
    await migrated.close();
    for (const statement of experiment.split(';').filter((x) => x.trim() !== '')) {
      await admin.query(statement);
      console.log(`experiment: ${statement.trim()}`);
    }
  }
  const phase = async (
    what: string,
    run: (store: Awaited<ReturnType<typeof openStore>>) => Promise<void>,
  ): Promise<void> => {
    const store = await openStore({ url: db.url });
    for (let i = 0; i < 200; i++) {
      const d = await store.decide(reserveInput(`warm ${what} ${i}`, 'warm'));
      if (d.verdict !== 'allow') throw new Error(d.verdict);
      await store.recordOutcome(confirmInput(d, `warm ${what} ${i}`));
    }
    await store.close();
    if (process.env['BENCH_PROFILE_ANALYZE'] === '1') await admin.query('analyze');
    await new Promise((r) => setTimeout(r, 500));
    await admin.query('select pg_stat_reset()');
    const [b0, r0] = await wal();
    const measured = await openStore({ url: db.url });
    const t0 = performance.now();
    const cpu0 = cpuSnapshot();
    const self0 = process.cpuUsage();
    await run(measured);
    const self = process.cpuUsage(self0);
    const used = cpuUse(cpu0, cpuSnapshot());
    const ms = (performance.now() - t0) / n;
    const pgUs = used === null ? Number.NaN : (used.postgresCores * used.seconds * 1e6) / n;
    const clientUs = (self.user + self.system) / n;
    await measured.close();
    await new Promise((r) => setTimeout(r, 500));
    const [b1, r1] = await wal();
    const rows = await admin.query<FunctionRow>(
      'select funcname, calls::text, total_time, self_time from pg_stat_user_functions order by self_time desc',
    );
    console.log(
      `${n} ${what}: ${ms.toFixed(3)} ms each, sequential; PostgreSQL CPU ${pgUs.toFixed(0)} µs, client CPU ${clientUs.toFixed(0)} µs each; WAL ${((b1 - b0) / n).toFixed(0)} B, ${((r1 - r0) / n).toFixed(1)} records each (cluster-wide)`,
    );
    console.log(
      `  function                  calls   total µs/call   self µs/call   self µs per ${what.split(' ')[0]}`,
    );
    for (const r of rows.rows) {
      const calls = Number(r.calls);
      console.log(
        `  ${r.funcname.padEnd(24)} ${String(calls).padStart(6)}  ${((r.total_time * 1000) / calls).toFixed(1).padStart(14)}  ${((r.self_time * 1000) / calls).toFixed(1).padStart(13)}  ${((r.self_time * 1000) / n).toFixed(1).padStart(10)}`,
      );
    }
    // Which tables a call reads and writes: index probes and row changes per call, from the same
    // statistics (exact counts, unlike the times: they do not depend on the machine being quiet).
    const tables = await admin.query<TableRow>(
      `select relname, (coalesce(idx_scan, 0) + seq_scan)::text as scans, n_tup_ins::text as ins,
         n_tup_upd::text as upd, n_tup_hot_upd::text as hot from pg_stat_user_tables
       where coalesce(idx_scan, 0) + seq_scan + n_tup_ins + n_tup_upd > 0 order by relname`,
    );
    console.log(`  table                  scans   inserts   updates (HOT)   per ${what.split(' ')[0]}`);
    for (const t of tables.rows) {
      const per = (v: string): string => (Number(v) / n).toFixed(2);
      console.log(
        `  ${t.relname.padEnd(20)} ${per(t.scans).padStart(7)} ${per(t.ins).padStart(9)} ${per(t.upd).padStart(9)} (${per(t.hot)})`,
      );
    }
  };
  await phase('allows (decide + recordOutcome)', (store) => runAllows(store, n));
  await phase('duplicates (decide)', (store) => runDuplicates(store, n));
  // A keyless tool's outcome takes the general path, which brings its operation's rows up to date
  // first: measured with a projector running beside it every 200 ms, as in a gate, so that path
  // meets the backlog a gate's would.
  await phase('keyless allows (decide + recordOutcome, projector every 200 ms)', async (store) => {
    const projector = new EventProjector({ store, intervalMs: 200 });
    projector.start();
    try {
      await runKeylessAllows(store, n);
    } finally {
      await projector.stop();
    }
  });
  // Decisions are projected from their events off the hot path (eg_project): what that later
  // work costs per decision, in the background projector's rounds, for everything decided above.
  {
    const store = await openStore({ url: db.url });
    const pending = await admin.query<{ n: string }>(
      `select count(*)::text as n from events e join log_projection c on c.id
       where e.type like 'decision.%' and not pg_visible_in_snapshot(e.tx, c.after_snapshot)`,
    );
    const decisions = Number(pending.rows[0]!.n);
    await new Promise((r) => setTimeout(r, 500));
    const [b0, r0] = await wal();
    const cpu0 = cpuSnapshot();
    let rounds = 0;
    for (let more = true; more && rounds < 10_000; rounds++) {
      more = (await store.projectEvents({ wait: false })).more;
    }
    const used = cpuUse(cpu0, cpuSnapshot());
    await store.close();
    await new Promise((r) => setTimeout(r, 500));
    const [b1, r1] = await wal();
    const pgUs = used === null ? Number.NaN : (used.postgresCores * used.seconds * 1e6) / decisions;
    console.log(
      `${decisions} decisions projected off the hot path in ${rounds} rounds: PostgreSQL CPU ${pgUs.toFixed(0)} µs, WAL ${((b1 - b0) / decisions).toFixed(0)} B, ${((r1 - r0) / decisions).toFixed(1)} records each (cluster-wide)`,
    );
  }
} finally {
  await admin.end();
  await db.drop();
}
