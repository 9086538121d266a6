import { setTimeout as sleep } from 'node:timers/promises';
import { StoreError } from '../errors.js';
import type { PolicySet, Tool } from '../policy/index.js';
import {
  type DecideInput,
  type DecideResult,
  type GateMode,
  isTransientStoreFailure,
  type OutcomeInput,
  RETRY_REASONS,
  type ReconciliationInput,
  type ReconciliationResult,
  type Scope,
  type Store,
  uuidv7,
} from '../store/index.js';
import { ArgumentRefusal } from './argument-refusal.js';
import {
  dispatchDeadlineMs,
  dispatchFailureFacts,
  LEASE_SPENT_AT_DECIDE,
  outcomeOf,
  streamOutcomeOf,
  toUpstream,
} from './dispatch-outcome.js';
import { MAX_EVENT_BYTES, watchEventStream } from './event-stream-watch.js';
import { withoutGateHeaders } from './gate-headers.js';
import type { CloseReport, GateLifecycle } from './gate-lifecycle.js';
import type { GateMetrics } from './gate-metrics.js';
import type { DecisionTrace, GateTracer } from './gate-tracing.js';
import { type GenerationState, GenerationSwitch, type ReloadReport } from './generation-switch.js';
import type { ResolveGovernedHosts } from './governed-addresses.js';
import { idempotencyPlace, withIdempotencyKey } from './idempotency-key.js';
import { BODY_LIMITS, type BodyLimits } from './json-scan.js';
import { normalizeHost, UNREADABLE_OPERATION_CLAIM } from './normalize-head.js';
import type { OutboxResult, OutcomeOutbox } from './outcome-outbox.js';
import type { PolicyGeneration } from './policy-generation.js';
import {
  ambiguousRouteResponse,
  asJsonRpcError,
  destinationRefusedResponse,
  problemResponse,
  renderStoreUnavailable,
  speakRefusal,
  transportProblem,
  upstreamFailedResponse,
} from './problem-response.js';
import { type Proposal, type Proposed, propose } from './proposal.js';
import { ANALYSIS_DEFAULTS } from './proposal-pool.js';
import type { PendingReadBack } from './read-back.js';
import { reconcileLookup } from './reconcile-lookup.js';
import { clientAddress, DERIVED_RUN_PREFIX, isDerivedRun, type RunIdentity } from './run-identity.js';
import { modeOf, shadowDispatchOf, shadowHeaders, shadowVerdictOf } from './shadow-dispatch.js';
import { settleTaskRead } from './task-read.js';
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
import { unknownRuleOf, unknownRules } from './unknown-rule.js';
import { factsForDecision, type ProposingRun, proposingRun, unclassifiedFacts } from './verdict-facts.js';
import { renderVerdict, type VerdictFacts, verdictHeaders } from './verdict-response.js';

/** Minimal structured logger; the CLI passes a JSON-lines one, tests none. */
export interface GateLogger {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** Options of {@link Gate}; validated and frozen once by `createGate`. */
export interface GateOptions {
  /** The set the gate starts with; `reload()` replaces it. */
  readonly policies: PolicySet;
  readonly store: Store;
  readonly scope: Scope;
  /** `shadow`: every tool's verdicts are recorded as would_* and nothing is refused (shadow-dispatch.ts). */
  readonly mode: GateMode;
  /** The run of requests without `Effectgate-Run`: fixed, or derived per scope and client (run-identity.ts). */
  readonly runs: RunIdentity;
  /** This gate process (UUIDv7), recorded on every attempt so crash recovery can tell live from dead. */
  readonly instanceId: string;
  readonly maxBodyBytes: number;
  /** Which governed host names are resolved to recognise their addresses (default `all`). */
  readonly resolveGovernedHosts?: ResolveGovernedHosts;
  /** Shape limits of a governed body (default `BODY_LIMITS`); past them the body is refused 413. */
  readonly bodyLimits?: BodyLimits;
  /** Worker threads analysing large governed bodies (default `ANALYSIS_DEFAULTS.threads`; 0: none). */
  readonly analysisThreads?: number;
  /** Bodies from this many bytes up go to a worker (default `ANALYSIS_DEFAULTS.offloadBodyBytes`). */
  readonly offloadBodyBytes?: number;
  /** Key for the HMAC authority reference; `null` records only which header carried a credential. */
  readonly authorityKey: string | null;
  readonly logger: GateLogger;
  /** Counters and timings for the admin server's `/metrics` (no-op by default). */
  readonly metrics: GateMetrics;
  /** Spans per governed decision and attempt (gate-tracing.ts; no-op by default). */
  readonly tracer: GateTracer;
  /** Where outcomes the store could not take yet wait for their retries. */
  readonly outbox: OutcomeOutbox;
  /** Register, heartbeat, recovery and the draining stop (`createGate` starts it). */
  readonly lifecycle: GateLifecycle;
}

/**
 * The engine: classify → scope → key → resolve duplicate state → record the Gate decision →
 * verdict → dispatch → outcome (docs/design.md §1). Adapters call `route()` on the head and `handle()`
 * with the buffered body; all verdict logic lives here.
 *
 * Store budget per governed request: allow = `decide` + `recordOutcome` (two round trips);
 * duplicate, halted and block = `decide` (one). Ungoverned traffic never reaches the store.
 *
 * Lifecycle: `createGate` starts the gate (register, recover); `close()` drains it.
 */
export class Gate implements GateHandler {
  readonly #o: GateOptions;
  /**
   * Everything derived from the policy set (policy-generation.ts), swapped whole by `reload()`.
   * A request reads the current generation once, when `handle()` starts, and keeps it to its end.
   */
  readonly #generations: GenerationSwitch;
  /** Calls inside `handle()`, so `close()` can wait for them. */
  readonly #inFlight = new Set<Promise<unknown>>();
  readonly #offloadBodyBytes: number;

