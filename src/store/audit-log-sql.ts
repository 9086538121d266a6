import { type Kysely, sql } from 'kysely';
import { toEvent } from './records.js';
import type { Database } from './schema.js';
import type { CheckpointRecord, EventRange, EventRecord, SealedHeads, UnsealedEvents } from './types.js';

/*
 * The sealed log's statements (KyselyStore delegates to these): reads of events by range and of
 * checkpoints, and the sealer's one write, eg_append_checkpoint. None is on the hot path.
 */

/** settings.audit_log_id, made by migration 0018. */
export async function auditLogId(db: Kysely<Database>): Promise<string> {
  const row = await db
    .selectFrom('settings')
    .select('value')
    .where('name', '=', 'audit_log_id')
    .executeTakeFirst();
  if (row === undefined)
    throw new Error('the store has no audit_log_id setting (migration 0018 not applied)');
  return row.value;
}

export async function readEventRanges(
  db: Kysely<Database>,
  ranges: readonly EventRange[],
): Promise<EventRecord[]> {
  if (ranges.length === 0) return [];
  // One statement for every range: a nested loop over the primary key (chain, seq) per range.
  const { rows } = await sql<{
    chain: number;
    seq: string;
    type: string;
    operation_id: string | null;
    payload: string;
    prev_hash: string;
    hash: string;
    recorded_at_us: string;
  }>`select e.chain, e.seq, e.type, e.operation_id, e.payload, e.prev_hash, e.hash,
      e.recorded_at_us::text as recorded_at_us
    from jsonb_to_recordset(${JSON.stringify(ranges)}::jsonb) as r("chain" int, "after" bigint, "upTo" bigint)
    join events e on e.chain = r."chain" and e.seq > r."after" and e.seq <= r."upTo"
    order by e.chain, e.seq`.execute(db);
  return rows.map((row) => toEvent({ ...row, seq: row.seq as unknown as number }));
}

const CHECKPOINT_COLUMNS = sql`size::text as size, heads::text as heads, root, frontier,
  to_char(sealed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as sealed_at, note`;

interface CheckpointRow {
  size: string;
  heads: string;
  root: string;
  frontier: string;
  sealed_at: string;
  note: string;
}

function toCheckpoint(row: CheckpointRow): CheckpointRecord {
  return Object.freeze({
    size: Number(row.size),
    heads: Object.freeze(JSON.parse(row.heads) as SealedHeads),
    root: row.root,
    frontier: row.frontier,
    sealedAt: row.sealed_at,
    note: row.note,
  });
}

export async function latestCheckpoint(db: Kysely<Database>): Promise<CheckpointRecord | null> {
  // Ordered by the column, qualified: a bare `size` would be the text output column of the same name.
  const { rows } = await sql<CheckpointRow>`select ${CHECKPOINT_COLUMNS} from audit_checkpoints
    order by audit_checkpoints.size desc limit 1`.execute(db);
  return rows[0] === undefined ? null : toCheckpoint(rows[0]);
}

export async function getCheckpoint(db: Kysely<Database>, size: number): Promise<CheckpointRecord | null> {
  const { rows } = await sql<CheckpointRow>`select ${CHECKPOINT_COLUMNS} from audit_checkpoints
    where size = ${size}`.execute(db);
  return rows[0] === undefined ? null : toCheckpoint(rows[0]);
}

export async function readCheckpoints(
  db: Kysely<Database>,
  after: number | null,
  limit: number,
): Promise<CheckpointRecord[]> {
  const { rows } = await sql<CheckpointRow>`select ${CHECKPOINT_COLUMNS} from audit_checkpoints
    where size > ${after ?? -1} order by audit_checkpoints.size limit ${limit}`.execute(db);
  return rows.map(toCheckpoint);
}

export async function appendCheckpoint(
  db: Kysely<Database>,
  after: number | null,
  checkpoint: CheckpointRecord,
): Promise<boolean> {
  const { rows } = await sql<{ appended: boolean }>`select eg_append_checkpoint(${after}::bigint,
    ${JSON.stringify(checkpoint)}) as appended`.execute(db);
  return rows[0]?.appended === true;
}

export async function unsealedEvents(
  db: Kysely<Database>,
  heads: SealedHeads | null,
): Promise<UnsealedEvents> {
  // A chain's sealed seq is never below its base: retention removes only sealed events, and
  // before the first checkpoint the log starts at the bases.
  const { rows } = await sql<{ count: string; oldest_us: string | null }>`
    with s as (
      select h.id, h.last_seq,
        greatest(h.base_seq, coalesce((${JSON.stringify(heads ?? {})}::jsonb ->> h.id::text)::bigint, 0)) as sealed
      from chain_head h
    )
    select coalesce(sum(greatest(s.last_seq - s.sealed, 0)), 0)::text as count,
      (select min(e.recorded_at_us) from events e join s on e.chain = s.id and e.seq = s.sealed + 1)::text as oldest_us
    from s`.execute(db);
  const row = rows[0]!;
  return Object.freeze({
    count: Number(row.count),
    oldestAt: row.oldest_us === null ? null : usToIso(row.oldest_us),
  });
}

/** Microseconds since the epoch as an ISO time (milliseconds: what Date holds). */
function usToIso(us: string): string {
  return new Date(Number(BigInt(us) / 1000n)).toISOString();
}
