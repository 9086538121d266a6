/**
 * The authority key as an operator meets it, with the built CLI: `effectgate proxy` on PostgreSQL
 * without a key refuses to start and names the one command to run; `effectgate keys authority`
 * writes the key an older version kept in the database (0600, never over a file), and the proxy
 * started with it deletes it from the database; on an embedded store the command points at the
 * key file beside it. Real PostgreSQL (when DATABASE_URL is set) and PGlite.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, startProxyProcess } from '../helpers/proxy-process.js';
import { openTestStore, storeTargets } from '../helpers/store.js';

const dir = mkdtempSync(join(tmpdir(), 'effectgate-e2e-authority-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
/** No key from the environment: the suite gives one to every gate on PostgreSQL. */
const noKey = { EFFECTGATE_AUTHORITY_KEY: '', DATABASE_URL: '' };
const LEGACY_KEY = 'c0ffee'.repeat(10);

describe('the authority key, with the CLI', { timeout: 120_000 }, () => {
  it('keys authority on an embedded store names the key file beside it and writes nothing', async () => {
    const out = join(dir, 'embedded.key');
    const r = await runCli(
      ['keys', 'authority', '--store', `pglite:${join(dir, 'store')}`, '--out', out],
      noKey,
    );
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${join(dir, 'store')}.keys/authority.key`);
    expect(() => statSync(out)).toThrow();
  });

  for (const target of storeTargets().filter((t) => t.kind === 'postgres')) {
    it('on PostgreSQL: refused without a key; keys authority exports the older key; the proxy with it deletes it', async () => {
      const store = await openTestStore(target);
      store.exemptFromTrailCheck('an operation row written by hand stands in for an older version');
      try {
        // An older version's database: its key in settings, an operation keyed with it.
        await store.query(`update settings set value = '${LEGACY_KEY}' where name = 'authority_key'`);
        await store.query(`insert into operations (id, tool_id, tenant, area, agent, state, run_id)
          values ('op-legacy', 't', 'a', 'b', 'c', 'succeeded', 'r')`);
        const refused = await runCli(
          ['proxy', '--listen', '127.0.0.1:0', '--policies', 'policies/', '--store', store.url],
          noKey,
        );
        expect(refused.code).toBe(1);
        expect(refused.stderr).toContain('EG_ERR_CONFIG_INVALID');
        expect(refused.stderr).toContain('effectgate keys authority');

        const file = join(dir, 'authority.key');
        const exported = await runCli(['keys', 'authority', '--store', store.url, '--out', file], noKey);
        expect(exported.code, exported.stderr).toBe(0);
        expect(readFileSync(file, 'utf8')).toBe(`${LEGACY_KEY}\n`);
        expect(statSync(file).mode & 0o777).toBe(0o600);
        // Never over an existing file.
        const again = await runCli(['keys', 'authority', '--store', store.url, '--out', file], noKey);
        expect(again.code).toBe(1);
        expect(again.stderr).toContain('exists: not replaced');

        const proxy = await startProxyProcess(
          ['--policies', 'policies/', '--store', store.url, '--authority-key-file', file],
          noKey,
        );
        await proxy.stop();
        expect(await store.storedAuthorityKey()).toBeNull();

        // A world-readable key file is refused, naming it.
        const open = join(dir, 'open.key');
        writeFileSync(open, `${LEGACY_KEY}\n`, { mode: 0o644 });
        const loose = await runCli(
          [
            'proxy',
            '--listen',
            '127.0.0.1:0',
            '--policies',
            'policies/',
            '--store',
            store.url,
            '--authority-key-file',
            open,
          ],
          noKey,
        );
        expect(loose.code).toBe(1);
        expect(loose.stderr).toContain(open);
      } finally {
        await store.close();
      }
    });
  }
});
