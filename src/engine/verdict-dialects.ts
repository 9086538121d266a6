/**
 * How a gate-made verdict is spoken to each kind of client (`verdict: { protocol: ... }` of a tool):
 * one row per dialect. A vendor's SDK reads its own API's error shape and nothing else: given a 409
 * problem+json, stripe-node resolves it as if it were the object asked for and retries it twice on
 * its own; `@slack/web-api` retries any status but 200 and 429 for half an hour. So each row answers
 * the way that API answers a refusal its SDK raises as its ordinary typed error, with the gate's
 * `detail` as the error's message, and never one the SDK repeats by itself (its repeats would be
 * counted as the agent proposing the effect again). Every row keeps the gate's whole problem body
 * (its `status`, `verdict`, `operation_id`...) somewhere the SDK hands to the caller.
 */
import type { VerdictProtocol } from '../policy/index.js';
import type { EnforcedVerdict } from '../store/index.js';
import type { VerdictFacts } from './verdict-response.js';

/** What a dialect makes of a verdict: the gate adds its `Effectgate-*` headers and cache-control. */
export interface DialectAnswer {
  readonly status: number;
  /** Response headers besides the gate's own; always with `content-type`. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: unknown;
}

/** What every row is given: the facts, their problem body, and what the request says. */
export interface DialectInput {
  readonly facts: VerdictFacts;
  /** The RFC 9457 body with effectgate's members (`verdictBody`). */
  readonly problem: Readonly<Record<string, unknown>>;
  readonly accept: string | undefined;
  /** The JSON-RPC request's `id`, or `null`. */
  readonly rpcId: string | number | null;
}

export type VerdictDialect = (input: DialectInput) => DialectAnswer;

/** JSON-RPC error codes in the implementation-defined server range (JSON-RPC 2.0 §5.1). */
export const JSONRPC_CODES: Readonly<Record<EnforcedVerdict, number>> = {
  allow: -32050,
  duplicate: -32051,
  pending: -32052,
  hold: -32053,
  halted: -32054,
  block: -32055,
};

/**
 * A halted run stays halted until a person releases it: the `Retry-After` a dialect that answers a
 * halt with 429 must send (an SDK that finds none treats the 429 as malformed) says "not soon".
 */
export const HALTED_RETRY_AFTER_SECONDS = 3600;

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

const JSON_TYPE = { 'content-type': 'application/json' } as const;

/** A key, budget or delegation refusal (422 in the problem body): the request itself is at fault. */
const requestAtFault = (facts: VerdictFacts): boolean => facts.verdict === 'block' && facts.status === 422;

/** `effectgate_<verdict>`; a request sent without a usable answer is `effectgate_upstream_failed`. */
const errorCode = (facts: VerdictFacts): string =>
  facts.verdict === 'allow' ? 'effectgate_upstream_failed' : `effectgate_${facts.verdict}`;

function retryAfter(facts: VerdictFacts): Record<string, string> {
  return facts.retryAfterSeconds === undefined ? {} : { 'retry-after': String(facts.retryAfterSeconds) };
}

/**
 * Stripe's API v1 error object. stripe-node maps the status to its error class (400
 * StripeInvalidRequestError, or StripeIdempotencyError for `type: idempotency_error`; 403
 * StripePermissionError; 429 StripeRateLimitError) and retries a 409 or a 5xx unless the answer
 * says `Stripe-Should-Retry: false`, which every verdict does. A request sent without a usable
 * answer (an `allow` that failed) keeps its 5xx and lets the SDK retry: the gate injects Stripe's
 * honoured Idempotency-Key, so the retry is the same attempt to Stripe.
 */
const stripe: VerdictDialect = ({ facts, problem }) => {
  const failed = facts.verdict === 'allow';
  const status = failed
    ? facts.status
    : facts.verdict === 'duplicate' || facts.verdict === 'pending' || requestAtFault(facts)
      ? 400
      : facts.verdict === 'halted'
        ? 429
        : 403;
  const type = failed
    ? 'api_error'
    : facts.verdict === 'duplicate' || facts.verdict === 'pending'
      ? 'idempotency_error'
      : 'invalid_request_error';
  return {
    status,
    headers: {
      ...JSON_TYPE,
      ...retryAfter(facts),
      ...(facts.verdict === 'halted' ? { 'retry-after': String(HALTED_RETRY_AFTER_SECONDS) } : {}),
      ...(failed ? {} : { 'stripe-should-retry': 'false' }),
      // stripe-node reports it as the error's `requestId`: the decision to look up in the trail.
      ...(facts.decisionId === null ? {} : { 'request-id': facts.decisionId }),
    },
    body: { error: { type, code: errorCode(facts), message: facts.detail, effectgate: problem } },
  };
};

/**
 * Slack's Web API answers every refusal `200 {"ok": false, "error": "<code>"}`, which
 * `@slack/web-api` raises as WebAPIPlatformError (`data` is the body) without retrying; any other
 * status it retries for half an hour, and a 429 it waits on. The gate's `detail` rides in
 * `response_metadata.messages` as an `[ERROR]` line, which the SDK logs as an error.
 */
const slack: VerdictDialect = ({ facts, problem }) => ({
  status: 200,
  headers: { ...JSON_TYPE, ...retryAfter(facts) },
  body: {
    ok: false,
    error: errorCode(facts),
    detail: facts.detail,
    response_metadata: { messages: [`[ERROR] ${facts.detail}`] },
    effectgate: problem,
  },
});

/**
 * GitHub's REST error body (`message`, `documentation_url`, `status` as a string). Octokit raises
 * RequestError with `message` as its message; its retry plugin never repeats a 403 or a 422, and
 * its throttling plugin leaves a 403 alone unless it says rate limit. A failed send keeps its 5xx.
 */
const github: VerdictDialect = ({ facts, problem }) => {
  const status =
    facts.verdict === 'allow'
      ? facts.status
      : facts.verdict === 'duplicate' || facts.verdict === 'pending' || requestAtFault(facts)
        ? 422
        : 403;
  return {
    status,
    headers: { ...JSON_TYPE, ...retryAfter(facts) },
    body: {
      message: facts.detail,
      documentation_url: problem['type'],
      status: String(status),
      effectgate: problem,
    },
  };
};

/**
 * A GraphQL response (GraphQL spec §7.1): HTTP 200, `data: null` and one error whose `message` is
 * the gate's `detail` and whose `extensions` carry the problem's members, `code`
 * `EFFECTGATE_<VERDICT>` (`EFFECTGATE_UPSTREAM_FAILED` for a send without a usable answer; a gate
 * error code the problem holds moves to `error_code`). Any GraphQL client raises its ordinary error
 * with the gate's reason as its message (Linear's SDK a LinearError, Apollo an ApolloError), as for
 * a mutation the server itself refused, and none repeats a 200 on its own.
 */
const graphql: VerdictDialect = ({ facts, problem }) => {
  const { code, ...members } = problem;
  return {
    status: 200,
    headers: { ...JSON_TYPE, ...retryAfter(facts) },
    body: {
      errors: [
        {
          message: facts.detail,
          extensions: {
            code: errorCode(facts).toUpperCase(),
            ...members,
            ...(code === undefined ? {} : { error_code: code }),
          },
        },
      ],
      data: null,
    },
  };
};

/** One row per `verdict.protocol` a policy may name. */
export const VERDICT_DIALECTS: Readonly<Record<VerdictProtocol, VerdictDialect>> = {
  // RFC 9457 problem+json with the verdict's own status (docs/verdicts.md).
  http: ({ facts, problem, accept }) => ({
    status: facts.status,
    headers: { 'content-type': negotiateProblemType(accept), ...retryAfter(facts) },
    body: problem,
  }),
  // A JSON-RPC 2.0 error with the request's `id` over HTTP 200: what MCP clients read.
  jsonrpc: ({ facts, problem, rpcId }) => ({
    status: 200,
    headers: { ...JSON_TYPE, ...retryAfter(facts) },
    body: {
      jsonrpc: '2.0',
      id: rpcId,
      error: { code: JSONRPC_CODES[facts.verdict], message: facts.detail, data: problem },
    },
  }),
  stripe,
  slack,
  github,
  graphql,
};
