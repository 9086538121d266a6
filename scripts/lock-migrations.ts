/*
 * `npm run migrations:lock`: records the checksum of every migration folder not yet in
 * src/store/migrations/migrations.lock.json. An applied migration never changes (databases ran it
 * once and recorded only its name), so a folder whose checksum differs from its recorded one is
 * refused here, and fails test/unit/store/migrations-lock.test.ts: add a new migration instead.
 * (A migration that never left your branch may be changed: delete its line from the lock and run
 * this again.)
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const MIGRATIONS_DIR: string = fileURLToPath(new URL('../src/store/migrations/', import.meta.url));
export const LOCK_FILE: string = join(MIGRATIONS_DIR, 'migrations.lock.json');

/**
 * The text a checksum covers: what runs. Comment blocks and lines that open with a comment marker
 * (the `/* … *\/` headers and `//` notes of the TypeScript, `--` lines of SQL) are left out, so
 * a comment can be corrected without the lock calling the migration edited; every statement,
 * string and identifier still counts.
 */
export function withoutComments(text: string): string {
  return text
    .replace(/^[ \t]*\/\*[\s\S]*?\*\/[ \t]*\n/gm, '')
    .split('\n')
    .filter((line) => !/^\s*(\/\/|--)/.test(line))
    .join('\n');
}

/** sha256 of each migration folder: its files' relative paths and texts, in path order. */
export function migrationChecksums(dir: string = MIGRATIONS_DIR): Record<string, string> {
  const checksums: Record<string, string> = {};
  const folders = readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory());
  for (const folder of folders.map((e) => e.name).sort()) {
    const hash = createHash('sha256');
    const files = readdirSync(join(dir, folder), { recursive: true, encoding: 'utf8' })
      .filter((file) => statSync(join(dir, folder, file)).isFile())
      .map((file) => file.replaceAll('\\', '/'))
      .sort();
    for (const file of files) {
      // Line endings normalized, so a Windows checkout (autocrlf) hashes the same.
      const text = withoutComments(readFileSync(join(dir, folder, file), 'utf8').replaceAll('\r\n', '\n'));
      hash.update(file).update('\0').update(text).update('\0');
    }
    checksums[folder] = `sha256:${hash.digest('hex')}`;
  }
  return checksums;
}

export function readLock(file: string = LOCK_FILE): Record<string, string> {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>) : {};
}

export interface LockProblem {
  readonly migration: string;
  /** unrecorded: new, not in the lock yet; edited, deleted: an applied migration changed. */
  readonly kind: 'unrecorded' | 'edited' | 'deleted';
  readonly message: string;
}

/** What differs between the migration folders and the lock; empty when they agree. */
export function lockProblems(actual: Record<string, string>, locked: Record<string, string>): LockProblem[] {
  const problems: LockProblem[] = [];
  for (const [migration, checksum] of Object.entries(actual)) {
    if (locked[migration] === undefined) {
      problems.push({
        migration,
        kind: 'unrecorded',
        message: `migration ${migration} is not in migrations.lock.json: run npm run migrations:lock to record it`,
      });
    } else if (locked[migration] !== checksum) {
      problems.push({
        migration,
        kind: 'edited',
        message: `migration ${migration} was edited after it landed: add a new migration instead`,
      });
    }
  }
  for (const migration of Object.keys(locked)) {
    if (actual[migration] === undefined) {
      problems.push({
        migration,
        kind: 'deleted',
        message: `migration ${migration} is in migrations.lock.json but its folder is gone: never delete an applied migration`,
      });
    }
  }
  return problems;
}

function main(): number {
  const actual = migrationChecksums();
  const locked = readLock();
  const problems = lockProblems(actual, locked);
  const refused = problems.filter((p) => p.kind !== 'unrecorded');
  if (refused.length > 0) {
    for (const p of refused) process.stderr.write(`${p.message}\n`);
    return 1;
  }
  const merged: Record<string, string> = { ...locked, ...actual };
  const sorted = Object.fromEntries(
    Object.keys(merged)
      .sort()
      .map((name) => [name, merged[name]]),
  );
  writeFileSync(LOCK_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
  const added = problems.map((p) => p.migration);
  process.stdout.write(added.length > 0 ? `recorded ${added.join(', ')}\n` : 'nothing to record\n');
  return 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = main();
}
