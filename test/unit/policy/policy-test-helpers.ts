import { fileURLToPath } from 'node:url';
import { PolicyError, type PolicyIssue } from '../../../src/errors.js';
import { parsePolicyFiles } from '../../../src/policy/index.js';

/** Absolute path of a fixture under test/fixtures/policies. */
export function fixture(name: string): string {
  return fileURLToPath(new URL(`../../fixtures/policies/${name}`, import.meta.url));
}

/** Absolute path of the shipped example policies folder. */
export const EXAMPLE_POLICIES = fileURLToPath(new URL('../../../policies', import.meta.url));

/** Joins lines with \n so a test's line numbers can be read off the array index (+1). */
export function lines(...rows: string[]): string {
  return `${rows.join('\n')}\n`;
}

/** A minimal valid tool, lines 3-8 of a file whose first two lines are `version: 1` / `tools:`. */
export const BASE_TOOL: readonly string[] = [
  'version: 1', // 1
  'tools:', // 2
  '  - id: t', // 3
  '    match:', // 4
  '      hosts: [api.example.com]', // 5
  '      method: POST', // 6
  '      path: /items/{id}', // 7
  '    effect: create', // 8
];

/** `BASE_TOOL` followed by `extra` (which therefore starts at line 9). */
export function baseWith(...extra: string[]): string {
  return lines(...BASE_TOOL, ...extra);
}

/** Parses and returns the issues; fails the test if parsing succeeded. */
export function issuesOf(...files: { file: string; text: string }[]): PolicyIssue[] {
  try {
    parsePolicyFiles(files);
  } catch (err) {
    if (err instanceof PolicyError) return [...err.issues];
    throw err;
  }
  throw new Error('expected a PolicyError, but the policies loaded');
}

/** The issues of a single in-memory file named `p.yaml`. */
export function issuesOfText(text: string): PolicyIssue[] {
  return issuesOf({ file: 'p.yaml', text });
}

/** Issues of `fn` (for async loaders). */
export async function issuesOfAsync(fn: () => Promise<unknown>): Promise<PolicyIssue[]> {
  try {
    await fn();
  } catch (err) {
    if (err instanceof PolicyError) return [...err.issues];
    throw err;
  }
  throw new Error('expected a PolicyError, but the policies loaded');
}
