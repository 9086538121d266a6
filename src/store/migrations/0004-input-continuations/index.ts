import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0004: MCP multi-round-trip calls (docs/design.md §4.1, MCP and JSON-RPC tools). A
 * `tools/call` answered `resultType: "input_required"` did not run: the tool asks for input and
 * the client sends the same call again with `inputResponses`. That continuation is the same
 * operation, not a duplicate and not a retry of a failure.
 *
 * - dedupe_keys.state gains awaiting_input: the key's latest attempt was answered input_required;
 *   the operation stays open and the next proposal for the same request continues it.
 * - dedupe_keys.input_rounds: how many of the key's attempts were such continuations. They do not
 *   spend the retry budget (`attempt_number - input_rounds` does).
 * - attempts.retry_reason gains input_required and attempts.retry_decision input_continuation:
 *   the later attempt's parent asked for input.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table dedupe_keys drop constraint dedupe_keys_state_check',
  `alter table dedupe_keys add constraint dedupe_keys_state_check check (state in
    ('pending', 'confirmed', 'unknown', 'released', 'awaiting_input'))`,
  'alter table dedupe_keys add column input_rounds int not null default 0',
  'alter table attempts drop constraint attempts_retry_reason_check',
  `alter table attempts add constraint attempts_retry_reason_check check (retry_reason in
    ('connection_not_established', 'rate_limited', 'destination_5xx', 'response_lost_after_dispatch',
     'credential_refreshed', 'operator_requested', 'input_required'))`,
  'alter table attempts drop constraint attempts_retry_decision_check',
  `alter table attempts add constraint attempts_retry_decision_check check (retry_decision in
    ('previous_attempt_failed', 'reservation_expired', 'destination_idempotency_honored', 'operator_approved',
     'curator_accepted_risk', 'input_continuation'))`,
];

export const migration0004: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
