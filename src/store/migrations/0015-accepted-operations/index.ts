import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0015: asynchronous acceptance. A destination that answers `202 Accepted` (or an MCP `tools/call`
 * answered with a task) took the work and has not done it yet: the effect may still happen, or
 * fail, later. Neither succeeded nor failed nor unknown (nothing was lost: the destination said
 * what it is doing).
 *
 * - operations.state gains accepted: the destination accepted the call; settled later by the
 *   tool's reconcile lookup, an observation posted to the admin API, or an operator's resolve.
 * - dedupe_keys.state gains accepted: the key stays reserved for that operation, never confirmed
 *   nor released by the acceptance, and never taken over when its pending_ttl runs out; a
 *   proposal for it meanwhile is answered pending, naming the operation and the destination's
 *   reference (dedupe_keys.destination_ref, set from Location or the tool's accepted_ref).
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table operations drop constraint operations_state_check',
  `alter table operations add constraint operations_state_check check (state in
    ('open', 'succeeded', 'failed', 'unknown', 'cancelled', 'duplicate_effect_confirmed', 'accepted'))`,
  'alter table dedupe_keys drop constraint dedupe_keys_state_check',
  `alter table dedupe_keys add constraint dedupe_keys_state_check check (state in
    ('pending', 'confirmed', 'unknown', 'released', 'awaiting_input', 'accepted'))`,
];

export const migration0015: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
