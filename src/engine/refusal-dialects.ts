/**
 * Answers the gate makes without a verdict (a store outage, arguments or an `Effectgate-Run` it
 * refuses) in the dialect of the tool they concern, as `verdict-dialects.ts` does for verdicts:
 * a vendor's SDK reads its own API's error shape and repeats what it does not recognise (stripe-node
 * a 5xx twice, `@slack/web-api` any status but 200 and 429 for half an hour). Each row makes the
 * SDK raise its ordinary typed error, with the gate's `detail` as its message, and never repeat the
 * request by itself: a refused argument is refused again, and a store outage outlasts an SDK's
 * back-off of a second or two, so its `Retry-After` is left for the agent to read.
 */
import type { VerdictProtocol } from '../policy/index.js';
import type { GateResponse } from './types.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A problem response as a JSON-RPC 2.0 error (`-32600` Invalid Request) with the request's `id`,
 * keeping the HTTP status: what an MCP server itself answers a request it rejects at the transport
 * (MCP 2026-07-28: 400 with a JSON-RPC error), so an MCP client surfaces the gate's message.
 */
export function asJsonRpcError(response: GateResponse, rpcId: string | number | null): GateResponse {
  const data = JSON.parse(decoder.decode(response.body)) as { detail?: unknown };
  return {
    status: response.status,
    headers: { ...response.headers, 'content-type': 'application/json' },
    body: encoder.encode(
      JSON.stringify({ jsonrpc: '2.0', id: rpcId, error: { code: -32600, message: data.detail, data } }),
    ),
  };
}

/** `effectgate_<slug>` from the problem's `EG_ERR_<SLUG>` code, e.g. `effectgate_store_unavailable`. */
function errorCode(problem: Readonly<Record<string, unknown>>): string {
  const code = typeof problem['code'] === 'string' ? problem['code'] : 'EG_ERR_REFUSED';
  return `effectgate_${code.replace(/^EG_ERR_/, '').toLowerCase()}`;
}

/**
 * Renders `response` (a gate-made problem+json) in `protocol`'s dialect; `http` keeps it as it is.
 * The problem's whole body rides along where the SDK hands it to the caller (`effectgate`, or the
 * GraphQL error's `extensions`); the gate's own headers (`retry-after`, `cache-control`) are kept.
 */
export function speakRefusal(
  response: GateResponse,
  protocol: VerdictProtocol,
  rpcId: string | number | null,
): GateResponse {
  if (protocol === 'http') return response;
  if (protocol === 'jsonrpc') return asJsonRpcError(response, rpcId);
  const problem = JSON.parse(decoder.decode(response.body)) as Record<string, unknown>;
  const detail = String(problem['detail'] ?? '');
  const transient = response.status >= 500;
  const { 'content-type': _type, ...kept } = response.headers;
  const answer = (status: number, headers: Record<string, string>, body: unknown): GateResponse => ({
    status,
    headers: { ...kept, 'content-type': 'application/json', ...headers },
    body: encoder.encode(JSON.stringify(body)),
  });
  switch (protocol) {
    // stripe-node raises StripeInvalidRequestError for a 400 and StripeAPIError for a 5xx, and
    // repeats neither when the answer says `Stripe-Should-Retry: false` (it ignores Retry-After).
    case 'stripe':
      return answer(
        transient ? response.status : 400,
        { 'stripe-should-retry': 'false' },
        {
          error: {
            type: transient ? 'api_error' : 'invalid_request_error',
            code: errorCode(problem),
            message: detail,
            effectgate: problem,
          },
        },
      );
    // `200 {"ok": false}` is a WebAPIPlatformError, which `@slack/web-api` never repeats.
    case 'slack':
      return answer(
        200,
        {},
        {
          ok: false,
          error: errorCode(problem),
          detail,
          response_metadata: { messages: [`[ERROR] ${detail}`] },
          effectgate: problem,
        },
      );
    // Octokit raises RequestError; its retry plugin leaves a 422 alone (a 413 or 415 it would
    // repeat), and a 503 with Retry-After is GitHub's own "try again later".
    case 'github': {
      const status = transient ? response.status : 422;
      return answer(
        status,
        {},
        { message: detail, documentation_url: problem['type'], status: String(status), effectgate: problem },
      );
    }
    // A GraphQL error over 200 (GraphQL spec §7.1), as `verdict-dialects.ts` renders a verdict.
    case 'graphql': {
      const { code, ...members } = problem;
      const extensions = { code: errorCode(problem).toUpperCase(), ...members, error_code: code };
      return answer(200, {}, { errors: [{ message: detail, extensions }], data: null });
    }
  }
}
