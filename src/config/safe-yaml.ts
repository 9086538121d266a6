import { type Document, LineCounter, type Node, parseDocument, type YAMLError } from 'yaml';
import { EffectgateError } from '../errors.js';

/** A problem found while reading a configuration file as YAML, located for `file:line:column`. */
export interface YamlIssue {
  readonly line: number;
  readonly column: number;
  readonly field: string;
  readonly message: string;
}

export interface SafeYamlLimits {
  /** Files larger than this are refused before parsing. */
  readonly maxBytes: number;
  /** Alias expansions allowed when resolving the tree ("billion laughs" guard). */
  readonly maxAliasCount: number;
  /** For messages: `policy files`, `agents files`. */
  readonly kind: string;
  /** Extra advice appended to a YAML syntax message (e.g. how to quote `{id}`). */
  readonly hint?: (message: string) => string;
}

export type SafeYaml =
  | { readonly ok: true; readonly doc: Document.Parsed; readonly lines: LineCounter }
  | { readonly ok: false; readonly issues: readonly YamlIssue[] };

const fileIssue = (message: string): YamlIssue => ({ line: 1, column: 1, field: '(file)', message });

/**
 * Reads untrusted YAML the one careful way every configuration file shares: a size cap before
 * parsing, unique keys, strict mode, the first syntax error (the ones after it are nearly always the
 * parser losing its footing) or every warning (unknown tags: a file must mean exactly what it
 * says), and the alias-expansion bound enforced by resolving the tree once.
 */
export function parseSafeYaml(text: string, limits: SafeYamlLimits): SafeYaml {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > limits.maxBytes) {
    return {
      ok: false,
      issues: [fileIssue(`file is ${bytes} bytes; ${limits.kind} are limited to ${limits.maxBytes} bytes`)],
    };
  }
  const lines = new LineCounter();
  let doc: Document.Parsed;
  try {
    doc = parseDocument(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true, strict: true });
  } catch (err) {
    return { ok: false, issues: [fileIssue(`YAML could not be parsed: ${(err as Error).message}`)] };
  }
  const problems: YAMLError[] = doc.errors.length > 0 ? doc.errors.slice(0, 1) : [...doc.warnings];
  if (problems.length > 0) {
    return {
      ok: false,
      issues: problems.map((e) => {
        const pos = e.linePos?.[0] ?? lines.linePos(e.pos[0]);
        const message = (e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
        return {
          line: pos.line,
          column: pos.col,
          field: '(yaml)',
          message: `invalid YAML: ${message}${limits.hint?.(message) ?? ''}`,
        };
      }),
    };
  }
  try {
    doc.toJS({ maxAliasCount: limits.maxAliasCount });
  } catch (err) {
    return {
      ok: false,
      issues: [
        fileIssue(
          `YAML refused: ${(err as Error).message} (at most ${limits.maxAliasCount} alias expansions)`,
        ),
      ],
    };
  }
  return { ok: true, doc, lines };
}

/** Every issue of one configuration file as one refusal, a `file:line:column: field: message` line each. */
export function yamlIssuesError(file: string, issues: readonly YamlIssue[]): EffectgateError {
  return new EffectgateError(
    'EG_ERR_CONFIG_INVALID',
    issues.map((i) => `${file}:${i.line}:${i.column}: ${i.field}: ${i.message}`).join('\n'),
  );
}

/** Where a node of a parsed file starts, as `YamlIssue` locates it (the file's start when none). */
export function nodePosition(lines: LineCounter): (node: Node | null | undefined) => {
  line: number;
  column: number;
} {
  return (node) => {
    const pos = lines.linePos(node?.range?.[0] ?? 0);
    return { line: pos.line, column: pos.col };
  };
}
