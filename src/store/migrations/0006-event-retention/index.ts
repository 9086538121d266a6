import { type Kysely, type Migration, sql } from 'kysely';

/*
 * 0006: retention of the event log (docs/design.md, `effectgate audit prune`). Old events can be archived as a verified
 * segment (`effectgate audit prune`) and removed from the store; each chain then starts after its
 * BASE, recorded in its head row, and is verified from there.
 *
 * - chain_head.base_seq / base_hash: the last removed event of the chain (0 and the genesis hash
 *   while nothing was removed). The first kept event has seq base_seq + 1 and prev_hash base_hash,
 *   and the archive that holds the removed ones ends with exactly that event.
 * - eg_events_append_only (the events table's trigger function, schema: see functions/README.md)
 *   still refuses every UPDATE and TRUNCATE, and every DELETE but one: an event at or below its
 *   chain's base, inside a transaction that set eg.pruning (eg_prune does both, in that order).
 *   A DELETE of any kept event is refused as before.
 *
 * Never edit once applied.
 */

const STATEMENTS: readonly string[] = [
  'alter table chain_head add column base_seq bigint not null default 0',
  `alter table chain_head add column base_hash text not null default repeat('0', 64)`,
  `create or replace function eg_events_append_only() returns trigger language plpgsql as $$
  begin
    if tg_op = 'DELETE' and current_setting('eg.pruning', true) = 'on'
        and old.seq <= (select base_seq from chain_head where id = old.chain) then
      return old;
    end if;
    raise exception 'effectgate: the events table is append-only (% refused)', tg_op
      using errcode = 'insufficient_privilege';
  end $$`,
];

export const migration0006: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    for (const statement of STATEMENTS) {
      await sql.raw(statement).execute(db);
    }
  },
};
