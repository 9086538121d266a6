import { type Kysely, sql } from 'kysely';
import { BACKGROUND_STATEMENT } from './counting-dialect.js';
import { jsonResult } from './json-result.js';
import type { Database } from './schema.js';
import type { ProjectionRound } from './types.js';

/*
 * The projection's statements (KyselyStore delegates to these): eg_project folds committed events
 * onto the tables made from them (`decisions`, `operations`, `attempts`; migrations 0019, 0023).
 * The gate's projector calls it
 * in the background; every reader of a projected table catches up first, so what it reads holds
 * every fact committed before it asked. Neither is on the hot path.
 */

/** Events one round takes: a round stays well under a second on either store. */
export const PROJECTION_LIMIT = 5000;
/** Rounds a catching-up reader runs at most: 5,000 × 256 = 1.28M events behind. */
const CATCH_UP_ROUNDS = 256;

export async function projectEvents(
  db: Kysely<Database>,
  limit: number,
  wait: boolean,
): Promise<ProjectionRound> {
  const { rows } = await sql<{
    result: string | { events: number; more: boolean; busy: boolean };
  }>`select eg_project(${limit}::int, ${wait}::boolean) as result ${sql.raw(wait ? '' : BACKGROUND_STATEMENT)}`.execute(
    db,
  );
  const r = rows[0] === undefined ? undefined : jsonResult(rows[0].result);
  return Object.freeze({
    events: Number(r?.events ?? 0),
    more: r?.more === true,
    busy: r?.busy === true,
  });
}

/**
 * Brings the projection up to date before a read: waits for a round another process runs, then
 * projects what is left. Bounded: a projection too far behind to finish here throws rather than
 * answering from a table that misses facts.
 */
export async function catchUp(db: Kysely<Database>): Promise<void> {
  for (let round = 0; round < CATCH_UP_ROUNDS; round++) {
    const r = await projectEvents(db, PROJECTION_LIMIT, true);
    if (!r.more) return;
  }
  throw new Error(
    `the projection is more than ${CATCH_UP_ROUNDS} rounds behind the events; is the gate's projector running?`,
  );
}

/**
 * Brings one operation's rows up to date before they are read (eg_project_operation.sql), so
 * reading one operation waits for no other operation and no projector round.
 */
export async function catchUpOperation(db: Kysely<Database>, operationId: string): Promise<void> {
  await sql`select eg_project_operation(${operationId})`.execute(db);
}
