import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0023: row_projection, each chain's frontier for the operation and attempt rows: the last seq
 * whose events those rows hold. From this version on the hot path no longer writes them (a fresh
 * operation, its first attempt, that attempt's outcome); eg_project_rows makes them from the
 * events, called by the projector in the background, by every reader before it reads, and by
 * every rare path before it reads or writes an operation's rows (eg_project_chain.sql).
 *
 * Its own table, not a column of event_projection: a rare path holds its chain's row here until it
 * commits (that lock is what keeps the projector from writing an operation's rows under it), and
 * the decisions' projection, which moves event_projection, must not wait behind it.
 *
 * Every chain starts at its head: the rows hold every committed event then, since the functions of
 * the previous version wrote them. An event of a previous version's function that commits after
 * this reads the head is projected once more, over the rows it wrote itself: eg_project_rows leaves
 * a row that is already there as it is and applies the event's changes again, which are the same.
 *
 * Schema only; the functions are in src/store/functions/. Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  `create table if not exists row_projection (
    chain int primary key,
    seq bigint not null check (seq >= 0)
  )`,
  'insert into row_projection (chain, seq) select id, last_seq from chain_head on conflict (chain) do nothing',
];

export const migration0023: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
