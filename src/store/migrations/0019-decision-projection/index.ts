import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0019: decisions become a projection of the events. A decision's facts were written twice on the
 * hot path, as its `decision.<verdict>` event and as a `decisions` row; the row is now made from
 * the event off the hot path (src/store/functions/eg_project.sql), by the gate's projector in the
 * background and by every reader of decisions before it reads, so a reader still sees every
 * decision committed before it asked.
 *
 * - event_projection: per chain, the last seq whose event has been projected. A chain's committed
 *   events are always a gap-free prefix of it (an append holds the chain's head row until it
 *   commits), so "every event after seq" is exactly what is left to project. Starts at the chains'
 *   current heads: every event before was written with its decisions row by the previous version.
 *   A decision that a previous version's gate writes after this (both a row and an event) is
 *   projected onto its own row, which the projection leaves as it is.
 * - Retention never removes an event the projection has not passed (eg_prune_cut).
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  `create table event_projection (
    chain int primary key,
    seq bigint not null check (seq >= 0)
  )`,
  'insert into event_projection (chain, seq) select id, last_seq from chain_head',
];

export const migration0019: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
