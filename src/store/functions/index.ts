import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { type Kysely, sql, type Transaction } from 'kysely';
import { compareVersions } from '../compare-versions.js';
import type { Database } from '../schema.js';

/*
 * The functions step: the store's SQL functions are not migrations but repeatable definitions,
 * one file each in this folder (README.md), applied after the schema migrations. Migrations hold
 * the schema and never change once applied; a function's file always holds its current
 * definition, so changing a function is editing its file, and reading one is opening one file.
 *
 * The files are read at run time from beside this module: from src/ under a test runner, and from
 * dist/, where `npm run build` copies them (scripts/copy-sql.mjs; tsc copies no .sql). A bundled
 * CLI would have to ship them beside its bundle the same way.
 */

export const FUNCTIONS_DIR: URL = new URL('./', import.meta.url);

/**
 * The eg_ functions that are schema, not definitions here: an append-only trigger needs its
 * function to exist, so the migration that made the table creates it (events: 0001-initial;
 * audit_checkpoints: 0018-audit-checkpoints) and this step never drops them.
 */
export const TRIGGER_FUNCTIONS: readonly string[] = [
  'eg_events_append_only',
  'eg_audit_checkpoints_append_only',
];
/** The events table's trigger function, the first of TRIGGER_FUNCTIONS. */
export const TRIGGER_FUNCTION = 'eg_events_append_only';

/** The `settings` row holding the checksum of the definitions last applied. */
export const CHECKSUM_SETTING = 'functions_checksum';

/**
 * The `settings` rows naming the newest effectgate that migrated the store, whose definitions the
 * live functions are: its version, and the newest migration it has (its migration set is every
 * migration up to that one). An older gate reads them to refuse the store (refuse-newer-store.ts)
 * instead of putting its own, older functions back.
 */
export const VERSION_SETTING = 'functions_version';
export const MIGRATION_SETTING = 'functions_migration';

/**
 * Created before the others, in this order. A `language sql` body is checked when it is created,
 * so the functions it calls must exist already; a plpgsql body's calls are resolved only when it
 * runs, so the rest need no order. `eg_call_repeat` calls `eg_call_key`, and `eg_projected_seq`
 * calls `eg_unseen_events`, each created first for it (eg_ms stays first for the next one that
 * needs it). A function missing here that should
 * be in it fails every fresh store's migrate with "function … does not exist".
 */
const CREATED_FIRST: readonly string[] = ['eg_ms', 'eg_call_key', 'eg_unseen_events'];

/**
 * Run after the definitions, in their transaction: brings the facts key rows copy from other rows
 * up to date, over what the previous definitions wrote while they were live (eg_sync_heads.sql).
 */
const SYNC_FUNCTION = 'eg_sync_heads';

/** Any fixed number, taken by this step only: 'egfn' in ASCII. */
const LOCK_KEY = 0x6567666e;

export interface FunctionDefinition {
  /** The function's name, which is its file's name. */
  readonly name: string;
  /** The file's text: one `create or replace function` statement, with its header comment. */
  readonly sql: string;
}

