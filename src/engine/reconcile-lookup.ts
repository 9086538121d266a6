/**
 * The reconciliation lookup (docs/design.md §3 "Reconciliation appends, never rewrites", §4.1
 * `reconcile`): after an attempt whose outcome is unknown, a new proposal for the same operation
 * makes the gate ask the destination whether the effect exists before anything is sent again.
 *
 * The answer is an observation, never a verdict on the first attempt: one match lets the store
 * settle the operation as succeeded via reconciliation, two or more confirm a duplicate effect
 * (keeping every remote reference). A `none` is only a negative observation: absence proves little
 * (a list endpoint may lag, paginate or filter), so the operation stays unknown. Anything the
 * destination does wrong is `inconclusive`, never a throw: the caller then falls back to holding.
 */
import { compileJsonPath, type ReconcileConfig, type Tool } from '../policy/index.js';
import type { ReconciliationInput } from '../store/index.js';
import type { ArgumentDocument } from './argument-document.js';
import { canonicalJson, sha256Ref } from './canonical-json.js';
import { formatAuthority } from './normalize-head.js';
import { destinationRefOf } from './response-facts.js';
import { isSecretCapture } from './secret-captures.js';
import type { GateRequest, UpstreamSender } from './types.js';

export interface ReconcileLookupInput {
  /** `tool.reconcile` must be non-null. */
  readonly tool: Tool;
  /** The proposal that triggered the lookup: its origin and its credentials (never stored). */
  readonly request: GateRequest;
  /** The proposal's argument document. */
  readonly args: ArgumentDocument;
  readonly operationId: string;
  readonly attemptId: string | null;
  readonly send: UpstreamSender;
  readonly timeoutMs: number;
}

/**
 * Headers that describe the proposal's body (the lookup has none) or its write (the idempotency
 * key belongs to the operation's attempts; a lookup is not one of them).
 */
const DROPPED_HEADERS: ReadonlySet<string> = new Set([
  'content-type',
  'content-length',
  'content-encoding',
  'transfer-encoding',
  'expect',
]);
const EMPTY = new Uint8Array(0);
const decoder = new TextDecoder();

/** One `match` pair with the request's value for it (`undefined` when the argument is absent). */
export interface Expected {
  readonly m: ReconcileConfig['match'][number];
  readonly value: unknown;
}

export type Outcome = Pick<ReconciliationInput, 'result' | 'matches' | 'remoteRefs' | 'status' | 'error'>;

/** Looks the operation up at the destination; never throws for anything the destination does. */
export async function reconcileLookup(input: ReconcileLookupInput): Promise<ReconciliationInput> {
  const { tool, request, args } = input;
  const reconcile = tool.reconcile;
  if (reconcile === null) throw new Error(`tool ${tool.id} declares no reconcile lookup`);

  const authority = formatAuthority(request.host, request.port, request.scheme === 'https' ? 443 : 80);
  const origin = `${request.scheme}://${authority}`;
  const filled = fillTemplate(reconcile.path, args.path, tool);
  const method = reconcile.method;
  // The trail shows secret captures as `{name}`, and the fingerprint hashes that same form: an
  // unkeyed hash of a short secret could be brute-forced from the trail.
  const endpoint = `${method} ${origin}${filled.display}`;
  const expected = reconcile.match.map((m) => ({ m, value: m.argument.evaluate(args)[0] }));
  const queryFingerprint = sha256Ref(
    canonicalJson({
      method,
      url: `${origin}${filled.display}`,
      match: expected.map(({ m, value }) => ({ remote: m.remote.expression, value })),
    }),
  );
  const base = { operationId: input.operationId, attemptId: input.attemptId, endpoint, queryFingerprint };

  // Without every value to look for, a lookup cannot tell anything: nothing is sent.
  const pathAndQuery = filled.real;
  const absent = expected.find((e) => e.value === undefined);
  if (pathAndQuery === null || absent !== undefined) {
    const error =
      pathAndQuery === null
        ? `path capture {${filled.missing}} absent`
        : `argument ${absent!.m.argument.expression} absent`;
    return { ...base, ...inconclusive(null, error), durationMs: 0, startedAt: new Date().toISOString() };
  }

  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const sent = await input.send({
    scheme: request.scheme,
    method,
    host: request.host,
    port: request.port,
    pathAndQuery,
    headers: lookupHeaders(request, tool, authority),
    body: EMPTY,
    deadlineMs: input.timeoutMs,
  });
  const durationMs = Math.round((performance.now() - t0) * 1000) / 1000;

  let outcome: Outcome;
  if (sent.kind === 'failure') outcome = inconclusive(null, sent.error);
  else if (sent.kind === 'stream') {
    // Never asked for (a lookup is buffered); read nothing from one rather than guess.
    sent.body.cancel('a reconciliation lookup reads no event stream');
    outcome = inconclusive(sent.status, 'an event stream, not a lookup answer');
  } else if (sent.status < 200 || sent.status > 299)
    outcome = inconclusive(sent.status, `status ${sent.status}`);
  else outcome = judge(tool, sent.status, sent.body, expected);
  return { ...base, ...outcome, durationMs, startedAt };
}

