import { parseArgs } from 'node:util';
import { openStore, resolveStoreUrl } from '../store/index.js';

/** `effectgate migrate [--store URL]`: applies pending migrations and exits. */
export async function runMigrate(argv: readonly string[]): Promise<number> {
  const { values } = parseArgs({ args: [...argv], options: { store: { type: 'string' } } });
  const url = resolveStoreUrl(values.store);
  const store = await openStore({ url, migrate: true });
  await store.close();
  process.stdout.write(`migrations applied (${store.kind})\n`);
  return 0;
}
