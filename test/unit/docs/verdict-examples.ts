import { dispatchFailureFacts } from '../../../src/engine/dispatch-outcome.js';
import {
  asJsonRpcError,
  destinationRefusedResponse,
  renderStoreUnavailable,
  transportProblem,
} from '../../../src/engine/problem-response.js';
import type { GateRequestHead, GateResponse } from '../../../src/engine/types.js';
import { blockFacts, factsForDecision, unclassifiedFacts } from '../../../src/engine/verdict-facts.js';
import { renderVerdict, type VerdictFacts } from '../../../src/engine/verdict-response.js';
import { parsePolicyFiles, type Tool } from '../../../src/policy/index.js';

/*
 * The answers docs/verdicts.md shows, made by the gate's own renderers from fixed facts, so
 * test/unit/docs/verdicts.test.ts can hold every example block of the page against them.
 */

const POLICY = `version: 1
tools:
  - id: github.create_issue
    match: { hosts: [api.github.com], method: POST, path: "/repos/{owner}/{repo}/issues" }
    effect: create
    dedupe: { key: [$.path.owner, $.path.repo, $.body.title], window: 24h }
    idempotency: { header: Idempotency-Key }
    response: { ref: $.html_url }
  - id: mcp.create_ticket
    match:
      hosts: [mcp.example.com]
      method: POST
      path: /mcp
      body: { "$.method": tools/call, "$.params.name": create_ticket }
    effect: create
    dedupe: { key: [$.body.params.arguments.subject], window: 1h }
    verdict: { protocol: jsonrpc }
  - id: stripe.create_payment_intent
    match: { hosts: [api.stripe.com], method: POST, path: /v1/payment_intents }
    effect: financial
    dedupe: { key: [$.body.customer, $.body.amount, $.body.currency, $.body.description], window: 24h }
    verdict: { protocol: stripe }
  - id: slack.post_message
    match: { hosts: [slack.com], method: POST, path: /api/chat.postMessage }
    effect: notify
    dedupe: { key: [$.body.channel, $.body.text], window: 10m }
    verdict: { protocol: slack }
  - id: github.create_issue_comment
    match: { hosts: [api.github.com], method: POST, path: "/repos/{owner}/{repo}/issues/{number}/comments" }
    effect: append
    dedupe: { key: [$.path.owner, $.path.repo, $.path.number, $.body.body], window: 24h }
    verdict: { protocol: github }
  - id: linear.issue_create
    match: { hosts: [api.linear.app], method: POST, path: /graphql, graphql: { mutation: issueCreate } }
    effect: create
    dedupe: { key: [$.graphql.args.input.teamId, $.graphql.args.input.title], window: 24h }
    verdict: { protocol: graphql }
`;

const tools = parsePolicyFiles([{ file: 'verdicts.yaml', text: POLICY }]).tools;
const http: Tool = tools[0]!;
const mcp: Tool = tools[1]!;
const stripe: Tool = tools[2]!;
const slack: Tool = tools[3]!;
const github: Tool = tools[4]!;
const linear: Tool = tools[5]!;

// Fixed ids and times: uuidv7-shaped, as the gate makes them.
const RUN = 'nightly-42';
const OP = '0193e4a1-7c2a-7d10-9b1e-5f0c2a9d4e01';
const ATTEMPT = '0193e4a1-7c2b-7e22-8a4f-1b3c5d7e9f02';
const DECISION = '0193e4b2-1d40-7a03-b6c8-2e4f6a8c0d03';
const APPROVAL = '0193e4b2-1d41-7b14-a7d9-3f5a7b9c1e04';
const CONFIRMED_AT = '2026-12-02T00:41:07.403Z';
const HALTED_AT = '2026-12-02T00:52:13.118Z';
const REF = 'https://github.com/acme/api/issues/7';
const WAIT_MS = 2_000;
const MAX_SKIPS = 3;
const RPC_ID = 7;

const duplicateResult = {
  verdict: 'duplicate',
  decisionId: DECISION,
  operationId: OP,
  source: {
    runId: RUN,
    step: 'open-ticket',
    operationId: OP,
    attemptId: ATTEMPT,
    confirmedAt: CONFIRMED_AT,
    destinationRef: REF,
  },
  duplicateSkips: 1,
  operationState: 'succeeded',
  reconciliation: null,
} as const;

const allowed = (tool: Tool): VerdictFacts => ({
  verdict: 'allow',
  status: 200,
  title: 'Allowed',
  detail: '',
  tool,
  decisionId: DECISION,
  operationId: OP,
  attemptId: ATTEMPT,
});

const unclassifiedHead = {
  scheme: 'https',
  method: 'POST',
  host: 'api.example.com',
  port: 443,
  path: '/v1/things',
  query: '',
  headers: {},
  context: {},
} as unknown as GateRequestHead;

const verdict = (facts: VerdictFacts, rpcId: number | null = null): GateResponse =>
  renderVerdict(facts, {}, rpcId);

