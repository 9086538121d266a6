import { existsSync, realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Dialect, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { EffectgateError, StoreError } from '../errors.js';
import { CountingDialect, RoundTripCounter } from './counting-dialect.js';
import { groupCommit, PGLITE_GROUP_COMMIT, POSTGRES_GROUP_COMMIT } from './group-commit.js';
import { inlineSender, preparedSender } from './hot-call.js';
import { KyselyStore } from './kysely-store.js';
import { refuseNewerThan } from './migrate-store.js';
import { PGliteDialect, PGliteLink } from './pglite-dialect.js';
import { type DirLock, lockStoreDir } from './pglite-lock.js';
import { startPGliteWorker } from './pglite-worker.js';
import { refuseRestoredStore } from './refuse-restored-store.js';
import type { Database } from './schema.js';
import { connectStoreSocket, hasStoreSocket, STORE_SOCKET } from './store-socket.js';
import type { Store } from './types.js';

export interface OpenStoreOptions {
  /** `postgres://…` | `postgresql://…` | `pglite:<dir>` | `pglite:memory`; default `pglite:./.effectgate`. */
  readonly url?: string;
  /** Apply pending migrations on open (default true). */
  readonly migrate?: boolean;
  /**
   * With `migrate: false`: refuse (`EG_ERR_STORE_MISSING`) a store that does not exist yet or was
   * never migrated, instead of creating an empty one or failing later on a missing table, and
   * (`EG_ERR_STORE_SCHEMA_NEWER`) one a newer effectgate migrated, as `migrate: true` does.
   */
  readonly requireExisting?: boolean;
  /**
   * Opened by a gate, which writes events: with `migrate: false` too, refuse a store restored into
   * another PostgreSQL cluster (`EG_ERR_STORE_RESTORED`), as migrating always does. The inspection
   * commands read such a store.
   */
  readonly gate?: boolean;
}

export const DEFAULT_STORE_URL = 'pglite:./.effectgate';

/** Connections per gate process: enough for concurrent proposals, small enough for many replicas. */
const PG_POOL_MAX = 16;

/** How long a new PostgreSQL connection may take before the call fails with a store error. */
const PG_CONNECT_TIMEOUT_MS = 5_000;

/** The store URL to use: the `--store` flag, else `DATABASE_URL`, else the embedded default. */
export function resolveStoreUrl(flag?: string, env: NodeJS.ProcessEnv = process.env): string {
  if (flag !== undefined && flag !== '') return flag;
  const fromEnv = env['DATABASE_URL'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  return DEFAULT_STORE_URL;
}

/** Opens (and by default migrates) the store named by `url`. */
export function openStore(options: OpenStoreOptions = {}): Promise<Store> {
  return openKyselyStore(options);
}

/**
 * For inspection and approval commands: the store itself, or, when a running gate holds the
 * embedded store's directory lock, that gate's store socket (docs/design.md §4.4: these commands
 * never fail with "database locked"). Never migrates, and never creates a store: one that is not there
 * (a command run from another directory than the gate's) is `EG_ERR_STORE_MISSING`.
 */
export async function openInspectionStore(url: string): Promise<Store> {
  try {
    return await openKyselyStore({ url, migrate: false, requireExisting: true });
  } catch (err) {
    if (
      !(err instanceof EffectgateError && err.code === 'EG_ERR_STORE_LOCKED' && url.startsWith('pglite:'))
    ) {
      throw err;
    }
    const dir = embeddedStoreDir(url);
    if (dir === null || !hasStoreSocket(dir)) {
      throw new EffectgateError(
        'EG_ERR_STORE_LOCKED',
        `${err.message} It serves no store socket (${join(dir ?? '.', STORE_SOCKET)}) to inspect through: a gate serves it once it listens, and one that could not says why in its log ("no store socket").`,
        { cause: err },
      );
    }
    const remote = connectStoreSocket(dir);
    await remote.ping();
    return remote;
  }
}

/** Where to point a command that found no store (the flag, the variable, the default). */
const POINT_AT_STORE =
  "run the command from the directory the gate was started in, or name the gate's store with --store pglite:DIR or --store postgres://… (or DATABASE_URL)";

/** A `pglite:DIR` whose database was never created: opening it would create an empty one. */
function refuseMissingEmbedded(url: string): void {
  const location = url.startsWith('pglite:') ? url.slice('pglite:'.length) : '';
  if (location === '' || location === 'memory') return;
  const dir = resolve(location);
  if (!existsSync(join(dir, 'pgdata'))) {
    throw new EffectgateError(
      'EG_ERR_STORE_MISSING',
      `No embedded store at ${dir} (store ${url}): ${POINT_AT_STORE}. Nothing was created.`,
    );
  }
}

/** A database the gate never migrated (an empty PostgreSQL database, a proxy run with --no-migrate). */
async function refuseUnmigrated(store: KyselyStore, url: string): Promise<void> {
  const { rows } = await sql<{ ok: boolean }>`select to_regclass('operations') is not null as ok`.execute(
    store.db,
  );
  if (rows[0]?.ok !== true) {
    throw new EffectgateError(
      'EG_ERR_STORE_MISSING',
      `The store ${redactUrl(url)} was never migrated (it has no effectgate tables): start the gate on it without --no-migrate, or run effectgate migrate --store …; or ${POINT_AT_STORE}.`,
    );
  }
}

/** A store URL without its password, for messages. */
function redactUrl(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:/@]*):[^@/]*@/i, '$1:***@');
}

