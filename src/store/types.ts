/**
 * The store interface: one implementation (kysely) over PostgreSQL (pg) and embedded PGlite.
 *
 * Hot-path budget (the project's "hot path is sacred" rule): a governed allow costs exactly two
 * calls that each make ONE database round trip (`decide`, then `recordOutcome`); a duplicate,
 * halted or block costs one (`decide`). Both are single statements calling PL/pgSQL functions, so
 * the reservation protocol is SQL, atomic and correct across processes, and the events they append
 * are written in the same transaction as the state they describe. The functions are in
 * src/store/functions/, one file each; its README.md has their lock order and event shapes.
 */

import type {
  APPROVAL_STATES,
  ENFORCED_VERDICTS,
  GATE_MODES,
  OBSERVATION_KINDS,
  OPERATION_STATES,
  POSTED_OBSERVATION_KINDS,
  RETRY_REASONS,
  SETTLED_STATES,
  SHADOW_VERDICTS,
  VERDICTS,
} from './vocabulary.js';

export interface Scope {
  readonly tenant: string;
  readonly area: string;
  readonly agent: string;
}

export type DispatchState = 'not_sent' | 'sent_no_response' | 'response_received' | 'execution_error';
export type OperationState = (typeof OPERATION_STATES)[number];
/** What enforce mode answers; `Verdict` adds what shadow mode records instead (`would_*`). */
export type EnforcedVerdict = (typeof ENFORCED_VERDICTS)[number];
export type ShadowVerdict = (typeof SHADOW_VERDICTS)[number];
export type Verdict = (typeof VERDICTS)[number];
export type GateMode = (typeof GATE_MODES)[number];
export type RetryReason = (typeof RETRY_REASONS)[number];

/**
 * Why the gate let a later attempt go (recorded with the attempt, docs/design.md §3 "Every later
 * attempt has a parent and a reason"): the previous attempt definitely failed or never left; the
 * previous reservation was lost (its outcome never recorded within pending_ttl); the destination
 * honors the operation's idempotency key (tool `idempotency.honored: true`); or an operator
 * approved this very retry.
 */
export type RetryDecision =
  | 'previous_attempt_failed'
  | 'reservation_expired'
  | 'destination_idempotency_honored'
  | 'operator_approved'
  /** The tool says `dedupe.on_expired: retry`: a lost reservation is tried again, accepting a possible second effect. */
  | 'curator_accepted_risk'
  /** The previous attempt was answered MCP `input_required`: this one continues the call (spends no budget). */
  | 'input_continuation';

/**
 * What the gate does with a new proposal for an operation whose outcome is unknown (docs/design.md §3,
 * derived from the tool at load time): retry at once with the same idempotency key (`honored`),
 * look at the destination first (`reconcile`), or hold it for an operator's approval (`hold`).
 */
export type UnknownRule = 'honored' | 'reconcile' | 'hold';

/** Result of a reconciliation lookup: exactly one matching remote item, none, two or more, or no usable answer. */
export type ReconciliationResult = 'match' | 'none' | 'multiple' | 'inconclusive';

/**
 * One reconciliation lookup the gate made against the destination for an operation whose outcome
 * is unknown (tool `reconcile`), with the credentials of the proposal that triggered it (never
 * stored). Appended as an observation; it never rewrites an attempt.
 */
export interface ReconciliationInput {
  /** The operation looked up. */
  readonly operationId: string;
  /** Its latest attempt when the lookup started. */
  readonly attemptId: string | null;
  /** `GET https://api.example.com/repos/acme/api/issues?state=all`: method and URL, no credentials. */
  readonly endpoint: string;
  /** `sha256:<hex>` of the canonical lookup (method, URL and the argument values matched on). */
  readonly queryFingerprint: string;
  readonly result: ReconciliationResult;
  /** How many remote items matched (0 when inconclusive). */
  readonly matches: number;
  /** The destination reference (tool `response.ref`) of every matching item, `null` where it has none. */
  readonly remoteRefs: readonly (string | null)[];
  /** Status of the lookup response, `null` when none came. */
  readonly status: number | null;
  /** Why the lookup was inconclusive (e.g. `status 503`, `ECONNREFUSED`, `not JSON`); never a secret. */
  readonly error: string | null;
  readonly durationMs: number;
  /** Gate clock when the lookup was sent (ISO 8601); the store records its own time too. */
  readonly startedAt: string;
}

/** What the gate knows about the request being proposed; never contains a secret. */
export interface RequestFacts {
  readonly scheme: 'http' | 'https';
  readonly method: string;
  readonly host: string;
  readonly port: number;
  /** Path without query. */
  readonly path: string;
  /** The tool's route, e.g. `POST api.github.com /repos/{owner}/{repo}/issues` (matcher `explain()`). */
  readonly route: string;
  /** `sha256:<hex>` of the RFC 8785 canonical request minus volatile and secret fields. */
  readonly fingerprint: string;
  /** A label or keyed fingerprint of the credential used; never the credential. */
  readonly authorityRef: string | null;
}

export interface DedupeKeyInput {
  /** `sha256:<hex>` of the canonical key, always including tenant, area, agent and tool id. */
  readonly hash: string;
  /** The extracted key values, redacted where the tool declares them secret. */
  readonly values: readonly unknown[];
  /** `null` = permanent. */
  readonly windowMs: number | null;
  readonly pendingTtlMs: number;
}

interface DecideCommon {
  /** Allocated by the caller (UUIDv7). */
  readonly decisionId: string;
  readonly runId: string;
  /**
   * Set when the gate derived the run (no `Effectgate-Run`, no fixed run): the gate's instance id
   * and the client address it was derived from (`'<instance> <address>'`; no address in process).
   * A halted derived run of the same scope and client halts this one too, so a looping client
   * stays halted across idle bounds and restarts of its gate until released.
   */
  readonly derivedClient?: string | null;
  readonly step: string | null;
  readonly worker: string | null;
  readonly agentVersion: string | null;
  readonly scope: Scope;
  readonly toolId: string;
  /** Why the request matched the tool (`ToolMatcher.explain()`). */
  readonly explain: string;
  /** Loop breaker: a run told this many times that one effect is done halts when it proposes that effect again. */
  readonly maxDuplicateSkips: number;
  readonly request: RequestFacts;
  /**
   * `shadow` (docs/design.md §2): every verdict but allow is recorded as `would_<verdict>` and the caller
   * sends the request anyway; a shadow decide never halts a run and never asks for an approval,
   * so it leaves no state an operator must clear when the tool moves to enforce. Absent: enforce.
   */
  readonly mode?: GateMode;
}

