import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0013: the idempotency key each attempt sent. The key was the operation id and nothing else, so
 * it was not recorded; now a tool's dialect may shorten it (max_length), and the agent's own key
 * may be kept or replaced (agent_key), so the trail records what went out and what the agent sent.
 *
 * - attempts.idempotency_key: the key this attempt sent (the agent's own when kept); null when
 *   none was sent. Attempts recorded before: null (they sent their operation id when the
 *   operation has an idempotency_header; eg_insert_attempt falls back to that for their retries).
 * - attempts.agent_idempotency_key: the key the agent sent itself, at most 255 characters.
 * - attempts.gate_idempotency_key: the gate's key for the operation (its id, or a SHA-256 prefix).
 * - attempts.replayed (0001) already says whether the destination answered a replay.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table attempts add column idempotency_key text',
  'alter table attempts add column agent_idempotency_key text',
  'alter table attempts add column gate_idempotency_key text',
  `alter table attempts add constraint attempts_agent_idempotency_key_len
    check (char_length(agent_idempotency_key) <= 255)`,
];

export const migration0013: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
