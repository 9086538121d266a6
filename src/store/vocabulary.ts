/*
 * The closed sets of the trail, as values: the types in types.ts are derived from these, and
 * whoever validates input (the admin API, the commands, the engine's Effectgate-Retry-Reason check)
 * uses these lists, so the sets are written once in TypeScript (and once in the migrations' CHECK
 * constraints, which must match).
 */

export const OPERATION_STATES = Object.freeze([
  'open',
  'succeeded',
  'failed',
  'unknown',
  'cancelled',
  'duplicate_effect_confirmed',
  // The destination accepted the call and has not done it yet (migration 0015, `outcome.accepted`).
  'accepted',
] as const);

/** Stored states plus `expired` (an approved card whose time is up reads as expired). */
export const APPROVAL_STATES = Object.freeze([
  'requested',
  'approved',
  'denied',
  'revoked',
  'used',
  'withdrawn',
  'expired',
] as const);

/** docs/design.md §3: the reasons a later attempt may have; a client may only claim operator_requested. */
export const RETRY_REASONS = Object.freeze([
  'connection_not_established',
  'rate_limited',
  'destination_5xx',
  'response_lost_after_dispatch',
  'credential_refreshed',
  'operator_requested',
  // The parent was answered MCP `input_required` (migration 0004): the later attempt continues it.
  'input_required',
] as const);

/** docs/design.md §3 "Observations": every kind of later evidence an operation can carry. */
export const OBSERVATION_KINDS = Object.freeze([
  'reconciliation',
  'gate_restarted',
  'outcome_lost',
  // From outside the gate (migration 0007, eg_add_observation.sql):
  'operator_decision',
  'callback',
  'read_back',
  'operator_note',
] as const);

/** The kinds anyone holding the admin token may post (`operator_decision` is `operations resolve`). */
export const POSTED_OBSERVATION_KINDS = Object.freeze(['callback', 'read_back', 'operator_note'] as const);

/** The states evidence from outside can settle an unknown operation in. */
export const SETTLED_STATES = Object.freeze(['succeeded', 'failed', 'duplicate_effect_confirmed'] as const);

/** What the gate answers a governed proposal in enforce mode (docs/design.md §4.3). */
export const ENFORCED_VERDICTS = Object.freeze([
  'allow',
  'duplicate',
  'pending',
  'hold',
  'halted',
  'block',
] as const);

/**
 * What shadow mode records instead of every verdict but allow (migration 0010): what enforce mode
 * would have answered; the request was sent anyway.
 */
export const SHADOW_VERDICTS = Object.freeze([
  'would_duplicate',
  'would_pending',
  'would_hold',
  'would_halted',
  'would_block',
] as const);

/** Every verdict a decision can record. */
export const VERDICTS = Object.freeze([...ENFORCED_VERDICTS, ...SHADOW_VERDICTS] as const);

/** `enforce`: verdicts are answered; `shadow`: recorded as would_<verdict>, nothing refused. */
export const GATE_MODES = Object.freeze(['enforce', 'shadow'] as const);
