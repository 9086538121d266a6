import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0024: every event gets the order the store itself gives it, beside its place in its hash chain:
 * - `tx`, the writer's top-level transaction id (`pg_current_xact_id()`, xid8), and
 * - `pos`, a number from the sequence `events_pos`, taken as the row is inserted.
 *
 * Why. Today a chain's head row is locked from an event's append to its commit (eg_append_event),
 * and that lock is what makes each chain's committed events a gap-free prefix the sealer and the
 * projection can read up to. The next versions read the order from these two columns instead,
 * without that lock: in batches by snapshot (the events one snapshot sees that the one before did
 * not, which is how PgQ reads its queues), and within a batch by `pos`.
 *
 * Why both columns. `tx` says which snapshot sees an event: an event is visible exactly when its
 * writer has committed, and the events of transactions below a snapshot's xmin can no longer
 * change. But tx order is not the order the writers saw each other in: a batch's transaction id is
 * taken at its first write, and it may then wait for a key another, younger transaction holds.
 * `pos` is: an event is inserted after every lock its call takes (eg_append_event is the last
 * statement of every function that writes, and a batch appends its events at its end), so an event
 * written after waiting for another transaction has a larger `pos` than every event that
 * transaction wrote (test/integration/store/event-order.test.ts). `cache 1`, the default, said on
 * purpose: a session that cached numbers would hand them out of order with the other sessions'.
 *
 * They are column defaults, so every insert gets them and no writer can forget them. Events
 * already there keep both null: they were written before the store gave an order, and their order
 * is their chain's. No index yet: nothing reads them until the projection and the sealer do.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'create sequence if not exists events_pos as bigint cache 1',
  // Nullable and added without a default, then given one: existing rows are not rewritten.
  'alter table events add column if not exists tx xid8, add column if not exists pos bigint',
  `alter table events alter column tx set default pg_current_xact_id(),
    alter column pos set default nextval('events_pos')`,
  'alter sequence events_pos owned by events.pos',
];

export const migration0024: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
