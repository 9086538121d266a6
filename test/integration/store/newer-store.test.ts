/**
 * A gate of an older version meets a store a newer one migrated. The newer version is built for
 * real: this release's migrations and functions plus a test-only migration and function, applied
 * with migrateStore under a newer version number. The older gate (this code) must refuse to start,
 * say which migration or version it does not know and what to do, and leave the newer functions
 * in place: putting its own back would break the newer gates that call them.
 */
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Kysely, type Migration, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { effectgateVersion } from '../../../src/effectgate-version.js';
import { EffectgateError } from '../../../src/errors.js';
import {
  CHECKSUM_SETTING,
  FUNCTIONS_DIR,
  MIGRATION_SETTING,
  VERSION_SETTING,
} from '../../../src/store/functions/index.js';
import { migrateStore, type StoreRelease, thisRelease } from '../../../src/store/migrate-store.js';
import { migrationProvider } from '../../../src/store/migrations/index.js';
import { openKyselyStore } from '../../../src/store/open-store.js';
import type { Database } from '../../../src/store/schema.js';
import { openTestStore, type StoreTarget, storeTargets } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, reserve } from './inputs.js';

/** A version newer than this one, whatever this one is. */
const NEWER = `${Number(effectgateVersion().split('.')[0]) + 1}.0.0`;
const NEWER_MIGRATION = '9999-from-a-newer-gate';

const newerMigration: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await sql`create table newer_gate_table (n int)`.execute(db);
  },
};

/** This release's function files plus one only the newer version has. */
let newerFunctionsDir: URL;

beforeAll(async () => {
  const dir = await mkdtemp(join(tmpdir(), 'eg-newer-functions-'));
  for (const file of (await readdir(FUNCTIONS_DIR)).filter((f) => f.endsWith('.sql'))) {
    await copyFile(new URL(file, FUNCTIONS_DIR), join(dir, file));
  }
  await writeFile(
    join(dir, 'eg_newer_probe.sql'),
    "create or replace function eg_newer_probe() returns text language sql immutable as $$ select 'newer' $$;\n",
  );
  newerFunctionsDir = pathToFileURL(`${dir}/`);
});

afterAll(async () => {
  await rm(newerFunctionsDir, { recursive: true, force: true });
});

/** A newer effectgate: with a migration of its own, or with new function definitions only. */
function newerRelease(options: { readonly migration: boolean; readonly functions: boolean }): StoreRelease {
  const current = thisRelease();
  return {
    version: NEWER,
    functionsDir: options.functions ? newerFunctionsDir : current.functionsDir,
    migrations: {
      async getMigrations(): Promise<Record<string, Migration>> {
        const own = await migrationProvider.getMigrations();
        return options.migration ? { ...own, [NEWER_MIGRATION]: newerMigration } : own;
      },
    },
  };
}

async function marks(db: Kysely<Database>): Promise<Record<string, string>> {
  const rows = await db
    .selectFrom('settings')
    .select(['name', 'value'])
    .where('name', 'in', [VERSION_SETTING, MIGRATION_SETTING, CHECKSUM_SETTING])
    .execute();
  return Object.fromEntries(rows.map((r) => [r.name, r.value]));
}

/** The newer version's own function, as it answers; null once gone. */
async function newerProbe(db: Kysely<Database>): Promise<string | null> {
  const { rows } = await sql<{
    answer: string | null;
  }>`select case when to_regprocedure('eg_newer_probe()') is null then null else 'present' end as answer`.execute(
    db,
  );
  if (rows[0]?.answer === null) return null;
  return (await sql<{ answer: string }>`select eg_newer_probe() as answer`.execute(db)).rows[0]!.answer;
}

async function refusal(opening: Promise<unknown>): Promise<EffectgateError> {
  const err = await opening.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(EffectgateError);
  expect(err).toMatchObject({ code: 'EG_ERR_STORE_SCHEMA_NEWER' });
  return err as EffectgateError;
}

/**
 * A store at a URL this test can reopen, as a gate restarting would: an embedded store in its own
 * directory, or a fresh PostgreSQL database.
 */
