/**
 * The operation and attempt rows as the store's own projection makes them from the events
 * (eg_project_rows.sql) into empty tables, compared with the rows the store holds (made by its
 * projection as it went, and by the rare paths' own writes). In one transaction that is
 * always rolled back: both tables emptied (foreign keys off: approvals and observations point at
 * operations), every event projected in order, and the result compared with a copy of the rows
 * taken first, both ways. Twice: all events in one call, and a few at a time (37, 64, 101, 37, …),
 * as a projector's rounds take them, so an attempt's outcome is projected both with its proposal
 * and after it. rows-from-events.ts says the events carry every fact; this says the store's SQL
 * reads them right, whatever the batches it was given.
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { TrailMismatch } from './trail-events.js';

type Row = Record<string, unknown>;

class RolledBack extends Error {}

/** Every row the projection makes differently from the row written, and rows on one side only. */
// biome-ignore lint/suspicious/noExplicitAny: any database shape
export async function projectedRowMismatches(db: Kysely<any>): Promise<TrailMismatch[]> {
  const { rows: has } = await sql<{ ok: boolean }>`
    select exists (select 1 from pg_proc where proname = 'eg_project_rows') as ok`.execute(db);
  if (has[0]?.ok !== true) return [];
  const whole = await projectedOnce(db, null);
  return whole.length > 0 ? whole : projectedOnce(db, [37, 64, 101]);
}

/**
 * Steps: how many events one call takes, in turn, in the order the projection reads them (by
 * position); null: all of them at once.
 */
// biome-ignore lint/suspicious/noExplicitAny: any database shape
async function projectedOnce(db: Kysely<any>, steps: readonly number[] | null): Promise<TrailMismatch[]> {
  let found: { side: string; tbl: string; row: Row }[] = [];
  try {
    await db.transaction().execute(async (tx) => {
      await sql`set local session_replication_role = replica`.execute(tx);
      await sql`create temp table eg_written_operations on commit drop as select * from operations`.execute(
        tx,
      );
      await sql`create temp table eg_written_attempts on commit drop as select * from attempts`.execute(tx);
      // Not a fact: where the projection had got to (operations.event_pos, eg_project_rows.sql),
      // behind a rare path's own writes until its event is projected.
      await sql`update eg_written_operations set event_pos = null`.execute(tx);
      await sql`delete from attempts`.execute(tx);
      await sql`delete from operations`.execute(tx);
      // Ordered by the column, not by its text.
      const { rows: events } = await sql<{ pos: string }>`
        select e.pos::text as pos from events e where e.operation_id is not null order by e.pos`.execute(tx);
      // Bounded: every round takes at least one event.
      for (let from = 0, round = 0; from < events.length; round++) {
        const step = steps === null ? events.length : steps[round % steps.length]!;
        const taken = events.slice(from, from + step);
        await sql`select eg_project_rows(${taken.map((e) => e.pos)}::bigint[])`.execute(tx);
        from += taken.length;
      }
      await sql`update operations set event_pos = null`.execute(tx);
      const { rows } = await sql<{ side: string; tbl: string; row: Row }>`
        select 'written' as side, 'operation' as tbl, to_jsonb(x) as row
          from (table eg_written_operations except table operations) x
        union all select 'projected', 'operation', to_jsonb(x)
          from (table operations except table eg_written_operations) x
        union all select 'written', 'attempt', to_jsonb(x)
          from (table eg_written_attempts except table attempts) x
        union all select 'projected', 'attempt', to_jsonb(x)
          from (table attempts except table eg_written_attempts) x`.execute(tx);
      found = rows;
      throw new RolledBack();
    });
  } catch (err) {
    if (!(err instanceof RolledBack)) throw err;
  }
  return describe(found);
}

function describe(found: readonly { side: string; tbl: string; row: Row }[]): TrailMismatch[] {
  const out: TrailMismatch[] = [];
  const byId = new Map<string, { written?: Row; projected?: Row; tbl: string }>();
  for (const f of found) {
    const id = String(f.row['id']);
    const entry = byId.get(id) ?? { tbl: f.tbl };
    entry[f.side as 'written' | 'projected'] = f.row;
    byId.set(id, entry);
  }
  for (const [id, { written, projected, tbl }] of byId) {
    const operationId = String((written ?? projected)?.[tbl === 'operation' ? 'id' : 'operation_id']);
    const what = tbl === 'operation' ? 'operation' : `attempt ${id}`;
    if (written === undefined || projected === undefined) {
      const problem =
        written === undefined
          ? 'the projection makes it, no row holds it'
          : 'a row holds it, the projection does not';
      out.push({ operationId, problem: `${what}: ${problem} (projected rows)`, told: [] });
      continue;
    }
    for (const column of Object.keys(written)) {
      const a = JSON.stringify(written[column]);
      const b = JSON.stringify(projected[column]);
      if (a !== b)
        out.push({
          operationId,
          problem: `${what}.${column}: the row says ${a}, the projection ${b}`,
          told: [],
        });
    }
  }
  return out;
}