  constructor(options: GateOptions) {
    this.#o = options;
    this.#generations = new GenerationSwitch(
      options.policies,
      Object.freeze({
        scope: options.scope,
        authorityKey: options.authorityKey,
        bodyLimits: options.bodyLimits ?? BODY_LIMITS,
        resolveGovernedHosts: options.resolveGovernedHosts ?? 'all',
        analysisThreads: options.analysisThreads ?? ANALYSIS_DEFAULTS.threads,
        logger: options.logger,
      }),
      // Crash recovery's fallback rules must know the tools a reload added (and keep removed ones').
      (policies) => options.lifecycle.learnRules(unknownRules(policies.tools)),
    );
    this.#offloadBodyBytes = options.offloadBodyBytes ?? ANALYSIS_DEFAULTS.offloadBodyBytes;
    // Resolving starts now; the lifecycle's start waits (bounded) for the first round.
    const firstRound = this.#generations.current.start();
    options.lifecycle.onStart(() => firstRound);
  }

  /** The run of every request without `Effectgate-Run` when one was fixed; `null` when runs are derived. */
  get runId(): string | null {
    return this.#o.runs.fixed;
  }

  get instanceId(): string {
    return this.#o.instanceId;
  }

  /**
   * The key of payload fingerprints: the authority key, else a fixed one. The admin server keys the
   * payloads posted to it with it (`createAdminServer({ payloadKey })`), so an observation a
   * destination posts and the gate's own read-back of the same payload carry one fingerprint.
   */
  get payloadKey(): string {
    return this.#o.authorityKey ?? READ_BACK_FINGERPRINT_KEY;
  }

  /** The policy set requests starting now are classified by. */
  get policies(): PolicySet {
    return this.#generations.current.policies;
  }

  /** Which policy generation serves now (1 at start, one more per reload) and what still winds down. */
  get generation(): GenerationState {
    return this.#generations.state;
  }

  /**
   * Serves `policies` from now on (hot reload). The next generation is built whole, its governed
   * names resolved (bounded), then swapped in at once; a request already in `handle()` finishes
   * under the set it started with, its outcome recorded under its tool as that set defined it.
   * The replaced generation's workers and address refreshes stop when its last request is done.
   * `policies` is a loaded, validated set (`loadPolicies`): validation is the loader's. The
   * `egress` block is read by a proxy once, at its creation: `effectgate proxy` refuses a reload
   * that changes it (src/cli/policy-reloader.ts).
   */
  reload(policies: PolicySet): Promise<ReloadReport> {
    return this.#generations.reload(policies);
  }

  /** The store this gate decides on (the CLI's admin server and store socket share it). */
  get store(): Store {
    return this.#o.store;
  }

  /** Outcomes waiting for the store (0 when every outcome is written). */
  get pendingOutcomes(): number {
    return this.#o.outbox.stats.pending;
  }

