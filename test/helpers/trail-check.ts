/**
 * The check every test store makes as it closes (store.ts): the trail must agree with the tables.
 * The events are read once; the state changes they state must chain to each operation's state
 * (trail-states.ts), and the operation and attempt rows they make must equal the rows the store
 * wrote (rows-from-events.ts).
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { rowMismatches, rowsFromEvents } from './rows-from-events.js';
import { readTrail, type TrailMismatch } from './trail-events.js';
import { stateMismatches, toldStateChanges } from './trail-states.js';

// biome-ignore lint/suspicious/noExplicitAny: any database shape
export async function trailMismatches(db: Kysely<any>): Promise<TrailMismatch[]> {
  const events = await readTrail(db);
  if (events === null) return [];
  const told = toldStateChanges(events);
  const ops = (await sql<{ id: string; state: string }>`select id, state from operations`.execute(db)).rows;
  return [...stateMismatches(ops, told), ...(await rowMismatches(db, rowsFromEvents(events, told)))];
}
