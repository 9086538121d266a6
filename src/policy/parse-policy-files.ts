import { PolicyError, type PolicyIssue } from '../errors.js';
import type { CompiledTool } from './compile-tool.js';
import { deepFreeze } from './deep-freeze.js';
import { DEFAULT_EGRESS } from './egress-policy.js';
import type { ParsedEgress } from './egress-section.js';
import { hostsOverlap } from './host-pattern.js';
import { type Located, parsePolicyFile } from './parse-policy-file.js';
import type { PolicyExample } from './policy-examples.js';
import type { SourcePosition } from './policy-reader.js';
import type { DefaultAction, PolicySet } from './types.js';

/** One policy file's name and contents. */
export interface PolicyFileText {
  readonly file: string;
  readonly text: string;
}

/**
 * Validates and compiles policy files already in memory, in the order given. Throws one
 * {@link PolicyError} listing every issue in every file; otherwise returns a deep-frozen, fully
 * defaulted {@link PolicySet}.
 *
 * @example
 * const set = parsePolicyFiles([{ file: 'github.yaml', text: 'version: 1\ntools: []\n' }]);
 * set.default; // 'allow'
 */
export function parsePolicyFiles(files: readonly PolicyFileText[]): PolicySet {
  const issues: PolicyIssue[] = [];
  if (files.length === 0) {
    issues.push({
      file: '(none)',
      line: 0,
      column: 0,
      field: '(file)',
      message: 'no policy files were given',
    });
  }
  let defaultAction: Located<DefaultAction> | null = null;
  let skips: Located<number> | null = null;
  let egress: Located<ParsedEgress> | null = null;
  const tools: CompiledTool[] = [];
  const examples: PolicyExample[] = [];
  for (const { file, text } of files) {
    const parsed = parsePolicyFile(file, text, issues);
    if (parsed === null) continue;
    defaultAction = agree(issues, 'default', defaultAction, parsed.default);
    skips = agree(issues, 'loop_breaker.max_duplicate_skips', skips, parsed.maxDuplicateSkips);
    egress = agreeEgress(issues, egress, parsed.egress);
    tools.push(...parsed.tools);
    examples.push(...parsed.examples);
  }
  checkUniqueIds(issues, tools);
  checkExampleTools(issues, examples, tools);
  checkDistinctRoutes(issues, tools);
  if (issues.length > 0) throw new PolicyError(sortIssues(issues, files));
  const set = deepFreeze<PolicySet>({
    default: defaultAction?.value ?? 'allow',
    loopBreaker: { maxDuplicateSkips: skips?.value ?? 3 },
    egress: egress?.value.policy ?? DEFAULT_EGRESS,
    tools: tools.map((t) => t.tool),
    files: files.map((f) => f.file),
  });
  SOURCES.set(set, Object.freeze(files.map(({ file, text }) => Object.freeze({ file, text }))));
  EXAMPLES.set(set, deepFreeze(examples));
  return set;
}

/** The `examples:` of the files each set was compiled from (kept off PolicySet: the gate never reads them). */
const EXAMPLES = new WeakMap<PolicySet, readonly PolicyExample[]>();

/**
 * The examples the files of `set` carry, in file order; empty for a set composed by hand. Read by
 * `effectgate policies test`.
 */
export function policyExamples(set: PolicySet): readonly PolicyExample[] {
  return EXAMPLES.get(set) ?? [];
}

/** An example expecting a tool no file declares could never pass: say so at `policies check`. */
function checkExampleTools(
  issues: PolicyIssue[],
  examples: readonly PolicyExample[],
  tools: readonly CompiledTool[],
): void {
  const ids = new Set(tools.map((t) => t.tool.id));
  for (const e of examples) {
    if (e.expect.tool === null || ids.has(e.expect.tool)) continue;
    issues.push({
      ...e.expect.toolAt,
      field: e.expect.toolField,
      message: `example ${JSON.stringify(e.name)} expects tool ${JSON.stringify(e.expect.tool)}, which no policy file declares (use null for an unclassified request)`,
    });
  }
}

/** The texts each set this module compiled was compiled from, keyed by the set itself. */
const SOURCES = new WeakMap<PolicySet, readonly PolicyFileText[]>();