  /**
   * Graceful stop: waits for governed calls in flight and for outcomes the store could not take
   * yet (at most the drain timeout in all), marks this instance stopped and closes a store the
   * gate opened. Resolves with what it could not finish; a second call returns the same report.
   */
  close(): Promise<CloseReport> {
    this.#generations.closing();
    return this.#o.lifecycle
      .close(async () => {
        if (this.#inFlight.size === 0) return 0;
        let timer: NodeJS.Timeout | undefined;
        const timedOut = new Promise<'timeout'>((resolve) => {
          timer = setTimeout(() => resolve('timeout'), this.#o.lifecycle.drainTimeoutMs);
        });
        // Until none is left (a call may start while the adapters stop taking new ones).
        let done: 'done' | 'timeout' = 'done';
        while (this.#inFlight.size > 0 && done === 'done') {
          done = await Promise.race([
            Promise.allSettled([...this.#inFlight]).then(() => 'done' as const),
            timedOut,
          ]);
        }
        clearTimeout(timer);
        return this.#inFlight.size;
      })
      .finally(() => this.#generations.stopAll());
  }

  route(head: GateRequestHead): RouteDecision {
    const g = this.#generations.current;
    // The unspecified address reaches this machine's own listeners on Linux: another spelling of
    // loopback that no host entry names. Never connected to, governed or not.
    if (UNSPECIFIED_HOSTS.has(head.host)) {
      return {
        kind: 'refuse',
        response: transportProblem(
          'destination_refused',
          `${head.host} is the unspecified address: the gate never connects to it. Address the destination by its name or its real address. Nothing was sent.`,
        ),
      };
    }
    // A CONNECT names only an authority: a host some tool names may carry governed requests, which
    // the proxy then routes one by one inside the tunnel (docs/design.md §4.2).
    // Interception is decided by host AND port: a tool on `host:8443` leaves TLS to `host:8444` alone.
    if (head.method === 'CONNECT' && g.routes.mayGovern(head.host, head.port)) {
      return { kind: 'govern', maxBodyBytes: this.#o.maxBodyBytes };
    }
    // Governed when a tool matches under the canonical host (or the governed name an IP belongs
    // to) and the effective method, or when a form body may name the method (`_method`).
    // A near miss of a governed route (or a strict match whose captures a lenient server reads
    // otherwise) is refused, not let out ungoverned or keyed on the wrong value (docs/design.md §4.1).
    // A name on a port where some tool names a host by address: classified once its addresses
    // are known (`handle()` waits for them), never before.
    if (g.named.pending(head.host, head.port)) return { kind: 'govern', maxBodyBytes: this.#o.maxBodyBytes };
    const route = g.routes.classify(head);
    if (route.conflict !== null) {
      return {
        kind: 'refuse',
        response: transportProblem('ambiguous_route', ArgumentRefusal.ambiguousRoute(route.conflict).message),
      };
    }
    const near = g.routes.nearMiss(head, route);
    if (near !== null) {
      return { kind: 'refuse', response: ambiguousRouteResponse(near.tool.id, near.explain()) };
    }
    if (route.candidates.length > 0 || g.routes.needsBody(head)) {
      return { kind: 'govern', maxBodyBytes: this.#o.maxBodyBytes };
    }
    if (g.policies.default === 'block') {
      if (this.#o.mode !== 'shadow') return { kind: 'refuse', response: this.#defaultBlock(head) };
      this.#wouldBlockUnclassified(head);
    }
    // An agent's own read-back of a tool's lookup (read-back.ts): buffered, so its answer can be
    // judged against the tool's unknown operations after it is delivered.
    if (g.readBacks.toolsFor(head).length > 0) return { kind: 'govern', maxBodyBytes: this.#o.maxBodyBytes };
    return { kind: 'pass' };
  }

  /**
   * What must be known before `route()` can answer for a tunnel to `host:port`: the addresses of a
   * name on a port where some tool names a host by address (a CONNECT cannot be buffered and
   * decided later as a request can).
   */
  prepare(host: string, port: number): Promise<void> | null {
    const g = this.#generations.current;
    const canonical = normalizeHost(host);
    return g.named.pending(canonical, port) ? g.named.resolve(canonical) : null;
  }

  refuse(_head: GateRequestHead | null, problem: TransportProblem, detail: string): GateResponse {
    return transportProblem(problem, detail);
  }

  /**
   * A request `route()` sent here, body buffered. Every call in progress (analysing its body,
   * deciding, at the destination, recording its outcome) is what `close()` waits for.
   */
  async handle(request: GateRequest, send: UpstreamSender): Promise<GateResponse> {
    // The generation this request runs under, to its end (its outcome and streamed outcome too):
    // a reload meanwhile neither reclassifies it nor stops the workers it may be waiting on.
    const g = this.#generations.current;
    g.acquire();
    const call = this.#handle(request, send, g);
    this.#inFlight.add(call);
    try {
      return await call;
    } finally {
      this.#inFlight.delete(call);
      g.release();
    }
  }

  async #handle(named: GateRequest, send: UpstreamSender, g: PolicyGeneration): Promise<GateResponse> {
    const started = performance.now();
    let request = named;
    const claimed = request.context.retryReason;
    if (claimed !== null && !RETRY_REASON_SET.has(claimed)) {
      // A closed set (docs/design.md §3): free prose could not be grouped or reviewed in the trail.
      return transportProblem(
        'bad_request',
        `Effectgate-Retry-Reason must be one of ${RETRY_REASONS.join(', ')}; the gate derives every reason but operator_requested itself. Nothing was sent.`,
      );
    }
    if (g.named.pending(request.host, request.port)) await g.named.resolve(request.host);
    let proposed: Proposed;
    try {
      proposed = await this.#propose(request, g);
    } catch (err) {
      // The analysis worker failed (crashed, or the body took it past its heap): nothing was sent.
      this.#o.logger.error({ err: messageOf(err) }, 'body analysis failed');
      return transportProblem(
        'analysis_failed',
        `The gate could not analyse this request's body (${messageOf(err)}). Nothing was sent; it is safe to try again.`,
      );
    }
    if (proposed.kind === 'refused') {
      this.#o.logger.info({ problem: proposed.problem, path: proposed.path }, 'arguments refused');
      const refusal = transportProblem(
        proposed.problem,
        proposed.detail,
        proposed.path === null ? undefined : { path: proposed.path },
      );
      if (proposed.rpcId !== undefined) return asJsonRpcError(refusal, proposed.rpcId);
      // A JSON-RPC tool's refusal without a request id to answer stays problem+json.
      const protocol = proposed.protocol ?? 'http';
      return protocol === 'jsonrpc' ? refusal : speakRefusal(refusal, protocol, null);
    }
    if (proposed.kind === 'unclassified') {
      if (g.policies.default === 'block') {
        if (this.#o.mode !== 'shadow') return this.#defaultBlock(request);
        this.#wouldBlockUnclassified(request);
      }
      // A read-back's candidates are read as it is sent: what its answer can speak for.
      const routes = g.readBacks.toolsFor(request);
      const pending =
        routes.length === 0 ? null : g.readBacks.begin(routes, request.scope ?? g.ctx.scope, this.#o.store);
      const sent = await send(toUpstream(request));
      if (pending !== null) this.#observeReadBack(pending, request, sent, g);
      // An MCP task read on a governed route: its answer may say how an accepted call ended.
      // Recorded before the answer is relayed, so the agent that reads "completed" and calls again
      // is answered duplicate; a store error is logged, never the agent's answer.
      if (proposed.taskRead !== undefined) {
        const read = proposed.taskRead;
        try {
          const recorded = await settleTaskRead(read, sent, this.#o.store);
          if (recorded > 0) this.#o.logger.info({ recorded, taskId: read.taskId }, 'MCP task read settled');
        } catch (err) {
          this.#o.logger.error({ err, taskId: read.taskId }, 'recording an MCP task read failed');
        }
      }
      return this.#relay(sent, null);
    }
    let proposal = proposed.proposal;
    const namedRun = request.context.run;
    if (namedRun !== null) {
      const refused = runRefusal(namedRun);
      if (refused !== null) {
        // In the tool's dialect: a JSON-RPC error for the request's id, a vendor SDK's own error.
        const refusal = transportProblem('bad_request', refused);
        return speakRefusal(refusal, proposal.tool.verdict.protocol, proposal.rpcId);
      }
    } else {
      // A run is derived only for a request some tool governs (run-identity.ts): ungoverned
      // traffic neither starts one nor keeps one alive. Only a derived run carries its client,
      // which a halt is found by; a fixed run (--run-id) is the operator's and never shares one.
      const client = clientAddress(request.client ?? null);
      const run = this.#o.runs.runOf(proposal.common.scope, client);
      request = { ...request, context: { ...request.context, run } };
      const derivedClient = this.#o.runs.fixed === null ? `${this.#o.instanceId} ${client}` : null;
      proposal = { ...proposal, common: { ...proposal.common, runId: run, derivedClient } };
    }
    const trace = this.#o.tracer.decision(request, proposal, started);
    try {
      return trace.end(await this.#govern(request, proposal, send, started, trace, g));
    } catch (err) {
      trace.fail(err);
      if (err instanceof StoreError) {
        this.#o.logger.error(
          { err: err.message, tool: proposal.tool.id },
          'store unavailable; failing closed',
        );
        return renderStoreUnavailable(proposal.tool, proposal.rpcId);
      }
      this.#o.logger.error({ err: messageOf(err), tool: proposal.tool.id }, 'gate error');
      return problemResponse({
        status: 500,
        problem: 'gate_error',
        title: 'Gate error',
        detail: `The gate failed while handling this ${proposal.tool.effect} effect (tool ${proposal.tool.id}). Check its trail before trying again.`,
      });
    }
  }

  /**
   * Judges an agent's read-back (read-back.ts) after its answer: off the agent's path, but a call
   * `close()` waits for, so a clean stop records what the gate saw.
   */
  #observeReadBack(
    pending: PendingReadBack,
    request: GateRequest,
    sent: UpstreamResult,
    g: PolicyGeneration,
  ): void {
    const observing = g.readBacks
      .observe(
        pending,
        request,
        request.context.run ??
          this.#o.runs.peek(request.scope ?? g.ctx.scope, clientAddress(request.client ?? null)) ??
          'not named',
        sent,
        this.#o.store,
        g.ctx.authorityKey ?? READ_BACK_FINGERPRINT_KEY,
      )
      .then((recorded) => {
        if (recorded > 0) this.#o.logger.info({ recorded, path: request.path }, 'read-back observed');
      });
    this.#track(observing, 'recording a read-back failed');
  }

  /**
   * Everything about the request that needs no store (`proposal.ts`): on the event loop for small
   * bodies, on an analysis worker for large ones, so one client's megabyte stalls nobody else.
   */
  #propose(request: GateRequest, g: PolicyGeneration): Promise<Proposed> | Proposed {
    if (g.pool === null || request.body.byteLength < this.#offloadBodyBytes) {
      return propose(g.ctx, request);
    }
    return g.pool.propose(request, g.addresses.namesFor(request.host));
  }

  async #govern(
    request: GateRequest,
    p: Proposal,
    send: UpstreamSender,
    started: number,
    trace: DecisionTrace,
    g: PolicyGeneration,
  ): Promise<GateResponse> {
    const { tool, args, common, key, keyError } = p;
    const o = this.#o;
    // Shadow mode (shadow-dispatch.ts): the same decide, recorded as would_*, then sent anyway.
    const shadow = modeOf(o.mode, tool) === 'shadow';
    const mode = shadow ? ({ mode: 'shadow' } as const) : {};
    // A delegation claim the gate cannot read is refused, never ignored (normalize-head.ts).
    const unreadableClaim = request.context.operation === UNREADABLE_OPERATION_CLAIM;
    if (p.block || unreadableClaim) {
      const r = await o.store.decide({
        ...common,
        ...mode,
        kind: 'block',
        decisionId: uuidv7(),
        reason: unreadableClaim
          ? 'delegation_unreadable_header: Effectgate-Operation must be exactly one operation id (it was repeated, longer than 200 characters or held control characters)'
          : (keyError ?? 'blocked'),
      });
      if (r.verdict === 'allow' || r.verdict === 'reconcile')
        throw new Error(`store answered ${r.verdict} to a block`);
      if (shadow) return this.#sendAnyway(r, p, request, send, started, null, g, trace);
      return this.#answer(r, tool, p.rpcId, request, started, null, g, proposingRun(p.common));
    }

    // Shadow mode never holds a request back, not even to wait on another run's reservation.
    const waitMs = shadow ? 0 : (tool.dedupe?.waitMs ?? 0);
    const deadline = Date.now() + waitMs;
    const newOperationId = uuidv7();
    const newAttemptId = uuidv7();
    const deadlineMs = dispatchDeadlineMs(tool);
    // When the last decide was asked: its reservation's lease (pending_ttl) runs from the start of
    // the store's transaction, which is no earlier than this.
    let reservedAt = 0;
    const reserve = (
      recordPending: boolean,
      reconciliation: ReconciliationInput | null,
    ): Promise<DecideResult> => {
      reservedAt = performance.now();
      return this.#decideOrAbandon(key?.hash ?? null, newAttemptId, {
        ...common,
        ...mode,
        kind: 'reserve',
        decisionId: uuidv7(),
        key,
        keyError,
        newOperationId,
        newAttemptId,
        idempotencyHeader: shadow ? null : idempotencyPlace(tool),
        idempotency:
          shadow || tool.idempotency === null
            ? null
            : {
                maxLength: tool.idempotency.maxLength,
                retentionMs: tool.idempotency.retentionMs,
                agentKeyMode: tool.idempotency.agentKey,
                agentKey: p.agentIdempotencyKey,
              },
        retryBudget: tool.retry.budget,
        unknownRule: unknownRuleOf(tool),
        hasLookup: tool.reconcile !== null,
        onExpired: tool.dedupe?.onExpired ?? 'unknown',
        claimedOperationId: request.context.operation,
        clientRetryReason: request.context.retryReason === 'operator_requested' ? 'operator_requested' : null,
        reconciliation,
        gateInstance: o.instanceId,
        deadlineMs: deadlineMs ?? null,
        recordPending,
      });
    };
    // Another run holds the key: wait briefly and ask again (docs/design.md §2 "Pending and
    // confirmed differ"); only the last answer is recorded.
    const decide = async (reconciliation: ReconciliationInput | null): Promise<DecideResult> => {
      let pollMs = 20;
      let result = await reserve(waitMs === 0, reconciliation);
      const waitStarted = result.verdict === 'pending' && result.decisionId === null ? performance.now() : -1;
      while (result.verdict === 'pending' && result.decisionId === null) {
        const remaining = deadline - Date.now();
        if (remaining <= 0) {
          result = await reserve(true, reconciliation);
        } else {
          await sleep(Math.min(pollMs, remaining));
          pollMs = Math.min(pollMs * 2, 250);
          result = await reserve(Date.now() >= deadline, reconciliation);
        }
      }
      if (waitStarted >= 0) o.metrics.reservationWait(tool.id, performance.now() - waitStarted);
      return result;
    };
    let result = await decide(null);
    let reconciled: ReconciliationInput | null = null;
    if (result.verdict === 'reconcile') {
      // The key's operation has an unknown outcome and the tool can look it up: look first, with
      // this proposal's credentials (never stored), then let the store settle it (docs/design.md §3).
      const observation = await reconcileLookup({
        tool,
        request,
        args,
        operationId: result.operationId,
        attemptId: result.attemptId,
        send,
        timeoutMs: deadlineMs ?? RECONCILE_TIMEOUT_MS,
      });
      o.metrics.reconciliation(tool.id, observation.result);
      reconciled = observation;
      result = await decide(observation);
    }
    if (result.verdict === 'reconcile') throw new Error('store asked to reconcile twice');
    if (result.verdict !== 'allow') {
      return shadow
        ? this.#sendAnyway(result, p, request, send, started, reconciled?.result ?? null, g, trace)
        : this.#answer(
            result,
            tool,
            p.rpcId,
            request,
            started,
            reconciled?.result ?? null,
            g,
            proposingRun(p.common),
          );
    }

    // What the decide took (a wait for a row lock, the other calls of a group-commit batch, its
    // queue) is lease the dispatch no longer has: the deadline counts from when the decide was
    // asked, so the call still ends a tenth of pending_ttl before the reservation could expire
    // and be taken over. Spent already (a decide slower than the lease): nothing is sent, and
    // the attempt is not_sent (504, safe to try again), never an unknown made by the gate itself.
    const leaseLeftMs =
      deadlineMs === undefined ? undefined : Math.floor(deadlineMs - (performance.now() - reservedAt));
    // The key the store chose for this attempt (eg_insert_attempt.sql): the agent's own is sent as
    // written, any other set in the tool's header or spliced into its body member.
    const sentKey = shadow ? null : (result.idempotencyKey ?? null);
    const upstream = toUpstream(
      sentKey === null ? request : withIdempotencyKey(request, tool, sentKey, p.agentIdempotencyKey),
      leaseLeftMs,
      // An MCP server answers a call with an event stream when it has progress to send.
      tool.verdict.protocol === 'jsonrpc',
    );
    const sendStarted = performance.now();
    const sent: UpstreamResult =
      leaseLeftMs !== undefined && leaseLeftMs <= 0
        ? { kind: 'failure', dispatchState: 'not_sent', timedOut: true, error: LEASE_SPENT_AT_DECIDE }
        : await trace.attempt(result, upstream, send);
    const upstreamMs = performance.now() - sendStarted;
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
    const settle = (
      outcome: OutcomeInput,
      ms: number,
    ): Promise<OutboxResult & { operationState: string }> => {
      o.metrics.upstream(tool.id, outcome.operationState, ms);
      trace.settled(outcome);
      // An operation this gate just saw go unknown: its tool's read-backs must see it at once.
      if (outcome.operationState === 'unknown') g.readBacks.forget(tool, common.scope);
      return this.#record(outcome, tool.id, common.runId, result, reconciled);
    };
    const keyHash = key?.hash ?? null;
    const windowMs = key?.windowMs ?? null;
    if (sent.kind === 'stream') {
      // The agent gets the events as they come; the outcome is recorded when the response event
      // shows it (or the stream ends without it), before that event is passed on; close() waits.
      const watch = watchEventStream(sent.body, p.rpcId, MAX_EVENT_BYTES, (s) => {
        const ms = performance.now() - sendStarted;
        return settle(streamOutcomeOf(s, sent, tool, result, keyHash, windowMs, roundMs(ms)), ms);
      });
      this.#track(watch.recorded, 'recording a streamed outcome failed');
      o.metrics.decision('allow', tool.id, performance.now() - started - upstreamMs);
      return { ...this.#relay(sent, facts), stream: watch.body };
    }
    const outcome = outcomeOf(sent, tool, p.rpcId, result, keyHash, windowMs, roundMs(upstreamMs), p.graphql);
    // The effect may have happened: the agent gets the destination's answer now, whatever the
    // store says. An outcome the store cannot take yet stays in the outbox, retried while the gate
    // runs; until it lands the key stays pending, and if it never does, the reservation's expiry
    // makes the attempt sent_no_response and its operation unknown (docs/design.md §4.1), never free.
    const written = await settle(outcome, upstreamMs);
    o.metrics.decision('allow', tool.id, performance.now() - started - upstreamMs);
    if (sent.kind === 'failure') {
      return renderVerdict(
        dispatchFailureFacts(facts, sent, written.operationState),
        request.headers,
        p.rpcId,
      );
    }
    const response = this.#relay(sent, facts);
    if (!written.recorded)
      (response.headers as Record<string, string>)['effectgate-warning'] = 'outcome-not-recorded';
    if (shadow) (response.headers as Record<string, string>)['effectgate-mode'] = 'shadow';
    return response;
  }

  /**
   * Shadow mode's answer to every verdict but allow (shadow-dispatch.ts): the store recorded it as
   * would_<verdict>; the request goes out as the agent wrote it, and what came back is recorded
   * beside that decision before the agent gets the destination's own answer. A record the store
   * cannot take waits in the outbox, retried while the gate runs and drained by a graceful stop,
   * and the answer is flagged (the decision already says it was sent).
   */
  async #sendAnyway(
    result: Exclude<DecideResult, { verdict: 'allow' | 'reconcile' }>,
    p: Proposal,
    request: GateRequest,
    send: UpstreamSender,
    started: number,
    reconciliation: ReconciliationResult | null,
    g: PolicyGeneration,
    trace: DecisionTrace,
  ): Promise<GateResponse> {
    const { tool, common } = p;
    const verdict = shadowVerdictOf(result.verdict);
    const facts = factsForDecision(result, tool, 0, g.ctx.maxDuplicateSkips, proposingRun(common));
    const sendStarted = performance.now();
    const sent = await trace.dispatch(
      toUpstream(request, undefined, tool.verdict.protocol === 'jsonrpc'),
      send,
    );
    const upstreamMs = performance.now() - sendStarted;
    const dispatch = shadowDispatchOf(sent);
    const recorded =
      facts.decisionId === null
        ? false
        : await this.#o.outbox.recordShadow({
            decisionId: facts.decisionId,
            operationId: facts.operationId,
            toolId: tool.id,
            runId: common.runId,
            scope: common.scope,
            verdict,
            ...dispatch,
            durationMs: roundMs(upstreamMs),
          });
    this.#o.logger.info(
      {
        verdict,
        mode: 'shadow',
        tool: tool.id,
        run: common.runId,
        decision: facts.decisionId,
        operation: facts.operationId,
        attempt: null,
        reconciliation,
        dispatch_state: dispatch.dispatchState,
        status: dispatch.status,
      },
      'governed decision',
    );
    this.#o.metrics.decision(verdict, tool.id, performance.now() - started - upstreamMs);
    const response = this.#relay(sent, null);
    const headers = response.headers as Record<string, string | string[]>;
    Object.assign(headers, shadowHeaders(verdict, facts.decisionId, facts.operationId));
    if (!recorded) headers['effectgate-warning'] = 'outcome-not-recorded';
    return response;
  }

  /**
   * Writes an allowed attempt's outcome (through the outbox) and logs the decision with what the
   * store settled: it may keep an operation unknown that this attempt alone would call failed (an
   * earlier attempt sent without a response may have done the effect).
   */
  async #record(
    outcome: OutcomeInput,
    toolId: string,
    runId: string,
    result: Extract<DecideResult, { verdict: 'allow' }>,
    reconciled: ReconciliationInput | null,
  ): Promise<OutboxResult & { operationState: string }> {
    const written = await this.#o.outbox.record(outcome);
    const operationState =
      written.recorded && written.operationState !== null ? written.operationState : outcome.operationState;
    this.#o.logger.info(
      {
        verdict: 'allow',
        tool: toolId,
        run: runId,
        decision: result.decisionId,
        operation: result.operationId,
        attempt: result.attemptId,
        attempt_number: result.attemptNumber,
        retry_of: result.retryOfAttemptId,
        retry_reason: result.retryReason,
        retry_decision: result.retryDecision,
        supersedes: result.supersedesOperationId,
        reconciliation: reconciled?.result ?? null,
        state: operationState,
        status: outcome.status,
      },
      'governed decision',
    );
    return { ...written, operationState };
  }

  /** Work that outlives `handle()` (a streamed answer's outcome): `close()` waits for it too. */
  #track(work: Promise<unknown>, failure: string): void {
    const tracked = work.catch((err: unknown) => this.#o.logger.error({ err: messageOf(err) }, failure));
    this.#inFlight.add(tracked);
    void tracked.finally(() => this.#inFlight.delete(tracked));
  }

  /**
   * `store.decide`, and when its connection is lost: the decide may have committed (an attempt
   * created, the key reserved) without the gate hearing so. Nothing was sent, and the gate knows
   * it, so it writes that down as soon as the store is back (`not_sent` for the attempt it
   * allocated, found by id if it exists at all), instead of leaving the key to expire into an
   * unknown that was never uncertain.
   */
  async #decideOrAbandon(
    keyHash: string | null,
    attemptId: string,
    input: DecideInput,
  ): Promise<DecideResult> {
    try {
      return await this.#o.store.decide(input);
    } catch (err) {
      if (input.kind === 'reserve' && isTransientStoreFailure(err)) {
        this.#o.outbox.enqueue(
          {
            operationId: null,
            attemptId,
            decisionId: input.decisionId,
            keyHash,
            windowMs: input.key?.windowMs ?? null,
            dispatchState: 'not_sent',
            operationState: 'failed',
            status: null,
            responseFingerprint: null,
            destinationRef: null,
            replayed: null,
            durationMs: 0,
            error: 'store_lost_at_decide: the gate never heard the decision and sent nothing',
          },
          err,
        );
      }
      throw err;
    }
  }

