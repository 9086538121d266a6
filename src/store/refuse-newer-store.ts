import { type Kysely, sql } from 'kysely';
import { EffectgateError } from '../errors.js';
import { compareVersions } from './compare-versions.js';
import { CHECKSUM_SETTING, MIGRATION_SETTING, VERSION_SETTING } from './functions/index.js';
import type { Database } from './schema.js';

/** What one effectgate brings to a store: the marks it compares with the store's. */
export interface ReleaseMarks {
  /** Its version (package.json). */
  readonly version: string;
  /** The names of its migrations. */
  readonly migrations: readonly string[];
  /** The checksum of its function definitions (functions/index.ts). */
  readonly functionsChecksum: string;
}

/** What a store says about who migrated it; each `null` when it has no such record yet. */
export interface StoreMarks {
  /** The migrations kysely_migration records as applied, in name order. */
  readonly migrations: readonly string[];
  readonly functionsChecksum: string | null;
  /** The newest effectgate that migrated the store (functions/index.ts, VERSION_SETTING). */
  readonly functionsVersion: string | null;
  /** The newest migration that effectgate had. */
  readonly functionsMigration: string | null;
}

/** Where the refusal sends the reader: the upgrade procedure. */
const SEE = 'docs/many-replicas.md, "Upgrades"';

/** The store's marks; a store never migrated (no kysely_migration, no settings) has none. */
export async function readStoreMarks(db: Kysely<Database>): Promise<StoreMarks> {
  const { rows } = await sql<{
    migrated: boolean;
    settings: boolean;
  }>`select to_regclass('kysely_migration') is not null as migrated, to_regclass('settings') is not null as settings`.execute(
    db,
  );
  const found = rows[0];
  const migrations =
    found?.migrated === true
      ? (await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db)).rows.map(
          (r) => r.name,
        )
      : [];
  const settings = new Map(
    found?.settings === true
      ? (
          await db
            .selectFrom('settings')
            .select(['name', 'value'])
            .where('name', 'in', [CHECKSUM_SETTING, VERSION_SETTING, MIGRATION_SETTING])
            .execute()
        ).map((r) => [r.name, r.value])
      : [],
  );
  return {
    migrations,
    functionsChecksum: settings.get(CHECKSUM_SETTING) ?? null,
    functionsVersion: settings.get(VERSION_SETTING) ?? null,
    functionsMigration: settings.get(MIGRATION_SETTING) ?? null,
  };
}

/**
 * Why this effectgate must not run on the store, or `null` when it may: the store has a migration
 * it does not know (kysely's migrator would only say "corrupted migrations"), or its functions
 * were written by a newer effectgate and differ from this one's (putting this one's back would
 * break the newer gates that call them). The same functions under a newer version are no reason:
 * the schema is one this gate knows and the functions are its own.
 */
export function newerStoreRefusal(store: StoreMarks, own: ReleaseMarks): EffectgateError | null {
  const known = new Set(own.migrations);
  const unknown = store.migrations.filter((m) => !known.has(m));
  // The record names the newest effectgate that migrated; it names the one that applied an
  // unknown migration only if it has that migration (a newer gate whose functions step failed
  // left an older record).
  const by =
    store.functionsVersion !== null &&
    store.functionsMigration !== null &&
    unknown.includes(store.functionsMigration)
      ? store.functionsVersion
      : null;
  if (unknown.length > 0) {
    return new EffectgateError(
      'EG_ERR_STORE_SCHEMA_NEWER',
      `The store was migrated by a newer effectgate${by === null ? '' : ` (${by})`} than this one (${own.version}): it has migration${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}, which effectgate ${own.version} does not know (its newest is ${own.migrations.at(-1) ?? 'none'}). This gate changed nothing in the store and does not start. Upgrade it to effectgate ${by ?? 'the version that migrated the store'} or later (${SEE}).`,
    );
  }
  const v = store.functionsVersion;
  if (
    v !== null &&
    store.functionsChecksum !== null &&
    store.functionsChecksum !== own.functionsChecksum &&
    compareVersions(v, own.version) > 0
  ) {
    return new EffectgateError(
      'EG_ERR_STORE_SCHEMA_NEWER',
      `The store's SQL functions were written by effectgate ${v}, newer than this one (${own.version}), and differ from this gate's: putting these back would break the gates of effectgate ${v} that call them. This gate changed nothing in the store and does not start. Upgrade it to effectgate ${v} or later (${SEE}).`,
    );
  }
  return null;
}

/** Throws `newerStoreRefusal`'s error, if any, for the store `db` reaches. */
export async function refuseNewerStore(db: Kysely<Database>, own: ReleaseMarks): Promise<void> {
  const refusal = newerStoreRefusal(await readStoreMarks(db), own);
  if (refusal !== null) throw refusal;
}