/** Every example of docs/verdicts.md, by the name its block is marked with. */
export const VERDICT_EXAMPLES: Readonly<Record<string, () => GateResponse>> = {
  duplicate: () => verdict(factsForDecision(duplicateResult, http, WAIT_MS, MAX_SKIPS)),
  pending: () =>
    verdict(
      factsForDecision(
        { verdict: 'pending', decisionId: DECISION, operationId: OP, operationState: 'open' },
        http,
        WAIT_MS,
        MAX_SKIPS,
      ),
    ),
  hold: () =>
    verdict(
      factsForDecision(
        {
          verdict: 'hold',
          decisionId: DECISION,
          operationId: OP,
          approvalId: APPROVAL,
          previousAttemptId: ATTEMPT,
          previousDispatchState: 'sent_no_response',
          requestChanged: false,
          approvedRequest: null,
          lastApproval: null,
          reconciliation: null,
        },
        http,
        WAIT_MS,
        MAX_SKIPS,
      ),
    ),
  halted: () =>
    verdict(
      factsForDecision(
        {
          verdict: 'halted',
          decisionId: DECISION,
          runId: RUN,
          duplicateSkips: MAX_SKIPS,
          haltedAt: HALTED_AT,
          haltDecisionId: DECISION,
          operationId: OP,
        },
        http,
        WAIT_MS,
        MAX_SKIPS,
      ),
    ),
  'block-key-missing': () => verdict(blockFacts(http, DECISION, 'key_path_missing: $.body.title', null)),
  'block-budget': () => verdict(blockFacts(http, DECISION, 'retry_budget_exhausted', OP)),
  'block-unclassified': () => verdict(unclassifiedFacts(unclassifiedHead)),
  'no-response': () =>
    verdict(
      dispatchFailureFacts(
        allowed(http),
        { kind: 'failure', dispatchState: 'sent_no_response', timedOut: false, error: 'ECONNRESET' },
        'unknown',
      ),
    ),
  'timed-out': () =>
    verdict(
      dispatchFailureFacts(
        allowed(http),
        {
          kind: 'failure',
          dispatchState: 'sent_no_response',
          timedOut: true,
          error: 'UND_ERR_HEADERS_TIMEOUT',
        },
        'unknown',
      ),
    ),
  'store-unavailable': () => renderStoreUnavailable(http, null),
  'jsonrpc-duplicate': () => verdict(factsForDecision(duplicateResult, mcp, WAIT_MS, MAX_SKIPS), RPC_ID),
  'stripe-duplicate': () =>
    verdict(
      factsForDecision(
        {
          ...duplicateResult,
          source: { ...duplicateResult.source, destinationRef: 'pi_3MtwBwLkdIwHu7ix28a3tqPa' },
        },
        stripe,
        WAIT_MS,
        MAX_SKIPS,
      ),
    ),
  'stripe-halted': () =>
    verdict(
      factsForDecision(
        {
          verdict: 'halted',
          decisionId: DECISION,
          runId: RUN,
          duplicateSkips: MAX_SKIPS,
          haltedAt: HALTED_AT,
          haltDecisionId: DECISION,
          operationId: OP,
        },
        stripe,
        WAIT_MS,
        MAX_SKIPS,
      ),
    ),
  'slack-duplicate': () =>
    verdict(
      factsForDecision(
        { ...duplicateResult, source: { ...duplicateResult.source, destinationRef: '1700000000.000100' } },
        slack,
        WAIT_MS,
        MAX_SKIPS,
      ),
    ),
  'github-duplicate': () => verdict(factsForDecision(duplicateResult, github, WAIT_MS, MAX_SKIPS)),
  'graphql-duplicate': () =>
    verdict(
      factsForDecision(
        { ...duplicateResult, source: { ...duplicateResult.source, destinationRef: 'ISS-1' } },
        linear,
        WAIT_MS,
        MAX_SKIPS,
      ),
    ),
  'jsonrpc-store-unavailable': () => renderStoreUnavailable(mcp, RPC_ID),
  'jsonrpc-refusal': () =>
    asJsonRpcError(
      transportProblem(
        'headers_disagree',
        'The Mcp-Name header says delete_ticket but the body calls create_ticket. Nothing was sent.',
      ),
      RPC_ID,
    ),
  'destination-refused': () =>
    destinationRefusedResponse('169.254.169.254 is a link-local address (egress.deny: link_local)'),
};

/** A response as the page shows it: status line, headers (sorted), a blank line, the JSON body pretty-printed. */
export function httpText(response: GateResponse): string {
  const headers = Object.entries(response.headers)
    .map(([name, value]) => `${name}: ${Array.isArray(value) ? value.join(', ') : value}`)
    .sort();
  const body = JSON.stringify(JSON.parse(new TextDecoder().decode(response.body)), null, 2);
  return [`HTTP/1.1 ${response.status}`, ...headers, '', body].join('\n');
}