/** Propose an effect: reserve its key (if any), or learn why not. */
export interface ReserveInput extends DecideCommon {
  readonly kind: 'reserve';
  /** `null` for tools without duplicate recognition (every proposal is a new operation). */
  readonly key: DedupeKeyInput | null;
  /** Set when the key could not be built and `on_missing: allow` let the call through ungoverned. */
  readonly keyError: string | null;
  /** Used only when a new operation is created. */
  readonly newOperationId: string;
  readonly newAttemptId: string;
  /**
   * Where the idempotency key goes (the header name, or the body member's JSONPath), or `null` when
   * none is sent. Recorded on the operation.
   */
  readonly idempotencyHeader: string | null;
  /**
   * The tool's idempotency dialect as the store needs it to choose each attempt's key
   * (eg_insert_attempt.sql), or `null` when no key is sent (no `idempotency`, or shadow mode).
   */
  readonly idempotency?: IdempotencyInput | null;
  readonly retryBudget: number;
  /** What to do when the key's operation has an unknown outcome (from the tool); recorded on a new operation. */
  readonly unknownRule: UnknownRule;
  /**
   * The tool declares a reconcile lookup. An accepted operation (eg_accepted.sql) is looked up
   * whenever the tool can, whatever its unknown rule: `idempotency.honored: true` makes a retry of
   * an unknown outcome safe without a lookup, but the work a destination accepted is still
   * best found by looking. Absent: only a `reconcile` unknown rule looks.
   */
  readonly hasLookup?: boolean;
  /**
   * A reservation found expired without an outcome: `unknown` marks its attempt `sent_no_response`
   * (observation `outcome_lost`) and answers by `unknownRule`; `retry` (tool `dedupe.on_expired`)
   * lets this proposal go out again as `curator_accepted_risk`.
   */
  readonly onExpired: 'unknown' | 'retry';
  /**
   * `Effectgate-Operation` from a delegated worker (docs/design.md §3 "Delegation"): the operation this
   * proposal is an attempt of, never a new one (eg_delegated.sql); `null` when none was sent.
   */
  readonly claimedOperationId: string | null;
  /** `operator_requested` when the client sent `Effectgate-Retry-Reason: operator_requested`. */
  readonly clientRetryReason: 'operator_requested' | null;
  /**
   * The lookup the gate made after a `reconcile` answer; `null` on a first proposal. With it the
   * store never answers `reconcile` again.
   */
  readonly reconciliation: ReconciliationInput | null;
  /** The gate process that will dispatch (recovery tells a live gate's in-flight attempt from a dead one's). */
  readonly gateInstance: string | null;
  /** The dispatch deadline the gate will apply, ms; recorded so recovery knows when an attempt is overdue. */
  readonly deadlineMs: number | null;
  /**
   * When false and the key is held by another run, nothing is recorded and `pending` is returned
   * with `decisionId: null` (the caller waits and asks again). When true, the pending decision is
   * recorded.
   */
  readonly recordPending: boolean;
}

/** What the store needs to choose an attempt's idempotency key (docs/design.md §3 "Idempotency keys"). */
export interface IdempotencyInput {
  /** `idempotency.max_length`: a longer operation id is sent as a SHA-256 hex prefix this long. */
  readonly maxLength: number | null;
  /** `idempotency.retention`, ms: past it an unknown operation's key is forgotten by the destination. */
  readonly retentionMs: number | null;
  /** `idempotency.agent_key`. */
  readonly agentKeyMode: 'keep' | 'replace' | 'require';
  /** The key the agent sent itself, at most 255 characters, or `null`. */
  readonly agentKey: string | null;
}

/** Record a policy block (e.g. a missing key path with `on_missing: block`). */
export interface BlockInput extends DecideCommon {
  readonly kind: 'block';
  readonly reason: string;
}

export type DecideInput = ReserveInput | BlockInput;

/** The earlier run that produced the effect a duplicate points at. */
export interface DuplicateSource {
  readonly runId: string | null;
  readonly step: string | null;
  readonly operationId: string;
  readonly attemptId: string | null;
  readonly confirmedAt: string;
  readonly destinationRef: string | null;
}

