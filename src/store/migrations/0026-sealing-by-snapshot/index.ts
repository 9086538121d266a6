import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0026: the sealer reads the log in batches by snapshot, as the projection does (migration 0025),
 * no longer chain by chain up to the head rows. A checkpoint names the batch it sealed, so that
 * `audit verify` can find its events again:
 * - `target_snapshot`: the batch is the events this snapshot sees ...
 * - `after_snapshot`: ... that this one did not (null: the first batch, whose events are those the
 *   checkpoint before, of the old form, had not sealed by chain);
 * - `through_pos`: sealed up to this `pos` (the batch goes on in the next checkpoint), or null:
 *   the whole batch (the next one starts from `target_snapshot`).
 * All three null: a checkpoint of the old form, which sealed the events of every chain after the
 * previous checkpoint's `heads` up to its own. Every checkpoint still records `heads` (each chain's
 * last sealed seq), read by retention.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  `alter table audit_checkpoints add column if not exists after_snapshot pg_snapshot,
    add column if not exists target_snapshot pg_snapshot,
    add column if not exists through_pos bigint`,
];

export const migration0026: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
