import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0025: the projection reads the log in batches by snapshot (the events one snapshot sees that the
 * one before did not, in `pos` order; migration 0024), no longer chain by chain behind frontier
 * rows a rare path locks:
 * - log_projection, one row: every event the snapshot `after_snapshot` sees is projected; the
 *   batch in progress is what `target_snapshot` sees and `after_snapshot` does not, projected up
 *   to `through_pos`. Null `after_snapshot`: the events before this version (no `tx`) are still to
 *   be drained through the old per-chain frontiers (eg_project_legacy.sql), once, in the step that
 *   installs the functions.
 * - operations.event_pos: the position of the newest event of the operation its rows hold (the
 *   operation's and its attempts'). The projection applies an operation's events only where they
 *   are newer, so a rare path that brings its operation up to date and the projector's rounds can
 *   no longer apply an older event over a newer one, whichever commits first; null on rows made
 *   before (older than any event with a position).
 * - events_tx_idx: a batch is found by transaction id (those the last snapshot saw running, and
 *   the newer ones), not by scanning the log.
 *
 * event_projection and row_projection stay, read by the drain only.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'create index if not exists events_tx_idx on events (tx)',
  'alter table operations add column if not exists event_pos bigint',
  `create table if not exists log_projection (
    id boolean primary key default true check (id),
    after_snapshot pg_snapshot,
    target_snapshot pg_snapshot,
    through_pos bigint not null default 0
  )`,
  'insert into log_projection (id) values (true) on conflict (id) do nothing',
];

export const migration0025: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
