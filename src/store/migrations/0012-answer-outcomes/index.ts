import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0012: an attempt records which rule of its tool's outcome contract decided its state, and the
 * destination's own error code. A destination that answers `200 {"ok": false}` (Slack) is read by
 * the tool's `outcome.failed_if`; without the rule in the trail, a `failed` attempt with status 200
 * would look like a contradiction.
 *
 * - attempts.outcome_rule: `status 201`, `failed_if $.ok == false`, `jsonrpc error`, `mcp isError`,
 *   `unreadable answer (not JSON)`… Attempts recorded before: null (their status decided).
 * - attempts.error_code: the value at the tool's `outcome.error_code` JSONPath when it is a short
 *   identifier (`not_in_channel`), never the destination's message, which may echo what was sent.
 *
 * Schema only; eg_record_outcome.sql writes them. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table attempts add column outcome_rule text',
  'alter table attempts add column error_code text',
];

export const migration0012: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
