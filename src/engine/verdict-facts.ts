import type { Tool } from '../policy/index.js';
import type { DecideResult } from '../store/index.js';
import { isDerivedRun } from './run-identity.js';
import type { GateRequestHead } from './types.js';
import type { VerdictFacts } from './verdict-response.js';

/** The run a proposal is in: derived by the gate (no `Effectgate-Run`), or named. */
export interface ProposingRun {
  readonly id: string;
  readonly derived: boolean;
}

/** The run of a proposal's store input: derived when the gate derived it (`derivedClient` set). */
export function proposingRun(common: {
  readonly runId: string;
  readonly derivedClient?: string | null;
}): ProposingRun {
  return { id: common.runId, derived: common.derivedClient != null };
}

/**
 * Turns a store decision (or a gate-side refusal) into the facts of the answer. The `detail` texts
 * are written for a model: they say what happened, that nothing was sent, and what to do next.
 * `run` is the proposal's own run (a derived one never halts, and a duplicate from the same derived
 * run may be another process at the same address); without it the run is taken as named.
 */
export function factsForDecision(
  result: Exclude<DecideResult, { verdict: 'allow' | 'reconcile' }>,
  tool: Tool,
  waitMs: number,
  maxDuplicateSkips: number,
  run: ProposingRun | null = null,
): VerdictFacts {
  switch (result.verdict) {
    case 'duplicate': {
      const s = result.source;
      // A derived run is every process of the scope behind one address: the same id is not
      // evidence that this agent did it (another process on the same host may have).
      const sameAddress = s !== null && run?.derived === true && s.runId === run.id;
      const derivedSource = s?.runId != null && isDerivedRun(s.runId);
      const whose = sameAddress
        ? ', the run the gate derived for every client of this scope at this address (not necessarily this process)'
        : derivedSource
          ? ', a run the gate derived for a client that named none'
          : '';
      const where =
        s === null
          ? 'an earlier run whose identity is not recorded'
          : `run ${s.runId ?? 'unknown'}${whose}${s.step ? ` step ${s.step}` : ''} (operation ${s.operationId}, confirmed at ${s.confirmedAt}${s.destinationRef ? `, result ${s.destinationRef}` : ''})`;
      const halts = run === null || !run.derived;
      const twice = result.operationState === 'duplicate_effect_confirmed';
      const found =
        result.reconciliation === null
          ? ''
          : twice
            ? ' The gate looked at the destination and found this effect MORE THAN ONCE: a person must clean it up.'
            : ' The gate looked at the destination and found the effect there, so the earlier unknown outcome is settled.';
      return {
        verdict: 'duplicate',
        status: 409,
        title: twice ? 'Duplicate effect skipped (effect found twice)' : 'Duplicate effect skipped',
        detail: `This ${tool.effect} effect (tool ${tool.id}) was already carried out by ${where}.${found} The gate skipped it so it does not happen again; nothing was sent. Do not retry it: use the earlier result.${halts && result.duplicateSkips >= maxDuplicateSkips ? ` This run was told ${result.duplicateSkips} times that this effect is done: proposing it again halts the run.` : ''}`,
        tool,
        decisionId: result.decisionId,
        operationId: result.operationId,
        source: s,
        sourceRelation: { derivedRun: derivedSource, sameAddress },
        extra: {
          operation_state: result.operationState,
          // This run's skips of this very effect; the loop breaker halts the run at the next one past the max.
          duplicate_skips: result.duplicateSkips,
          max_duplicate_skips: maxDuplicateSkips,
          ...(result.reconciliation === null ? {} : { reconciliation: result.reconciliation }),
        },
      };
    }
    case 'hold': {
      const last = result.lastApproval;
      const previous = result.previousDispatchState ?? 'without a recorded outcome';
      const looked =
        result.reconciliation === 'none'
          ? ' The gate looked at the destination and did not find it, but absence proves little.'
          : result.reconciliation === 'inconclusive'
            ? ' The gate tried to look at the destination, but the lookup gave no usable answer.'
            : '';
      // An approval is for the request it was asked about (its fingerprint): say when this one is
      // another request, and when the approval the agent may know of does not cover it.
      const other = result.approvedRequest;
      const changed = `${
        result.requestChanged
          ? ' This request differs from that attempt (same key values, another request fingerprint): it is a change, and approving it lets it go as a new operation.'
          : ''
      }${
        other
          ? ` Approval ${other.id} was given for another request with these key values and does not cover this one.`
          : ''
      }`;
      return {
        verdict: 'hold',
        status: 428,
        title: 'Retry of an unknown outcome needs approval',
        detail: `An earlier attempt of this ${tool.effect} effect (tool ${tool.id}, operation ${result.operationId}) ended ${previous}: it may already have happened.${looked}${changed} Repeating it could do it twice, so the gate holds this retry and sent nothing. A person must approve it (approval ${result.approvalId})${last ? `; the last approval was ${last.state}${last.by ? ` by ${last.by}` : ''}${last.reason ? ` (${last.reason})` : ''}` : ''}. Do not retry until it is approved; check whether the effect happened.`,
        tool,
        decisionId: result.decisionId,
        operationId: result.operationId,
        extra: {
          approval_id: result.approvalId,
          previous_attempt_id: result.previousAttemptId,
          previous_dispatch_state: result.previousDispatchState,
          request_changed: result.requestChanged,
          ...(other ? { approved_request_id: other.id } : {}),
          operation_state: 'unknown',
          ...(result.reconciliation === null ? {} : { reconciliation: result.reconciliation }),
        },
      };
    }
    case 'pending': {
      const unknown = result.operationState === 'unknown';
      if (result.operationState === 'accepted') {
        // The destination took the work and is doing it: the same call again would be a second one.
        const ref = result.destinationRef ?? null;
        return {
          verdict: 'pending',
          status: 409,
          title: 'Same effect accepted by the destination, not finished',
          detail: `The destination accepted the same ${tool.effect} effect earlier (tool ${tool.id}, operation ${result.operationId}${ref === null ? '' : `, its reference ${ref}`}) and has not finished it. Nothing was sent. Do not repeat it; check on that work instead.`,
          tool,
          decisionId: result.decisionId,
          operationId: result.operationId,
          retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
          extra: { operation_state: 'accepted', destination_ref: ref },
        };
      }
      return {
        verdict: 'pending',
        status: 409,
        title: unknown ? 'Same effect has an unknown outcome' : 'Same effect in progress',
        detail: unknown
          ? `The same ${tool.effect} effect (tool ${tool.id}, operation ${result.operationId}) was sent earlier and its outcome is unknown: it may already have happened. Nothing was sent. Do not repeat it; wait until the outcome is settled, then check whether it happened.`
          : `Another run is performing the same ${tool.effect} effect right now (tool ${tool.id}, operation ${result.operationId}). Nothing was sent. Wait, then check its result before trying again.`,
        tool,
        decisionId: result.decisionId,
        operationId: result.operationId,
        retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
        extra: { operation_state: result.operationState },
      };
    }
    case 'halted': {
      // Written for the model (stop) and for the person it reports to (which run, how to let it go on).
      const release = `A person can release it: effectgate runs release ${result.runId} --by WHO --reason TEXT.`;
      return {
        verdict: 'halted',
        status: 429,
        title: 'Run halted by the loop breaker',
        detail:
          result.haltDecisionId === result.decisionId
            ? `This run proposed again an effect it had already been told ${result.duplicateSkips} times is done (operation ${result.operationId ?? 'unknown'}), so the gate halted the run: every further governed call of run ${result.runId} is refused, nothing was sent. Stop proposing effects and report to a person. ${release}`
            : `Run ${result.runId} was halted at ${result.haltedAt} by the loop breaker (decision ${result.haltDecisionId}): it kept proposing an effect that was already done. Every governed call of this run is refused, nothing was sent. Stop proposing effects and report to a person. ${release}`,
        tool,
        decisionId: result.decisionId,
        operationId: null,
        extra: {
          run_id: result.runId,
          duplicate_skips: result.duplicateSkips,
          halted_at: result.haltedAt,
          halt_decision_id: result.haltDecisionId,
          looped_operation_id: result.operationId,
        },
      };
    }
    case 'block':
      return blockFacts(tool, result.decisionId, result.reason, result.operationId);
  }
}

