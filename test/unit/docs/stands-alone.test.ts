import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * The repository stands alone: its code, tests, benchmarks and documents cite what is in it or a
 * public specification, never a document outside it nor a tracker's issue number, which a reader
 * of the repository cannot open. (A GitHub issue the demo creates, "issue #1", is product output,
 * not a citation.)
 */
const REPO = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const ROOTS = ['README.md', 'src', 'test', 'bench', 'docs', 'scripts', 'deploy', 'policies', '.ci'];
const SKIP = new Set(['node_modules', 'dist', 'results', '.git']);
const TEXT = /\.(ts|mts|js|mjs|sql|md|yaml|yml|json|sh|py|rb|php|go|html|css)$|^run$/;

function filesUnder(path: string): string[] {
  let stat: ReturnType<typeof statSync>;
  try {
    stat = statSync(path);
  } catch {
    return [];
  }
  if (stat.isFile()) return TEXT.test(path.split('/').pop() ?? '') ? [path] : [];
  return readdirSync(path)
    .filter((name) => !SKIP.has(name))
    .flatMap((name) => filesUnder(join(path, name)));
}

// Built from parts so that this file does not match itself.
const OUTSIDE: [string, RegExp][] = [
  ['a tracker issue number', new RegExp(`\\b${'issue'}s? \\d+\\b`, 'i')],
  ['the shared folder', new RegExp(`\\.\\./${'shared'}\\b`)],
  ['a design document outside docs/', new RegExp(`\\b${'DESIGN'}\\.md`)],
];

const FILES = ROOTS.flatMap((root) => filesUnder(join(REPO, root)));

describe('the repository stands alone', () => {
  it('reads the files it checks', () => {
    expect(FILES.length).toBeGreaterThan(200);
    expect(FILES.some((f) => f.endsWith('bench/README.md'))).toBe(true);
  });

  it('cites no issue number and no document outside the repository', () => {
    const found: string[] = [];
    for (const file of FILES) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        for (const [what, pattern] of OUTSIDE) {
          if (pattern.test(line))
            found.push(`${relative(REPO, file)}:${i + 1}: ${what}: ${line.trim().slice(0, 120)}`);
        }
      });
    }
    expect(found).toEqual([]);
  });

  it('would see a citation if one came back', () => {
    expect(OUTSIDE.filter(([, p]) => p.test(`as asked in ${'issue'} 12, item 3`)).length).toBe(1);
    expect(OUTSIDE.filter(([, p]) => p.test(`see ../${'shared'}/${'DESIGN'}.md §2`)).length).toBe(2);
    expect(OUTSIDE.some(([, p]) => p.test('docs/design.md §2; created issue #1'))).toBe(false);
  });
});