/** Every definition in the folder, in creation order. */
export async function loadFunctions(dir: URL = FUNCTIONS_DIR): Promise<FunctionDefinition[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const definitions = await Promise.all(
    files.map(async (file): Promise<FunctionDefinition> => {
      const name = file.slice(0, -'.sql'.length);
      const text = await readFile(new URL(file, dir), 'utf8');
      // A file named after another function would leave its namesake undefined and redefine the
      // other one: say so at once.
      const defined = /^create or replace function (\w+)\(/m.exec(text)?.[1];
      if (defined !== name) {
        throw new Error(`${file} must define function ${name}, not ${defined ?? 'none'}`);
      }
      return { name, sql: text };
    }),
  );
  const rank = (name: string): number => {
    const i = CREATED_FIRST.indexOf(name);
    return i === -1 ? CREATED_FIRST.length : i;
  };
  return definitions.sort((a, b) => rank(a.name) - rank(b.name) || (a.name < b.name ? -1 : 1));
}

/** sha256 over every file's name and text, in name order (not creation order). */
export function functionsChecksum(definitions: readonly FunctionDefinition[]): string {
  const hash = createHash('sha256');
  for (const d of [...definitions].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    hash.update(d.name).update('\0').update(d.sql).update('\0');
  }
  return `sha256:${hash.digest('hex')}`;
}

/** Who applies the functions, and what it applies. */
export interface FunctionsWriter {
  /** The definitions, in creation order (`loadFunctions`). */
  readonly definitions: readonly FunctionDefinition[];
  /** The effectgate version applying them. */
  readonly version: string;
  /** The newest migration that version has. */
  readonly lastMigration: string;
  /**
   * Runs under the step's lock before anything is read or changed, and throws to leave the store
   * as it is: a store a newer effectgate migrated (refuse-newer-store.ts).
   */
  readonly check: (trx: Transaction<Database>) => Promise<void>;
}

/**
 * Makes the live functions exactly the files, unless the checksum stored by the last run says
 * they already are: drops every eg_ function of the current schema but the triggers' (so an old
 * signature or a function whose file is gone goes too), creates every file, stores the checksum
 * and who wrote them, then brings the key rows' copies up to date (SYNC_FUNCTION). One
 * transaction, so a failure leaves the previous functions in place; under
 * an advisory lock, so concurrent gate starts take turns and only the first one redefines
 * anything, and `writer.check` sees what the last one wrote. Each file is one statement, one
 * query (PGlite's extended protocol runs one statement at a time).
 * Returns whether it redefined the functions.
 */
export async function applyFunctions(db: Kysely<Database>, writer: FunctionsWriter): Promise<boolean> {
  const checksum = functionsChecksum(writer.definitions);
  const marks = [
    { name: VERSION_SETTING, value: writer.version },
    { name: MIGRATION_SETTING, value: writer.lastMigration },
  ];
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${sql.lit(LOCK_KEY)})`.execute(trx);
    await writer.check(trx);
    const stored = new Map(
      (
        await trx
          .selectFrom('settings')
          .select(['name', 'value'])
          .where('name', 'in', [CHECKSUM_SETTING, VERSION_SETTING, MIGRATION_SETTING])
          .execute()
      ).map((r) => [r.name, r.value]),
    );
    if (stored.get(CHECKSUM_SETTING) === checksum) {
      // The same definitions: a newer gate only records that it has them too (so a refusal can
      // name it); an older one leaves the newer one's record.
      const recorded = stored.get(VERSION_SETTING);
      const newer = recorded === undefined || compareVersions(writer.version, recorded) >= 0;
      if (newer && marks.some((m) => stored.get(m.name) !== m.value)) await upsertSettings(trx, marks);
      return false;
    }
    const live = await sql<{ signature: string }>`
      select format('%I(%s)', p.proname, pg_get_function_identity_arguments(p.oid)) as signature
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = current_schema() and starts_with(p.proname, 'eg_')
        and p.proname not in (${sql.join(TRIGGER_FUNCTIONS.map((name) => sql.lit(name)))})`.execute(trx);
    for (const { signature } of live.rows) {
      await sql.raw(`drop function ${signature}`).execute(trx);
    }
    for (const definition of writer.definitions) {
      try {
        await sql.raw(definition.sql).execute(trx);
      } catch (err) {
        throw new Error(`${definition.name}.sql: ${err instanceof Error ? err.message : String(err)}`, {
          cause: err,
        });
      }
    }
    await sql`select ${sql.raw(SYNC_FUNCTION)}()`.execute(trx);
    await upsertSettings(trx, [{ name: CHECKSUM_SETTING, value: checksum }, ...marks]);
    return true;
  });
}

async function upsertSettings(
  trx: Transaction<Database>,
  rows: readonly { readonly name: string; readonly value: string }[],
): Promise<void> {
  await trx
    .insertInto('settings')
    .values([...rows])
    .onConflict((oc) => oc.column('name').doUpdateSet((eb) => ({ value: eb.ref('excluded.value') })))
    .execute();
}
