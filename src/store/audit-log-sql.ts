import { type Kysely, sql } from 'kysely';
import { type EventRow, toChainedEvent, toEvent } from './records.js';
import type { Database } from './schema.js';
import type {
  BatchEvents,
  BatchRead,
  ChainedEvent,
  CheckpointBatch,
  CheckpointRecord,
  EventRange,
  SealedHeads,
  UnsealedEvents,
} from './types.js';

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

// `pos`, `seq` and the time as text: exact whatever the driver does with bigint.
const EVENT_COLUMNS = sql`e.pos::text as pos, e.chain, e.seq::text as seq, e.type, e.operation_id, e.payload,
  e.prev_hash, e.hash, e.recorded_at_us::text as recorded_at_us`;

export async function readEventRanges(
  db: Kysely<Database>,
  ranges: readonly EventRange[],
): Promise<ChainedEvent[]> {
  if (ranges.length === 0) return [];
  // One statement for every range: a nested loop over the primary key (chain, seq) per range.
  const { rows } = await sql<EventRow>`select ${EVENT_COLUMNS}
    from jsonb_to_recordset(${JSON.stringify(ranges)}::jsonb) as r("chain" int, "after" bigint, "upTo" bigint)
    join events e on e.chain = r."chain" and e.seq > r."after" and e.seq <= r."upTo"
    order by e.chain, e.seq`.execute(db);
  return rows.map(toChainedEvent);
}

export async function readBatch(db: Kysely<Database>, read: BatchRead): Promise<BatchEvents> {
  const target =
    read.target ?? (await sql<{ s: string }>`select pg_current_snapshot()::text as s`.execute(db)).rows[0]!.s;
  // A later statement sees every transaction `target` sees (they committed before it was taken),
  // so the two statements read what one would. The batch after a snapshot is found by
  // transaction id (eg_batch_events, events_tx_idx), and its rest by position; the first one, past
  // the heads the old form sealed, by each chain's unsealed tail (events_chain_seq_idx; the
  // planner may walk that index whole, once per round of the first batch) and, for the events
  // without a chain (which the old form never sealed), by position from `from`.
  const upTo = typeof read.upTo === 'number' ? read.upTo : Number.MAX_SAFE_INTEGER;
  const { rows } =
    read.after === null
      ? await sql<EventRow>`select b.pos, b.chain, b.seq, b.type, b.operation_id, b.payload, b.prev_hash, b.hash,
            b.recorded_at_us
          from ((select ${EVENT_COLUMNS}, e.pos as ord
                 from chain_head h
                 join events e on e.chain = h.id and e.seq > coalesce((${JSON.stringify(read.sealed)}::jsonb ->> h.id::text)::bigint, 0)
                 where e.tx is not null and pg_visible_in_snapshot(e.tx, ${target}::pg_snapshot)
                   and e.pos > ${read.from} and e.pos <= ${upTo}
                 order by e.pos limit ${read.limit})
                union all
                (select ${EVENT_COLUMNS}, e.pos as ord
                 from events e
                 where e.pos > ${read.from} and e.pos <= ${upTo} and e.seq is null
                   and pg_visible_in_snapshot(e.tx, ${target}::pg_snapshot)
                 order by e.pos limit ${read.limit})) b
          order by b.ord limit ${read.limit}`.execute(db)
      : read.from === 0 || read.upTo === 'end'
        ? await sql<EventRow>`select ${EVENT_COLUMNS}
          from eg_batch_events(${read.after}::pg_snapshot, ${target}::pg_snapshot) e
          where e.pos > ${read.from} and e.pos <= ${upTo}
          order by e.pos limit ${read.limit}`.execute(db)
        : // A batch's rest, from the last position sealed, in the primary key's order (migration
          // 0027): reading it again by transaction id would read all of it, every round.
          await sql<EventRow>`select ${EVENT_COLUMNS}
          from events e
          where e.pos > ${read.from} and e.pos <= ${upTo}
            and pg_visible_in_snapshot(e.tx, ${target}::pg_snapshot)
            and not pg_visible_in_snapshot(e.tx, ${read.after}::pg_snapshot)
          order by e.pos limit ${read.limit}`.execute(db);
  return Object.freeze({
    target,
    events: Object.freeze(rows.map(toEvent)),
    positions: Object.freeze(rows.map((row) => Number(row.pos))),
  });
}

export async function hasUnchainedEvents(db: Kysely<Database>): Promise<boolean> {
  // Any row with a chain field missing: none is expected of this version's append, and a row
  // edited by hand is one too. Read once per export, which reads every event anyway.
  const { rows } = await sql<{ found: boolean }>`select exists (select 1 from events e
      where e.seq is null or e.chain is null or e.prev_hash is null or e.hash is null) as found`.execute(db);
  return rows[0]?.found === true;
}

export async function hasUnsealedLegacy(db: Kysely<Database>, heads: SealedHeads): Promise<boolean> {
  // Events without a `tx` are a prefix of every chain (migration 0024): look at each chain's first
  // unsealed event only.
  const { rows } = await sql<{ found: boolean }>`select exists (
      select 1 from chain_head h
      join events e on e.chain = h.id and e.seq = greatest(h.base_seq, coalesce((${JSON.stringify(heads)}::jsonb ->> h.id::text)::bigint, 0)) + 1
      where e.tx is null) as found`.execute(db);
  return rows[0]?.found === true;
}