  #answer(
    result: Exclude<DecideResult, { verdict: 'allow' | 'reconcile' }>,
    tool: Tool,
    rpcId: string | number | null,
    request: GateRequestHead,
    started: number,
    reconciliation: ReconciliationResult | null,
    g: PolicyGeneration,
    run: ProposingRun,
  ): GateResponse {
    const facts = factsForDecision(result, tool, tool.dedupe?.waitMs ?? 0, g.ctx.maxDuplicateSkips, run);
    this.#o.logger.info(
      {
        verdict: result.verdict,
        tool: tool.id,
        run: request.context.run,
        decision: result.decisionId,
        operation: facts.operationId,
        // No attempt is made on any verdict but allow; a hold names the attempt it would repeat.
        attempt: null,
        ...(result.verdict === 'hold' ? { previous_attempt: result.previousAttemptId } : {}),
        ...(result.verdict === 'block' ? { reason: result.reason } : {}),
        reconciliation,
      },
      'governed decision',
    );
    this.#o.metrics.decision(result.verdict, tool.id, performance.now() - started);
    return renderVerdict(facts, request.headers, rpcId);
  }

  #relay(sent: UpstreamResult, facts: VerdictFacts | null): GateResponse {
    if (sent.kind === 'failure') {
      // A relayed request the egress rules stopped is refused (403), as on the streaming path.
      if (sent.error === 'EG_ERR_DESTINATION_REFUSED') {
        return destinationRefusedResponse(
          'its destination address is denied (egress.deny); nothing reached it',
        );
      }
      return upstreamFailedResponse(sent.error, sent.timedOut);
    }
    // The destination never speaks in the gate's namespace (gate-headers.ts).
    const headers = withoutGateHeaders(sent.headers);
    const all = facts === null ? headers : { ...headers, ...verdictHeaders(facts) };
    if (sent.kind === 'stream') return { status: sent.status, headers: all, body: EMPTY, stream: sent.body };
    return { status: sent.status, headers: all, body: sent.body };
  }

  /**
   * Shadow mode under `default: block`: the request matches no tool, so no decision can be recorded
   * (enforce mode records none either); the log line is what says enforce mode would refuse it.
   * Method, host and port only: a path or query may carry what the trail never keeps.
   */
  #wouldBlockUnclassified(head: GateRequestHead): void {
    this.#o.logger.info(
      {
        verdict: 'would_block',
        mode: 'shadow',
        reason: 'unclassified',
        method: head.method,
        host: head.host,
        port: head.port,
      },
      'default: block would refuse this unclassified request; sent anyway (shadow mode)',
    );
  }

  #defaultBlock(head: GateRequestHead): GateResponse {
    return renderVerdict(unclassifiedFacts(head), head.headers, null);
  }
}

