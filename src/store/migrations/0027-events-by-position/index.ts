import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0027: an event is known by its position (`pos`, migration 0024), no longer by its place in a
 * hash chain. This is the schema of an append that touches no head row: the store gives an event
 * its order, and the sealer (audit-sealer.ts) seals it into the Merkle tree afterwards, so no row
 * lock is held from an append to its commit for the trail's sake.
 * - Events from before 0024 have no position: they get one now, below every other (negative, in
 *   the order of their time, each taken as the latest time its chain had reached by then, so a
 *   chain keeps its own order even where an early version's clock went back). Every event after
 *   them already has a larger one.
 * - `pos` becomes the primary key: the projection names its events by position, and a batch's
 *   events are read by it.
 * - `(chain, seq)` stays unique for the events that have them, by a partial index: an event that
 *   has no chain is not in it, so an append that no longer writes one pays no entry there.
 * - `chain`, `seq`, `prev_hash` and `hash` may be null from now on: an event written without a
 *   chain has none of them, and its integrity is the sealed tree's (checkpoint-leaves.ts).
 *
 * The events table refuses updates (its trigger, 0001): the one update here is the numbering of
 * old events, with the trigger off for this transaction's statement only.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table events disable trigger events_no_update_delete',
  `update events e set pos = n.pos
    from (select chain, seq, row_number() over (order by t, chain, seq) - count(*) over () - 1 as pos
          from (select chain, seq, max(recorded_at_us) over (partition by chain order by seq) as t
                from events where pos is null) c) n
    where e.chain = n.chain and e.seq = n.seq`,
  'alter table events enable trigger events_no_update_delete',
  'alter table events alter column pos set not null',
  'alter table events drop constraint events_pkey',
  'alter table events add constraint events_pkey primary key (pos)',
  'create unique index if not exists events_chain_seq_idx on events (chain, seq) where seq is not null',
  `alter table events alter column chain drop not null, alter column seq drop not null,
    alter column prev_hash drop not null, alter column hash drop not null`,
];

export const migration0027: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
