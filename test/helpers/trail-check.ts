/**
 * The check every test store makes as it closes (store.ts): the trail must agree with the tables.
 * The events are read once; the state changes they state must chain to each operation's state
 * (trail-states.ts), and the operation and attempt rows they make must equal the rows the store
 * holds (rows-from-events.ts), and so must the rows the store's own projection makes from them
 * (projected-rows.ts). And each key row's copy of its operation's state (migration 0021)
 * must be that operation's state, and its lost-attempt mark (migration 0022) must name its attempt
 * exactly when an expiry or a recovery marked that attempt.
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { projectedRowMismatches } from './projected-rows.js';
import { rowMismatches, rowsFromEvents } from './rows-from-events.js';
import { readTrail, type TrailMismatch } from './trail-events.js';
import { stateMismatches, toldStateChanges } from './trail-states.js';

// biome-ignore lint/suspicious/noExplicitAny: any database shape
export async function trailMismatches(db: Kysely<any>): Promise<TrailMismatch[]> {
  const events = await readTrail(db);
  if (events === null) return [];
  const told = toldStateChanges(events);
  const ops = (await sql<{ id: string; state: string }>`select id, state from operations`.execute(db)).rows;
  return [
    ...stateMismatches(ops, told),
    ...(await rowMismatches(db, rowsFromEvents(events, told))),
    ...(await keyStateMismatches(db)),
    ...(await lostMarkMismatches(db)),
    ...(await projectedRowMismatches(db)),
  ];
}

/** Keys whose operation_state is not their operation's state; none on a store before migration 0021. */
// biome-ignore lint/suspicious/noExplicitAny: any database shape
async function keyStateMismatches(db: Kysely<any>): Promise<TrailMismatch[]> {
  const { rows: has } = await sql<{ n: number }>`
    select count(*)::int as n from information_schema.columns
    where table_name = 'dedupe_keys' and column_name = 'operation_state'`.execute(db);
  if (has[0]?.n !== 1) return [];
  const { rows } = await sql<{ key_hash: string; operation_id: string; copy: string | null; state: string }>`
    select k.key_hash, k.operation_id, k.operation_state as copy, o.state from dedupe_keys k
    join operations o on o.id = k.operation_id where k.operation_state is distinct from o.state`.execute(db);
  return rows.map((r) => ({
    operationId: r.operation_id,
    problem: `its key ${r.key_hash} says the operation is ${r.copy ?? 'null'}, the operation row says ${r.state}`,
    told: [],
  }));
}

/** Keys whose lost-attempt mark disagrees with their attempt's row; none before migration 0022. */
// biome-ignore lint/suspicious/noExplicitAny: any database shape
async function lostMarkMismatches(db: Kysely<any>): Promise<TrailMismatch[]> {
  const { rows: has } = await sql<{ n: number }>`
    select count(*)::int as n from information_schema.columns
    where table_name = 'dedupe_keys' and column_name = 'lost_attempt_id'`.execute(db);
  if (has[0]?.n !== 1) return [];
  const { rows } = await sql<{ key_hash: string; operation_id: string; marked: boolean }>`
    select k.key_hash, k.operation_id, k.lost_attempt_id is not distinct from k.attempt_id as marked
    from dedupe_keys k join attempts a on a.id = k.attempt_id
    where (k.lost_attempt_id is not distinct from k.attempt_id) <> (a.recovered_at is not null)`.execute(db);
  return rows.map((r) => ({
    operationId: r.operation_id,
    problem: r.marked
      ? `its key ${r.key_hash} marks its attempt lost, but no expiry or recovery marked that attempt`
      : `its key ${r.key_hash} does not mark its attempt lost, but an expiry or a recovery marked it`,
    told: [],
  }));
}
