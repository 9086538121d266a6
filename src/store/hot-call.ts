import type pg from 'pg';
import type { RoundTripCounter } from './counting-dialect.js';
import type { PGliteLink } from './pglite-dialect.js';

/** How long one hot-path call may wait for the server's answer. */
export const HOT_CALL_TIMEOUT_MS = 10_000;

/** The two PL/pgSQL functions of the hot path (src/store/functions/eg_decide.sql, eg_record_outcome.sql). */
export type StoreFunction = 'eg_decide' | 'eg_record_outcome';

/**
 * Runs `select <fn>(<input as JSON text>)` in ONE round trip and returns the function's result,
 * the cheapest way the driver offers. Every other query goes through kysely as usual.
 */
export type HotCall = (fn: StoreFunction, input: unknown) => Promise<unknown>;

/**
 * PostgreSQL: a named prepared statement per function, so each pooled connection parses and plans
 * `select eg_…($1)` once instead of on every call (kysely can only send unnamed ones).
 */
export function preparedHotCall(pool: pg.Pool, counter: RoundTripCounter): HotCall {
  return async (fn, input) => {
    counter.add();
    const { rows } = await pool.query<{ result: unknown }>({
      name: fn,
      text: `select ${fn}($1) as result`,
      values: [JSON.stringify(input)],
      // A call the server does not answer fails instead of holding its agent forever; the pool
      // drops the connection it errored on. Whether it committed is unknown to the gate, which is
      // why both functions are safe to call again (idempotent outcome, abandoned decide).
      query_timeout: HOT_CALL_TIMEOUT_MS,
    } as pg.QueryConfig);
    return rows[0]!.result;
  };
}

/**
 * PGlite: the JSON inlined as an escaped literal, no parameters, so PGlite uses the simple query
 * protocol: two calls into WASM (query, sync) instead of six (parse, describe, bind, describe,
 * execute, sync). Sent pipelined (PGliteLink.pipelined): ordered with every other statement on
 * the single connection, without holding it while it runs.
 */
export function inlineHotCall(link: PGliteLink, counter: RoundTripCounter): HotCall {
  return async (fn, input) => {
    counter.add();
    const { rows } = await link.pipelined<{ result: unknown }>(
      `select ${fn}(${jsonLiteral(input)}) as result`,
    );
    return rows[0]!.result;
  };
}

/**
 * `input` as a PostgreSQL escape-string literal. E'' reads backslash escapes whatever
 * standard_conforming_strings says, so doubling every backslash and quote keeps any text inside
 * the literal; JSON.stringify never emits a raw NUL or control character.
 */
export function jsonLiteral(input: unknown): string {
  const json = JSON.stringify(input);
  return `E'${json.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}
