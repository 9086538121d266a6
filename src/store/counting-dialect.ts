import type {
  CompiledQuery,
  DatabaseConnection,
  DatabaseIntrospector,
  Dialect,
  DialectAdapter,
  Driver,
  Kysely,
  QueryCompiler,
  QueryResult,
  TransactionSettings,
} from 'kysely';

/*
 * Wraps any kysely dialect to count the statements sent to the database: the hot-path budget
 * (`decide` = 1 round trip, `recordOutcome` = 1) is asserted by tests from this counter, so it
 * counts at the lowest level kysely offers, transaction control statements included.
 */

/**
 * Ends the text of a statement that background work sends (the projector's rounds): counted in
 * `background`, not in `count`, so the budget of a call is asserted whatever a timer did meanwhile.
 */
export const BACKGROUND_STATEMENT = '/* background */';

export class RoundTripCounter {
  #count = 0;
  #background = 0;

  get count(): number {
    return this.#count;
  }

  get background(): number {
    return this.#background;
  }

  add(text = ''): void {
    if (text.endsWith(BACKGROUND_STATEMENT)) this.#background += 1;
    else this.#count += 1;
  }
}

class CountingConnection implements DatabaseConnection {
  readonly inner: DatabaseConnection;
  readonly #counter: RoundTripCounter;

  constructor(inner: DatabaseConnection, counter: RoundTripCounter) {
    this.inner = inner;
    this.#counter = counter;
  }

  executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    this.#counter.add(compiledQuery.sql);
    return this.inner.executeQuery<R>(compiledQuery);
  }

  streamQuery<R>(compiledQuery: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    this.#counter.add(compiledQuery.sql);
    return this.inner.streamQuery<R>(compiledQuery, chunkSize);
  }
}

class CountingDriver implements Driver {
  readonly #inner: Driver;
  readonly #counter: RoundTripCounter;
  // One wrapper per underlying connection, so the inner driver always gets back its own object.
  readonly #wrappers = new WeakMap<DatabaseConnection, CountingConnection>();

  constructor(inner: Driver, counter: RoundTripCounter) {
    this.#inner = inner;
    this.#counter = counter;
  }

  init(): Promise<void> {
    return this.#inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const inner = await this.#inner.acquireConnection();
    let wrapper = this.#wrappers.get(inner);
    if (!wrapper) {
      wrapper = new CountingConnection(inner, this.#counter);
      this.#wrappers.set(inner, wrapper);
    }
    return wrapper;
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    return this.#inner.releaseConnection(unwrap(connection));
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    this.#counter.add();
    return this.#inner.beginTransaction(unwrap(connection), settings);
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    this.#counter.add();
    return this.#inner.commitTransaction(unwrap(connection));
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    this.#counter.add();
    return this.#inner.rollbackTransaction(unwrap(connection));
  }

  async savepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    this.#counter.add();
    await this.#inner.savepoint?.(unwrap(connection), name, compile);
  }

  async rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    this.#counter.add();
    await this.#inner.rollbackToSavepoint?.(unwrap(connection), name, compile);
  }

  async releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compile: QueryCompiler['compileQuery'],
  ): Promise<void> {
    this.#counter.add();
    await this.#inner.releaseSavepoint?.(unwrap(connection), name, compile);
  }

  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}

function unwrap(connection: DatabaseConnection): DatabaseConnection {
  return connection instanceof CountingConnection ? connection.inner : connection;
}

export class CountingDialect implements Dialect {
  readonly #inner: Dialect;
  readonly #counter: RoundTripCounter;

  constructor(inner: Dialect, counter: RoundTripCounter) {
    this.#inner = inner;
    this.#counter = counter;
  }

  createDriver(): Driver {
    return new CountingDriver(this.#inner.createDriver(), this.#counter);
  }

  createAdapter(): DialectAdapter {
    return this.#inner.createAdapter();
  }

  createQueryCompiler(): QueryCompiler {
    return this.#inner.createQueryCompiler();
  }

  // biome-ignore lint/suspicious/noExplicitAny: kysely's Dialect signature takes Kysely<any>.
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return this.#inner.createIntrospector(db);
  }
}