/**
 * The texts `set` was compiled from, or null when `set` is not one `parsePolicyFiles` (or
 * `loadPolicies`) returned as it is (a set composed by hand, `{ ...a, tools: [...] }`). A
 * body-analysis worker compiles its own copy of the policies from these (compiled tools hold
 * functions, which cannot cross threads), so only the very object compiled from them may be used:
 * any other set could decide differently on the worker than on the event loop.
 */
export function policySources(set: PolicySet): readonly PolicyFileText[] | null {
  return SOURCES.get(set) ?? null;
}

/** A setting several files may repeat, but only with the same value. */
function agree<T>(
  issues: PolicyIssue[],
  field: string,
  earlier: Located<T> | null,
  later: Located<T> | null,
): Located<T> | null {
  if (later === null) return earlier;
  if (earlier === null) return later;
  if (earlier.value !== later.value) {
    issues.push({
      ...later.at,
      field,
      message: `${String(later.value)} here conflicts with ${String(earlier.value)} in ${where(earlier.at)}; files in one policy set must agree`,
    });
  }
  return earlier;
}

/**
 * `egress` is set-wide like `default`: files that declare it must declare the same deny and allow
 * sets (order and repeats aside); files that leave it out take the one declared. Neither list is
 * merged: a second file silently widening `allow` (or narrowing `deny`) is exactly what must not
 * happen unseen.
 */
function agreeEgress(
  issues: PolicyIssue[],
  earlier: Located<ParsedEgress> | null,
  later: Located<ParsedEgress> | null,
): Located<ParsedEgress> | null {
  if (later === null) return earlier;
  if (earlier === null) return later;
  if (earlier.value.key !== later.value.key) {
    const text = (e: ParsedEgress): string =>
      `deny [${e.policy.deny.join(', ')}] allow [${e.policy.allow.join(', ')}]`;
    issues.push({
      ...later.at,
      field: 'egress',
      message: `${text(later.value)} here conflicts with ${text(earlier.value)} in ${where(earlier.at)}; files in one policy set must agree (declare egress in one file)`,
    });
  }
  return earlier;
}

function checkUniqueIds(issues: PolicyIssue[], tools: readonly CompiledTool[]): void {
  const seen = new Map<string, CompiledTool>();
  for (const t of tools) {
    const first = seen.get(t.tool.id);
    if (first === undefined) seen.set(t.tool.id, t);
    else
      issues.push({
        ...t.idAt,
        field: `${t.field}.id`,
        message: `duplicate tool id ${JSON.stringify(t.tool.id)}; first declared at ${where(first.idAt)}`,
      });
  }
}

/**
 * Two tools that claim the same request (same method, same path shape, overlapping hosts,
 * identical body conditions) would make classification depend on file order. Refuse them.
 */
function checkDistinctRoutes(issues: PolicyIssue[], tools: readonly CompiledTool[]): void {
  const groups = new Map<string, CompiledTool[]>();
  for (const t of tools) {
    const m = t.matcher;
    const key = `${m.method} ${m.path.shape} ${m.bodyKey}`;
    const group = groups.get(key) ?? [];
    const clash = group.find((g) => g.matcher.hosts.some((a) => m.hosts.some((b) => hostsOverlap(a, b))));
    if (clash !== undefined) {
      issues.push({
        ...t.matchAt,
        field: `${t.field}.match`,
        message:
          `tool ${JSON.stringify(t.tool.id)} matches the same requests as ${JSON.stringify(clash.tool.id)} ` +
          `(${where(clash.matchAt)}): ${m.explain()}; merge them or tell them apart with match.body`,
      });
    }
    group.push(t);
    groups.set(key, group);
  }
}

/** File order first, then position, so the report reads top to bottom like a compiler's. */
function sortIssues(issues: readonly PolicyIssue[], files: readonly PolicyFileText[]): PolicyIssue[] {
  const order = new Map(files.map((f, i) => [f.file, i]));
  return [...issues].sort(
    (a, b) => (order.get(a.file) ?? -1) - (order.get(b.file) ?? -1) || a.line - b.line || a.column - b.column,
  );
}

function where(at: SourcePosition): string {
  return `${at.file}:${at.line}`;
}
