import type { Tool } from '../policy/index.js';
import type { DuplicateSource, EnforcedVerdict } from '../store/index.js';
import type { GateResponse, HeaderMap } from './types.js';
import { VERDICT_DIALECTS } from './verdict-dialects.js';

export { negotiateProblemType } from './verdict-dialects.js';

/** The facts of one gate-made answer; rendered in the tool's dialect (`verdict-dialects.ts`). */
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
  /**
   * Duplicates only: whether the source run is one the gate derived (no `Effectgate-Run`), and
   * whether it is the proposal's own derived run, i.e. the same address, maybe another process.
   */
  readonly sourceRelation?: { readonly derivedRun: boolean; readonly sameAddress: boolean };
  readonly retryAfterSeconds?: number;
  /** More members for the body (e.g. `dispatch_state`, `missing`). */
  readonly extra?: Readonly<Record<string, unknown>>;
  /** The `Effectgate-Operation` header is sent only when the verdict concerns an operation. */
  readonly operationHeader?: boolean;
}

const encoder = new TextEncoder();

function sourceJson(
  source: DuplicateSource | null,
  relation: VerdictFacts['sourceRelation'],
): Record<string, unknown> | null {
  if (source === null) return null;
  return {
    run_id: source.runId,
    step: source.step,
    operation_id: source.operationId,
    attempt_id: source.attemptId,
    confirmed_at: source.confirmedAt,
    destination_ref: source.destinationRef,
    ...(relation === undefined
      ? {}
      : { derived_run: relation.derivedRun, same_address: relation.sameAddress }),
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
  if (facts.source !== undefined) body['source'] = sourceJson(facts.source, facts.sourceRelation);
  if (facts.retryAfterSeconds !== undefined) body['retry_after'] = facts.retryAfterSeconds;
  if (facts.extra) Object.assign(body, facts.extra);
  return body;
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
 * Renders a gate-made answer in the dialect its tool's `verdict.protocol` names
 * (`verdict-dialects.ts`): problem+json by default, a JSON-RPC 2.0 error with the request's `id`
 * (`rpcId`, from `jsonRpcId`), or the destination's own error shape for the SDKs that call it.
 */
export function renderVerdict(
  facts: VerdictFacts,
  requestHeaders: HeaderMap,
  rpcId: string | number | null,
): GateResponse {
  const dialect = VERDICT_DIALECTS[facts.tool?.verdict.protocol ?? 'http'];
  const answer = dialect({
    facts,
    problem: verdictBody(facts),
    accept: firstHeader(requestHeaders, 'accept'),
    rpcId,
  });
  return {
    status: answer.status,
    headers: { ...answer.headers, ...verdictHeaders(facts), 'cache-control': 'no-store' },
    body: encoder.encode(JSON.stringify(answer.body)),
  };
}
