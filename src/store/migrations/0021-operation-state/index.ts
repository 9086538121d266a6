import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0021: dedupe_keys.operation_state, the state of the operation the key names, kept beside the
 * key's own state. It is the first of the facts a key row carries so that the hot path can answer
 * from the key alone and the operations table can become a projection of the events: a duplicate
 * (a key confirmed inside its window) reads the operation's state here instead of in `operations`.
 *
 * Written by the functions in the same statement or transaction as the operation's state
 * (eg_set_operation_state.sql, and the key's own moves: a key taken for an attempt names an open
 * operation). No backfill here: the functions step fills the column after it installs the
 * definitions that keep it, in their transaction (eg_sync_heads.sql), so what the previous
 * version's functions write in between is covered too, and this migration holds its table lock
 * only for the instant an added nullable column takes.
 *
 * - fillfactor 90 on dedupe_keys: the wider row left too little room on a full page for its new
 *   version, and 5 % of the outcome's one key update stopped being HOT (a new index entry too);
 *   with a tenth of each page kept free they all are again, and an allow's WAL is back to what it
 *   was before the column (bench/README.md). Applies to pages written from now on.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  // `if not exists`: a store rewound by hand to before an earlier migration runs this again.
  `alter table dedupe_keys add column if not exists operation_state text check (operation_state in
    ('open', 'succeeded', 'failed', 'unknown', 'cancelled', 'duplicate_effect_confirmed', 'accepted'))`,
  'alter table dedupe_keys set (fillfactor = 90)',
];

export const migration0021: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
