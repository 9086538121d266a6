import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0014: a client's automatic repeats of one call are not proposals. An SDK that retries a refusal
 * on its own (stripe-node repeats a 409 twice, with the same Idempotency-Key) sent the loop
 * breaker three proposals for one call of the agent's, so a run was halted for what its library
 * did. The last counted skip of each run and key remembers which call it was, so a repeat of that
 * call soon after is recorded as a duplicate but not counted (eg_call_repeat.sql, bounded).
 *
 * - run_key_skips.call_key: the call of the last counted skip: the agent's own idempotency key
 *   (`key:<key>`); null without one (a fingerprint cannot tell a retry from a model's loop).
 * - run_key_skips.call_at: when that skip was counted.
 * - run_key_skips.call_repeats: repeats of that call answered since, not counted.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table run_key_skips add column call_key text',
  'alter table run_key_skips add column call_at timestamptz',
  'alter table run_key_skips add column call_repeats int not null default 0',
];

export const migration0014: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