async function reopenableStore(
  target: StoreTarget,
): Promise<{ readonly url: string; readonly dispose: () => Promise<void> }> {
  if (target.kind === 'pglite') {
    const dir = await mkdtemp(join(tmpdir(), 'eg-newer-store-'));
    return { url: `pglite:${dir}`, dispose: () => rm(dir, { recursive: true, force: true }) };
  }
  const holder = await openTestStore(target, { migrate: false });
  return { url: holder.url, dispose: () => holder.close() };
}

for (const target of storeTargets()) {
  describe(`a store a newer effectgate migrated, on ${target.name}`, () => {
    it('an older gate refuses to start on it, names the migration and the version, and leaves its functions', async () => {
      const { url, dispose } = await reopenableStore(target);
      try {
        // Migrated by this version, then by the newer one, which then stops.
        const first = await openKyselyStore({ url });
        let before: Record<string, string>;
        try {
          expect(await marks(first.db)).toMatchObject({
            [VERSION_SETTING]: effectgateVersion(),
            [MIGRATION_SETTING]: (await thisMigrations()).at(-1),
          });
          await migrateStore(first.db, newerRelease({ migration: true, functions: true }));
          expect(await newerProbe(first.db)).toBe('newer');
          expect(await marks(first.db)).toMatchObject({
            [VERSION_SETTING]: NEWER,
            [MIGRATION_SETTING]: NEWER_MIGRATION,
          });
          before = await marks(first.db);
        } finally {
          await first.close();
        }

        // This version starts again: migrating, and with --no-migrate.
        const started = await refusal(openKyselyStore({ url }));
        expect(started.message).toContain(`migration ${NEWER_MIGRATION}`);
        expect(started.message).toContain(`effectgate ${effectgateVersion()} does not know`);
        expect(started.message).toContain(`a newer effectgate (${NEWER})`);
        expect(started.message).toContain(`Upgrade it to effectgate ${NEWER} or later`);
        await refusal(openKyselyStore({ url, migrate: false, requireExisting: true }));

        // The newer version's functions and record are as it left them, and still answer.
        const after = await openKyselyStore({ url, migrate: false });
        try {
          expect(await newerProbe(after.db)).toBe('newer');
          expect(await marks(after.db)).toEqual(before);
          expectVerdict(await after.decide(reserve(newRun(), newKey())), 'allow');
          // The newer version itself still starts on it.
          await migrateStore(after.db, newerRelease({ migration: true, functions: true }));
          expect(await newerProbe(after.db)).toBe('newer');
        } finally {
          await after.close();
        }
      } finally {
        await dispose();
      }
      // Five starts of a real store, an embedded one booting each time.
    }, 120_000);

    it('refuses functions a newer version wrote even without a migration of its own, and keeps them', async () => {
      const store = await openTestStore(target);
      try {
        await migrateStore(store.db, newerRelease({ migration: false, functions: true }));
        const err = await refusal(store.migrate());
        expect(err.message).toContain(`SQL functions were written by effectgate ${NEWER}`);
        expect(err.message).toContain(`Upgrade it to effectgate ${NEWER} or later`);
        expect(await newerProbe(store.db)).toBe('newer');
        expect((await marks(store.db))[VERSION_SETTING]).toBe(NEWER);
      } finally {
        await store.close();
      }
    });

    it('starts on a store a newer version migrated with the same schema and functions, leaving its record', async () => {
      const store = await openTestStore(target);
      try {
        await migrateStore(store.db, newerRelease({ migration: false, functions: false }));
        const recorded = await marks(store.db);
        expect(recorded[VERSION_SETTING]).toBe(NEWER);
        await store.migrate();
        expect(await marks(store.db)).toEqual(recorded);
        expectVerdict(await store.decide(reserve(newRun(), newKey())), 'allow');
      } finally {
        await store.close();
      }
    });

    it('records itself on a store migrated before versions were recorded', async () => {
      const store = await openTestStore(target);
      try {
        await store.query(
          `delete from settings where name in ('${VERSION_SETTING}', '${MIGRATION_SETTING}')`,
        );
        await store.migrate();
        expect(await marks(store.db)).toMatchObject({
          [VERSION_SETTING]: effectgateVersion(),
          [MIGRATION_SETTING]: (await thisMigrations()).at(-1),
        });
      } finally {
        await store.close();
      }
    });
  });
}

async function thisMigrations(): Promise<string[]> {
  return Object.keys(await migrationProvider.getMigrations()).sort();
}
