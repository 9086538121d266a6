import { EffectgateError } from '../errors.js';

/** The four MCP tool hints, each defaulted the way the MCP spec says when a server leaves it out. */
export interface McpToolHints {
  readonly readOnlyHint: boolean;
  readonly destructiveHint: boolean;
  readonly idempotentHint: boolean;
  readonly openWorldHint: boolean;
}

export type McpHintName = keyof McpToolHints;

/** MCP spec defaults: a tool that says nothing is assumed to write, destroy, repeat and reach out. */
export const MCP_DEFAULT_HINTS: McpToolHints = Object.freeze({
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: true,
});

const HINT_NAMES: readonly McpHintName[] = Object.freeze(Object.keys(MCP_DEFAULT_HINTS) as McpHintName[]);

/** One tool of a `tools/list` result, as the server describes it (untrusted: hints, not facts). */
export interface McpToolDescription {
  readonly name: string;
  /** `annotations.title`, or `null`. */
  readonly title: string | null;
  /** Defaulted hints. */
  readonly hints: McpToolHints;
  /** The hints the server actually gave as booleans; the others are defaults. */
  readonly givenHints: readonly McpHintName[];
  /** `inputSchema.required` names, in order. */
  readonly required: readonly string[];
  /** `inputSchema.properties` names, in order. */
  readonly properties: readonly string[];
}

/** A parsed `tools/list` result. */
export interface ToolsList {
  readonly tools: readonly McpToolDescription[];
  /** Set when the server paginated: the document holds one page only. */
  readonly nextCursor: string | null;
}

/**
 * Parses a `tools/list` result (`{"tools": [...]}`) or the whole JSON-RPC response carrying one
 * (`{"jsonrpc": "2.0", "id": 1, "result": {"tools": [...]}}`). Throws `EG_ERR_CONFIG_INVALID`
 * with a message starting `source: `. Hints that are absent, or not booleans, take the MCP spec
 * defaults: a malformed hint must not make a tool look safer than saying nothing would.
 *
 * @example
 * parseToolsList('{"tools":[{"name":"create_ticket"}]}', 'tools.json').tools[0].hints.destructiveHint; // true
 */
export function parseToolsList(text: string, source: string): ToolsList {
  const fail = (message: string): EffectgateError =>
    new EffectgateError('EG_ERR_CONFIG_INVALID', `${source}: ${message}`);
  let doc: unknown;
  try {
    doc = JSON.parse(text.startsWith('\uFEFF') ? text.slice(1) : text);
  } catch (err) {
    throw fail(`not JSON: ${(err as Error).message}`);
  }
  if (!isObject(doc)) throw fail(`expected a JSON object, got ${kind(doc)}`);
  let result: unknown = doc;
  if (!('tools' in doc) && ('result' in doc || 'error' in doc)) {
    if (!('result' in doc)) {
      const error = isObject(doc['error']) ? doc['error'] : {};
      throw fail(
        `is a JSON-RPC error response (code ${JSON.stringify(error['code'] ?? null)}, ` +
          `message ${JSON.stringify(error['message'] ?? null)}), not a tools/list result`,
      );
    }
    result = doc['result'];
  }
  if (!isObject(result) || !Array.isArray(result['tools'])) {
    throw fail('expected a tools/list result {"tools": [...]} or a JSON-RPC response whose result is one');
  }
  const seen = new Map<string, number>();
  const tools = result['tools'].map((item, i): McpToolDescription => {
    if (!isObject(item)) throw fail(`tools[${i}] is ${kind(item)}, expected an object`);
    const name = item['name'];
    if (typeof name !== 'string' || name === '') throw fail(`tools[${i}].name must be a non-empty string`);
    const earlier = seen.get(name);
    if (earlier !== undefined)
      throw fail(`tools[${i}].name ${JSON.stringify(name)} repeats tools[${earlier}]; tool names are unique`);
    seen.set(name, i);
    return describeTool(name, item);
  });
  const cursor = result['nextCursor'];
  return Object.freeze({
    tools: Object.freeze(tools),
    nextCursor: typeof cursor === 'string' && cursor !== '' ? cursor : null,
  });
}

function describeTool(name: string, item: Readonly<Record<string, unknown>>): McpToolDescription {
  const annotations = isObject(item['annotations']) ? item['annotations'] : {};
  const hints: Record<McpHintName, boolean> = { ...MCP_DEFAULT_HINTS };
  const givenHints: McpHintName[] = [];
  for (const hint of HINT_NAMES) {
    const value = annotations[hint];
    if (typeof value !== 'boolean') continue;
    hints[hint] = value;
    givenHints.push(hint);
  }
  const title = annotations['title'] ?? item['title'];
  const schema = isObject(item['inputSchema']) ? item['inputSchema'] : {};
  const required = Array.isArray(schema['required'])
    ? schema['required'].filter((r): r is string => typeof r === 'string' && r !== '')
    : [];
  const properties = isObject(schema['properties']) ? Object.keys(schema['properties']) : [];
  return Object.freeze({
    name,
    title: typeof title === 'string' ? title : null,
    hints: Object.freeze(hints),
    givenHints: Object.freeze(givenHints),
    required: Object.freeze(required),
    properties: Object.freeze(properties),
  });
}

function isObject(value: unknown): value is Readonly<Record<string, unknown>> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function kind(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}
