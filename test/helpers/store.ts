/**
 * Real stores for tests, no mocks: every store suite runs once per target. `pglite:memory` always;
 * PostgreSQL when DATABASE_URL is set, each opened store then getting a fresh, uniquely named
 * database (created through DATABASE_URL, dropped on close) so parallel test files never collide.
 *
 *   for (const target of storeTargets()) describe(target.name, () => { ... openTestStore(target) ... })
 */
import { randomBytes } from 'node:crypto';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import type { KyselyStore } from '../../src/store/kysely-store.js';
import { openKyselyStore } from '../../src/store/open-store.js';
import type { Database } from '../../src/store/schema.js';
import type {
  ApprovalDecisionInput,
  ApprovalRecord,
  BatchEvents,
  BatchRead,
  ChainCut,
  ChainedEvent,
  ChainHead,
  CheckpointRecord,
  DecideInput,
  DecideResult,
  DecisionRecord,
  EventPosition,
  EventRange,
  GrantInput,
  GrantRecord,
  ObservationInput,
  ObservationRecord,
  ObservationResult,
  OperationFilter,
  OperationLookup,
  OperationRecord,
  OperationState,
  OutcomeInput,
  ProjectionRound,
  RecoveredAttempt,
  RecoverInput,
  RunRecord,
  RunReleaseInput,
  SealedHeads,
  ShadowDispatchInput,
  ShadowVerdictCount,
  Store,
  StoredAuthorityKey,
  StoreStats,
  UnsealedEvents,
} from '../../src/store/types.js';
import { trailMismatches } from './trail-check.js';
import type { TrailMismatch } from './trail-events.js';

export interface StoreTarget {
  readonly kind: 'pglite' | 'postgres';
  /** For test titles. */
  readonly name: string;
  /** PostgreSQL only: the server database used to create and drop per-test databases. */
  readonly adminUrl?: string;
}

export function storeTargets(env: NodeJS.ProcessEnv = process.env): StoreTarget[] {
  const targets: StoreTarget[] = [{ kind: 'pglite', name: 'pglite:memory' }];
  const url = env['DATABASE_URL'];
  if (url) targets.push({ kind: 'postgres', name: 'postgres', adminUrl: url });
  return targets;
}

/** A real store plus what tests need beyond `Store`. `close()` also drops its database. */
export interface TestStore extends Store {
  readonly target: StoreTarget;
  /** The store URL (`pglite:memory`, or the fresh PostgreSQL database's URL). */
  readonly url: string;
  /** The store's kysely instance (e.g. to migrate it as another release would). */
  readonly db: Kysely<Database>;
  /**
   * Runs raw SQL on this store's database (e.g. tampering with events in audit tests), once the
   * projection holds every committed event: the operation and attempt rows read as a reader sees them.
   */
  query<R = Record<string, unknown>>(text: string): Promise<R[]>;
  /** Raw SQL with the projection left where it is (a test of the projection, a store rewound). */
  rawQuery<R = Record<string, unknown>>(text: string): Promise<R[]>;
  /** Projects every committed event, as a reader of the projected tables does first. */
  catchUp(): Promise<void>;
  /**
   * Another, separately opened store on the same database, standing in for a second gate
   * process (PostgreSQL only; PGlite is single-process). The caller closes it.
   */
  openSibling(): Promise<Store>;
  /**
   * Skips the check on close that the trail's state changes agree with the operations table: for a
   * store whose events a test prunes or tampers with on purpose. Says why.
   */
  exemptFromTrailCheck(reason: string): void;
}

export async function openTestStore(
  target: StoreTarget,
  options: { readonly migrate?: boolean } = {},
): Promise<TestStore> {
  if (target.kind === 'pglite') {
    const inner = await openKyselyStore({ url: 'pglite:memory', migrate: options.migrate ?? true });
    return new TestStoreHandle(target, 'pglite:memory', inner, async () => undefined);
  }
  const adminUrl = target.adminUrl!;
  const dbName = `eg_test_${process.pid}_${randomBytes(5).toString('hex')}`;
  await admin(adminUrl, `create database ${dbName}`);
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  try {
    const inner = await openKyselyStore({ url: url.toString(), migrate: options.migrate ?? true });
    return new TestStoreHandle(target, url.toString(), inner, () =>
      admin(adminUrl, `drop database if exists ${dbName} with (force)`),
    );
  } catch (err) {
    await admin(adminUrl, `drop database if exists ${dbName} with (force)`);
    throw err;
  }
}

