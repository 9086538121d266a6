import { type Document, isAlias, isMap, isScalar, isSeq, type LineCounter, type Node, visit } from 'yaml';
import { suggestField } from '../config/index.js';
import type { PolicyIssue } from '../errors.js';

/** A value in the YAML tree together with the dotted field path that names it in error messages. */
export interface Slot {
  /** The value node (aliases resolved); `null` only for an empty document. */
  readonly node: Node | null;
  /** Where to point an error about this value: the value itself, or its key when the value is empty. */
  readonly at: Node | null;
  readonly field: string;
  /** The key naming this value, if any: "missing field" issues point there rather than at the value. */
  readonly keyAt?: Node;
}

/** Where a node sits, for issues raised after the reader is gone (cross-file checks). */
export interface SourcePosition {
  readonly file: string;
  readonly line: number;
  readonly column: number;
}

/** Scalar values a policy file may contain. */
export type YamlScalar = string | number | boolean | null;

/**
 * Reads one parsed policy file field by field, recording every problem as a located
 * {@link PolicyIssue} instead of stopping at the first, so one load reports them all.
 */
export class PolicyReader {
  readonly file: string;
  readonly #lines: LineCounter;
  readonly #issues: PolicyIssue[];
  readonly #aliases = new Map<Node, Node | null>();

  constructor(file: string, doc: Document, lines: LineCounter, issues: PolicyIssue[]) {
    this.file = file;
    this.#lines = lines;
    this.#issues = issues;
    // One pass in document order resolves every alias to the latest anchor before it; the alias
    // count itself was already bounded by toJS({ maxAliasCount }).
    const anchors = new Map<string, Node>();
    visit(doc, {
      Node: (_key, node) => {
        if (isAlias(node)) this.#aliases.set(node, anchors.get(node.source) ?? null);
        else if (node.anchor) anchors.set(node.anchor, node);
      },
    });
  }

  /** Issues recorded so far (across files); compare before and after to know if a part failed. */
  get issueCount(): number {
    return this.#issues.length;
  }

  /** 1-based line and column of a node (1:1 when there is none, e.g. an empty file). */
  position(node: Node | null): SourcePosition {
    const offset = node?.range?.[0];
    if (offset === undefined) return { file: this.file, line: 1, column: 1 };
    const pos = this.#lines.linePos(offset);
    return { file: this.file, line: pos.line, column: pos.col };
  }

  root(node: Node | null): Slot {
    return { node: this.#resolve(node), at: node, field: '' };
  }

  /** Records an issue located at `at` (line 1, column 1 when there is no node). */
  issue(at: Node | null, field: string, message: string): void {
    this.#issues.push({ ...this.position(at), field: field || '(file)', message });
  }

  /**
   * Reads a mapping with a fixed set of fields. Unknown fields and missing required ones are
   * reported (with a did-you-mean hint); returns the known fields present, or `null` if `slot` is
   * not a mapping at all.
   */
  fields(slot: Slot, known: readonly string[], required: readonly string[] = []): Map<string, Slot> | null {
    const entries = this.entries(slot);
    if (entries === null) return null;
    const out = new Map<string, Slot>();
    for (const [name, value] of entries) {
      if (known.includes(name)) {
        out.set(name, value);
        continue;
      }
      const hint = suggestField(name, known);
      this.issue(
        value.keyAt,
        value.field,
        `unknown field ${JSON.stringify(name)}${hint === null ? '' : `; did you mean ${JSON.stringify(hint)}?`}` +
          ` (known: ${known.join(', ')})`,
      );
    }
    for (const name of required) {
      if (!out.has(name))
        this.issue(slot.keyAt ?? slot.at, slot.field, `missing required field ${JSON.stringify(name)}`);
    }
    return out;
  }

  /** Reads a mapping with free-form string keys (body conditions, reconcile.match). */
  entries(slot: Slot): Map<string, Slot & { readonly keyAt: Node }> | null {
    const node = slot.node;
    if (!isMap(node)) {
      this.#wrongType(slot, 'a mapping');
      return null;
    }
    const out = new Map<string, Slot & { readonly keyAt: Node }>();
    for (const pair of node.items) {
      const keyNode = pair.key as Node;
      const key = isScalar(keyNode) ? keyNode.value : undefined;
      if (typeof key !== 'string') {
        this.issue(keyNode, slot.field, 'field names must be strings');
        continue;
      }
      const field =
        slot.field === ''
          ? key
          : /^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)
            ? `${slot.field}.${key}`
            : `${slot.field}[${JSON.stringify(key)}]`;
      const value = (pair.value ?? null) as Node | null;
      out.set(key, { node: this.#resolve(value), at: value?.range ? value : keyNode, field, keyAt: keyNode });
    }
    return out;
  }

  /** Reads a sequence; each item's field is `field[i]`. */
  items(slot: Slot): Slot[] | null {
    const node = slot.node;
    if (!isSeq(node)) {
      this.#wrongType(slot, 'a list');
      return null;
    }
    return node.items.map((item, i) => {
      const n = item as Node;
      return { node: this.#resolve(n), at: n, field: `${slot.field}[${i}]` };
    });
  }

  /** A scalar of any type; `undefined` (with an issue) for a mapping or list. */
  scalar(slot: Slot): YamlScalar | undefined {
    const node = slot.node;
    if (isScalar(node)) {
      const v = node.value;
      if (v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return v;
    }
    this.#wrongType(slot, 'a string, number, boolean or null');
    return undefined;
  }

  /** A non-empty string. */
  string(slot: Slot): string | null {
    const node = slot.node;
    if (isScalar(node) && typeof node.value === 'string' && node.value.length > 0) return node.value;
    this.#wrongType(slot, 'a non-empty string');
    return null;
  }

  /** One of `options` (exact spelling). */
  oneOf<T extends string>(slot: Slot, options: readonly T[]): T | null {
    const node = slot.node;
    const v = isScalar(node) ? node.value : undefined;
    if (typeof v === 'string' && (options as readonly string[]).includes(v)) return v as T;
    this.issue(slot.at, slot.field, `expected one of ${options.join(', ')}, got ${describe(node)}`);
    return null;
  }

  /** An integer at least `min`. */
  integer(slot: Slot, min: number): number | null {
    const node = slot.node;
    const v = isScalar(node) ? node.value : undefined;
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= min) return v;
    this.issue(slot.at, slot.field, `expected an integer >= ${min}, got ${describe(node)}`);
    return null;
  }

  boolean(slot: Slot): boolean | null {
    const node = slot.node;
    if (isScalar(node) && typeof node.value === 'boolean') return node.value;
    this.#wrongType(slot, 'true or false');
    return null;
  }

  #resolve(node: Node | null): Node | null {
    return node !== null && isAlias(node) ? (this.#aliases.get(node) ?? null) : node;
  }

  #wrongType(slot: Slot, expected: string): void {
    this.issue(slot.at, slot.field, `expected ${expected}, got ${describe(slot.node)}`);
  }
}

function describe(node: Node | null): string {
  if (node === null) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) {
    const v = node.value;
    if (v === null) return 'an empty value';
    return typeof v === 'string' ? `the string ${JSON.stringify(v)}` : `${typeof v} ${String(v)}`;
  }
  return 'an unsupported node';
}
