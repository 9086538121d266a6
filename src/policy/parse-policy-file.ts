import { parseSafeYaml } from '../config/index.js';
import type { PolicyIssue } from '../errors.js';
import { type CompiledTool, compileTool } from './compile-tool.js';
import { type ParsedEgress, readEgress } from './egress-section.js';
import { type PolicyExample, readExamples } from './policy-examples.js';
import { PolicyReader, type SourcePosition } from './policy-reader.js';
import type { DefaultAction } from './types.js';

/** Policy files are small; anything bigger is a mistake or an attack on the parser. */
export const MAX_POLICY_FILE_BYTES = 1024 * 1024;
/** Enough for shared host lists; far below what a "billion laughs" document needs. */
export const MAX_ALIAS_COUNT = 50;

export const TOP_FIELDS = ['version', 'default', 'loop_breaker', 'egress', 'tools', 'examples'] as const;
export const LOOP_BREAKER_FIELDS = ['max_duplicate_skips'] as const;

/** A file-level setting with where it was written, so conflicts across files can name both. */
export interface Located<T> {
  readonly value: T;
  readonly at: SourcePosition;
}

export interface ParsedPolicyFile {
  readonly default: Located<DefaultAction> | null;
  readonly maxDuplicateSkips: Located<number> | null;
  /** `null` when the file has no `egress` block (or an invalid one, already reported). */
  readonly egress: Located<ParsedEgress> | null;
  readonly tools: readonly CompiledTool[];
  /** The file's `examples:` (requests `policies test` checks), in file order. */
  readonly examples: readonly PolicyExample[];
}

/**
 * Parses and validates one policy file, appending every problem to `issues`. Returns `null` when
 * the file could not be read as YAML at all; otherwise the valid parts (the caller throws if any
 * issue was recorded, so partial results never escape).
 */
export function parsePolicyFile(file: string, text: string, issues: PolicyIssue[]): ParsedPolicyFile | null {
  const yaml = parseSafeYaml(text, {
    maxBytes: MAX_POLICY_FILE_BYTES,
    maxAliasCount: MAX_ALIAS_COUNT,
    kind: 'policy files',
    hint,
  });
  if (!yaml.ok) {
    for (const i of yaml.issues) issues.push({ file, ...i });
    return null;
  }
  const { doc, lines } = yaml;

  const r = new PolicyReader(file, doc, lines, issues);
  const root = r.root(doc.contents);
  if (root.node === null) {
    r.issue(null, '', 'file is empty; expected a mapping with version: 1 and tools');
    return null;
  }
  const f = r.fields(root, TOP_FIELDS, ['version']);
  if (f === null) return null;
  const version = f.get('version');
  if (version !== undefined && r.scalar(version) !== 1) {
    r.issue(version.at, version.field, 'version must be 1 (the only policy format this effectgate reads)');
  }
  const def = f.get('default');
  const defValue = def === undefined ? null : r.oneOf(def, ['allow', 'block'] as const);
  const lb = f.get('loop_breaker');
  const lbFields = lb === undefined ? null : r.fields(lb, LOOP_BREAKER_FIELDS);
  const skips = lbFields?.get('max_duplicate_skips');
  const skipsValue = skips === undefined ? null : r.integer(skips, 1);
  const egress = f.get('egress');
  const egressValue = egress === undefined ? null : readEgress(r, egress);
  const toolsSlot = f.get('tools');
  const tools: CompiledTool[] = [];
  for (const item of (toolsSlot && r.items(toolsSlot)) ?? []) {
    const compiled = compileTool(r, item);
    if (compiled !== null) tools.push(compiled);
  }
  const examplesSlot = f.get('examples');
  const examples = examplesSlot === undefined ? [] : readExamples(r, examplesSlot);
  return {
    default: def === undefined || defValue === null ? null : { value: defValue, at: r.position(def.at) },
    maxDuplicateSkips:
      skips === undefined || skipsValue === null ? null : { value: skipsValue, at: r.position(skips.at) },
    egress:
      egress === undefined || egressValue === null
        ? null
        : { value: egressValue, at: r.position(egress.keyAt ?? egress.at) },
    tools,
    examples,
  };
}

/** The classic trap: `{name}` captures inside a `{ ... }` flow mapping start a nested mapping. */
function hint(message: string): string {
  return /flow-(map|seq)-(start|end)/.test(message)
    ? '; inside [ ] or { } quote values that contain { } [ ] or commas, e.g. path: "/a/{id}"'
    : '';
}
