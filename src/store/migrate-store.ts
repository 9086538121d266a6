import { type Kysely, type MigrationProvider, Migrator } from 'kysely';
import { effectgateVersion } from '../effectgate-version.js';
import { EffectgateError } from '../errors.js';
import {
  applyFunctions,
  FUNCTIONS_DIR,
  type FunctionDefinition,
  functionsChecksum,
  loadFunctions,
} from './functions/index.js';
import { migrationProvider } from './migrations/index.js';
import {
  newerStoreRefusal,
  type ReleaseMarks,
  readStoreMarks,
  refuseNewerStore,
} from './refuse-newer-store.js';
import { refuseRestoredStore } from './refuse-restored-store.js';
import type { Database } from './schema.js';

/** What one effectgate brings to a store: its version, its migrations, its function definitions. */
export interface StoreRelease {
  readonly version: string;
  readonly migrations: MigrationProvider;
  readonly functionsDir: URL;
}

/** This effectgate's release. Tests migrate with another one to stand in for a newer version. */
export function thisRelease(): StoreRelease {
  return { version: effectgateVersion(), migrations: migrationProvider, functionsDir: FUNCTIONS_DIR };
}

/** A release read: its marks and its definitions. */
async function readRelease(
  release: StoreRelease,
): Promise<{ readonly marks: ReleaseMarks; readonly definitions: readonly FunctionDefinition[] }> {
  const definitions = await loadFunctions(release.functionsDir);
  const migrations = Object.keys(await release.migrations.getMigrations()).sort();
  return {
    marks: { version: release.version, migrations, functionsChecksum: functionsChecksum(definitions) },
    definitions,
  };
}

/**
 * Refuses (`EG_ERR_STORE_SCHEMA_NEWER`) a store a newer effectgate migrated, without changing it:
 * for a gate that runs on a store without migrating it (`--no-migrate`, the inspection commands).
 */
export async function refuseNewerThan(
  db: Kysely<Database>,
  release: StoreRelease = thisRelease(),
): Promise<void> {
  await refuseNewerStore(db, (await readRelease(release)).marks);
}

/**
 * Applies the release's pending migrations, then its functions (functions/index.ts). A store a
 * newer effectgate migrated is refused before anything changes: first here, then again by the
 * functions step under its lock (a newer gate may migrate in between), and when kysely's migrator
 * fails, in case that is why ("corrupted migrations: previously executed migration … is missing").
 */
export async function migrateStore(
  db: Kysely<Database>,
  release: StoreRelease = thisRelease(),
): Promise<void> {
  const { marks, definitions } = await readRelease(release);
  await refuseNewerStore(db, marks);
  const migrator = new Migrator({ db, provider: release.migrations });
  let outcome: Awaited<ReturnType<Migrator['migrateToLatest']>>;
  try {
    outcome = await migrator.migrateToLatest();
  } catch (err) {
    outcome = { error: err };
  }
  if (outcome.error !== undefined) {
    const refusal = newerStoreRefusal(await readStoreMarks(db).catch(() => NO_MARKS), marks);
    if (refusal !== null) throw refusal;
    const failed = outcome.results?.find((r) => r.status === 'Error')?.migrationName;
    throw new EffectgateError(
      'EG_ERR_MIGRATION_FAILED',
      `Store migration ${failed ?? '(setup)'} failed: ${messageOf(outcome.error)}`,
      { cause: outcome.error },
    );
  }
  // Then the functions, on the schema the migrations just made.
  try {
    await applyFunctions(db, {
      definitions,
      version: release.version,
      lastMigration: marks.migrations.at(-1) ?? '',
      check: (trx) => refuseNewerStore(trx, marks),
    });
  } catch (err) {
    if (err instanceof EffectgateError) throw err;
    throw new EffectgateError(
      'EG_ERR_MIGRATION_FAILED',
      `Store functions (src/store/functions) failed: ${messageOf(err)}`,
      { cause: err },
    );
  }
  // Migrated or not, a store restored into another cluster must not take new events.
  await refuseRestoredStore(db);
}

/** A store whose marks could not be read after a failed migration: the failure speaks for itself. */
const NO_MARKS = {
  migrations: [],
  functionsChecksum: null,
  functionsVersion: null,
  functionsMigration: null,
} as const;

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
