import type pg from 'pg';
import type { PGliteLink } from './pglite-dialect.js';

/** How long one hot-path call (or one batch of them) may wait for the server's answer. */
export const HOT_CALL_TIMEOUT_MS = 10_000;

/** The two PL/pgSQL functions of the hot path (src/store/functions/eg_decide.sql, eg_record_outcome.sql). */
export type StoreFunction = 'eg_decide' | 'eg_record_outcome';

/** One hot-path call: its function and its input as JSON text. */
export interface HotCallText {
  readonly fn: StoreFunction;
  readonly input: string;
}

/**
 * Calls a hot-path function with its input, the cheapest way the driver offers: `one` sends
 * `select <fn>(<input as JSON text>)`, `many` sends `select eg_batch(<fns>, <inputs as one JSON array>)` (several
 * calls, proposals and outcomes alike, one round trip, one transaction, results in input order;
 * eg_batch.sql). Both are one round trip. group-commit.ts decides which one a call goes in.
 */
export interface HotSender {
  one(fn: StoreFunction, input: string): Promise<unknown>;
  many(calls: readonly HotCallText[]): Promise<readonly unknown[]>;
}

/**
 * eg_batch's first argument: the one function every call runs (`eg_decide`), or a JSON array of
 * each call's when they differ. Also the batch's name: `batch:eg_decide`, `batch:eg_record_outcome`
 * or `batch:mixed`, so a relay in a fault test can tell them apart.
 */
export function batchFunctions(calls: readonly HotCallText[]): {
  readonly fns: string;
  readonly name: string;
} {
  const first = calls[0]?.fn ?? 'eg_decide';
  if (calls.every((c) => c.fn === first)) return { fns: first, name: `batch:${first}` };
  return { fns: JSON.stringify(calls.map((c) => c.fn)), name: 'batch:mixed' };
}

/**
 * PostgreSQL: named prepared statements, so each pooled connection parses and plans
 * `select eg_…($1)` and `select eg_batch($1, $2)` once instead of on every call (kysely can only
 * send unnamed ones).
 */
export function preparedSender(pool: pg.Pool): HotSender {
  const run = async (name: string, text: string, values: unknown[]): Promise<unknown> => {
    const { rows } = await pool.query<{ result: unknown }>({
      name,
      text,
      values,
      // A call the server does not answer fails instead of holding its agent forever; the pool
      // drops the connection it errored on. Whether it committed is unknown to the gate, which is
      // why both functions are safe to call again (idempotent outcome, abandoned decide).
      query_timeout: HOT_CALL_TIMEOUT_MS,
    } as pg.QueryConfig);
    return rows[0]!.result;
  };
  return {
    one: (fn, input) => run(fn, `select ${fn}($1) as result`, [input]),
    many: async (calls) => {
      const { fns, name } = batchFunctions(calls);
      const inputs = jsonArray(calls.map((c) => c.input));
      return (await run(name, 'select eg_batch($1, $2) as result', [fns, inputs])) as unknown[];
    },
  };
}

/**
 * PGlite: the JSON inlined as escaped literals, no parameters, so PGlite uses the simple query
 * protocol: two calls into WASM (query, sync) instead of six (parse, describe, bind, describe,
 * execute, sync). Sent pipelined (PGliteLink.pipelined): ordered with every other statement on
 * the single connection, without holding it while it runs.
 */
export function inlineSender(link: PGliteLink): HotSender {
  const run = async (text: string): Promise<unknown> =>
    (await link.pipelined<{ result: unknown }>(text)).rows[0]!.result;
  return {
    one: (fn, input) => run(`select ${fn}(${textLiteral(input)}) as result`),
    many: async (calls) => {
      const { fns } = batchFunctions(calls);
      const inputs = jsonArray(calls.map((c) => c.input));
      return (await run(
        `select eg_batch(${textLiteral(fns)}, ${textLiteral(inputs)}) as result`,
      )) as unknown[];
    },
  };
}

/** The inputs (each one JSON text) as one JSON array, for eg_batch: joined, never re-encoded. */
export function jsonArray(inputs: readonly string[]): string {
  return `[${inputs.join(',')}]`;
}

/**
 * `text` as a PostgreSQL escape-string literal. E'' reads backslash escapes whatever
 * standard_conforming_strings says, so doubling every backslash and quote keeps any text inside
 * the literal; JSON.stringify never emits a raw NUL or control character.
 */
export function textLiteral(text: string): string {
  return `E'${text.replaceAll('\\', '\\\\').replaceAll("'", "''")}'`;
}