/** The real directory of a `pglite:DIR` store URL; `null` for `pglite:memory` or a missing one. */
export function embeddedStoreDir(url: string): string | null {
  const location = url.startsWith('pglite:') ? url.slice('pglite:'.length) : '';
  if (location === '' || location === 'memory') return null;
  try {
    return realpathSync(resolve(location));
  } catch {
    return null;
  }
}

/** `openStore`, typed as the implementation (its `db` is used by maintenance commands and tests). */
export async function openKyselyStore(options: OpenStoreOptions = {}): Promise<KyselyStore> {
  const url = options.url ?? DEFAULT_STORE_URL;
  const migrate = options.migrate ?? true;
  if (!migrate && options.requireExisting === true) refuseMissingEmbedded(url);
  const counter = new RoundTripCounter();
  let store: KyselyStore;
  if (/^postgres(ql)?:\/\//i.test(url)) {
    const pool = postgresPool(url);
    const db = kysely(new PostgresDialect({ pool }), counter);
    const hot = groupCommit(preparedSender(pool), counter, POSTGRES_GROUP_COMMIT);
    store = new KyselyStore({ kind: 'postgres', db, counter, hot });
  } else if (url.startsWith('pglite:')) {
    store = await openPGlite(url.slice('pglite:'.length), counter);
  } else {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      `Unsupported store URL "${url.split(':')[0]}:…": use postgres://…, postgresql://…, pglite:<dir> or pglite:memory.`,
    );
  }
  try {
    // Reachability first, so an unreachable server reads as EG_ERR_STORE_UNAVAILABLE, not as a
    // failed migration.
    await store.ping();
    if (migrate) await store.migrate();
    else if (options.requireExisting === true) {
      await refuseUnmigrated(store, url);
      // A gate that does not migrate (--no-migrate, the inspection commands) changes nothing, but
      // would still run this version's queries and calls against a newer schema.
      await refuseNewerThan(store.db);
      if (options.gate === true) await refuseRestoredStore(store.db);
    }
  } catch (err) {
    await store.close().catch(() => undefined);
    throw err;
  }
  return store;
}

function kysely(dialect: Dialect, counter: RoundTripCounter): Kysely<Database> {
  return new Kysely<Database>({ dialect: new CountingDialect(dialect, counter) });
}

function postgresPool(url: string): pg.Pool {
  // A store that stops answering (a dropped route, a frozen server) must fail calls, not hang the
  // agents behind them: bounded connects, TCP keep-alive on pooled connections, and a read timeout
  // on the hot path (hot-call.ts). The reservation protocol makes a failed call safe either way.
  const pool = new pg.Pool({
    connectionString: url,
    max: PG_POOL_MAX,
    connectionTimeoutMillis: PG_CONNECT_TIMEOUT_MS,
    keepAlive: true,
  });
  // An idle client dropped by the server emits 'error' on the pool; unhandled, that would kill the
  // process. The pool discards that client and the next query reports any real outage.
  pool.on('error', () => undefined);
  // A client whose connection dies while it is checked out (mid-query: a reset, a cut relay, a
  // server restart) emits 'error' on itself, where the pool does not listen. The query it was
  // running rejects on its own, so this listener only keeps the process alive (a
  // flapping store once killed the gate this way).
  pool.on('connect', (client) => {
    client.on('error', () => undefined);
  });
  return pool;
}

async function openPGlite(location: string, counter: RoundTripCounter): Promise<KyselyStore> {
  if (location === 'memory') {
    const link = new PGliteLink(await startPGliteWorker(undefined));
    const db = kysely(new PGliteDialect(link), counter);
    const hot = groupCommit(inlineSender(link), counter, PGLITE_GROUP_COMMIT);
    return new KyselyStore({ kind: 'pglite', db, counter, hot });
  }
  if (location === '') {
    throw new EffectgateError(
      'EG_ERR_CONFIG_INVALID',
      'Store URL "pglite:" needs a directory, e.g. pglite:./.effectgate',
    );
  }
  const lock: DirLock = lockStoreDir(resolve(location));
  try {
    // The database files live in a subdirectory so the store directory can also hold the lock
    // file (and whatever else the gate keeps beside its store) without confusing PostgreSQL.
    const link = new PGliteLink(await startPGliteWorker(resolve(lock.dir, 'pgdata')));
    const db = kysely(new PGliteDialect(link), counter);
    const hot = groupCommit(inlineSender(link), counter, PGLITE_GROUP_COMMIT);
    return new KyselyStore({
      kind: 'pglite',
      db,
      counter,
      hot,
      onClose: () => lock.release(),
      dir: lock.dir,
    });
  } catch (err) {
    lock.release();
    throw new StoreError(`Could not open the embedded store in ${lock.dir}`, { cause: err });
  }
}