/**
 * Why a run id a client names is refused, or null. Derived ids are the gate's alone: one read
 * from another client's 409 must not join (and halt) that client's run (run-identity.ts). `.` and
 * `..` cannot be a path segment of the run's page (a browser removes them, `%2E` spellings too).
 */
function runRefusal(run: string): string | null {
  if (isDerivedRun(run)) {
    return `Effectgate-Run must not start with ${DERIVED_RUN_PREFIX}: those are the runs the gate derives for clients that name none. Name your own run, or send none. Nothing was sent.`;
  }
  if (run === '.' || run === '..') {
    return `Effectgate-Run must not be ${run}: a run id is also the last segment of its page's address. Nothing was sent.`;
  }
  return null;
}

/**
 * The closed set of retry reasons (docs/design.md §3); a client may send one, only operator_requested
 * counts.
 */
const RETRY_REASON_SET: ReadonlySet<string> = new Set(RETRY_REASONS);

/** Reconciliation lookup deadline for tools without a pending_ttl (no dedupe): never unbounded. */
const RECONCILE_TIMEOUT_MS = 10_000;

/**
 * Keys a payload fingerprint (a read-back's, one posted to the admin API) when the gate has no
 * authority key of its own.
 */
export const READ_BACK_FINGERPRINT_KEY = 'effectgate read-back';

/** Canonical spellings of the unspecified addresses (`0`, `0.0.0.0`, `[::]`, `[0:0::0]` all end here). */
const UNSPECIFIED_HOSTS: ReadonlySet<string> = new Set(['0.0.0.0', '::']);

const EMPTY = new Uint8Array(0);

/** Milliseconds to the microsecond, as the trail records durations. */
function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
