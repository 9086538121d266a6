/**
 * RFC 9457 problem responses the gate makes outside a verdict: transport refusals, a store outage,
 * an upstream that gave no usable response to ungoverned traffic. Shared by both adapters and the
 * engine so every gate-made error has one shape; verdicts are rendered by `verdict-response.ts`.
 */
import { type ErrorCode, type ErrorVariant, errorAnswer } from '../errors.js';
import type { VerdictProtocol } from '../policy/index.js';
import { speakRefusal } from './refusal-dialects.js';
import { tlsVerificationAdvice } from './tls-verification.js';
import type { GateResponse } from './types.js';

export { asJsonRpcError, speakRefusal } from './refusal-dialects.js';

const encoder = new TextEncoder();

interface ProblemText {
  readonly title: string;
  readonly detail: string;
  /** More body members (e.g. `tool`, `dispatch_state`). */
  readonly extra?: Readonly<Record<string, unknown>>;
  /** More response headers (e.g. `retry-after`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** A problem that answers no error code (a 408, a connection cap): its own status and slug. */
export interface TransportProblemInit extends ProblemText {
  readonly status: number;
  /** Slug for `urn:effectgate:problem:<slug>`. */
  readonly problem: string;
}

/**
 * The problem answering error `code`: its status and slug come from the catalogue
 * (`ERROR_CODES`), never from the call site, so one code is answered one way everywhere.
 */
export function codedProblem<C extends ErrorCode>(
  code: C,
  text: ProblemText & { readonly variant?: ErrorVariant<C> },
): GateResponse {
  const { status, type } = errorAnswer(code, text.variant);
  return problemResponse({ ...text, status, problem: type, extra: { code, ...text.extra } });
}

/** An `application/problem+json` response; `message` repeats `detail` for SDKs that read only it. */
export function problemResponse(init: TransportProblemInit): GateResponse {
  const body = {
    type: `urn:effectgate:problem:${init.problem}`,
    title: init.title,
    status: init.status,
    detail: init.detail,
    message: init.detail,
    ...init.extra,
  };
  return {
    status: init.status,
    headers: { 'content-type': 'application/problem+json', 'cache-control': 'no-store', ...init.headers },
    body: encoder.encode(JSON.stringify(body)),
  };
}

/**
 * 502, or 504 when the upstream timed out, for traffic the gate relays without governing it; a
 * certificate that does not verify says why and what fixes it (`tls-verification.ts`).
 */
export function upstreamFailedResponse(error: string, timedOut: boolean): GateResponse {
  const tls = tlsVerificationAdvice(error);
  return codedProblem('EG_ERR_UPSTREAM_FAILED', {
    ...(timedOut ? { variant: 'timed_out' } : {}),
    title:
      tls !== null
        ? 'Upstream certificate not verified'
        : timedOut
          ? 'Upstream timed out'
          : 'Upstream unreachable',
    detail: tls ?? `The destination gave no usable response (${error}).`,
  });
}

/**
 * 403 for a destination the policies' `egress` block denies (docs/design.md §4.1), refused before
 * connecting; `reason` names the address and the rule.
 */
export function destinationRefusedResponse(reason: string): GateResponse {
  return transportProblem(
    'destination_refused',
    `The destination is refused by the policies' egress rules: ${reason}. Nothing was sent. If this destination is intended, list it under egress.allow.`,
  );
}

/**
 * 400 for a near miss of a governed route: the path matches no tool as written but would match
 * `toolId` the way a lenient server reads it (docs/design.md §4.1 "Spellings"). Forwarding it would
 * let an effect out ungoverned; governing it would key a request the gate cannot be sure of.
 */
export function ambiguousRouteResponse(toolId: string, explain: string): GateResponse {
  // A strict match whose captures a lenient server reads otherwise is not a miss: say which it is.
  const what = explain.endsWith('captures read differently')
    ? `This request matches tool ${toolId}, but a server may read its path captures otherwise (${explain}), and the tool's key reads them`
    : `This request matches no tool as written, but a server may read it as tool ${toolId} (${explain})`;
  return codedProblem('EG_ERR_AMBIGUOUS_ROUTE', {
    title: 'Ambiguous spelling of a governed route',
    detail: `${what}. Nothing was sent. Send the route's canonical spelling.`,
    extra: { tool: toolId },
  });
}

/**
 * The refusals the gate makes before its store, by slug (the `type` each code's catalogue entry
 * gives; `test/unit/errors.test.ts` holds them equal); `transportProblem` renders them.
 */
export const TRANSPORT_PROBLEMS = {
  body_too_large: { code: 'EG_ERR_BODY_TOO_LARGE', title: 'Request body too large' },
  bad_request: { code: 'EG_ERR_BAD_REQUEST', title: 'Bad proxy request' },
  proxy_auth_required: { code: 'EG_ERR_PROXY_AUTH_REQUIRED', title: 'Proxy authentication required' },
  // Arguments refused before any store round trip (texts: `argument-refusal.ts`).
  arguments_ambiguous: { code: 'EG_ERR_ARGUMENTS_AMBIGUOUS', title: 'Ambiguous arguments' },
  // MCP routing headers that name another call than the body (MCP 2026-07-28 requires 400).
  headers_disagree: {
    code: 'EG_ERR_ARGUMENTS_AMBIGUOUS',
    variant: 'headers_disagree',
    title: 'Routing headers disagree with the body',
  },
  body_too_complex: { code: 'EG_ERR_BODY_TOO_COMPLEX', title: 'Request body too complex' },
  body_unreadable: { code: 'EG_ERR_BODY_UNREADABLE', title: 'Request body unreadable' },
  ambiguous_route: { code: 'EG_ERR_AMBIGUOUS_ROUTE', title: 'Ambiguous spelling of a governed route' },
  graphql_invalid: { code: 'EG_ERR_GRAPHQL_INVALID', title: 'GraphQL request unreadable' },
  destination_refused: { code: 'EG_ERR_DESTINATION_REFUSED', title: 'Destination refused' },
  idempotency_key: { code: 'EG_ERR_IDEMPOTENCY_KEY', title: 'Idempotency key unusable' },
  // A body-analysis worker failed (crashed, or past its memory limit): nothing was sent.
  analysis_failed: {
    code: 'EG_ERR_ANALYSIS_FAILED',
    title: 'Gate could not analyse the body',
    retryAfterSeconds: 1,
  },
} as const satisfies Readonly<
  Record<string, { code: ErrorCode; variant?: string; title: string; retryAfterSeconds?: number }>
>;

/** A refusal made before the engine can classify (413, 400, 407), or of unreadable arguments (422, 413). */
export function transportProblem(
  problem: keyof typeof TRANSPORT_PROBLEMS,
  detail: string,
  extra?: Readonly<Record<string, unknown>>,
): GateResponse {
  const p: { code: ErrorCode; variant?: string; title: string; retryAfterSeconds?: number } =
    TRANSPORT_PROBLEMS[problem];
  return codedProblem(p.code, {
    // The satisfies above checks nothing about variants; errorAnswer throws on an unknown one.
    ...(p.variant === undefined ? {} : { variant: p.variant as never }),
    title: p.title,
    detail,
    ...(extra === undefined ? {} : { extra }),
    ...(p.retryAfterSeconds === undefined ? {} : { headers: { 'retry-after': String(p.retryAfterSeconds) } }),
  });
}

/**
 * Fail closed: without its store the gate cannot tell a first effect from a repeat, so nothing is
 * sent. JSON-RPC tools get the same facts as a JSON-RPC error, as their clients expect; the other
 * dialects as their SDK's own error, which it does not repeat (`refusal-dialects.ts`).
 */
export function renderStoreUnavailable(
  tool: {
    readonly id: string;
    readonly effect: string;
    readonly verdict: { readonly protocol: VerdictProtocol };
  },
  rpcId: string | number | null,
): GateResponse {
  const detail = `The gate cannot reach its store, so it cannot tell whether this ${tool.effect} effect (tool ${tool.id}) was already done. Nothing was sent (fail closed). Try again later.`;
  const response = codedProblem('EG_ERR_STORE_UNAVAILABLE', {
    title: 'Gate store unavailable',
    detail,
    extra: { tool: tool.id },
    headers: { 'retry-after': '5' },
  });
  if (tool.verdict.protocol !== 'jsonrpc') return speakRefusal(response, tool.verdict.protocol, rpcId);
  const data = JSON.parse(new TextDecoder().decode(response.body)) as unknown;
  return {
    status: 200,
    headers: { 'content-type': 'application/json', 'retry-after': '5', 'cache-control': 'no-store' },
    body: encoder.encode(
      JSON.stringify({ jsonrpc: '2.0', id: rpcId, error: { code: -32056, message: detail, data } }),
    ),
  };
}
