/**
 * A store's events as the trail checks read them (trail-check.ts): every event once, its payload
 * parsed, one chain after another in seq order. Every change of an operation is told by an event
 * of its own, on its own chain (src/store/functions/README.md, "Events"), so each operation's
 * history is in order here, as the projection applies it.
 */

import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export interface TrailEvent {
  readonly type: string;
  readonly operationId: string | null;
  readonly payload: Record<string, unknown>;
}

/** Where the trail and the tables disagree about one operation (or one of its attempts). */
export interface TrailMismatch {
  readonly operationId: string;
  readonly problem: string;
  /** What the trail told of it, for the message. */
  readonly told: readonly string[];
}

/**
 * The events, or null for a store a test left unmigrated (or half-migrated on purpose): it has no
 * tables to hold to a trail.
 */
// biome-ignore lint/suspicious/noExplicitAny: any database shape
export async function readTrail(db: Kysely<any>): Promise<TrailEvent[] | null> {
  const { rows: ok } = await sql<{ ok: boolean }>`
    select to_regclass('operations') is not null and to_regclass('attempts') is not null
       and to_regclass('events') is not null as ok`.execute(db);
  if (ok[0]?.ok !== true) return null;
  const { rows } = await sql<{ type: string; operation_id: string | null; payload: string }>`
    select type, operation_id, payload from events order by chain, seq`.execute(db);
  return rows.map((r) => ({
    type: r.type,
    operationId: r.operation_id,
    payload: JSON.parse(r.payload) as Record<string, unknown>,
  }));
}
