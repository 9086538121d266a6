import { parse } from 'yaml';
import { compileJsonPath } from './json-path.js';
import type { McpHintName, McpToolDescription } from './tools-list.js';

/** Where the MCP server is reached: the request head a `tools/call` to it has. */
export interface McpEndpoint {
  /** Canonical host, as the classifier sees request hosts. */
  readonly host: string;
  readonly port: number;
  /** As a `match.hosts` entry: `mcp.example.com`, `mcp.example.com:8443`. */
  readonly hostText: string;
  readonly path: string;
}

/** A suggested dedupe key path and why it was picked, for the YAML comment. */
export interface KeySuggestion {
  readonly expression: string;
  readonly why: string;
}

const ARGUMENTS = '$.body.params.arguments';

/**
 * The key path to suggest: the first required argument a JSONPath of the accepted subset can
 * name, else the first declared property, else the whole argument object. Each candidate is
 * compiled and tried on a document holding only that argument, so a name the subset would read
 * differently (`a.b`, `x:y`) is never suggested.
 */
export function suggestKey(tool: McpToolDescription): KeySuggestion {
  for (const [names, why] of [
    [tool.required, 'the first required argument'],
    [tool.properties, 'the first declared argument (none is required)'],
  ] as const) {
    for (const name of names) {
      const expression = argumentPath(name);
      if (expression !== null) return { expression, why };
    }
  }
  return { expression: ARGUMENTS, why: 'no usable argument is declared, so the whole argument object' };
}

/**
 * A starting classification for an MCP tool: a `tools:` list item. `declareBefore` names the
 * policy tool with body conditions that classifies the call today (it wins over a later one).
 */
export function classificationYaml(
  tool: McpToolDescription,
  id: string,
  endpoint: McpEndpoint,
  declareBefore: string | null,
): string {
  const key = suggestKey(tool);
  return [
    `  # From the tools/list entry of the MCP tool ${quoted(tool.name)}. Annotations are untrusted hints:`,
    `  #   ${hintsText(tool)}`,
    '  # The effect is guessed from destructiveHint: review it, and review the dedupe key and window.',
    ...(declareBefore === null
      ? []
      : [`  # Declare it before ${printableAscii(declareBefore)}, which classifies this call today.`]),
    `  - id: ${id}`,
    '    match:',
    `      hosts: [${scalar(endpoint.hostText)}]`,
    '      method: POST',
    `      path: ${scalar(endpoint.path)}`,
    '      body:',
    `        "$.method": tools/call`,
    `        "$.params.name": ${scalar(tool.name)}`,
    `    effect: ${tool.hints.destructiveHint ? 'destroy' : 'create'}`,
    ...dedupeLines(key),
    '    verdict: { protocol: jsonrpc }',
    '',
  ].join('\n');
}

/** A `dedupe` block to add to the policy tool `toolId` (at `where`), which classifies the call without one. */
export function dedupeYaml(tool: McpToolDescription, toolId: string, where: string): string {
  return [
    `    # Add to tool ${toolId} (${printableAscii(where)}): it classifies the MCP tool ${quoted(tool.name)}`,
    '    # with recognition off. Annotations are untrusted hints:',
    `    #   ${hintsText(tool)}`,
    '    # Review the dedupe key and window.',
    ...dedupeLines(suggestKey(tool)),
    '',
  ].join('\n');
}

function dedupeLines(key: KeySuggestion): string[] {
  return [
    '    dedupe:',
    `      # A guess: ${key.why}. Key on the arguments that make two calls one effect.`,
    `      key: [${scalar(key.expression)}]`,
    '      window: 1h',
  ];
}

/** `readOnlyHint false (default), destructiveHint true, …`: what the server said and what was assumed. */
function hintsText(tool: McpToolDescription): string {
  return (Object.keys(tool.hints) as McpHintName[])
    .map((h) => `${h} ${tool.hints[h]}${tool.givenHints.includes(h) ? '' : ' (default)'}`)
    .join(', ');
}

function argumentPath(name: string): string | null {
  const mark = {};
  const document = { body: { params: { arguments: { [name]: mark } } } };
  for (const expression of [`${ARGUMENTS}.${name}`, `${ARGUMENTS}['${name}']`]) {
    try {
      const hits = compileJsonPath(expression).evaluate(document);
      if (hits.length === 1 && hits[0] === mark) return expression;
    } catch {
      // Not in the accepted subset: try the next spelling.
    }
  }
  return null;
}

// Plain YAML only for text that cannot be read as anything else, in block or flow context.
const PLAIN = /^[A-Za-z0-9_$/][A-Za-z0-9_$./-]*$/;

/** `text` as a YAML scalar that reads back as exactly that string. */
function scalar(text: string): string {
  return PLAIN.test(text) && parse(text) === text ? text : quoted(text);
}

/** Local text (a policy file name) for a one-line comment: anything but printable ASCII becomes `?`. */
function printableAscii(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?');
}

/**
 * A double-quoted YAML scalar in printable ASCII: the text comes from an untrusted server, so no
 * line break may end a comment early and no control or bidi character may reach a terminal.
 */
function quoted(text: string): string {
  let out = '';
  for (const ch of JSON.stringify(text)) {
    const cp = ch.codePointAt(0)!;
    if (cp >= 0x20 && cp < 0x7f) out += ch;
    else if (cp <= 0xffff) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += `\\U${cp.toString(16).padStart(8, '0')}`;
  }
  return out;
}
