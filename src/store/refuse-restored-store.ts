import { type Kysely, sql } from 'kysely';
import { EffectgateError } from '../errors.js';
import type { Database } from './schema.js';

/**
 * Refuses a store whose recorded transaction ids are ahead of its database's: a dump restored into
 * another PostgreSQL cluster (pg_dump / pg_restore, logical replication), whose transaction ids
 * start lower than the ones the events and the stored snapshots carry. The projection and the
 * sealer find new events by transaction id against their last snapshot (migrations 0024-0026): an
 * event written there with a lower id reads as one that snapshot already saw, so it would never be
 * projected nor sealed, and `audit verify` would count it as sealed. A physical copy (a replica
 * promoted, pg_basebackup, pg_upgrade, a copy of an embedded store's directory) keeps the ids and
 * is never refused.
 *
 * At start only, two statements: which of them the schema has, then the newest event's `tx` (an
 * index probe on events_tx_idx) and the xmax of the projection's and the latest checkpoint's
 * snapshots, against this database's current snapshot.
 * No committed transaction has an id at or past the current snapshot's xmax, so on a store that
 * was never moved the answer is always no.
 */
export async function refuseRestoredStore(db: Kysely<Database>): Promise<void> {
  // A store an older release migrated (or an upgrade test's) may lack some of them.
  const { rows: has } = await sql<{ tx: boolean; projection: boolean; sealed: boolean }>`select
      exists (select 1 from information_schema.columns where table_schema = current_schema()
        and table_name = 'events' and column_name = 'tx') as tx,
      to_regclass('log_projection') is not null as projection,
      exists (select 1 from information_schema.columns where table_schema = current_schema()
        and table_name = 'audit_checkpoints' and column_name = 'target_snapshot') as sealed`.execute(db);
  const none = sql`null::xid8`;
  const { rows } = await sql<{
    tx: string | null;
    projected: string | null;
    sealed: string | null;
    now: string;
  }>`
    select (${has[0]?.tx === true ? sql`(select max(tx) from events)` : none})::text as tx,
      (${has[0]?.projection === true ? sql`(select pg_snapshot_xmax(after_snapshot) from log_projection where id)` : none})::text as projected,
      (${
        has[0]?.sealed === true
          ? sql`(select pg_snapshot_xmax(target_snapshot) from audit_checkpoints
              where target_snapshot is not null order by size desc limit 1)`
          : none
      })::text as sealed,
      pg_snapshot_xmax(pg_current_snapshot())::text as now`.execute(db);
  const row = rows[0];
  if (row === undefined) return;
  const now = BigInt(row.now);
  // A committed event's id is below the current xmax; a snapshot taken earlier has an xmax at most it.
  const ahead = [
    row.tx === null ? null : BigInt(row.tx) + 1n,
    ...[row.projected, row.sealed].map((x) => (x === null ? null : BigInt(x))),
  ].reduce<bigint>((max, x) => (x !== null && x > max ? x : max), now);
  if (ahead <= now) return;
  throw new EffectgateError(
    'EG_ERR_STORE_RESTORED',
    `This store records transaction ids up to ${ahead}, and its database is only at ${now}: it was restored into another PostgreSQL cluster (a dump), whose ids started lower. Events written now would never be projected nor sealed, so the gate does not start. Restore it so the ids go on: into a cluster whose transaction id epoch is past them (pg_resetwal --epoch on the new cluster before its first start), or after consuming ${ahead - now} transaction ids on it; or move it physically (pg_basebackup, a promoted replica, pg_upgrade). See docs/many-replicas.md, "Moving a store".`,
  );
}
