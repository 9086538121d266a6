import { EffectgateError } from '../errors.js';
import { classificationYaml, dedupeYaml, type McpEndpoint } from './classification-suggestion.js';
import { Classifier } from './classifier.js';
import { parseHostPattern } from './host-pattern.js';
import { RouteMatcher } from './route-matcher.js';
import type { McpToolDescription, McpToolHints, ToolsList } from './tools-list.js';
import type { PolicySet, RouteInput, Tool } from './types.js';

export type { McpEndpoint } from './classification-suggestion.js';

export type AnnotationWarningReason = 'unclassified' | 'no_dedupe';

/** An MCP tool that may have effects and that the policies would not recognise a repeat of. */
export interface AnnotationWarning {
  /** The MCP tool's name. */
  readonly tool: string;
  readonly reason: AnnotationWarningReason;
  /** The defaulted hints, and the title when the server gave one. */
  readonly annotations: McpToolHints & { readonly title: string | null };
  /** The policy tool that classifies the call (`no_dedupe`), or `null` (`unclassified`). */
  readonly classifiedBy: { readonly id: string; readonly file: string; readonly line: number } | null;
  /** YAML to paste and review: a whole `tools:` item, or a `dedupe` block for `classifiedBy`. */
  readonly suggestion: string;
}

export interface AnnotationReport {
  readonly endpoint: McpEndpoint;
  /** MCP tools that may have effects (readOnlyHint not true), each checked. */
  readonly checked: readonly string[];
  /** MCP tools that say they are read-only: not checked. */
  readonly readOnly: readonly string[];
  readonly warnings: readonly AnnotationWarning[];
}

const DEFAULT_PORT = 443;

/**
 * The MCP endpoint to check `tools/call`s against: `host` (`name` or `name:port`) when given,
 * else the one host the set's `verdict: { protocol: jsonrpc }` tools name. Throws
 * `EG_ERR_CONFIG_INVALID` naming the flag when neither gives exactly one concrete host.
 */
export function mcpEndpoint(set: PolicySet, host: string | undefined, path: string): McpEndpoint {
  if (!path.startsWith('/') || /[\s?#{}]/.test(path))
    throw configError(`--mcp-path ${JSON.stringify(path)} must be a literal path such as /mcp`);
  const text = host ?? defaultHost(set);
  let pattern: ReturnType<typeof parseHostPattern>;
  try {
    pattern = parseHostPattern(text);
  } catch (err) {
    throw configError(`--mcp-host: ${(err as Error).message}`);
  }
  if (pattern.kind !== 'exact')
    throw configError(`--mcp-host ${JSON.stringify(text)} must name one host, not a pattern`);
  return Object.freeze({
    host: pattern.host,
    port: pattern.port ?? DEFAULT_PORT,
    hostText: pattern.text,
    path,
  });
}

/**
 * Which MCP tools that may have effects the policies would let through without recognising a
 * repeat. Each is asked of the real classifier with the request a `tools/call` of it is, so the
 * answer is the one the gate would give. Annotations only shape the warnings and suggestions;
 * they never reach a verdict.
 */
export function annotationWarnings(set: PolicySet, list: ToolsList, endpoint: McpEndpoint): AnnotationReport {
  const classifier = new Classifier(set);
  const head: RouteInput = { host: endpoint.host, port: endpoint.port, method: 'POST', path: endpoint.path };
  const candidates = classifier.candidates(head);
  const ids = new Set(set.tools.map((t) => t.id));
  const checked: string[] = [];
  const readOnly: string[] = [];
  const warnings: AnnotationWarning[] = [];
  for (const tool of list.tools) {
    if (tool.hints.readOnlyHint) {
      readOnly.push(tool.name);
      continue;
    }
    checked.push(tool.name);
    const chosen = classifier.select(candidates, toolsCallBody(tool.name));
    if (chosen !== null && chosen.tool.dedupe !== null) continue;
    warnings.push(warning(tool, chosen?.tool ?? null, endpoint, ids));
  }
  return Object.freeze({
    endpoint,
    checked: Object.freeze(checked),
    readOnly: Object.freeze(readOnly),
    warnings: Object.freeze(warnings),
  });
}

/** The JSON-RPC body of a `tools/call` of `name`, as an MCP client sends it. */
export function toolsCallBody(name: string): unknown {
  return { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } };
}

function warning(
  tool: McpToolDescription,
  by: Tool | null,
  endpoint: McpEndpoint,
  ids: Set<string>,
): AnnotationWarning {
  const annotations = Object.freeze({ ...tool.hints, title: tool.title });
  const where = by === null ? '' : `${by.source.file}:${by.source.line}`;
  let suggestion: string;
  if (by !== null && namesTool(by, tool.name)) suggestion = dedupeYaml(tool, by.id, where);
  else {
    // A tool of its own: one with body conditions is tried before a catch-all without any, but
    // among tools with body conditions declaration order decides.
    const before = by?.match.hasBodyConditions === true ? `${by.id} (${where})` : null;
    const id = freeId(tool.name, ids);
    ids.add(id);
    suggestion = classificationYaml(tool, id, endpoint, before);
  }
  return Object.freeze({
    tool: tool.name,
    reason: by === null ? 'unclassified' : 'no_dedupe',
    annotations,
    classifiedBy:
      by === null ? null : Object.freeze({ id: by.id, file: by.source.file, line: by.source.line }),
    suggestion,
  });
}

/** Whether `by`'s body conditions single out the MCP tool `name` (`$.params.name: name`). */
function namesTool(by: Tool, name: string): boolean {
  if (!(by.match instanceof RouteMatcher)) return false;
  return by.match.bodyConditions.some((c) => c.canonical === '$.params.name' && c.value === name);
}

/** `mcp.<name>` in the characters a tool id allows, made unique against the set's ids. */
function freeId(name: string, taken: ReadonlySet<string>): string {
  const base = `mcp.${name.replace(/[^A-Za-z0-9_.:-]/g, '_')}`.slice(0, 190);
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}_${n}`;
  return id;
}

function defaultHost(set: PolicySet): string {
  const hosts = new Set<string>();
  for (const t of set.tools) {
    if (t.verdict.protocol !== 'jsonrpc' || !(t.match instanceof RouteMatcher)) continue;
    for (const h of t.match.hosts) hosts.add(h.text);
  }
  const [only, ...more] = [...hosts];
  if (only !== undefined && more.length === 0 && !only.startsWith('*.')) return only;
  const why =
    only === undefined
      ? 'no tool with verdict: { protocol: jsonrpc } names a host'
      : `the jsonrpc tools name ${hosts.size === 1 ? 'only the pattern' : 'several hosts:'} ${[...hosts].join(', ')}`;
  throw configError(`--mcp-host is required: ${why}`);
}

function configError(message: string): EffectgateError {
  return new EffectgateError('EG_ERR_CONFIG_INVALID', message);
}
