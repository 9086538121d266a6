import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lockProblems, migrationChecksums, readLock } from '../../../scripts/lock-migrations.js';
import { migrationProvider } from '../../../src/store/migrations/index.js';

/*
 * A database runs a migration once and records only its name, so an applied migration edited in
 * place would leave fresh stores and old ones with different schemas, silently. Hence
 * migrations.lock.json, the checksum of every migration folder, held against the folders here.
 */
describe('migrations.lock.json', () => {
  it('records every migration folder, each exactly as it landed', () => {
    expect(lockProblems(migrationChecksums(), readLock()).map((p) => p.message)).toEqual([]);
  });

  it('names every migration folder in the provider, and nothing else', async () => {
    expect(Object.keys(await migrationProvider.getMigrations()).sort()).toEqual(
      Object.keys(migrationChecksums()).sort(),
    );
  });
});

describe('lockProblems', () => {
  const dirs: string[] = [];

  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  /** The checksums of a migrations folder holding these files. */
  function migrations(files: Record<string, string>): Record<string, string> {
    const dir = mkdtempSync(join(tmpdir(), 'eg-migrations-'));
    dirs.push(dir);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(join(dir, path, '..'), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    return migrationChecksums(dir);
  }

  it('tells an edited migration from a new one and from a deleted one', () => {
    const landed = migrations({ '0001-a/index.ts': 'one', '0002-b/index.ts': 'two' });
    const now = migrations({ '0001-a/index.ts': 'one, edited', '0003-c/index.ts': 'three' });
    expect(lockProblems(now, landed).map((p) => p.message)).toEqual([
      'migration 0001-a was edited after it landed: add a new migration instead',
      'migration 0003-c is not in migrations.lock.json: run npm run migrations:lock to record it',
      'migration 0002-b is in migrations.lock.json but its folder is gone: never delete an applied migration',
    ]);
  });

  it('hashes file names as well as texts, and ignores line endings', () => {
    const landed = migrations({ '0001-a/index.ts': 'x\ny\n' });
    expect(migrations({ '0001-a/index.ts': 'x\r\ny\r\n' })).toEqual(landed);
    expect(migrations({ '0001-a/other.ts': 'x\ny\n' })).not.toEqual(landed);
    expect(migrations({ '0001-a/index.ts': 'x\ny\n', '0001-a/more.sql': '' })).not.toEqual(landed);
  });
});