export type DecideResult =
  | {
      readonly verdict: 'allow';
      readonly decisionId: string;
      readonly operationId: string;
      readonly attemptId: string;
      readonly attemptNumber: number;
      readonly retryOfAttemptId: string | null;
      readonly retryReason: RetryReason | null;
      readonly retryDecision: RetryDecision | null;
      /** Set when this proposal changed the request materially and forked a new operation. */
      readonly supersedesOperationId: string | null;
      /** The idempotency key this attempt sends (chosen by the store), or `null` when none is sent. */
      readonly idempotencyKey?: string | null;
    }
  | {
      readonly verdict: 'duplicate';
      readonly decisionId: string;
      readonly operationId: string;
      /** `null` when the source run is not known; never invented. */
      readonly source: DuplicateSource | null;
      readonly duplicateSkips: number;
      /** The source operation's state: `duplicate_effect_confirmed` when reconciliation found the effect twice. */
      readonly operationState: OperationState;
      /** Set when this very proposal's reconciliation lookup settled the operation. */
      readonly reconciliation: ReconciliationResult | null;
    }
  | {
      /**
       * Not a verdict: the key's operation has an unknown outcome and the tool has a `reconcile`
       * lookup. Nothing was recorded; the gate makes the lookup and calls `decide` again with it.
       */
      readonly verdict: 'reconcile';
      readonly decisionId: null;
      readonly operationId: string;
      readonly attemptId: string | null;
    }
  | {
      /** Retry of an unknown outcome that needs an operator's approval (428). */
      readonly verdict: 'hold';
      readonly decisionId: string;
      readonly operationId: string;
      /** The open approval request for this operation (created by this decision or an earlier one). */
      readonly approvalId: string;
      readonly previousAttemptId: string | null;
      readonly previousDispatchState: DispatchState | null;
      /** This request's fingerprint differs from the unknown attempt's: same key values, another request. */
      readonly requestChanged: boolean;
      /**
       * An approval given for ANOTHER request of the same attempt (another fingerprint), still
       * usable: it does not cover this one, which is held on its own card (`approvalId`). Else `null`.
       */
      readonly approvedRequest: { readonly id: string; readonly fingerprint: string | null } | null;
      /** The last decided approval of this operation when it was denied, revoked or expired; else `null`. */
      readonly lastApproval: {
        readonly id: string;
        readonly state: ApprovalState;
        readonly by: string | null;
        readonly reason: string | null;
      } | null;
      readonly reconciliation: ReconciliationResult | null;
    }
  | {
      readonly verdict: 'pending';
      readonly decisionId: string | null;
      readonly operationId: string;
      readonly operationState: OperationState;
      /** `accepted`: the destination's reference for the work it accepted (Location, `accepted_ref`). */
      readonly destinationRef?: string | null;
    }
  | {
      /** The loop breaker (eg_decide step a): the run is halted; nothing is reserved or sent. */
      readonly verdict: 'halted';
      readonly decisionId: string;
      readonly runId: string;
      /** How many times the run had been told the key it looped on is done. */
      readonly duplicateSkips: number;
      readonly haltedAt: string;
      /** The decision that halted the run: this one when this proposal halted it. */
      readonly haltDecisionId: string;
      /** The operation the run looped on, on the proposal that halted it; else `null`. */
      readonly operationId: string | null;
    }
  | {
      readonly verdict: 'block';
      readonly decisionId: string;
      readonly reason: string;
      readonly operationId: string | null;
    };

export interface OutcomeInput {
  /**
   * `null` only for an abandoned decide: the gate lost the answer of a decide that may have created
   * `attemptId` (its store connection was cut) and sent nothing. The store finds the attempt by id,
   * records it `not_sent`, or does nothing when the decide never committed.
   */
  readonly operationId: string | null;
  readonly attemptId: string;
  readonly decisionId: string;
  /** `null` when the tool has no duplicate recognition. */
  readonly keyHash: string | null;
  readonly windowMs: number | null;
  readonly dispatchState: DispatchState;
  /**
   * Resulting operation state: `succeeded` confirms the key, `failed` releases it, `unknown` keeps
   * it held. `open`: the destination answered without running the tool (MCP `input_required`); the
   * operation stays open and the key awaits the call's continuation, the next attempt of the same
   * operation (docs/design.md §4.1).
   */
  readonly operationState: 'succeeded' | 'failed' | 'unknown' | 'open' | 'accepted';
  readonly status: number | null;
  readonly responseFingerprint: string | null;
  readonly destinationRef: string | null;
  /** Whether the destination said it replayed a stored result; `null` when it said nothing. */
  readonly replayed: boolean | null;
  readonly durationMs: number;
  /** Short error text for failures without a response; never a secret. */
  readonly error: string | null;
  /**
   * Which rule of the tool's outcome contract decided the state (`status 201`,
   * `failed_if $.ok == false`, `jsonrpc error`, `mcp isError`); absent: not recorded.
   */
  readonly outcomeRule?: string | null;
  /** The destination's error code read with `outcome.error_code` (an identifier, never its message). */
  readonly errorCode?: string | null;
}

export interface AttemptRecord {
  readonly id: string;
  readonly operationId: string;
  readonly number: number;
  readonly decisionId: string;
  readonly runId: string;
  readonly step: string | null;
  readonly worker: string | null;
  /** `null` while the dispatch has no recorded outcome. */
  readonly dispatchState: DispatchState | null;
  readonly retryOfAttemptId: string | null;
  readonly retryReason: RetryReason | null;
  readonly retryDecision: RetryDecision | null;
  /** Attempts this operation may make in all (tool `retry.budget`) minus this attempt's number. */
  readonly remainingAttempts: number | null;
  readonly request: RequestFacts;
  readonly status: number | null;
  readonly responseFingerprint: string | null;
  readonly destinationRef: string | null;
  readonly replayed: boolean | null;
  /** The idempotency key this attempt sent (the agent's own when kept), or `null` when none (migration 0013). */
  readonly idempotencyKey: string | null;
  /** The key the agent sent itself (cut to 255 characters when the gate replaced it), or `null`. */
  readonly agentIdempotencyKey: string | null;
  /** The gate's key for the operation (its id, or its SHA-256 prefix under `max_length`), or `null`. */
  readonly gateIdempotencyKey: string | null;
  readonly durationMs: number | null;
  readonly error: string | null;
  /** Which rule decided the outcome (`status 201`, `failed_if $.ok == false`); `null` before one, or when none was recorded. */
  readonly outcomeRule: string | null;
  /** The destination's error code (`outcome.error_code`), or `null`. */
  readonly errorCode: string | null;
  readonly startedAt: string;
  readonly finishedAt: string | null;
  /** Set when crash recovery marked this attempt `sent_no_response` (the gate died mid-dispatch). */
  readonly recoveredAt: string | null;
}

export interface OperationRecord {
  readonly id: string;
  readonly toolId: string;
  readonly scope: Scope;
  readonly state: OperationState;
  readonly keyHash: string | null;
  readonly keyValues: readonly unknown[] | null;
  readonly idempotencyHeader: string | null;
  readonly runId: string;
  readonly step: string | null;
  readonly worker: string | null;
  readonly agentVersion: string | null;
  /** The operation this one replaced because the request changed materially (a fork, not a retry). */
  readonly supersedesOperationId: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly attempts: readonly AttemptRecord[];
}

export type ObservationKind = (typeof OBSERVATION_KINDS)[number];
export type PostedObservationKind = (typeof POSTED_OBSERVATION_KINDS)[number];
export type SettledState = (typeof SETTLED_STATES)[number];

