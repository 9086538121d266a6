import { compileMatch } from './compile-match.js';
import { DEFAULT_REPLAYED_HEADER, readIdempotency } from './idempotency-section.js';
import { compileJsonPath } from './json-path.js';
import type { PolicyReader, Slot, SourcePosition } from './policy-reader.js';
import { readArgumentPaths, readsGraphql } from './policy-values.js';
import type { RouteMatcher } from './route-matcher.js';
import { readDedupe, readOutcome, readReconcile, readResponse } from './tool-sections.js';
import type { CompiledPath, Effect, Tool, ToolMode, VerdictProtocol } from './types.js';

export const TOOL_FIELDS = [
  'id',
  'match',
  'effect',
  'dedupe',
  'idempotency',
  'retry',
  'outcome',
  'response',
  'redact',
  'fingerprint',
  'reconcile',
  'verdict',
  'mode',
] as const;

export const RETRY_FIELDS = ['budget'] as const;
export const FINGERPRINT_FIELDS = ['ignore'] as const;
export const VERDICT_FIELDS = ['protocol'] as const;

const EFFECTS: readonly Effect[] = [
  'read',
  'create',
  'set_state',
  'append',
  'notify',
  'destroy',
  'financial',
];
const PROTOCOLS: readonly VerdictProtocol[] = ['http', 'jsonrpc', 'stripe', 'slack', 'github', 'graphql'];
const MODES: readonly ToolMode[] = ['enforce', 'shadow'];
// Ids show up in the trail, in verdict bodies and in CLI arguments: keep them plain.
const TOOL_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$/;

/** A compiled tool plus what the cross-file checks need to point at it. */
export interface CompiledTool {
  readonly tool: Tool;
  readonly matcher: RouteMatcher;
  /** Dotted field of the entry, e.g. `tools[2]`. */
  readonly field: string;
  readonly idAt: SourcePosition;
  readonly matchAt: SourcePosition;
}

/**
 * Compiles one entry of `tools`, recording every problem on the reader. Returns `null` if the
 * entry had any issue: a half-valid tool is never governed.
 */
export function compileTool(r: PolicyReader, slot: Slot): CompiledTool | null {
  const before = r.issueCount;
  const f = r.fields(slot, TOOL_FIELDS, ['id', 'match', 'effect']);
  if (f === null) return null;
  const idSlot = f.get('id');
  const id = idSlot === undefined ? null : r.string(idSlot);
  if (idSlot !== undefined && id !== null && !TOOL_ID.test(id)) {
    r.issue(
      idSlot.at,
      idSlot.field,
      `tool id ${JSON.stringify(id)} may only use letters, digits and _ . : -`,
    );
  }
  const matchSlot = f.get('match');
  const { matcher, captures } =
    matchSlot === undefined ? { matcher: null, captures: null } : compileMatch(r, matchSlot);
  const effectSlot = f.get('effect');
  const effect = effectSlot === undefined ? null : r.oneOf(effectSlot, EFFECTS);

  const protocol = readProtocol(r, f.get('verdict'));
  const dedupeSlot = f.get('dedupe');
  const idemSlot = f.get('idempotency');
  const reconcileSlot = f.get('reconcile');
  const tool = {
    id: id ?? '',
    source: { file: r.file, line: lineOf(r, slot) },
    match: matcher,
    effect,
    dedupe: dedupeSlot === undefined ? null : readDedupe(r, dedupeSlot, captures),
    idempotency: idemSlot === undefined ? null : readIdempotency(r, idemSlot),
    retry: { budget: readRetryBudget(r, f.get('retry')) },
    outcome: readOutcome(r, f.get('outcome'), protocol),
    response: readResponse(r, f.get('response')),
    redact: f.has('redact') ? readArgumentPaths(r, f.get('redact')!, captures) : [],
    fingerprintIgnore: readFingerprintIgnore(r, f.get('fingerprint'), captures),
    reconcile: reconcileSlot === undefined ? null : readReconcile(r, reconcileSlot, captures),
    verdict: { protocol },
    // Shadow mode (docs/design.md §2): verdicts recorded as would_*, nothing refused. A gate started with
    // `--mode shadow` treats every tool so, whatever this says.
    mode: readMode(r, f.get('mode')),
  };
  if (protocol === 'jsonrpc') tool.fingerprintIgnore.push(...JSONRPC_VOLATILE);
  if (matcher?.graphqlMutation === null) refuseGraphqlPaths(r, f, tool);
  // The key member is the gate's (or the agent's) to fill: a repeat that carries the gate's key
  // where the first carried none is the same request, not a changed one.
  if (tool.idempotency?.body) tool.fingerprintIgnore.push(tool.idempotency.body.argumentPath);
  // A tool that sends keys reads the replay marker of draft-ietf-httpapi-idempotency-key-header
  // (Stripe's `Idempotent-Replayed`) unless it names another.
  if (tool.idempotency !== null && tool.response.replayedHeader === null) {
    tool.response = { ...tool.response, replayedHeader: DEFAULT_REPLAYED_HEADER };
  }
  if (r.issueCount !== before || matcher === null || effect === null || id === null) return null;
  return {
    tool: { ...tool, match: matcher, effect },
    matcher,
    field: slot.field,
    idAt: r.position(idSlot?.at ?? null),
    matchAt: r.position(matchSlot?.at ?? null),
  };
}