/**
 * What a lookup answer says about the expected item: `match`, `multiple`, `none`, or
 * `inconclusive` when it is not the list the tool describes. Also judges an agent's own read-back
 * (read-back.ts).
 */
export function judge(tool: Tool, status: number, body: Uint8Array, expected: readonly Expected[]): Outcome {
  const json = parseAnswer(body);
  return json === NOT_JSON
    ? inconclusive(status, 'response is not JSON')
    : judgeParsed(tool, status, json, expected);
}

/** Marks an answer that is not JSON (`parseAnswer`). */
export const NOT_JSON: unique symbol = Symbol('not JSON');

/** The answer's JSON, or `NOT_JSON`: parsed once when one answer is judged against several operations. */
export function parseAnswer(body: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(body));
  } catch {
    return NOT_JSON;
  }
}

/** `judge` for an answer already parsed. */
export function judgeParsed(
  tool: Tool,
  status: number,
  json: unknown,
  expected: readonly Expected[],
): Outcome {
  const reconcile = tool.reconcile!;
  const items = reconcile.items.evaluate(json);
  // An empty list is a real answer; a response without the expected list (an error object, a
  // changed API) is not, and must not pass for "no such item". A wildcard over an object lists its
  // member values (`$[*]` over `{"message":"Bad credentials"}` gives one string "item"), so the
  // container a wildcard walks must be a list.
  const lists = listsWalked(reconcile.items.expression, json);
  if (lists === null ? items.length === 0 : lists.length === 0 || !lists.every(Array.isArray)) {
    return inconclusive(
      status,
      items.length === 0 ? 'items path matched nothing' : 'items path matched no list',
    );
  }
  const wanted = expected.map((e) => canonicalJson(e.value));
  const matching = items.filter((item) =>
    expected.every((e, i) => {
      const remote = e.m.remote.evaluate(item)[0];
      return remote !== undefined && canonicalJson(remote) === wanted[i];
    }),
  );
  const remoteRefs = matching.map((item) => destinationRefOf(tool, item));
  const result = matching.length === 0 ? 'none' : matching.length === 1 ? 'match' : 'multiple';
  return { result, matches: matching.length, remoteRefs, status, error: null };
}

/**
 * The containers an items path ending in a wildcard (`$[*]`, `$.data[*]`, `$.data.*`) walks, or
 * `null` for any other items path (whose shape cannot be checked beyond "it found something").
 */
function listsWalked(expression: string, json: unknown): unknown[] | null {
  const parent = /^(.*?)(?:\[\*\]|\.\*)$/.exec(expression)?.[1];
  // `$..*` is a descendant walk, not a listing.
  if (parent === undefined || parent.endsWith('.')) return null;
  try {
    return compileJsonPath(parent).evaluate(json);
  } catch {
    return null;
  }
}

function inconclusive(status: number | null, error: string): Outcome {
  return { result: 'inconclusive', matches: 0, remoteRefs: [], status, error };
}

/**
 * Fills `{name}` placeholders: `real` with the encoded captures (null when one is absent), `display`
 * with secret or absent captures left as `{name}` so no secret reaches the trail.
 */
function fillTemplate(
  template: string,
  captures: Readonly<Record<string, string>>,
  tool: Tool,
): { real: string | null; display: string; missing: string | null } {
  let missing: string | null = null;
  const fill = (forDisplay: boolean): string =>
    template.replace(/\{([^}]*)\}/g, (whole, name: string) => {
      const value = Object.hasOwn(captures, name) ? captures[name] : undefined;
      if (value === undefined) {
        missing ??= name;
        return whole;
      }
      return forDisplay && isSecretCapture(tool, name) ? whole : encodeURIComponent(value);
    });
  const display = fill(true);
  const real = fill(false);
  return { real: missing === null ? real : null, display, missing };
}

/**
 * The agent's own end-to-end headers, credentials included: the lookup acts with exactly the
 * authority the agent used (never more), and the headers are sent, never stored.
 */
function lookupHeaders(
  request: GateRequest,
  tool: Tool,
  authority: string,
): Record<string, string | string[]> {
  const idempotency = tool.idempotency?.header?.toLowerCase();
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    const lower = name.toLowerCase();
    if (value === undefined || DROPPED_HEADERS.has(lower) || lower === idempotency) continue;
    headers[lower] = value;
  }
  headers['accept'] = 'application/json';
  headers['host'] = authority;
  return headers;
}
