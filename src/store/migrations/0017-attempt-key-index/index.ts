import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0017: an index on the idempotency key each attempt sent (attempts.idempotency_key, 0013). A
 * webhook or an observation posted to the admin API may name its operation by that key
 * (findOperations); without an index the lookup scanned every attempt. Partial, like
 * attempts_destination_ref_idx (0007): most attempts send no key, and only a key is looked up.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'create index attempts_idempotency_key_idx on attempts (idempotency_key) where idempotency_key is not null',
];

export const migration0017: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
