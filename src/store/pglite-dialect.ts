import type { PGlite } from '@electric-sql/pglite';
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

/*
 * A kysely dialect over an embedded PGlite instance. kysely ships one only from 0.29 (Node 22),
 * so this is the small part we need: PGlite speaks PostgreSQL, so the adapter, query compiler and
 * introspector are kysely's own PostgreSQL ones; only the driver is new.
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

class PGliteConnection implements DatabaseConnection {
  readonly #pglite: PGlite;

  constructor(pglite: PGlite) {
    this.#pglite = pglite;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.#pglite.query<R>(compiledQuery.sql, [...compiledQuery.parameters], {
      rowMode: 'object',
    });
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
  readonly #pglite: PGlite;
  readonly #connection: PGliteConnection;
  readonly #mutex = new Mutex();
  #release: (() => void) | undefined;

  constructor(pglite: PGlite) {
    this.#pglite = pglite;
    this.#connection = new PGliteConnection(pglite);
  }

  async init(): Promise<void> {
    await this.#pglite.waitReady;
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

/** kysely dialect over a PGlite instance; destroying the Kysely instance closes PGlite. */
export class PGliteDialect implements Dialect {
  readonly #pglite: PGlite;

  constructor(pglite: PGlite) {
    this.#pglite = pglite;
  }

  createDriver(): Driver {
    return new PGliteDriver(this.#pglite);
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
