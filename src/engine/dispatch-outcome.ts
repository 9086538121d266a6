import { errorAnswer } from '../errors.js';
import type { Tool } from '../policy/index.js';
import type { DecideResult, OutcomeInput } from '../store/index.js';
import { acceptedRefOf, answerOutcome } from './answer-outcome.js';
import { contentTypeOf } from './argument-document.js';
import { sha256Ref } from './canonical-json.js';
import type { StreamSettlement } from './event-stream-watch.js';
import { type GraphqlCall, graphqlOutcome } from './graphql-outcome.js';
import { jsonRpcOutcome, jsonRpcResponseOutcome } from './jsonrpc-outcome.js';
import { formatAuthority } from './normalize-head.js';
import { extractDestinationRef, readReplayed } from './response-facts.js';
import { tlsVerificationAdvice } from './tls-verification.js';
import type { GateRequest, UpstreamRequest, UpstreamResult } from './types.js';
import type { VerdictFacts } from './verdict-response.js';

const EMPTY = new Uint8Array(0);

/**
 * The request the gate rebuilds for the destination: the buffered body (the sender sets an
 * explicit Content-Length), the end-to-end headers (the idempotency key already placed by
 * `withIdempotencyKey`), and Host from the target authority.
 */
export function toUpstream(request: GateRequest, deadlineMs?: number, streamEvents = false): UpstreamRequest {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(request.headers)) {
    if (v !== undefined && k !== 'content-length') headers[k] = v;
  }
  headers['host'] = formatAuthority(request.host, request.port, request.scheme === 'https' ? 443 : 80);
  return {
    ...(deadlineMs === undefined ? {} : { deadlineMs }),
    ...(streamEvents ? { streamEvents } : {}),
    scheme: request.scheme,
    method: request.method,
    host: request.host,
    port: request.port,
    pathAndQuery: request.query === '' ? request.path : `${request.path}?${request.query}`,
    headers,
    body:
      request.body.byteLength === 0 && (request.method === 'GET' || request.method === 'HEAD')
        ? EMPTY
        : request.body,
  };
}

/** The facts every outcome of one allowed attempt carries, however it ended. */
function attemptOf(
  allow: Extract<DecideResult, { verdict: 'allow' }>,
  keyHash: string | null,
  windowMs: number | null,
  durationMs: number,
): Pick<OutcomeInput, 'operationId' | 'attemptId' | 'decisionId' | 'keyHash' | 'windowMs' | 'durationMs'> {
  return {
    operationId: allow.operationId,
    attemptId: allow.attemptId,
    decisionId: allow.decisionId,
    keyHash,
    windowMs,
    durationMs,
  };
}

/** What one dispatch settled: attempt facts and the operation state by the tool's `outcome` contract. */
export function outcomeOf(
  sent: Exclude<UpstreamResult, { kind: 'stream' }>,
  tool: Tool,
  rpcId: string | number | null,
  allow: Extract<DecideResult, { verdict: 'allow' }>,
  keyHash: string | null,
  windowMs: number | null,
  durationMs: number,
  graphql: GraphqlCall | null = null,
): OutcomeInput {
  const base = attemptOf(allow, keyHash, windowMs, durationMs);
  if (sent.kind === 'failure') {
    return {
      ...base,
      dispatchState: sent.dispatchState,
      // Nothing left the gate: a definite non-effect. Anything else: nobody knows (never `failed`).
      operationState: sent.dispatchState === 'not_sent' ? 'failed' : 'unknown',
      status: null,
      responseFingerprint: null,
      destinationRef: null,
      replayed: null,
      error: sent.error,
      outcomeRule: sent.dispatchState === 'not_sent' ? 'not sent' : 'no response',
      errorCode: null,
    };
  }
  const received = {
    ...base,
    dispatchState: 'response_received' as const,
    status: sent.status,
    responseFingerprint: sha256Ref(sent.body),
    replayed: readReplayed(tool, sent.headers),
  };
  if (tool.verdict.protocol === 'jsonrpc') {
    // The JSON-RPC response says what happened, inside whatever HTTP status (jsonrpc-outcome.ts).
    const rpc = jsonRpcOutcome(tool, rpcId, sent.status, contentTypeOf(sent), sent.body);
    return {
      ...received,
      operationState: rpc.operationState,
      destinationRef: rpc.destinationRef,
      error: rpc.note,
      outcomeRule: rpc.rule,
      errorCode: rpc.errorCode,
    };
  }
  if (graphql !== null) {
    // A GraphQL server answers 200 for a mutation that did nothing: data and errors say (graphql-outcome.ts).
    const gql = graphqlOutcome(tool, graphql, sent.status, sent.body);
    return {
      ...received,
      operationState: gql.operationState,
      destinationRef: gql.destinationRef,
      error: gql.note,
      outcomeRule: gql.rule,
      errorCode: gql.errorCode,
    };
  }
  // The status by the tool's contract, then what the answer says (answer-outcome.ts).
  const answer = answerOutcome(tool, sent.status, sent.body);
  return {
    ...received,
    operationState: answer.state,
    destinationRef:
      answer.state === 'accepted'
        ? acceptedRefOf(tool, sent.headers, sent.body)
        : extractDestinationRef(tool, sent.body),
    error: null,
    outcomeRule: answer.rule,
    errorCode: answer.errorCode,
  };
}

/**
 * What a streamed answer settled (`watchEventStream`): read from the JSON-RPC response event when
 * it came, else `sent_no_response` and `unknown` (the call reached the destination; its end was
 * never seen), the same as a timeout.
 */
