import type { Migration, MigrationProvider } from 'kysely';
import { migration0001 } from './0001-initial.js';
import { migration0002 } from './0002-unknown-outcomes.js';

/*
 * Migrations are listed in code, not discovered on disk, so they work unchanged from dist/ and
 * from a bundled CLI. Names sort in apply order; never rename or edit an applied one, add a new one.
 */
const MIGRATIONS: Readonly<Record<string, Migration>> = {
  '0001-initial': migration0001,
  '0002-unknown-outcomes': migration0002,
};

export const migrationProvider: MigrationProvider = {
  async getMigrations(): Promise<Record<string, Migration>> {
    return { ...MIGRATIONS };
  },
};
