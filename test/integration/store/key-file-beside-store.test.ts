/**
 * A secret key file beside an embedded store (key-file-beside-store.ts), on the real file system:
 * made once, 0600 in a 0700 folder beside (not inside) the store directory; read back unchanged;
 * one key when many callers race to make it; refused, by path, when others could read it.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keyFileBesideStore, readKeyFile, storeKeysDir } from '../../../src/store/index.js';

describe('keyFileBesideStore', () => {
  let root: string;
  let storeDir: string;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'effectgate-keys-'));
    storeDir = join(root, 'store');
    mkdirSync(storeDir);
  });

  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('makes the key once, 0600 in a 0700 folder beside the store, and reads the same bytes after', async () => {
    let calls = 0;
    const first = await keyFileBesideStore(storeDir, 'authority.key', () => {
      calls++;
      return 'k'.repeat(64);
    });
    expect(first).toMatchObject({ path: join(root, 'store.keys', 'authority.key'), created: true });
    expect(first.content.toString()).toBe('k'.repeat(64));
    expect(storeKeysDir(storeDir)).toBe(join(root, 'store.keys'));
    expect(statSync(first.path).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, 'store.keys')).mode & 0o777).toBe(0o700);
    // Not inside the store directory: a copy of it does not carry the key.
    expect(readdirSync(storeDir)).toEqual([]);
    const again = await keyFileBesideStore(storeDir, 'authority.key', () => {
      calls++;
      return 'other';
    });
    expect(again).toEqual({ path: first.path, content: first.content, created: false });
    expect(calls).toBe(1);
    // A second key beside the first (the audit signing key follows the same pattern).
    const audit = await keyFileBesideStore(storeDir, 'audit.key', () => Buffer.from([1, 2, 3]));
    expect(audit.path).toBe(join(root, 'store.keys', 'audit.key'));
    expect([...audit.content]).toEqual([1, 2, 3]);
  });

  it('racing callers all miss the file, each generates, and all end with the one key that was linked', async () => {
    let generated = 0;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        keyFileBesideStore(storeDir, 'authority.key', async () => {
          generated++;
          await new Promise((r) => setTimeout(r, 5));
          return `key-of-caller-${i}-${'x'.repeat(40)}`;
        }),
      ),
    );
    expect(generated).toBeGreaterThan(1); // the race really happened
    expect(new Set(results.map((r) => r.content.toString())).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    // No temporary file is left behind.
    expect(readdirSync(join(root, 'store.keys'))).toEqual(['authority.key']);
  });

  it('refuses a key file its group or other users can read, naming the file', async () => {
    const dir = join(root, 'store.keys');
    mkdirSync(dir, { mode: 0o700 });
    const path = join(dir, 'authority.key');
    writeFileSync(path, `${'a'.repeat(64)}\n`, { mode: 0o600 });
    for (const mode of [0o644, 0o640, 0o604]) {
      chmodSync(path, mode);
      const err = await keyFileBesideStore(storeDir, 'authority.key', () => 'never').catch((e: Error) => e);
      expect(err).toMatchObject({ code: 'EG_ERR_CONFIG_INVALID' });
      expect((err as Error).message).toContain(path);
      expect((err as Error).message).toContain(`chmod 600 ${path}`);
    }
    // A configured file (a Kubernetes Secret under fsGroup is 0440) may be group-readable, never world.
    chmodSync(path, 0o440);
    expect((await readKeyFile(path, { groupReadable: true }))?.toString()).toBe(`${'a'.repeat(64)}\n`);
    chmodSync(path, 0o444);
    await expect(readKeyFile(path, { groupReadable: true })).rejects.toThrow(path);
  });

  it('refuses an empty key file and a key folder others can write to', async () => {
    const dir = join(root, 'store.keys');
    mkdirSync(dir, { mode: 0o700 });
    writeFileSync(join(dir, 'authority.key'), '', { mode: 0o600 });
    await expect(keyFileBesideStore(storeDir, 'authority.key', () => 'never')).rejects.toThrow(/is empty/);
    chmodSync(dir, 0o777);
    await expect(keyFileBesideStore(storeDir, 'other.key', () => 'never')).rejects.toThrow(
      `chmod 700 ${dir}`,
    );
    await expect(keyFileBesideStore(storeDir, '../escape', () => 'never')).rejects.toThrow(
      /Not a key file name/,
    );
  });
});
