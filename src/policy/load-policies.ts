import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { PolicyError, type PolicyIssue } from '../errors.js';
import { MAX_POLICY_FILE_BYTES } from './parse-policy-file.js';
import { type PolicyFileText, parsePolicyFiles } from './parse-policy-files.js';
import type { PolicySet } from './types.js';

const POLICY_FILE = /\.ya?ml$/i;

/**
 * Loads a policies folder (every `*.yaml` / `*.yml` directly in it, sorted by name, not
 * recursive) or a single policy file. Throws a {@link PolicyError} listing every issue found in
 * every file, with file, line, column and field; an empty folder is an error too, since a gate
 * with no policies would silently govern nothing.
 *
 * @example
 * const policies = await loadPolicies('policies/');
 * policies.tools.map((t) => t.id); // ['github.create_issue', 'mcp.create_ticket']
 */
export async function loadPolicies(path: string): Promise<PolicySet> {
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    throw new PolicyError([pathIssue(path, `cannot read policies: ${err.code ?? err.message}`)], {
      cause: err,
    });
  });
  let names: string[];
  if (info.isDirectory()) {
    const entries = await readdir(path, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      throw new PolicyError([pathIssue(path, `cannot list policies: ${err.code ?? err.message}`)], {
        cause: err,
      });
    });
    names = entries
      .filter((e) => POLICY_FILE.test(e.name) && (e.isFile() || e.isSymbolicLink()))
      .map((e) => join(path, e.name))
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    if (names.length === 0)
      throw new PolicyError([pathIssue(path, 'folder holds no *.yaml or *.yml policy files')]);
  } else {
    names = [path];
  }
  const issues: PolicyIssue[] = [];
  const files: PolicyFileText[] = [];
  for (const file of names) {
    const text = await readPolicyFile(file, issues);
    if (text !== null) files.push({ file, text });
  }
  if (issues.length === 0) return parsePolicyFiles(files);
  // Report unreadable files together with everything wrong in the readable ones.
  try {
    if (files.length > 0) parsePolicyFiles(files);
  } catch (err) {
    if (err instanceof PolicyError) issues.push(...err.issues);
    else throw err;
  }
  throw new PolicyError(issues);
}

async function readPolicyFile(file: string, issues: PolicyIssue[]): Promise<string | null> {
  try {
    // Check the size before reading so an oversized file is never pulled into memory.
    const { size, isFile } = await stat(file).then((s) => ({ size: s.size, isFile: s.isFile() }));
    if (!isFile) {
      issues.push(pathIssue(file, 'is not a regular file'));
      return null;
    }
    if (size > MAX_POLICY_FILE_BYTES) {
      issues.push({
        ...pathIssue(
          file,
          `file is ${size} bytes; policy files are limited to ${MAX_POLICY_FILE_BYTES} bytes (1 MiB)`,
        ),
        line: 1,
        column: 1,
      });
      return null;
    }
    return await readFile(file, 'utf8');
  } catch (err) {
    issues.push(
      pathIssue(file, `cannot read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`),
    );
    return null;
  }
}

function pathIssue(file: string, message: string): PolicyIssue {
  return { file, line: 0, column: 0, field: '(file)', message };
}
