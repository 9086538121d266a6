import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0020: attempts.kept_state, the state an attempt's outcome reported when the unknown-outcome
 * rules kept its operation unknown instead (a retry's definite failure, or its request for more
 * input, while an earlier attempt may have done the effect). Null for every other attempt.
 *
 * An earlier attempt's late outcome can prove it was never sent (its decide's answer was lost, so
 * the gate sent nothing, and its not_sent waited in the outbox while the retry was made and
 * answered). When that was the last earlier attempt that might have done the effect, the retry's
 * own answer is the operation's after all: eg_record_outcome settles it from this column. The
 * column keeps that answer where the late outcome can read it by key, without searching the
 * events for the retry's outcome.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  // `if not exists`: a store rewound by hand to before an earlier migration runs this again.
  `alter table attempts add column if not exists kept_state text check (kept_state in ('failed', 'open'))`,
];

export const migration0020: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
