import { setTimeout as sleep } from 'node:timers/promises';
import { type Classification, Classifier, type PolicySet, type Tool } from '../policy/index.js';
import { type DecideResult, type Scope, type Store, uuidv7 } from '../store/index.js';
import { type ArgumentDocument, buildArgumentDocument } from './argument-document.js';
import { dispatchFailureFacts, outcomeOf, toUpstream } from './dispatch-outcome.js';
import { renderStoreUnavailable, transportProblem, upstreamFailedResponse } from './problem-response.js';
import { authorityRef, requestFingerprint } from './request-fingerprint.js';
import { buildSemanticKey } from './semantic-key.js';
import type {
  GateHandler,
  GateRequest,
  GateRequestHead,
  GateResponse,
  RouteDecision,
  TransportProblem,
  UpstreamResult,
  UpstreamSender,
} from './types.js';
import { blockFacts, factsForDecision, unclassifiedFacts } from './verdict-facts.js';
import { renderVerdict, type VerdictFacts, verdictHeaders } from './verdict-response.js';

/** Minimal structured logger; the CLI passes a JSON-lines one, tests none. */
export interface GateLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** Options of {@link Gate}; validated and frozen once by `createGate`. */
export interface GateOptions {
  readonly policies: PolicySet;
  readonly store: Store;
  readonly scope: Scope;
  /** Run id for requests without `Effectgate-Run` (default: one UUIDv7 per gate instance). */
  readonly runId: string;
  readonly maxBodyBytes: number;
  /** Key for the HMAC authority reference; `null` records only which header carried a credential. */
  readonly authorityKey: string | null;
  readonly logger: GateLogger;
}

/**
 * The engine: classify → scope → key → resolve duplicate state → record the Gate decision →
 * verdict → dispatch → outcome (DESIGN.md §1). Adapters call `route()` on the head and `handle()`
 * with the buffered body; all verdict logic lives here.
 *
 * Store budget per governed request: allow = `decide` + `recordOutcome` (two round trips);
 * duplicate, halted and block = `decide` (one). Ungoverned traffic never reaches the store.
 */
export class Gate implements GateHandler {
  readonly #o: GateOptions;
  readonly #classifier: Classifier;

  constructor(options: GateOptions) {
    this.#o = options;
    this.#classifier = new Classifier(options.policies);
  }

  get runId(): string {
    return this.#o.runId;
  }

  get policies(): PolicySet {
    return this.#o.policies;
  }