export function blockFacts(
  tool: Tool,
  decisionId: string,
  reason: string,
  operationId: string | null,
): VerdictFacts {
  if (reason.startsWith('key_path_missing')) {
    const missing = reason.slice(reason.indexOf(':') + 1).trim();
    return {
      verdict: 'block',
      status: 422,
      title: 'Duplicate key cannot be built',
      detail: `The request lacks ${missing}, which tool ${tool.id} needs to recognise a repeated effect. The gate refused it and sent nothing. Include the missing field and try again.`,
      tool,
      decisionId,
      operationId: null,
      extra: { reason: 'key_path_missing', missing: missing.split(', ') },
    };
  }
  if (reason.startsWith('key_value_invalid')) {
    const problems = reason.slice(reason.indexOf(':') + 1).trim();
    return {
      verdict: 'block',
      status: 422,
      title: 'Duplicate key cannot be built',
      detail: `Tool ${tool.id} cannot recognise a repeated effect from this request: ${problems}. The gate refused it and sent nothing. Fix the value and try again.`,
      tool,
      decisionId,
      operationId: null,
      extra: { reason: 'key_value_invalid', invalid: problems.split(', ') },
    };
  }
  if (reason.startsWith('delegation_')) {
    // Effectgate-Operation named an operation this proposal cannot be an attempt of (eg_delegated.sql).
    const cut = reason.indexOf(':');
    return {
      verdict: 'block',
      status: 422,
      title: 'Not an attempt of the named operation',
      detail: `Effectgate-Operation says this request acts on an existing operation of tool ${tool.id}, but ${cut < 0 ? reason : reason.slice(cut + 1).trim()}. The gate refused it and sent nothing: a delegated worker carries the id of the very operation it performs, with the same request.`,
      tool,
      decisionId,
      operationId,
      operationHeader: false,
      extra: { reason: cut < 0 ? reason : reason.slice(0, cut) },
    };
  }
  if (reason === 'retry_budget_exhausted') {
    return {
      verdict: 'block',
      status: 403,
      title: 'Retry budget exhausted',
      detail: `Operation ${operationId ?? ''} of tool ${tool.id} already used its ${tool.retry.budget} attempts. The gate refused another and sent nothing. Ask a person before trying again.`,
      tool,
      decisionId,
      operationId,
      operationHeader: false,
      extra: { reason },
    };
  }
  return {
    verdict: 'block',
    status: 403,
    title: 'Blocked by policy',
    detail: `Tool ${tool.id} is blocked by policy (${reason}). Nothing was sent.`,
    tool,
    decisionId,
    operationId: null,
    extra: { reason },
  };
}

/** `default: block` for egress no tool classifies; answered without a store round trip. */
export function unclassifiedFacts(head: GateRequestHead): VerdictFacts {
  return {
    verdict: 'block',
    status: 403,
    title: 'Unclassified egress blocked',
    detail: `Egress to ${head.method} ${head.host}${head.path} matches no tool classification and the policy default is block. Nothing was sent.`,
    tool: null,
    decisionId: null,
    operationId: null,
    extra: { reason: 'unclassified' },
  };
}