async function admin(adminUrl: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

class TestStoreHandle implements TestStore {
  readonly target: StoreTarget;
  readonly url: string;
  readonly #inner: KyselyStore;
  readonly #dispose: () => Promise<void>;
  #trailCheckExempt: string | null = null;

  constructor(target: StoreTarget, url: string, inner: KyselyStore, dispose: () => Promise<void>) {
    this.target = target;
    this.url = url;
    this.#inner = inner;
    this.#dispose = dispose;
  }

  get kind(): 'postgres' | 'pglite' {
    return this.#inner.kind;
  }

  get stats(): StoreStats {
    return this.#inner.stats;
  }

  decide(input: DecideInput): Promise<DecideResult> {
    return this.#inner.decide(input);
  }

  recordOutcome(input: OutcomeInput): Promise<{ readonly operationState: OperationState | null }> {
    return this.#inner.recordOutcome(input);
  }

  getOperation(id: string): Promise<OperationRecord | null> {
    return this.#inner.getOperation(id);
  }

  listOperations(filter?: OperationFilter): Promise<OperationRecord[]> {
    return this.#inner.listOperations(filter);
  }

  countOperations(
    filter?: Omit<OperationFilter, 'state' | 'limit' | 'supersedesOperationId' | 'keyValues'>,
  ): Promise<Partial<Record<OperationState, number>>> {
    return this.#inner.countOperations(filter);
  }

  countDuplicates(operationIds: readonly string[]): Promise<Readonly<Record<string, number>>> {
    return this.#inner.countDuplicates(operationIds);
  }

  countShadowVerdicts(filter?: { readonly since?: string }): Promise<readonly ShadowVerdictCount[]> {
    return this.#inner.countShadowVerdicts(filter);
  }

  recordShadowDispatch(input: ShadowDispatchInput): Promise<boolean> {
    return this.#inner.recordShadowDispatch(input);
  }

  listObservations(operationId: string): Promise<ObservationRecord[]> {
    return this.#inner.listObservations(operationId);
  }

  listApprovals(filter?: Parameters<Store['listApprovals']>[0]): Promise<ApprovalRecord[]> {
    return this.#inner.listApprovals(filter);
  }

  getApproval(id: string): Promise<ApprovalRecord | null> {
    return this.#inner.getApproval(id);
  }

  decideApproval(input: ApprovalDecisionInput): Promise<ApprovalRecord> {
    return this.#inner.decideApproval(input);
  }

  createGrant(input: GrantInput): Promise<GrantRecord> {
    return this.#inner.createGrant(input);
  }

  listGrants(filter?: Parameters<Store['listGrants']>[0]): Promise<GrantRecord[]> {
    return this.#inner.listGrants(filter);
  }

  revokeGrant(input: Parameters<Store['revokeGrant']>[0]): Promise<GrantRecord> {
    return this.#inner.revokeGrant(input);
  }

  listRuns(filter?: Parameters<Store['listRuns']>[0]): Promise<RunRecord[]> {
    return this.#inner.listRuns(filter);
  }

  releaseRun(input: RunReleaseInput): Promise<RunRecord> {
    return this.#inner.releaseRun(input);
  }

  addObservation(input: ObservationInput): Promise<ObservationResult> {
    return this.#inner.addObservation(input);
  }

  findOperations(lookup: OperationLookup): Promise<OperationRecord[]> {
    return this.#inner.findOperations(lookup);
  }

  registerInstance(id: string): ReturnType<Store['registerInstance']> {
    return this.#inner.registerInstance(id);
  }

  heartbeat(id: string, life?: string): Promise<void> {
    return this.#inner.heartbeat(id, life);
  }

  stopInstance(id: string, life?: string): Promise<void> {
    return this.#inner.stopInstance(id, life);
  }

  recover(input: RecoverInput): Promise<RecoveredAttempt[]> {
    return this.#inner.recover(input);
  }

  get dir(): string | null {
    return this.#inner.dir;
  }

  storedAuthorityKey(): Promise<StoredAuthorityKey | null> {
    return this.#inner.storedAuthorityKey();
  }

  dropStoredAuthorityKey(key: string): Promise<void> {
    return this.#inner.dropStoredAuthorityKey(key);
  }

  getDecision(id: string): Promise<DecisionRecord | null> {
    return this.#inner.getDecision(id);
  }

  listDecisions(filter: {
    readonly runId?: string;
    readonly operationId?: string;
  }): Promise<DecisionRecord[]> {
    return this.#inner.listDecisions(filter);
  }

  readEvents(after: EventPosition | 0, limit: number): Promise<ChainedEvent[]> {
    return this.#inner.readEvents(after, limit);
  }

  retentionCuts(before: string): Promise<ChainCut[]> {
    return this.#inner.retentionCuts(before);
  }

  retentionCheckpoint(before: string): Promise<CheckpointRecord | null> {
    return this.#inner.retentionCheckpoint(before);
  }

  pruneChain(cut: ChainCut): Promise<number> {
    return this.#inner.pruneChain(cut);
  }

  chainHeads(): Promise<ChainHead[]> {
    return this.#inner.chainHeads();
  }

  auditLogId(): Promise<string> {
    return this.#inner.auditLogId();
  }

  readEventRanges(ranges: readonly EventRange[]): Promise<ChainedEvent[]> {
    return this.#inner.readEventRanges(ranges);
  }

  latestCheckpoint(): Promise<CheckpointRecord | null> {
    return this.#inner.latestCheckpoint();
  }

  getCheckpoint(size: number): Promise<CheckpointRecord | null> {
    return this.#inner.getCheckpoint(size);
  }

  readCheckpoints(after: number | null, limit: number): Promise<CheckpointRecord[]> {
    return this.#inner.readCheckpoints(after, limit);
  }

  appendCheckpoint(after: number | null, checkpoint: CheckpointRecord): Promise<boolean> {
    return this.#inner.appendCheckpoint(after, checkpoint);
  }

  projectEvents(options?: { readonly limit?: number; readonly wait?: boolean }): Promise<ProjectionRound> {
    return this.#inner.projectEvents(options);
  }

  readBatch(read: BatchRead): Promise<BatchEvents> {
    return this.#inner.readBatch(read);
  }

  hasUnsealedLegacy(heads: SealedHeads): Promise<boolean> {
    return this.#inner.hasUnsealedLegacy(heads);
  }

  hasUnchainedEvents(): Promise<boolean> {
    return this.#inner.hasUnchainedEvents();
  }

  unsealedEvents(latest: CheckpointRecord | null): Promise<UnsealedEvents> {
    return this.#inner.unsealedEvents(latest);
  }

  ping(): Promise<void> {
    return this.#inner.ping();
  }

  migrate(): Promise<void> {
    return this.#inner.migrate();
  }

  get db(): Kysely<Database> {
    return this.#inner.db;
  }

  async query<R = Record<string, unknown>>(text: string): Promise<R[]> {
    await this.catchUp();
    return this.rawQuery<R>(text);
  }

  openSibling(): Promise<Store> {
    if (this.target.kind !== 'postgres') throw new Error('openSibling: PGlite is single-process');
    return openKyselyStore({ url: this.url, migrate: false });
  }

  async rawQuery<R = Record<string, unknown>>(text: string): Promise<R[]> {
    const result = await sql.raw<R>(text).execute(this.#inner.db);
    return result.rows;
  }

  async catchUp(): Promise<void> {
    for (let round = 0; round < 100; round++) {
      if (!(await this.#inner.projectEvents({ wait: true })).more) return;
    }
    throw new Error('catchUp: the projection did not catch up in 100 rounds');
  }

  exemptFromTrailCheck(reason: string): void {
    this.#trailCheckExempt = reason;
  }

  /**
   * Closes the store, after checking that its trail agrees with its tables (trail-check.ts): every
   * suite that runs on a test store checks it, whatever it set out to test.
   */
  async close(): Promise<void> {
    let lies: TrailMismatch[] = [];
    try {
      if (this.#trailCheckExempt === null) {
        // A store a test left at an older version (its projection tables dropped, or never made)
        // has the rows its functions wrote, and nothing to project them with.
        const { rows } = await sql<{
          projects: boolean;
        }>`select to_regprocedure('eg_project_operation(text)') is not null
            and to_regclass('log_projection') is not null as projects`.execute(this.#inner.db);
        if (rows[0]?.projects === true) await this.catchUp();
        lies = await trailMismatches(this.#inner.db);
      }
    } finally {
      try {
        await this.#inner.close();
      } finally {
        await this.#dispose();
      }
    }
    if (lies.length > 0) {
      throw new Error(
        `the trail disagrees with the operations and attempts tables (${lies.length}):\n${lies
          .slice(0, 10)
          .map((l) => `  ${l.operationId}: ${l.problem}; the trail: ${l.told.join(', ') || 'no change'}`)
          .join('\n')}`,
      );
    }
  }
}