/**
 * Later evidence about an operation (docs/design.md §3): a reconciliation lookup, a gate restart, a
 * lost outcome, or evidence from outside the gate (an operator's decision, a callback, a
 * read-back, a note: `addObservation`).
 */
export interface ObservationRecord {
  readonly id: string;
  readonly operationId: string;
  /** The operation's latest attempt when the evidence came (for a lookup: the attempt it looked for). */
  readonly attemptId: string | null;
  readonly kind: ObservationKind;
  /**
   * `match` / `none` / `multiple` / `inconclusive` for a lookup; `marked_unknown` for a restart and
   * for a reservation that expired without an outcome (`outcome_lost`); for evidence from outside,
   * the state it settled the operation in, `noted`, or `not_settled` (it claimed a state the
   * operation could no longer take: `facts.stateAtObservation` says which it had).
   */
  readonly result: string;
  /** The observation's facts (for a lookup: endpoint, queryFingerprint, matches, remoteRefs, status, error). */
  readonly facts: Readonly<Record<string, unknown>>;
  /** The decision whose proposal triggered it, when one did. */
  readonly decisionId: string | null;
  readonly createdAt: string;
}

/**
 * `requested` (open, created by a `hold`) → `approved` (allows exactly one retry until
 * `expiresAt`) → `used` (by that retry); or `denied`; an approved one can be `revoked`, and reads
 * as `expired` once its time is up. A request still open when evidence settles the operation (a
 * late outcome, a reconciliation) is `withdrawn`: nothing is left to approve.
 */
export type ApprovalState = (typeof APPROVAL_STATES)[number];

/**
 * An approval card (docs/design.md §3): who may try what again, recorded apart from what happened.
 * Approving allows exactly one more attempt of the operation.
 */
export interface ApprovalRecord {
  readonly id: string;
  readonly operationId: string;
  readonly state: ApprovalState;
  /** What the operation intends: tool, scope, key values, destination and request fingerprint. */
  readonly intent: {
    readonly toolId: string;
    readonly scope: Scope;
    readonly keyValues: readonly unknown[] | null;
    readonly method: string;
    readonly host: string;
    readonly path: string;
    readonly route: string;
    /** The request fingerprint of the attempt whose outcome is unknown (the one to be retried). */
    readonly fingerprint: string;
    /**
     * The fingerprint of the request this card is about, the only request it can let go (migration
     * 0011): the held proposal's, or the lost attempt's for a card opened by recovery. It differs
     * from `fingerprint` when the request changed (same key values, another body): approving it
     * lets that changed request go as a new operation. `null`: a card recorded before 0011 for a
     * changed request whose fingerprint was never recorded; it lets no request go.
     */
    readonly requestFingerprint: string | null;
    /** The idempotency header the retry will carry (value = operation id), or `null`. */
    readonly idempotencyHeader: string | null;
    /** The key the retry will send (the unknown attempt's); absent on cards recorded before migration 0013. */
    readonly idempotencyKey?: string | null;
  };
  readonly previousAttemptId: string | null;
  readonly previousDispatchState: DispatchState | null;
  readonly previousStatus: number | null;
  /** What approving will do, in words, e.g. "one retry of operation … with the same Idempotency-Key". */
  readonly plannedRecovery: string;
  readonly requestedAt: string;
  /** The decision (a `hold`) or the recovery that asked for it. */
  readonly requestedBy: string;
  readonly decidedBy: string | null;
  readonly decidedAt: string | null;
  readonly reason: string | null;
  /** Until when an approved retry may start; `null` = no expiry. */
  readonly expiresAt: string | null;
  readonly revokedBy: string | null;
  readonly revokedAt: string | null;
  readonly usedByAttemptId: string | null;
  readonly usedAt: string | null;
  /** The session grant the retry was made under (the card is `used`, decided by the grant's author), else `null`. */
  readonly grantId: string | null;
}

/**
 * A session grant (docs/design.md §3 "Approvals"): one run of one scope may
 * retry unknown operations of one tool (or of every tool) until `expiresAt`, without a card per
 * call. Who was allowed to try, recorded apart from what happened.
 */
export interface GrantRecord {
  readonly id: string;
  readonly scope: Scope;
  readonly runId: string;
  /** `null`: every tool. */
  readonly toolId: string | null;
  readonly grantedBy: string;
  readonly reason: string;
  readonly grantedAt: string;
  readonly expiresAt: string;
  readonly revokedBy: string | null;
  readonly revokedAt: string | null;
  readonly revokeReason: string | null;
  /** `active`, `expired` (by the database clock) or `revoked`. */
  readonly state: 'active' | 'expired' | 'revoked';
}

export interface GrantInput {
  readonly runId: string;
  /** `null`: every tool. */
  readonly toolId: string | null;
  /** `null`: the one scope the run's recorded decisions name (refused when none or several). */
  readonly scope: Scope | null;
  readonly by: string;
  readonly reason: string;
  readonly ttlMs: number;
}

/** A run the loop breaker knows: it has a duplicate skip, a halt or a release recorded (migration 0009). */
export interface RunRecord {
  readonly id: string;
  readonly scope: Scope;
  /** Duplicates the run was answered since it was first seen, over all keys (releases do not reset it). */
  readonly duplicateSkips: number;
  /** `null`: not halted. */
  readonly haltedAt: string | null;
  readonly haltDecisionId: string | null;
  /** The keys the run was told are done since its last release, most skipped first. */
  readonly keys: readonly { readonly keyHash: string; readonly skips: number }[];
  readonly releases: readonly RunReleaseRecord[];
  readonly firstSkipAt: string;
}

export interface RunReleaseRecord {
  readonly id: string;
  readonly haltDecisionId: string | null;
  readonly haltedAt: string | null;
  readonly releasedBy: string;
  readonly reason: string;
  readonly releasedAt: string;
}

export interface RunReleaseInput {
  readonly runId: string;
  /** `null`: the one scope with a halted run of that id (refused when several). */
  readonly scope: Scope | null;
  readonly by: string;
  readonly reason: string;
}

