/**
 * Inspection commands never create a store: run from another directory than the
 * gate's, or pointed at a database the gate never migrated, they say where they looked and how to
 * point at the right store, and leave nothing behind. The built CLI, real PGlite and PostgreSQL.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets } from '../helpers/store.js';

const dir = mkdtempSync(join(tmpdir(), 'effectgate-missing-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const noDatabaseUrl = { DATABASE_URL: '' };

describe('a command that finds no store', { timeout: 60_000 }, () => {
  it.each([
    [['operations']],
    [['trail', 'some-operation']],
    [['approvals', 'list']],
    [['recover']],
    [['audit', 'verify']],
  ])(
    '%j from a directory without one: EG_ERR_STORE_MISSING naming it, and no .effectgate created',
    async (args) => {
      const r = await runCli(args, noDatabaseUrl, dir);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain('EG_ERR_STORE_MISSING');
      expect(r.stderr).toContain(`No embedded store at ${join(dir, '.effectgate')}`);
      expect(r.stderr).toContain('--store pglite:DIR');
      expect(existsSync(join(dir, '.effectgate'))).toBe(false);
    },
  );

  it('the proxy with --no-migrate on a store that is not there refuses to start, and creates nothing', async () => {
    const where = join(dir, 'not-here');
    const r = await runCli(
      [
        'proxy',
        '--listen',
        '127.0.0.1:0',
        '--policies',
        'policies/',
        '--no-migrate',
        '--store',
        `pglite:${where}`,
      ],
      noDatabaseUrl,
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('EG_ERR_STORE_MISSING');
    expect(existsSync(where)).toBe(false);
  });

  for (const target of storeTargets().filter((t) => t.kind === 'postgres')) {
    it('a PostgreSQL database the gate never migrated is named as such, not "relation does not exist"', async () => {
      const empty = await openTestStore(target, { migrate: false });
      try {
        const r = await runCli(['operations', '--store', empty.url]);
        expect(r.code).toBe(1);
        expect(r.stderr).toContain('EG_ERR_STORE_MISSING');
        expect(r.stderr).toContain('was never migrated');
        expect(r.stderr).not.toContain('does not exist');
      } finally {
        await empty.close();
      }
    });
  }
});
