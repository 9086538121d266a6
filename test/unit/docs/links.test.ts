import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/*
 * Relative links of the reference pages (docs/*.md and README.md) point at files that exist and,
 * for a `#fragment` into a Markdown file, at one of its headings (GitHub's anchor spelling).
 */
const REPO = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const PAGES = [
  'README.md',
  ...readdirSync(join(REPO, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(join(REPO, file), 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1]!)));
}

const LINKS: [string, string][] = PAGES.flatMap((page) =>
  [
    ...readFileSync(join(REPO, page), 'utf8')
      .replace(/```[\s\S]*?```/g, '')
      .matchAll(/\]\(([^)\s]+)\)/g),
  ]
    .map((m) => m[1]!)
    .filter((l) => !/^[a-z]+:/.test(l))
    .map((l): [string, string] => [page, l]),
);

describe('links of the reference pages', () => {
  it('finds the links the pages hold', () => {
    expect(LINKS.some(([page]) => page === 'docs/policy-reference.md')).toBe(true);
  });

  it.each(LINKS)('%s: %s resolves', (page, link) => {
    const [path, fragment] = link.split('#') as [string, string | undefined];
    const target = path === '' ? page : join(dirname(page), path);
    expect(existsSync(join(REPO, target)), `${page}: ${link}`).toBe(true);
    if (fragment !== undefined && target.endsWith('.md'))
      expect(anchorsOf(target).has(fragment), `${page}: #${fragment} in ${target}`).toBe(true);
  });
});