const CHECKPOINT_COLUMNS = sql`size::text as size, heads::text as heads, root, frontier,
  to_char(sealed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as sealed_at, note,
  after_snapshot::text as after_snapshot, target_snapshot::text as target_snapshot,
  through_pos::text as through_pos`;

interface CheckpointRow {
  size: string;
  heads: string;
  root: string;
  frontier: string;
  sealed_at: string;
  note: string;
  after_snapshot: string | null;
  target_snapshot: string | null;
  through_pos: string | null;
}

function toBatch(row: CheckpointRow): CheckpointBatch | null {
  if (row.target_snapshot === null) return null;
  return Object.freeze({
    after: row.after_snapshot,
    target: row.target_snapshot,
    through: row.through_pos === null ? null : Number(row.through_pos),
  });
}

function toCheckpoint(row: CheckpointRow): CheckpointRecord {
  return Object.freeze({
    size: Number(row.size),
    heads: Object.freeze(JSON.parse(row.heads) as SealedHeads),
    batch: toBatch(row),
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

/**
 * Where retention may cut the log: the latest checkpoint sealed before `before` that covers every
 * chain's base and goes past one (the log is not cut there already), and that the projection has
 * passed on every chain (eg_projected_seq.sql: a decision or row not projected yet would be lost
 * with its event). Null when none is.
 */
export async function retentionCheckpoint(
  db: Kysely<Database>,
  before: string,
): Promise<CheckpointRecord | null> {
  // Each chain's projected seq once (materialized), not once per checkpoint row looked at.
  const { rows } = await sql<CheckpointRow>`with p as materialized (
      select h.id, h.base_seq, greatest(h.base_seq, eg_projected_seq(h.id)) as projected from chain_head h)
    select ${CHECKPOINT_COLUMNS} from audit_checkpoints c
    where c.sealed_at < ${before}::timestamptz and not exists (select 1 from p
      where coalesce((c.heads ->> p.id::text)::bigint, 0) not between p.base_seq and p.projected)
    and exists (select 1 from p where coalesce((c.heads ->> p.id::text)::bigint, 0) > p.base_seq)
    order by c.size desc limit 1`.execute(db);
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
  latest: CheckpointRecord | null,
): Promise<UnsealedEvents> {
  const b = latest?.batch ?? null;
  // By snapshot, as the sealer reads: the events the batch's snapshots do not cover. The first
  // batch (`after` null) goes by chain: no snapshot says what came before it, and its heads say
  // where it ended on every chain.
  const { rows } =
    b === null || b.after === null ? await unsealedByChain(db, latest) : await unsealedBySnapshot(db, b);
  const row = rows[0]!;
  return Object.freeze({
    count: Number(row.count),
    oldestAt: row.oldest_us === null ? null : usToIso(row.oldest_us),
  });
}

type UnsealedRows = Promise<{ rows: { count: string; oldest_us: string | null }[] }>;

function unsealedBySnapshot(db: Kysely<Database>, b: CheckpointBatch): UnsealedRows {
  // A batch sealed whole: everything its target did not see. One sealed up to `through`: what its
  // `after` did not see, but for the part of the batch sealed.
  return sql<{ count: string; oldest_us: string | null }>`
    select count(*)::text as count, min(e.recorded_at_us)::text as oldest_us
    from eg_unseen_events(${b.through === null ? b.target : b.after}::pg_snapshot) e
    where not (${b.through !== null} and pg_visible_in_snapshot(e.tx, ${b.target}::pg_snapshot)
      and e.pos <= ${b.through ?? 0})`.execute(db);
}

function unsealedByChain(db: Kysely<Database>, latest: CheckpointRecord | null): UnsealedRows {
  // A chain's sealed seq is never below its base: retention removes only sealed events, and
  // before the first checkpoint the log starts at the bases.
  const heads = latest?.heads ?? null;
  // The events without a chain: none is sealed before a first batch (the old form seals by chain
  // only), which seals those its target sees, up to `through` if it is cut there.
  const b = latest?.batch ?? null;
  const unchained =
    b === null
      ? sql`select e.recorded_at_us from events e where e.seq is null`
      : sql`select e.recorded_at_us from eg_unseen_events(${b.target}::pg_snapshot) e where e.seq is null
          union all
          select e.recorded_at_us from events e
          where ${b.through !== null} and e.pos > ${b.through ?? 0} and e.seq is null
            and pg_visible_in_snapshot(e.tx, ${b.target}::pg_snapshot)`;
  return sql<{ count: string; oldest_us: string | null }>`
    with s as (
      select h.id, h.last_seq,
        greatest(h.base_seq, coalesce((${JSON.stringify(heads ?? {})}::jsonb ->> h.id::text)::bigint, 0)) as sealed
      from chain_head h
    ), u as (${unchained})
    select (coalesce(sum(greatest(s.last_seq - s.sealed, 0)), 0) + (select count(*) from u))::text as count,
      least((select min(e.recorded_at_us) from events e join s on e.chain = s.id and e.seq = s.sealed + 1),
            (select min(u.recorded_at_us) from u))::text as oldest_us
    from s`.execute(db);
}

/** Microseconds since the epoch as an ISO time (milliseconds: what Date holds). */
function usToIso(us: string): string {
  return new Date(Number(BigInt(us) / 1000n)).toISOString();
}
