import {
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import type { EmbeddedPg, EmbeddedResult } from './pglite-worker.js';

/*
 * A kysely dialect over an embedded PGlite (run in a worker thread, see pglite-worker.ts). kysely
 * ships one only from 0.29 (Node 22), so this is the small part we need: PGlite speaks PostgreSQL,
 * so the adapter, query compiler and introspector are kysely's own PostgreSQL ones; only the
 * driver is new.
 *
 * PGlite is a single connection. kysely issues a transaction as BEGIN ... COMMIT on one acquired
 * connection, so the driver hands that connection to one holder at a time (a mutex): a query from
 * elsewhere waits instead of landing inside someone else's transaction.
 */

/** Serializes holders of the single PGlite connection, in arrival order. */
class Mutex {
  #tail: Promise<void> = Promise.resolve();

  /** Resolves, once the previous holder released, with the function that releases this hold. */
  lock(): Promise<() => void> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = this.#tail;
    this.#tail = previous.then(() => held);
    return previous.then(() => release);
  }
}

/**
 * The single PGlite connection and the mutex that hands it out, shared by the kysely driver and
 * the store's hot path.
 */
export class PGliteLink {
  readonly pglite: EmbeddedPg;
  readonly mutex = new Mutex();

  constructor(pglite: EmbeddedPg) {
    this.pglite = pglite;
  }

  /**
   * One autocommit statement, without parameters. It is SENT under the mutex, so it runs after
   * everything earlier holders sent (their transactions included) and before anything later; but
   * the mutex is released as soon as it is sent, not when it returns, since PGlite runs what it
   * receives one statement after another. So the next statements are already queued in the worker
   * when this one ends, and PGlite never idles waiting for the proxy's busy event loop.
   */
  async pipelined<R>(sql: string): Promise<EmbeddedResult<R>> {
    const release = await this.mutex.lock();
    let result: Promise<EmbeddedResult<R>>;
    try {
      result = this.pglite.exec<R>(sql);
    } finally {
      release();
    }
    return result;
  }
}

class PGliteConnection implements DatabaseConnection {
  readonly #pglite: EmbeddedPg;

  constructor(pglite: EmbeddedPg) {
    this.#pglite = pglite;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    // Without parameters, the simple query protocol: two calls into WASM (query, sync) instead of
    // the extended protocol's six (parse, describe, bind, describe, execute, sync).
    const result =
      compiledQuery.parameters.length === 0
        ? await this.#pglite.exec<R>(compiledQuery.sql)
        : await this.#pglite.query<R>(compiledQuery.sql, compiledQuery.parameters);
    return {
      rows: result.rows,
      ...(result.affectedRows === undefined ? {} : { numAffectedRows: BigInt(result.affectedRows) }),
    };
  }

  // PGlite has no server-side cursor API; the whole result is in memory anyway, hand it out in chunks.
  async *streamQuery<R>(
    compiledQuery: CompiledQuery,
    chunkSize = 100,
  ): AsyncIterableIterator<QueryResult<R>> {
    const { rows } = await this.executeQuery<R>(compiledQuery);
    for (let i = 0; i < rows.length; i += chunkSize) {
      yield { rows: rows.slice(i, i + chunkSize) };
    }
  }
}

class PGliteDriver implements Driver {
  readonly #pglite: EmbeddedPg;
  readonly #connection: PGliteConnection;
  readonly #mutex: Mutex;
  #release: (() => void) | undefined;

  constructor(link: PGliteLink) {
    this.#pglite = link.pglite;
    this.#mutex = link.mutex;
    this.#connection = new PGliteConnection(link.pglite);
  }

  async init(): Promise<void> {
    // Started (and ready) before the dialect is made.
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    this.#release = await this.#mutex.lock();
    return this.#connection;
  }

  async releaseConnection(): Promise<void> {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    let text = 'begin';
    if (settings.isolationLevel) text += ` isolation level ${settings.isolationLevel}`;
    if (settings.accessMode) text += ` ${settings.accessMode}`;
    await connection.executeQuery(CompiledQuery.raw(text));
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoteIdentifier(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${quoteIdentifier(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${quoteIdentifier(name)}`));
  }

  async destroy(): Promise<void> {
    // Wait for the current holder (an in-flight query or transaction) before closing under it.
    const release = await this.#mutex.lock();
    try {
      if (!this.#pglite.closed) await this.#pglite.close();
    } finally {
      release();
    }
  }
}

function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** kysely dialect over an embedded PGlite; destroying the Kysely instance closes it. */
export class PGliteDialect implements Dialect {
  readonly #link: PGliteLink;

  constructor(link: PGliteLink) {
    this.#link = link;
  }

  createDriver(): Driver {
    return new PGliteDriver(this.#link);
  }

  createAdapter(): DialectAdapter {
    return new PostgresAdapter();
  }

  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }

  // biome-ignore lint/suspicious/noExplicitAny: kysely's Dialect signature takes Kysely<any>.
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}
