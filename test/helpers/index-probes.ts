/**
 * How many index probes one call of a store function makes in each of some tables, counted around
 * the call in one statement: `pg_stat_get_xact_numscans` over each table's indexes, read before and
 * after it. Counts not yet flushed include earlier transactions' (statistics are flushed at most
 * once a second, never inside a statement), so only the difference is the call's. Used to hold a
 * hot path to the rows it may read: a probe is a read, or the lookup of the row a statement writes.
 */

import { type Kysely, sql } from 'kysely';
import type { Database } from '../../src/store/schema.js';

export interface Probed<T> {
  /** The function's answer, parsed from its JSON. */
  readonly answer: T;
  /** Index probes per table named. */
  readonly probes: Readonly<Record<string, number>>;
}

export async function callCountingProbes<T>(
  db: Kysely<Database>,
  fn: 'eg_decide' | 'eg_record_outcome',
  input: unknown,
  tables: readonly string[],
): Promise<Probed<T>> {
  const count = (table: string) =>
    sql`(select coalesce(sum(pg_stat_get_xact_numscans(indexrelid)), 0)::int from pg_index
         where indrelid = ${sql.raw(`'${table}'::regclass`)})`;
  const before = sql.join(tables.map((t, i) => sql`${count(t)} as ${sql.ref(`t${i}`)}`));
  const after = sql.join(
    tables.map((t, i) => sql`${count(t)} - b.${sql.ref(`t${i}`)} as ${sql.ref(`t${i}`)}`),
  );
  const { rows } = await sql<Record<string, number | string>>`
    with b as materialized (select ${before}),
      r as materialized (select ${sql.raw(fn)}(${JSON.stringify(input)}) as a from b)
    select r.a::text as answer, ${after}
    from r, b`.execute(db);
  const row = rows[0]!;
  return {
    answer: JSON.parse(String(row['answer'])) as T,
    probes: Object.fromEntries(tables.map((t, i) => [t, Number(row[`t${i}`])])),
  };
}
