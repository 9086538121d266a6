import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0005: an event append in one statement (docs/benchmarks.md). eg_append_event read the chain head with
 * `select ... for update` and then inserted the event and updated the head: two statements per
 * event, two events per governed allow. With these two columns one UPDATE of the head row takes
 * its lock, moves it and returns what the event row needs, and the INSERT of the event reads it
 * in the same statement (a data-modifying CTE).
 *
 * - chain_head.prev_hash: the hash before last_hash. Only an output of that UPDATE (it is set to
 *   the old last_hash on every append, so RETURNING can hand the old value to the INSERT); the
 *   verifier never reads it.
 * - chain_head.last_us: the last event's recorded_at_us. The append reads the clock before the
 *   lock and records greatest(clock, last_us), so time still never goes backwards along a chain
 *   (before, the clock was read after the lock). Started from each chain's last event.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table chain_head add column prev_hash text',
  'alter table chain_head add column last_us bigint not null default 0',
  `update chain_head h set prev_hash = e.prev_hash, last_us = e.recorded_at_us
    from events e where e.chain = h.id and e.seq = h.last_seq`,
];

export const migration0005: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