export function streamOutcomeOf(
  settlement: StreamSettlement,
  sent: Extract<UpstreamResult, { kind: 'stream' }>,
  tool: Tool,
  allow: Extract<DecideResult, { verdict: 'allow' }>,
  keyHash: string | null,
  windowMs: number | null,
  durationMs: number,
): OutcomeInput {
  const base = attemptOf(allow, keyHash, windowMs, durationMs);
  // A status the tool's contract does not call succeeded decides, as for a buffered answer (a
  // JSON-RPC error inside a 2xx the policy lists as unknown must not release the key).
  const byStatus = tool.outcome.classify(sent.status);
  if (byStatus !== 'succeeded') {
    return {
      ...base,
      dispatchState: 'response_received',
      operationState: byStatus,
      status: sent.status,
      responseFingerprint: settlement.kind === 'response' ? sha256Ref(settlement.data) : null,
      destinationRef: null,
      replayed: readReplayed(tool, sent.headers),
      error: settlement.kind === 'response' ? null : settlement.detail,
      outcomeRule: `status ${sent.status}`,
      errorCode: null,
    };
  }
  if (settlement.kind === 'no_response') {
    return {
      ...base,
      dispatchState: 'sent_no_response',
      operationState: 'unknown',
      status: null,
      responseFingerprint: null,
      destinationRef: null,
      replayed: null,
      error: settlement.detail,
      outcomeRule: 'no response',
      errorCode: null,
    };
  }
  const rpc = jsonRpcResponseOutcome(tool, settlement.response, settlement.data);
  return {
    ...base,
    dispatchState: 'response_received',
    operationState: rpc.operationState,
    status: sent.status,
    // Of the response event: the stream around it (progress, other messages) is not the answer.
    responseFingerprint: sha256Ref(settlement.data),
    destinationRef: rpc.destinationRef,
    replayed: readReplayed(tool, sent.headers),
    error: rpc.note,
    outcomeRule: rpc.rule,
    errorCode: rpc.errorCode,
  };
}

/** The gate-made 502/504 when an allowed dispatch got no usable response (docs/design.md §4.3). */
export function dispatchFailureFacts(
  allowed: VerdictFacts,
  sent: Extract<UpstreamResult, { kind: 'failure' }>,
  operationState: string,
): VerdictFacts {
  const tool = allowed.tool?.id ?? '';
  // The connector refused the resolved address (`egress`): a refusal, not an upstream failure.
  if (sent.dispatchState === 'not_sent' && sent.error === 'EG_ERR_DESTINATION_REFUSED') {
    return {
      ...allowed,
      status: errorAnswer('EG_ERR_DESTINATION_REFUSED').status,
      title: 'Destination refused',
      detail: `The request for tool ${tool} was not sent: its destination address is refused by the policies' egress rules (egress.deny); nothing reached it.${operationState === 'unknown' ? ' An earlier attempt of this operation was sent without a response: its outcome stays unknown.' : ''} If this destination is intended, list it under egress.allow.`,
      extra: {
        code: 'EG_ERR_DESTINATION_REFUSED',
        dispatch_state: sent.dispatchState,
        operation_state: operationState,
      },
    };
  }
  const earlier = operationState === 'unknown';
  // Checked only for not_sent: a certificate error after writing began cannot be one (classify-failure.ts).
  const tls = sent.dispatchState === 'not_sent' ? tlsVerificationAdvice(sent.error, !earlier) : null;
  return {
    ...allowed,
    status: errorAnswer('EG_ERR_UPSTREAM_FAILED', sent.timedOut ? 'timed_out' : undefined).status,
    title:
      tls !== null
        ? 'Upstream certificate not verified'
        : sent.timedOut
          ? 'Upstream timed out'
          : 'No usable upstream response',
    detail:
      tls !== null
        ? `The request for tool ${tool} was not sent. ${tls}${earlier ? ' An earlier attempt of this operation was sent without a response: the effect may already have happened, and its outcome stays unknown; do not assume it failed.' : ''}`
        : sent.dispatchState === 'not_sent'
          ? operationState === 'unknown'
            ? `The request for tool ${tool} could not be sent (${sent.error}), but an earlier attempt of this operation was sent without a response: the effect may already have happened. Its outcome stays unknown; do not assume it failed.`
            : `The request for tool ${tool} could not be sent (${sent.error}); nothing reached the destination. It is safe to try again.`
          : `The request for tool ${tool} was sent but no usable response came back (${sent.error}). The effect may or may not have happened: its outcome is unknown. Do not assume it failed.`,
    extra: {
      code: 'EG_ERR_UPSTREAM_FAILED',
      dispatch_state: sent.dispatchState,
      operation_state: operationState,
    },
  };
}

/**
 * The error of an allowed attempt the gate did not send because its decide took the whole dispatch
 * deadline (a lock wait, a slow store): nothing left the gate, so it is `not_sent`.
 */
export const LEASE_SPENT_AT_DECIDE = 'lease_spent_at_decide';

/**
 * How long an allowed dispatch may take before the gate gives up on it (outcome `unknown`): under
 * the key's pending_ttl, so a reservation can never expire, and be taken over by another run,
 * while its own request is still in flight. A tenth of the TTL is left for recording the outcome.
 * The gate counts it from when it asked for the decision (gate.ts).
 */
export function dispatchDeadlineMs(tool: Tool): number | undefined {
  return tool.dedupe === null ? undefined : Math.max(1, Math.floor(tool.dedupe.pendingTtlMs * 0.9));
}
