import type { Tool } from '../policy/index.js';
import type { DispatchState, EnforcedVerdict, GateMode, ShadowVerdict } from '../store/index.js';
import type { UpstreamResult } from './types.js';

/*
 * Shadow mode (docs/design.md §2; like Smokescreen's report mode): a gate started with `--mode shadow`,
 * or a tool with `mode: shadow`, computes every verdict exactly as enforce mode would and records
 * it, but refuses nothing and answers nothing itself. An allow is an allow (an attempt of its
 * operation, outcome recorded), so the operations a tool made in shadow are the history it keeps
 * recognising duplicates by once it enforces. Every other verdict is recorded as would_<verdict>
 * (eg_decided.sql) and the request is sent anyway; what came back is recorded beside that decision
 * (eg_shadow_dispatched.sql). In both cases the request goes out as the agent wrote it: no
 * Idempotency-Key is injected, since a key the gate chose would let the destination deduplicate,
 * which is enforcing. A shadow decide never waits on another run's reservation, never halts a run
 * and never asks for an approval (eg_halted.sql, eg_unknown.sql), and its would_duplicates are
 * counted apart from what a run was told (eg_skip.sql). Nothing it leaves may loosen enforce mode
 * later either: a keyless shadow attempt is never retried as "honored" (eg_unknown.sql).
 * What came back waits in the outbox when the store cannot take it (outcome-outbox.ts).
 *
 * What shadow mode still refuses, in both modes: a request the gate cannot read (a body past its
 * limits, ambiguous arguments, a route near miss, a malformed context header), since no verdict
 * can be computed for it, and any governed request while the store is unreachable (503), since
 * what it sent could not be recorded and the trail would then lie.
 */

/** The mode a tool's proposals are decided in: the gate's `shadow` wins over the tool's `enforce`. */
export function modeOf(gateMode: GateMode, tool: Tool): GateMode {
  return gateMode === 'shadow' || tool.mode === 'shadow' ? 'shadow' : 'enforce';
}

/** What shadow mode records instead of an enforced verdict other than allow. */
export function shadowVerdictOf(verdict: Exclude<EnforcedVerdict, 'allow'>): ShadowVerdict {
  return `would_${verdict}`;
}

/** What a request sent anyway got back, as `Store.recordShadowDispatch` takes it. */
export function shadowDispatchOf(sent: UpstreamResult): {
  readonly dispatchState: DispatchState;
  readonly status: number | null;
  readonly error: string | null;
} {
  if (sent.kind === 'failure') return { dispatchState: sent.dispatchState, status: null, error: sent.error };
  return { dispatchState: 'response_received', status: sent.status, error: null };
}

/**
 * The `Effectgate-*` headers on the destination's answer to a request sent anyway: the agent's
 * code reads the destination's response as if no gate were there, and whoever looks sees what
 * enforce mode would have done (and which earlier operation it would have pointed at).
 */
export function shadowHeaders(
  verdict: ShadowVerdict,
  decisionId: string | null,
  operationId: string | null,
): Record<string, string> {
  const headers: Record<string, string> = { 'effectgate-verdict': verdict, 'effectgate-mode': 'shadow' };
  if (decisionId !== null) headers['effectgate-decision'] = decisionId;
  if (operationId !== null) headers['effectgate-operation'] = operationId;
  return headers;
}
