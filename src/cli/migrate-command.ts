import { openStore, resolveStoreUrl } from '../store/index.js';
import { type FlagTable, parseFlags } from './parse-flags.js';

export const USAGE =
  'usage: effectgate migrate [--store URL]   (default: DATABASE_URL, else pglite:./.effectgate)';

export const MIGRATE_OPTIONS = { store: { type: 'string' } } as const satisfies FlagTable;

/** `effectgate migrate [--store URL]`: applies pending migrations and exits. */
export async function runMigrate(argv: readonly string[]): Promise<number> {
  const { values } = parseFlags({ args: [...argv], options: MIGRATE_OPTIONS }, USAGE);
  const url = resolveStoreUrl(values.store);
  const store = await openStore({ url, migrate: true });
  await store.close();
  process.stdout.write(`migrations applied (${store.kind})\n`);
  return 0;
}
