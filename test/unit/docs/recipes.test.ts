import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * docs/recipes.md shows the exact lines its tests run. Each block there is preceded by
 * `<!-- recipe: <file>#<name> -->`, and the file holds the same lines between `// recipe: <name>`
 * and `// end recipe` (indentation aside): a recipe edited on one side only fails here, and so does
 * a region of a recipe test that the page does not show.
 */
const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const docs = readFileSync(join(REPO, 'docs/recipes.md'), 'utf8');
const SOURCES = [
  ...readdirSync(join(REPO, 'test/integration/recipes'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `test/integration/recipes/${f}`),
  ...readdirSync(join(REPO, 'test/e2e'))
    .filter((f) => f.startsWith('agent-recipes'))
    .map((f) => `test/e2e/${f}`),
];

interface Shown {
  readonly file: string;
  readonly name: string;
  readonly code: string;
}

const shown: Shown[] = [...docs.matchAll(/<!-- recipe: ([^#\s]+)#([\w-]+) -->\n```\w*\n([\s\S]*?)```/g)].map(
  (m) => ({ file: m[1]!, name: m[2]!, code: m[3]! }),
);

/** The lines between `// recipe: name` and `// end recipe`, less their common indentation. */
function regionsOf(file: string): Map<string, string> {
  const text = readFileSync(join(REPO, file), 'utf8');
  const regions = new Map<string, string>();
  for (const m of text.matchAll(/^[ \t]*\/\/ recipe: ([\w-]+)\n([\s\S]*?)^[ \t]*\/\/ end recipe$/gm)) {
    const lines = m[2]!.replace(/\n$/, '').split('\n');
    const indent = Math.min(...lines.filter((l) => l.trim() !== '').map((l) => /^ */.exec(l)![0].length));
    regions.set(m[1]!, `${lines.map((l) => l.slice(indent)).join('\n')}\n`);
  }
  return regions;
}

describe('docs/recipes.md', () => {
  it('shows recipes', () => {
    expect(shown.length).toBeGreaterThan(0);
  });

  it.each(shown.map((s) => [`${s.file}#${s.name}`, s] as const))('%s is the code the test runs', (_, s) => {
    expect(SOURCES, `${s.file} is not a recipe test`).toContain(s.file);
    const region = regionsOf(s.file).get(s.name);
    expect(region, `${s.file} has no region "${s.name}"`).toBeDefined();
    expect(s.code).toBe(region);
  });

  it('shows every region of the recipe tests', () => {
    const regions = SOURCES.flatMap((file) => [...regionsOf(file).keys()].map((name) => `${file}#${name}`));
    expect(regions.length).toBeGreaterThan(0);
    expect(shown.map((s) => `${s.file}#${s.name}`).sort()).toEqual(regions.sort());
  });
});
