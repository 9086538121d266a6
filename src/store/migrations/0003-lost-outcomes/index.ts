import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0003: lost outcomes are unknown, never free keys (docs/design.md §2 and §3, and the
 * policy reference's `dedupe.pending_ttl` and `unknown` rows).
 *
 * - operations.unknown_rule: the tool's unknown-outcome rule (honored | reconcile | hold) recorded
 *   when the operation is created, so recovery (`effectgate recover`, a replica's sweep) knows
 *   what follows for every operation without the policies. NULL on operations created before.
 * - attempts.retry_decision gains curator_accepted_risk (`dedupe.on_expired: retry`).
 * - observations.kind gains outcome_lost (a reservation that expired without an outcome).
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  `alter table operations add column unknown_rule text check (unknown_rule in ('honored', 'reconcile', 'hold'))`,
  'alter table attempts drop constraint attempts_retry_decision_check',
  `alter table attempts add constraint attempts_retry_decision_check check (retry_decision in
    ('previous_attempt_failed', 'reservation_expired', 'destination_idempotency_honored', 'operator_approved',
     'curator_accepted_risk'))`,
  'alter table observations drop constraint observations_kind_check',
  `alter table observations add constraint observations_kind_check check (kind in
    ('reconciliation', 'gate_restarted', 'outcome_lost'))`,
];

export const migration0003: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