export interface ApprovalDecisionInput {
  readonly approvalId: string;
  /** approve/deny a `requested` approval; revoke an `approved` one that was not used yet. */
  readonly action: 'approve' | 'deny' | 'revoke';
  /** Who decided (free text: a person's login or an email). */
  readonly by: string;
  readonly reason: string;
  /** approve only: how long the approved retry may wait to start; `null` = no expiry. */
  readonly ttlMs?: number | null;
}

/**
 * Evidence from outside the gate for `addObservation`. Never the evidence's payload itself (it may
 * hold secrets): its fingerprint.
 */
export interface ObservationInput {
  readonly operationId: string;
  readonly kind: 'operator_decision' | PostedObservationKind;
  /** Who or what produced it: a person's login, a webhook's name. */
  readonly by: string;
  /** Why (an operator's decision), or what it says (a note). */
  readonly reason: string | null;
  /** The state it settles the operation in: required for `operator_decision`, never for `operator_note`. */
  readonly settles: SettledState | null;
  /** The status the evidence reports (a callback's, a read-back's), when it has one. */
  readonly status: number | null;
  /** The destination's reference for the effect (the created issue's URL, a refund's id). */
  readonly destinationRef: string | null;
  /** Every reference, for `duplicate_effect_confirmed` (the first is `destinationRef` when that is null). */
  readonly refs: readonly string[];
  /** `sha256:<hex>` of the evidence's payload as RFC 8785 JSON, or as given; also what makes a repeat delivery one observation. */
  readonly payloadFingerprint: string | null;
  /** Where it was recorded: `cli`, `api`, `page`, `gate`. */
  readonly source: string;
  /**
   * The operation's latest attempt the evidence was gathered after (a read-back): a later attempt
   * may have done what the evidence could not see, so it then settles nothing (`not_settled`).
   */
  readonly asOfAttemptId?: string | null;
}

export interface ObservationResult {
  readonly observationId: string;
  readonly operationId: string;
  readonly kind: ObservationInput['kind'];
  /** The state it settled, `noted`, or `not_settled`. */
  readonly result: string;
  /** The operation's state after it. */
  readonly operationState: OperationState;
  readonly stateChange: { readonly from: OperationState; readonly to: OperationState } | null;
  /** What happened to the operation's key: `confirmed` or `released`; `null` when it did not move. */
  readonly key: { readonly state: 'confirmed' | 'released'; readonly windowEndsAt?: string | null } | null;
  /** Open approval requests (or unused approvals) of the operation that it withdrew. */
  readonly approvalsWithdrawn: number;
  /** The same delivery was recorded before (same kind, payload fingerprint and claim): nothing was written. */
  readonly alreadyRecorded: boolean;
}

/** How a caller that does not know our operation id names one (a webhook). */
export type OperationLookup = { readonly idempotencyKey: string } | { readonly destinationRef: string };

/** One attempt crash recovery found without an outcome and marked `sent_no_response`. */
export interface RecoveredAttempt {
  readonly operationId: string;
  readonly attemptId: string;
  readonly toolId: string;
  /** The approval request created for it (tools whose unknown rule is `hold`), else `null`. */
  readonly approvalId: string | null;
  /** The unknown rule the next proposal follows: recorded on the operation, else the caller's, else hold. */
  readonly rule: UnknownRule;
}

export interface RecoverInput {
  /** The calling gate process; its own in-flight attempts are never touched. `null` for the CLI. */
  readonly instanceId: string | null;
  /**
   * True when no other gate can be running on this store (embedded PGlite: the directory lock):
   * every attempt without an outcome is orphaned. Otherwise only attempts of gate instances whose
   * heartbeat is older than `staleAfterMs` (or that stopped), and attempts past their deadline.
   */
  readonly exclusive: boolean;
  readonly staleAfterMs: number;
  /** The unknown rule of each tool the caller knows; tools with rule `hold` get an approval request. */
  readonly rules: Readonly<Record<string, UnknownRule>>;
}

export interface OperationFilter {
  readonly state?: OperationState;
  readonly toolId?: string;
  readonly tenant?: string;
  /** ISO 8601: operations created at or after. */
  readonly since?: string;
  /** Operations forked from this one (their `supersedesOperationId`). */
  readonly supersedesOperationId?: string;
  /** Exactly these semantic key values (as recorded, in order); pair with `toolId`. */
  readonly keyValues?: readonly unknown[];
  readonly limit?: number;
}

/**
 * What became of a request shadow mode sent although its decision was `would_<verdict>`
 * (`Store.recordShadowDispatch`, migration 0010). Not an attempt: the gate reserved nothing and
 * injected no Idempotency-Key for it; the trail shows it beside its decision.
 */
export interface ShadowDispatchInput {
  readonly decisionId: string;
  /** The operation the would-verdict named (the earlier effect), or `null`. */
  readonly operationId: string | null;
  readonly toolId: string;
  readonly runId: string;
  readonly scope: Scope;
  readonly verdict: ShadowVerdict;
  readonly dispatchState: DispatchState;
  readonly status: number | null;
  readonly durationMs: number;
  readonly error: string | null;
}

export interface ShadowDispatchRecord {
  readonly dispatchState: DispatchState;
  readonly status: number | null;
  readonly durationMs: number | null;
  readonly error: string | null;
  readonly recordedAt: string;
}

/** Shadow verdicts of one tool (`Store.countShadowVerdicts`): what enforce mode would have prevented. */
export interface ShadowVerdictCount {
  readonly toolId: string;
  readonly verdict: ShadowVerdict;
  readonly count: number;
}

export interface DecisionRecord {
  readonly id: string;
  readonly runId: string;
  readonly step: string | null;
  readonly toolId: string;
  readonly verdict: Verdict;
  readonly reason: string | null;
  readonly operationId: string | null;
  readonly attemptId: string | null;
  readonly keyHash: string | null;
  readonly scope: Scope;
  readonly explain: string;
  readonly createdAt: string;
  /**
   * A `would_*` decision's request as sent anyway: `null` until recorded (in flight, or the gate
   * stopped before it could record what came back); always `null` for an enforced verdict.
   */
  readonly shadowDispatch: ShadowDispatchRecord | null;
}

