import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0022: dedupe_keys.lost_attempt_id, the attempt of the key that an expiry or a crash recovery
 * marked sent_no_response while the key named it. The key's attempt was marked lost exactly when
 * this equals attempt_id; a key that moves to another attempt needs no reset, since the column then
 * names an attempt the key no longer holds.
 *
 * Why on the key: an expiry that keeps the key pending (on_expired: retry with no budget left)
 * leaves a pending key whose attempt may still report its real outcome, late. That outcome must be
 * recorded as late evidence, not as a first answer. Today eg_record_outcome learns it from the
 * attempt's row; once the attempt rows are made from the events off the hot path, the outcome of a
 * first attempt that still holds its pending key is to be answered from the key row alone, and this
 * is the one fact it needs besides what the key already holds (src/store/README.md, "Next").
 *
 * No backfill here: the functions step fills the column after it installs the definitions that
 * keep it, in their transaction (eg_sync_heads.sql), so what an older version's functions mark in
 * between is covered too, and this migration holds its table lock only for the instant an added
 * nullable column takes. A null in a row costs one bit of its null bitmap, and the column is written
 * only when an attempt is marked lost, so the hot path's key update stays as it was.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  // `if not exists`: a store rewound by hand to before an earlier migration runs this again.
  'alter table dedupe_keys add column if not exists lost_attempt_id text',
];

export const migration0022: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