/**
 * `$.graphql…` paths in a tool without `match.graphql`: no request of it carries a GraphQL call,
 * so such a key would be missing every time.
 */
function refuseGraphqlPaths(
  r: PolicyReader,
  f: ReadonlyMap<string, Slot>,
  tool: Pick<Tool, 'dedupe' | 'redact' | 'fingerprintIgnore' | 'reconcile'>,
): void {
  const sections: [string, readonly CompiledPath[]][] = [
    ['dedupe', tool.dedupe?.key ?? []],
    ['redact', tool.redact],
    ['fingerprint', tool.fingerprintIgnore],
    ['reconcile', tool.reconcile?.match.map((m) => m.argument) ?? []],
  ];
  for (const [name, paths] of sections) {
    const path = paths.find(readsGraphql);
    const slot = f.get(name);
    if (path === undefined || slot === undefined) continue;
    r.issue(
      slot.at,
      slot.field,
      `${path.expression}: $.graphql paths read the GraphQL call of a tool with match.graphql, and this tool has none`,
    );
  }
}

function readRetryBudget(r: PolicyReader, slot: Slot | undefined): number {
  const f = slot === undefined ? null : r.fields(slot, RETRY_FIELDS);
  const budget = f?.get('budget');
  return (budget && r.integer(budget, 1)) ?? 3;
}

/**
 * What every JSON-RPC request carries that changes on each retry by design (docs/design.md §4.1): the
 * request `id` (a client must not reuse one), `params._meta` (progress token, trace context), and
 * what an MCP continuation adds to the same call after `input_required` (`params.inputResponses`,
 * the opaque `params.requestState`). Never part of the fingerprint of a JSON-RPC tool, whatever the
 * policy says, so a retry after a lost response is attempt n+1 of its operation, and a
 * continuation is the next attempt of the call that asked for input, not a changed request.
 */
const JSONRPC_VOLATILE: readonly CompiledPath[] = Object.freeze([
  compileJsonPath('$.body.id'),
  compileJsonPath('$.body.params._meta'),
  compileJsonPath('$.body.params.inputResponses'),
  compileJsonPath('$.body.params.requestState'),
]);

function readFingerprintIgnore(
  r: PolicyReader,
  slot: Slot | undefined,
  captures: readonly string[] | null,
): CompiledPath[] {
  const f = slot === undefined ? null : r.fields(slot, FINGERPRINT_FIELDS);
  const ignore = f?.get('ignore');
  return ignore === undefined ? [] : readArgumentPaths(r, ignore, captures);
}

function readProtocol(r: PolicyReader, slot: Slot | undefined): VerdictProtocol {
  const f = slot === undefined ? null : r.fields(slot, VERDICT_FIELDS);
  const protocol = f?.get('protocol');
  return (protocol && r.oneOf(protocol, PROTOCOLS)) ?? 'http';
}

function readMode(r: PolicyReader, slot: Slot | undefined): ToolMode {
  return (slot && r.oneOf(slot, MODES)) ?? 'enforce';
}

function lineOf(r: PolicyReader, slot: Slot): number {
  return r.position(slot.at).line;
}
