import type { ReconciliationResult, Verdict } from '../store/index.js';

/** How a governed dispatch ended, by the tool's `outcome` contract (a timeout is `unknown`). */
/** `open`: answered without running the tool (MCP `input_required`), awaiting the call's continuation. */
export type UpstreamOutcome = 'succeeded' | 'failed' | 'unknown' | 'open' | 'accepted';

/**
 * What happened to an outcome the store could not take at once (the outbox): queued for retries,
 * written later, or dropped (outbox full, the gate stopping, or refused by the store).
 */
export type DeferredOutcomeEvent = 'queued' | 'written' | 'dropped';

/**
 * What the Gate reports about its own work, for an operator's dashboards. The engine knows nothing
 * of Prometheus: the admin server implements this with prom-client (`src/admin/metrics.ts`), and
 * without it every call is a no-op.
 *
 * Called on the request path, so an implementation must be O(1) and allocation-light: no string
 * building per call beyond looking up the label values it is given, never a store round trip, never
 * a throw. Label values are tool ids (bounded by the policy set) and closed sets; never a key value,
 * a run id or anything secret.
 */
export interface GateMetrics {
  /**
   * One governed decision (every verdict, exactly once per proposal). `overheadMs`: the time the
   * gate itself added to the request, i.e. the whole of `handle` minus the governed upstream
   * dispatch (store round trips, waiting on another run's reservation and a reconciliation lookup
   * are all the gate's doing).
   */
  decision(verdict: Verdict, tool: string, overheadMs: number): void;
  /** One governed dispatch (an `allow`): how long the destination took and how it ended. */
  upstream(tool: string, outcome: UpstreamOutcome, ms: number): void;
  /** A proposal that had to wait on another run's pending reservation, and for how long. */
  reservationWait(tool: string, ms: number): void;
  /** One reconciliation lookup after an unknown outcome, and what it found. */
  reconciliation(tool: string, result: ReconciliationResult): void;
  /** An outcome the store could not take at once moved through the outbox. */
  deferredOutcome(event: DeferredOutcomeEvent): void;
}

/** The default: records nothing. */
export const noGateMetrics: GateMetrics = Object.freeze({
  decision() {},
  upstream() {},
  reservationWait() {},
  reconciliation() {},
  deferredOutcome() {},
});