/** What every event of the log holds, with or without a chain. */
interface EventBody {
  readonly type: string;
  /** The operation whose lifecycle the event belongs to (`decision.allow`, `attempt.outcome`), else null. */
  readonly operationId: string | null;
  /** Microseconds since the Unix epoch, from the database clock. */
  readonly recordedAtUs: string;
  /** The exact JSON text that was hashed. */
  readonly payload: string;
}

/**
 * One row of the append-only, hash-chained event log, exactly as stored. The log is several
 * independent chains (see `EVENT_CHAINS`); `seq` counts within the event's chain.
 */
export interface ChainedEvent extends EventBody {
  /** The chain: `chainOf(operationId ?? payload.input.decisionId)`. */
  readonly chain: number;
  /** Position in its chain, from 1, without gaps. */
  readonly seq: number;
  readonly prevHash: string;
  readonly hash: string;
  /**
   * Its position in the store (migration 0024; the events' key since 0027, which numbered the
   * events from before 0024 below every other). Absent where it is not read: an export file.
   */
  readonly pos?: number;
}

/**
 * An event appended without a chain (migration 0027 allows it): no seq, no link, no hash of its
 * own. Its order is its position, and it is protected once sealed, by its leaf in the signed tree
 * (`eventLeafHash`), which covers its position and every field.
 */
export interface UnchainedEvent extends EventBody {
  readonly pos: number;
  readonly chain: null;
  readonly seq: null;
  readonly prevHash: null;
  readonly hash: null;
}

/** An event of the log, with a chain or without one. */
export type EventRecord = ChainedEvent | UnchainedEvent;

/** Where an event sits in the log: events are read in (chain, seq) order. */
export interface EventPosition {
  readonly chain: number;
  readonly seq: number;
}

/**
 * The head row of one chain: its last event, and its base: the last event retention removed (0
 * and GENESIS_HASH while none was; absent in a version 1 export). The chain is verified from its
 * base: its first kept event has seq baseSeq + 1 and prev_hash baseHash.
 */
export interface ChainHead {
  readonly chain: number;
  readonly lastSeq: number;
  readonly lastHash: string;
  readonly baseSeq?: number;
  readonly baseHash?: string;
}

/**
 * Where retention cuts one chain: after its base, up to and including `cutSeq` (its seq in the
 * checkpoint retention cuts at; in a log never sealed, `retentionCuts`, the last event recorded
 * before the cut-off); `cutSeq = baseSeq` when the chain keeps everything.
 */
export interface ChainCut {
  readonly chain: number;
  readonly baseSeq: number;
  readonly baseHash: string;
  readonly cutSeq: number;
  readonly cutHash: string;
}

/**
 * The last sealed seq of every chain that has one, by chain number as text (`{"3": 120}`); a chain
 * absent has none sealed.
 */
export type SealedHeads = Readonly<Record<string, number>>;

/**
 * The batch of events a checkpoint sealed (migration 0026): those `target` sees and `after` did
 * not, in `pos` order, up to `through`. Snapshots are PostgreSQL `pg_snapshot` text
 * (`xmin:xmax:xip,...`).
 */
export interface CheckpointBatch {
  /** Null: the first batch, every event with a `tx` the checkpoint before had not sealed by chain. */
  readonly after: string | null;
  readonly target: string;
  /** The last `pos` sealed; null: the whole batch (the next one starts after `target`). */
  readonly through: number | null;
}

/**
 * One checkpoint of the sealed log (audit_checkpoints, migrations 0018 and 0026): the RFC 9162
 * Merkle tree over every event sealed so far, in sealing order, checkpoint by checkpoint. Within
 * one, the events of its batch in `pos` order; in a checkpoint of the old form (no batch), the
 * events after the previous checkpoint's heads up to its own, by chain then seq.
 */
export interface CheckpointRecord {
  /** Leaves in the tree: events sealed so far, removed ones included. */
  readonly size: number;
  /** Each chain's last sealed seq (retention cuts the chains there). */
  readonly heads: SealedHeads;
  /** What it sealed, found by snapshot; null: a checkpoint of the old form (sealed by chain). */
  readonly batch: CheckpointBatch | null;
  /** The tree's root hash, 64 lowercase hex digits. */
  readonly root: string;
  /** The tree's compact range at this size (MerkleFrontier JSON). */
  readonly frontier: string;
  /** When it was sealed (ISO). */
  readonly sealedAt: string;
  /** The C2SP signed note of the checkpoint (checkpoint-note.ts). */
  readonly note: string;
}

/** A read of one batch's events (AuditStore.readBatch). */
export interface BatchRead {
  readonly after: string | null;
  readonly target: string | null;
  /** Events with a larger `pos` only (0: from the batch's start). */
  readonly from: number;
  /**
   * How a batch's rest (`from` > 0) is read: up to this position, an index range (a checkpoint
   * that ends there); `'end'`, to the batch's end found by transaction id (an old batch read again,
   * where an open index range would read every event written since); absent, an open index range
   * (the batch being sealed now, past whose end lies only what was written since).
   */
  readonly upTo?: number | 'end';
  readonly limit: number;
  /** With `after` null: the heads the old form sealed up to. */
  readonly sealed: SealedHeads;
}

/** What AuditStore.readBatch read. */
export interface BatchEvents {
  /** The batch's target snapshot: the one asked for, or the store's current one. */
  readonly target: string;
  readonly events: readonly EventRecord[];
  /** Each event's `pos`, in the same order. */
  readonly positions: readonly number[];
}

/** The events of one chain with `after < seq <= upTo`. */
export interface EventRange {
  readonly chain: number;
  readonly after: number;
  readonly upTo: number;
}

/** Events no checkpoint covers yet. */
/** What one projection round did (Store.projectEvents). */
export interface ProjectionRound {
  /** Events read (of every type; decisions among them were projected). */
  readonly events: number;
  /** A chain had more events than the round took: call again. */
  readonly more: boolean;
  /** Another process was projecting; this round did nothing. */
  readonly busy: boolean;
}

export interface UnsealedEvents {
  readonly count: number;
  /** When the oldest of them was recorded (ISO); null when there is none. */
  readonly oldestAt: string | null;
}

