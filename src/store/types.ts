/**
 * The store interface: one implementation (kysely) over PostgreSQL (pg) and embedded PGlite.
 *
 * Hot-path budget (the project's "hot path is sacred" rule): a governed allow costs exactly two
 * calls that each make ONE database round trip (`decide`, then `recordOutcome`); a duplicate,
 * halted or block costs one (`decide`). Both are single statements calling PL/pgSQL functions, so
 * the reservation protocol is SQL, atomic and correct across processes, and the events they append
 * are written in the same transaction as the state they describe.
 */

export interface Scope {
  readonly tenant: string;
  readonly area: string;
  readonly agent: string;
}

export type DispatchState = 'not_sent' | 'sent_no_response' | 'response_received' | 'execution_error';
export type OperationState =
  | 'open'
  | 'succeeded'
  | 'failed'
  | 'unknown'
  | 'cancelled'
  | 'duplicate_effect_confirmed';
export type Verdict = 'allow' | 'duplicate' | 'pending' | 'hold' | 'halted' | 'block';
export type RetryReason =
  | 'connection_not_established'
  | 'rate_limited'
  | 'destination_5xx'
  | 'response_lost_after_dispatch'
  | 'credential_refreshed'
  | 'operator_requested';

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
  readonly step: string | null;
  readonly worker: string | null;
  readonly agentVersion: string | null;
  readonly scope: Scope;
  readonly toolId: string;
  /** Why the request matched the tool (`ToolMatcher.explain()`). */
  readonly explain: string;
  /** Loop breaker: when the run already has this many duplicate skips, the verdict is `halted`. */
  readonly maxDuplicateSkips: number;
  readonly request: RequestFacts;
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
  /** Idempotency header to inject (value = operation id), or `null`. Recorded on the operation. */
  readonly idempotencyHeader: string | null;
  readonly retryBudget: number;
  /**
   * When false and the key is held by another run, nothing is recorded and `pending` is returned
   * with `decisionId: null` (the caller waits and asks again). When true, the pending decision is
   * recorded.
   */
  readonly recordPending: boolean;
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
    }
  | {
      readonly verdict: 'duplicate';
      readonly decisionId: string;
      readonly operationId: string;
      /** `null` when the source run is not known; never invented. */
      readonly source: DuplicateSource | null;
      readonly duplicateSkips: number;
    }
  | {
      readonly verdict: 'pending';
      readonly decisionId: string | null;
      readonly operationId: string;
      readonly operationState: OperationState;
    }
  | { readonly verdict: 'halted'; readonly decisionId: string; readonly duplicateSkips: number }
  | {
      readonly verdict: 'block';
      readonly decisionId: string;
      readonly reason: string;
      readonly operationId: string | null;
    };

export interface OutcomeInput {
  readonly operationId: string;
  readonly attemptId: string;
  readonly decisionId: string;
  /** `null` when the tool has no duplicate recognition. */
  readonly keyHash: string | null;
  readonly windowMs: number | null;
  readonly dispatchState: DispatchState;
  /** Resulting operation state: `succeeded` confirms the key, `failed` releases it, `unknown` keeps it held. */
  readonly operationState: 'succeeded' | 'failed' | 'unknown';
  readonly status: number | null;
  readonly responseFingerprint: string | null;
  readonly destinationRef: string | null;
  /** Whether the destination said it replayed a stored result; `null` when it said nothing. */
  readonly replayed: boolean | null;
  readonly durationMs: number;
  /** Short error text for failures without a response; never a secret. */
  readonly error: string | null;
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
  readonly request: RequestFacts;
  readonly status: number | null;
  readonly responseFingerprint: string | null;
  readonly destinationRef: string | null;
  readonly replayed: boolean | null;
  readonly durationMs: number | null;
  readonly error: string | null;
  readonly startedAt: string;
  readonly finishedAt: string | null;
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
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly attempts: readonly AttemptRecord[];
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
}

/**
 * One row of the append-only, hash-chained event log, exactly as stored. The log is several
 * independent chains (see `EVENT_CHAINS`); `seq` counts within the event's chain.
 */
export interface EventRecord {
  /** The chain: `chainOf(operationId ?? payload.input.decisionId)`. */
  readonly chain: number;
  /** Position in its chain, from 1, without gaps. */
  readonly seq: number;
  readonly type: string;
  /** The operation whose lifecycle the event belongs to (`decision.allow`, `attempt.outcome`), else null. */
  readonly operationId: string | null;
  /** Microseconds since the Unix epoch, from the database clock. */
  readonly recordedAtUs: string;
  /** The exact JSON text that was hashed. */
  readonly payload: string;
  readonly prevHash: string;
  readonly hash: string;
}

/** Where an event sits in the log: events are read in (chain, seq) order. */
export interface EventPosition {
  readonly chain: number;
  readonly seq: number;
}

/** The head row of one chain: its last event. */
export interface ChainHead {
  readonly chain: number;
  readonly lastSeq: number;
  readonly lastHash: string;
}

export interface StoreStats {
  /** Database round trips made since the store was opened (each statement sent counts one). */
  readonly roundTrips: number;
}

export interface Store {
  /** `postgres` or `pglite`. */
  readonly kind: 'postgres' | 'pglite';
  decide(input: DecideInput): Promise<DecideResult>;
  recordOutcome(input: OutcomeInput): Promise<{ readonly operationState: OperationState }>;
  getOperation(id: string): Promise<OperationRecord | null>;
  listOperations(filter?: {
    readonly state?: OperationState;
    readonly limit?: number;
  }): Promise<OperationRecord[]>;
  getDecision(id: string): Promise<DecisionRecord | null>;
  listDecisions(filter: {
    readonly runId?: string;
    readonly operationId?: string;
  }): Promise<DecisionRecord[]>;
  /**
   * At most `limit` events in (chain, seq) order, after the position `after` (keyset paging over
   * every chain; `0` = from the very start).
   */
  readEvents(after: EventPosition | 0, limit: number): Promise<EventRecord[]>;
  /** The head row of every chain, by chain. */
  chainHeads(): Promise<ChainHead[]>;
  /** Cheap liveness check (`select 1`). */
  ping(): Promise<void>;
  /** Applies pending migrations (kysely Migrator; its lock makes concurrent starts safe). */
  migrate(): Promise<void>;
  readonly stats: StoreStats;
  close(): Promise<void>;
}