  route(head: GateRequestHead): RouteDecision {
    const candidates = this.#classifier.candidates(head);
    if (candidates.length > 0) return { kind: 'govern', maxBodyBytes: this.#o.maxBodyBytes };
    if (this.#o.policies.default === 'block') return { kind: 'refuse', response: this.#defaultBlock(head) };
    return { kind: 'pass' };
  }

  refuse(_head: GateRequestHead | null, problem: TransportProblem, detail: string): GateResponse {
    return transportProblem(problem, detail);
  }

  async handle(request: GateRequest, send: UpstreamSender): Promise<GateResponse> {
    const candidates = this.#classifier.candidates(request);
    const args0 = buildArgumentDocument(request, {});
    const chosen = this.#classifier.select(candidates, args0.body);
    if (chosen === null) {
      // A route matched but no tool's body conditions did: the request is unclassified.
      if (this.#o.policies.default === 'block') return this.#defaultBlock(request);
      return this.#relay(await send(toUpstream(request, null)), null);
    }
    const args: ArgumentDocument = { ...args0, path: chosen.params };
    try {
      return await this.#govern(request, chosen, args, send);
    } catch (err) {
      this.#o.logger.error({ err: String(err), tool: chosen.tool.id }, 'store unavailable; failing closed');
      return renderStoreUnavailable(chosen.tool, args.body);
    }
  }

  async #govern(
    request: GateRequest,
    c: Classification,
    args: ArgumentDocument,
    send: UpstreamSender,
  ): Promise<GateResponse> {
    const tool = c.tool;
    const o = this.#o;
    const ctx = request.context;
    const common = {
      runId: ctx.run ?? o.runId,
      step: ctx.step,
      worker: ctx.worker,
      agentVersion: ctx.agentVersion,
      scope: o.scope,
      toolId: tool.id,
      explain: tool.match.explain(),
      maxDuplicateSkips: o.policies.loopBreaker.maxDuplicateSkips,
      request: {
        scheme: request.scheme,
        method: request.method,
        host: request.host,
        port: request.port,
        path: request.path,
        route: tool.match.explain(),
        fingerprint: requestFingerprint(request, tool, args),
        authorityRef: authorityRef(request.headers, o.authorityKey),
      },
    };

    let key = null;
    let keyError: string | null = null;
    if (tool.dedupe !== null) {
      const k = buildSemanticKey(tool, o.scope, args);
      if (k.ok) {
        key = {
          hash: k.hash,
          values: k.values,
          windowMs: tool.dedupe.windowMs,
          pendingTtlMs: tool.dedupe.pendingTtlMs,
        };
      } else {
        keyError = `key_path_missing: ${k.missing.join(', ')}`;
        if (tool.dedupe.onMissing === 'block') {
          const r = await o.store.decide({
            ...common,
            kind: 'block',
            decisionId: uuidv7(),
            reason: keyError,
          });
          if (r.verdict === 'allow') throw new Error('store answered allow to a block');
          return this.#answer(r, tool, args.body, request);
        }
      }
    }

    const waitMs = tool.dedupe?.waitMs ?? 0;
    const deadline = Date.now() + waitMs;
    const newOperationId = uuidv7();
    const newAttemptId = uuidv7();
    const reserve = (recordPending: boolean): Promise<DecideResult> =>
      o.store.decide({
        ...common,
        kind: 'reserve',
        decisionId: uuidv7(),
        key,
        keyError,
        newOperationId,
        newAttemptId,
        idempotencyHeader: tool.idempotency?.header ?? null,
        retryBudget: tool.retry.budget,
        recordPending,
      });
    let pollMs = 20;
    let result = await reserve(waitMs === 0);
    // Another run holds the key: wait briefly and ask again (seed: "others wait briefly and
    // retry"); only the last answer is recorded. An unknown outcome will not settle within
    // `wait`, so it is recorded at once.
    while (result.verdict === 'pending' && result.decisionId === null) {
      const remaining = deadline - Date.now();
      if (result.operationState === 'unknown' || remaining <= 0) {
        result = await reserve(true);
      } else {
        await sleep(Math.min(pollMs, remaining));
        pollMs = Math.min(pollMs * 2, 250);
        result = await reserve(Date.now() >= deadline);
      }
    }
    if (result.verdict !== 'allow') return this.#answer(result, tool, args.body, request);

    const upstream = toUpstream(
      request,
      tool.idempotency ? { name: tool.idempotency.header, value: result.operationId } : null,
    );
    const started = performance.now();
    const sent = await send(upstream);
    const durationMs = Math.round((performance.now() - started) * 1000) / 1000;
    const outcome = outcomeOf(sent, tool, result, key?.hash ?? null, key?.windowMs ?? null, durationMs);
    const facts: VerdictFacts = {
      verdict: 'allow',
      status: 200,
      title: 'Allowed',
      detail: '',
      tool,
      decisionId: result.decisionId,
      operationId: result.operationId,
      attemptId: result.attemptId,
    };
    let recorded = true;
    try {
      await o.store.recordOutcome(outcome);
    } catch (err) {
      // The effect may have happened: the agent must still get the destination's answer. The
      // reservation stays pending and expires after pending_ttl (seed: prefer trying again over
      // pretending an unrecorded effect is done forever).
      recorded = false;
      o.logger.error({ err: String(err), operation: result.operationId }, 'outcome not recorded');
    }
    o.logger.info(
      {
        verdict: 'allow',
        tool: tool.id,
        run: common.runId,
        operation: result.operationId,
        attempt: result.attemptId,
        state: outcome.operationState,
        status: outcome.status,
      },
      'governed decision',
    );
    if (sent.kind === 'failure') {
      return renderVerdict(
        dispatchFailureFacts(facts, sent, outcome.operationState),
        request.headers,
        args.body,
      );
    }
    const response = this.#relay(sent, facts);
    if (!recorded)
      (response.headers as Record<string, string>)['effectgate-warning'] = 'outcome-not-recorded';
    return response;
  }

  #answer(
    result: Exclude<DecideResult, { verdict: 'allow' }>,
    tool: Tool,
    body: unknown,
    request: GateRequestHead,
  ): GateResponse {
    const facts =
      result.verdict === 'block'
        ? blockFacts(tool, result.decisionId, result.reason, result.operationId)
        : factsForDecision(result, tool, tool.dedupe?.waitMs ?? 0);
    this.#o.logger.info(
      {
        verdict: result.verdict,
        tool: tool.id,
        run: request.context.run ?? this.#o.runId,
        decision: result.decisionId,
        operation: facts.operationId,
      },
      'governed decision',
    );
    return renderVerdict(facts, request.headers, body);
  }

  #relay(sent: UpstreamResult, facts: VerdictFacts | null): GateResponse {
    if (sent.kind === 'failure') return upstreamFailedResponse(sent.error, sent.timedOut);
    if (facts === null) return { status: sent.status, headers: sent.headers, body: sent.body };
    return { status: sent.status, headers: { ...sent.headers, ...verdictHeaders(facts) }, body: sent.body };
  }

  #defaultBlock(head: GateRequestHead): GateResponse {
    return renderVerdict(unclassifiedFacts(head), head.headers, undefined);
  }
}