export interface StoreStats {
  /**
   * Database round trips made since the store was opened (each statement sent counts one; a call
   * that went in a group-commit batch counts the one round trip it took part in).
   */
  readonly roundTrips: number;
  /** Round trips of background work (the projector's rounds), not in `roundTrips`. */
  readonly backgroundRoundTrips: number;
  /** What group commit did with the hot path's calls (group-commit.ts). */
  readonly groupCommit: GroupCommitStats;
}

/** See group-commit.ts. */
export interface GroupCommitStats {
  /** Round trips that carried more than one hot-path call (eg_batch). */
  readonly batches: number;
  /** Calls that went in those batches. */
  readonly batchedCalls: number;
  /** Batches the server refused and rolled back whole, whose calls then went one by one. */
  readonly fallbacks: number;
}

/** What `Store.storedAuthorityKey` found. */
export interface StoredAuthorityKey {
  readonly key: string;
  readonly keyed: boolean;
}

/** What the engine needs on a call's path and around it: propose, settle, shadow results, its own life and recovery. */
export interface EngineStore {
  decide(input: DecideInput): Promise<DecideResult>;
  /**
   * Idempotent: an attempt that already has this outcome (a write whose commit was lost with its
   * connection, written again) answers its operation's state again. `operationState` is `null` only
   * for an abandoned decide that never committed (no such attempt).
   */
  recordOutcome(input: OutcomeInput): Promise<{ readonly operationState: OperationState | null }>;
  /**
   * Records what a request shadow mode sent anyway got back (eg_shadow_dispatched.sql): one row and
   * one `shadow.dispatched` event; a second call for the same decision is ignored (true: recorded).
   */
  recordShadowDispatch(input: ShadowDispatchInput): Promise<boolean>;
  /**
   * Registers (or re-announces) a running gate process; `heartbeat` keeps it alive. A gate that
   * starts again under the same id starts a new life: its attempts recorded before this call are
   * its previous life's, recovered by its next `recover`. Answers this life (pass it to
   * `heartbeat` and `stopInstance`, so a life that was replaced never speaks for its successor) and
   * the previous life's last heartbeat and stop time, `null` for an id never seen.
   */
  registerInstance(id: string): Promise<{
    readonly life: string;
    readonly previous: { readonly heartbeatAt: string; readonly stoppedAt: string | null } | null;
  }>;
  /** Keeps a life visible; no-op once another life of the id registered. */
  heartbeat(id: string, life?: string): Promise<void>;
  /** Marks a gate process stopped after it drained (its attempts all have outcomes); only `life` when given. */
  stopInstance(id: string, life?: string): Promise<void>;
  /**
   * Crash recovery (docs/design.md §3 "Persist before dispatch"): every attempt persisted
   * without an outcome whose gate is gone is marked `sent_no_response` with a `gate_restarted`
   * observation; its operation becomes `unknown`, its key `unknown`.
   */
  recover(input: RecoverInput): Promise<RecoveredAttempt[]>;
  /**
   * The authority (HMAC) key kept in the store's `settings` table: migration 0002 made one per
   * store, and versions before the key moved out of the database keyed fingerprints with it
   * (src/engine/authority-key.ts moves or drops it). `keyed`: the trail may hold fingerprints made
   * with it (the store has an operation). `null` once it is gone.
   */
  storedAuthorityKey(): Promise<StoredAuthorityKey | null>;
  /** Deletes the stored authority key if it still is `key` (compare and delete: never another's). */
  dropStoredAuthorityKey(key: string): Promise<void>;
}

/** What operators do (admin API, UI, CLI): approvals, grants, released runs, evidence and resolutions. */
export interface OperatorStore {
  listApprovals(filter?: {
    readonly state?: ApprovalState;
    readonly operationId?: string;
    readonly limit?: number;
  }): Promise<ApprovalRecord[]>;
  getApproval(id: string): Promise<ApprovalRecord | null>;
  /**
   * Approve, deny or revoke. Throws `EG_ERR_NOT_FOUND` for an unknown id and
   * `EG_ERR_APPROVAL_STATE` when the approval is not in a state the action applies to.
   */
  decideApproval(input: ApprovalDecisionInput): Promise<ApprovalRecord>;
  /**
   * Records a session grant. Throws `EG_ERR_CONFIG_INVALID` when no scope is given and the run's
   * decisions do not name exactly one.
   */
  createGrant(input: GrantInput): Promise<GrantRecord>;
  listGrants(filter?: {
    readonly runId?: string;
    readonly grantId?: string;
    readonly limit?: number;
  }): Promise<GrantRecord[]>;
  /** Ends an active grant early. `EG_ERR_NOT_FOUND`, or `EG_ERR_APPROVAL_STATE` when it is revoked or expired. */
  revokeGrant(input: {
    readonly grantId: string;
    readonly by: string;
    readonly reason: string;
  }): Promise<GrantRecord>;
  /**
   * Lets a halted run go on (eg_release_run.sql): its per-key counts start again, the release is
   * recorded. `EG_ERR_NOT_FOUND` for a run never skipped, `EG_ERR_RUN_STATE` for one not halted,
   * `EG_ERR_CONFIG_INVALID` when no scope is given and several are halted under that id.
   */
  releaseRun(input: RunReleaseInput): Promise<RunRecord>;
  /**
   * Appends evidence from outside the gate to an operation and, when it says so and the operation
   * can take it, settles it (eg_add_observation.sql). Throws `EG_ERR_NOT_FOUND` for an unknown
   * operation and `EG_ERR_OPERATION_STATE` for an operator's decision on one that cannot be
   * settled (naming its state).
   */
  addObservation(input: ObservationInput): Promise<ObservationResult>;
}

