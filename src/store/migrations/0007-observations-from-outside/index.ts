import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0007: observations from outside the gate (docs/design.md §3): an operator's
 * decision that settles an unknown operation, a destination's callback, an agent's read-back and
 * an operator's note, each appended to its operation (eg_observation.sql).
 *
 * - observations.kind gains operator_decision, callback, read_back and operator_note.
 * - operations.window_ms: the tool's dedupe window when the operation was created (NULL for a
 *   permanent window, and for operations created before this migration, which are then kept as
 *   permanent), so an operator settling it as succeeded confirms its key for the same window the
 *   gate would have, without the policies.
 * - attempts_destination_ref_idx: a webhook knows the destination's reference (a refund's id),
 *   not our operation id; partial, so only outcomes that carry a reference pay for it.
 * - observations_destination_ref_idx: the same for a reference an observation brought (a
 *   callback or an operator told it, e.g. for an attempt whose response was lost).
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table observations drop constraint observations_kind_check',
  `alter table observations add constraint observations_kind_check check (kind in
    ('reconciliation', 'gate_restarted', 'outcome_lost', 'operator_decision', 'callback', 'read_back',
     'operator_note'))`,
  'alter table operations add column window_ms bigint',
  'create index attempts_destination_ref_idx on attempts (destination_ref) where destination_ref is not null',
  `create index observations_destination_ref_idx on observations ((facts ->> 'destinationRef'))
    where facts ? 'destinationRef'`,
];

export const migration0007: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
