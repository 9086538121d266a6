import type { DecideResult, OutcomeInput } from '../store/index.js';
import type { Proposal } from './proposal.js';
import type {
  GateRequestHead,
  GateResponse,
  UpstreamRequest,
  UpstreamResult,
  UpstreamSender,
} from './types.js';

/** The facts of an allowed attempt a trace names (the store's `allow` answer). */
export type TracedAttempt = Extract<DecideResult, { verdict: 'allow' }>;

/**
 * Where the Gate reports its governed decisions as traces (OpenTelemetry when configured, see
 * `tracerFromEnv`). The engine knows nothing of OpenTelemetry: `otel-tracer.ts` implements this
 * and is loaded only when tracing is on, so an unconfigured gate loads no SDK and, through
 * {@link noGateTracer}, allocates nothing per request.
 *
 * A tracer belongs to one gate: the gate calls `close()` when it stops. Nothing an implementation
 * records may hold a body, a query string, a credential or a header value (the trail keeps no
 * secret; traces must not either).
 */
export interface GateTracer {
  /**
   * One governed decision begins (a proposal the store will decide on); `startedAt` is the
   * `performance.now()` at which the gate received it. The agent's `traceparent` / `tracestate`
   * in `request.headers` are the parent. Never throws.
   */
  decision(request: GateRequestHead, proposal: Proposal, startedAt: number): DecisionTrace;
  /** Exports what is still buffered and stops; bounded, never rejects. Idempotent. */
  close(): Promise<void>;
}

/** One governed decision's trace, from its proposal to the answer the agent gets. */
export interface DecisionTrace {
  /**
   * Sends an allowed attempt through `send` inside the attempt's own span: the request the
   * destination gets carries a `traceparent` naming that span instead of the agent's.
   */
  attempt(allow: TracedAttempt, upstream: UpstreamRequest, send: UpstreamSender): Promise<UpstreamResult>;
  /**
   * Shadow mode sends a request its decision would have stopped (`would_*`) through `send` inside
   * a CLIENT span of its own, ended when the answer (or its failure) is there.
   */
  dispatch(upstream: UpstreamRequest, send: UpstreamSender): Promise<UpstreamResult>;
  /** The attempt's outcome is known (for a streamed answer, when its response event arrived). */
  settled(outcome: OutcomeInput): void;
  /** The agent's answer: its verdict headers close the decision. Returns `response` itself. */
  end(response: GateResponse): GateResponse;
  /** The gate failed before it had a verdict (store unavailable, a bug). */
  fail(err: unknown): void;
}

/** The no-op decision: one frozen object shared by every request, so no allocation per call. */
const NO_DECISION: DecisionTrace = Object.freeze({
  attempt: (_allow: TracedAttempt, upstream: UpstreamRequest, send: UpstreamSender) => send(upstream),
  dispatch: (upstream: UpstreamRequest, send: UpstreamSender) => send(upstream),
  settled() {},
  end: (response: GateResponse) => response,
  fail() {},
});

/** The default: traces nothing, and the agent's `traceparent` reaches the destination untouched. */
export const noGateTracer: GateTracer = Object.freeze({
  decision: () => NO_DECISION,
  close: () => Promise.resolve(),
});