/** What the admin API, the UI, the CLI and the engine's reconciliation read: operations, runs, decisions and their evidence. */
export interface TrailReads {
  getOperation(id: string): Promise<OperationRecord | null>;
  listOperations(filter?: OperationFilter): Promise<OperationRecord[]>;
  /** How many operations are in each state (same filter, without `state` and `limit`). */
  countOperations(
    filter?: Omit<OperationFilter, 'state' | 'limit'>,
  ): Promise<Partial<Record<OperationState, number>>>;
  /**
   * How many proposals each of these operations absorbed: its decisions with verdict `duplicate`
   * (the gate answered them with the operation's result instead of sending anything). One grouped
   * query for a whole list; an operation without one is absent from the answer.
   */
  countDuplicates(operationIds: readonly string[]): Promise<Readonly<Record<string, number>>>;
  /**
   * What shadow mode recorded instead of refusing, per tool and verdict ("12 duplicate effects would
   * have been skipped"), since `since` when given. Tools that never ran in shadow are absent.
   */
  countShadowVerdicts(filter?: { readonly since?: string }): Promise<readonly ShadowVerdictCount[]>;
  listObservations(operationId: string): Promise<ObservationRecord[]>;
  /**
   * Runs the loop breaker knows (a skip, a halt or a release recorded), halted first (newest halt
   * first), then by first skip, newest first. `runId` may match several scopes.
   */
  listRuns(filter?: {
    readonly runId?: string;
    readonly halted?: boolean;
    readonly limit?: number;
  }): Promise<RunRecord[]>;
  /**
   * The operations an idempotency key (the value the gate sent: an operation id whose tool injects
   * one) or a destination reference (an attempt's, or one an observation brought) names; at most 10.
   */
  findOperations(lookup: OperationLookup): Promise<OperationRecord[]>;
  getDecision(id: string): Promise<DecisionRecord | null>;
  listDecisions(filter: {
    readonly runId?: string;
    readonly operationId?: string;
  }): Promise<DecisionRecord[]>;
}

/** What the audit needs: the event log, its projection, its sealed checkpoints, retention. */
export interface AuditStore {
  /**
   * At most `limit` events in (chain, seq) order, after the position `after` (keyset paging over
   * every chain; `0` = from the very start).
   */
  readEvents(after: EventPosition | 0, limit: number): Promise<ChainedEvent[]>;
  /** The head row of every chain, by chain. */
  chainHeads(): Promise<ChainHead[]>;
  /** Retention, step 1: where each chain would be cut to remove the events recorded before `before` (ISO time). */
  retentionCuts(before: string): Promise<ChainCut[]>;
  /**
   * Retention of a sealed log, step 1: the checkpoint to cut at, the latest sealed before `before`
   * (ISO time) that covers every chain's base and that the projection has passed; null when none is.
   */
  retentionCheckpoint(before: string): Promise<CheckpointRecord | null>;
  /**
   * Retention, last step: removes one chain's events after its base up to its cut (archived
   * first: audit-retention.ts) and makes the cut its base, in one transaction. Returns how many it
   * removed. `EG_ERR_AUDIT_CHAIN_BROKEN` when the chain is no longer where the cut says.
   */
  pruneChain(cut: ChainCut): Promise<number>;
  /**
   * Projects committed events onto the tables made from them (decisions, operations, attempts;
   * migrations 0019, 0023, 0025), at most `limit` events. `wait` false (the background projector): a round
   * another process is running is skipped (`busy`), not waited for. Readers of decisions catch up
   * by themselves; this is what keeps them from having much to do.
   */
  projectEvents(options?: { readonly limit?: number; readonly wait?: boolean }): Promise<ProjectionRound>;
  /** The sealed log's identity (settings.audit_log_id): the origin of its checkpoints names it. */
  auditLogId(): Promise<string>;
  /** The events of the given ranges, in (chain, seq) order: what a checkpoint of the old form sealed. */
  readEventRanges(ranges: readonly EventRange[]): Promise<ChainedEvent[]>;
  /**
   * At most `limit` events of a batch (those `target` sees and `after` did not) with a `pos` past
   * `from`, in `pos` order; with `after` null, those with a `tx` not sealed by chain in `sealed`.
   * `target` null: the store's current snapshot, returned with the events.
   */
  readBatch(read: BatchRead): Promise<BatchEvents>;
  /** Whether an event written before the store gave events an order (no `tx`) lies past `heads`. */
  hasUnsealedLegacy(heads: SealedHeads): Promise<boolean>;
  /** Whether the log holds an event without a chain (which a later version's append writes). */
  hasUnchainedEvents(): Promise<boolean>;
  /** The newest checkpoint, or null while the log has none. */
  latestCheckpoint(): Promise<CheckpointRecord | null>;
  /** The checkpoint of tree size `size`, or null. */
  getCheckpoint(size: number): Promise<CheckpointRecord | null>;
  /** At most `limit` checkpoints by size, after size `after` (null: from the first). */
  readCheckpoints(after: number | null, limit: number): Promise<CheckpointRecord[]>;
  /**
   * Appends `checkpoint` if the latest one is still of size `after` (null: none yet); false, and
   * nothing written, when another sealer appended meanwhile.
   */
  appendCheckpoint(after: number | null, checkpoint: CheckpointRecord): Promise<boolean>;
  /** How many committed events `latest` does not seal (null: none is), and the oldest one's time. */
  unsealedEvents(latest: CheckpointRecord | null): Promise<UnsealedEvents>;
}

/** The store itself: which one it is, liveness, migrations, figures, close. */
export interface StoreHandle {
  /** `postgres` or `pglite`. */
  readonly kind: 'postgres' | 'pglite';
  /**
   * The directory of an embedded store on disk (`pglite:DIR`, resolved); `null` for PostgreSQL,
   * `pglite:memory` and a store reached through a running gate's socket. Its secret key files live
   * beside it (key-file-beside-store.ts).
   */
  readonly dir: string | null;
  /** Cheap liveness check (`select 1`). */
  ping(): Promise<void>;
  /**
   * Applies pending migrations (kysely Migrator; its lock makes concurrent starts safe), then the
   * function definitions of src/store/functions/ when they changed (under an advisory lock).
   */
  migrate(): Promise<void>;
  readonly stats: StoreStats;
  close(): Promise<void>;
}

/**
 * A store, cut by audience: a part of the code that needs only one audience's calls takes that
 * interface (or a Pick of it), so what it may do to the store is visible in its signature.
 */
export interface Store extends StoreHandle, EngineStore, OperatorStore, TrailReads, AuditStore {}
