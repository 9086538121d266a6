import type { Tool } from '../policy/index.js';
import type { DuplicateSource, EnforcedVerdict } from '../store/index.js';
import type { GateResponse, HeaderMap } from './types.js';

/** The facts of one gate-made answer; rendered as problem+json, plain JSON or JSON-RPC. */
export interface VerdictFacts {
  readonly verdict: EnforcedVerdict;
  readonly status: number;
  readonly title: string;
  /** Written for a model to read: what happened and what to do next. */
  readonly detail: string;
  readonly tool: Tool | null;
  readonly decisionId: string | null;
  /** The existing operation the proposal concerns; `null` when there is none. */
  readonly operationId: string | null;
  readonly attemptId?: string | null;
  /** Duplicates only: the earlier run, or `null` when it is not known (never invented). */
  readonly source?: DuplicateSource | null;
  readonly retryAfterSeconds?: number;
  /** More members for the body (e.g. `dispatch_state`, `missing`). */
  readonly extra?: Readonly<Record<string, unknown>>;
  /** The `Effectgate-Operation` header is sent only when the verdict concerns an operation. */
  readonly operationHeader?: boolean;
}

/** JSON-RPC error codes in the implementation-defined server range (JSON-RPC 2.0 §5.1). */
const JSONRPC_CODES: Readonly<Record<EnforcedVerdict, number>> = {
  allow: -32050,
  duplicate: -32051,
  pending: -32052,
  hold: -32053,
  halted: -32054,
  block: -32055,
};

const encoder = new TextEncoder();

function sourceJson(source: DuplicateSource | null): Record<string, unknown> | null {
  if (source === null) return null;
  return {
    run_id: source.runId,
    step: source.step,
    operation_id: source.operationId,
    attempt_id: source.attemptId,
    confirmed_at: source.confirmedAt,
    destination_ref: source.destinationRef,
  };
}

/** The body members shared by every rendering (RFC 9457 members plus effectgate's). */
export function verdictBody(facts: VerdictFacts): Record<string, unknown> {
  const body: Record<string, unknown> = {
    type: `urn:effectgate:verdict:${facts.verdict}`,
    title: facts.title,
    status: facts.status,
    detail: facts.detail,
    // Many SDKs surface only `message` from a JSON error body (docs/design.md §4.3).
    message: facts.detail,
    verdict: facts.verdict,
    tool: facts.tool?.id ?? null,
    decision_id: facts.decisionId,
  };
  if (facts.operationId !== null) body['operation_id'] = facts.operationId;
  if (facts.attemptId) body['attempt_id'] = facts.attemptId;
  if (facts.source !== undefined) body['source'] = sourceJson(facts.source);
  if (facts.retryAfterSeconds !== undefined) body['retry_after'] = facts.retryAfterSeconds;
  if (facts.extra) Object.assign(body, facts.extra);
  return body;
}

/**
 * Chooses the media type: problem+json unless the client's Accept excludes it and allows plain
 * JSON, in which case the same body is sent as application/json.
 */
export function negotiateProblemType(accept: string | undefined): string {
  if (accept === undefined || accept.trim() === '') return 'application/problem+json';
  let json = false;
  for (const part of accept.split(',')) {
    const [rawType, ...params] = part.split(';');
    const type = rawType?.trim().toLowerCase() ?? '';
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q !== undefined && Number(q.slice(2)) === 0) continue;
    if (type === 'application/problem+json' || type === 'application/*' || type === '*/*') {
      return 'application/problem+json';
    }
    if (type === 'application/json') json = true;
  }
  return json ? 'application/json' : 'application/problem+json';
}

function firstHeader(headers: HeaderMap, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** The `id` of a JSON-RPC request body, or `null` (a notification, or not JSON-RPC). */
export function jsonRpcId(body: unknown): string | number | null {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const id = (body as Record<string, unknown>)['id'];
    if (typeof id === 'string' || typeof id === 'number') return id;
  }
  return null;
}

/** The `Effectgate-*` response headers of a verdict (docs/design.md §4.2). */
export function verdictHeaders(facts: VerdictFacts): Record<string, string> {
  const h: Record<string, string> = { 'effectgate-verdict': facts.verdict };
  if (facts.decisionId !== null) h['effectgate-decision'] = facts.decisionId;
  if (facts.operationId !== null && facts.operationHeader !== false)
    h['effectgate-operation'] = facts.operationId;
  if (facts.attemptId) h['effectgate-attempt'] = facts.attemptId;
  return h;
}

/**
 * Renders a gate-made answer. Tools with `verdict.protocol: jsonrpc` get a JSON-RPC 2.0 error with
 * the request's `id` (`rpcId`, from `jsonRpcId`) and HTTP 200 (what MCP clients read); everyone
 * else RFC 9457 problem+json.
 */
export function renderVerdict(
  facts: VerdictFacts,
  requestHeaders: HeaderMap,
  rpcId: string | number | null,
): GateResponse {
  const headers: Record<string, string> = { ...verdictHeaders(facts), 'cache-control': 'no-store' };
  if (facts.retryAfterSeconds !== undefined) headers['retry-after'] = String(facts.retryAfterSeconds);
  const body = verdictBody(facts);
  if (facts.tool?.verdict.protocol === 'jsonrpc') {
    const rpc = {
      jsonrpc: '2.0',
      id: rpcId,
      error: { code: JSONRPC_CODES[facts.verdict], message: facts.detail, data: body },
    };
    headers['content-type'] = 'application/json';
    return { status: 200, headers, body: encoder.encode(JSON.stringify(rpc)) };
  }
  headers['content-type'] = negotiateProblemType(firstHeader(requestHeaders, 'accept'));
  return { status: facts.status, headers, body: encoder.encode(JSON.stringify(body)) };
}
