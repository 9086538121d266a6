import { type Kysely, sql } from 'kysely';
import { EffectgateError, StoreError } from '../errors.js';
import * as auditLog from './audit-log-sql.js';
import type { RoundTripCounter } from './counting-dialect.js';
import * as projection from './event-projection-sql.js';
import type { GroupCommit } from './group-commit.js';
import { decideAnswer, type OutcomeAnswer, outcomeAnswer } from './hot-answers.js';
import { jsonResult } from './json-result.js';
import { migrateStore } from './migrate-store.js';
import {
  toApproval,
  toAttempt,
  toChainedEvent,
  toDecision,
  toGrant,
  toObservation,
  toOperation,
  toRun,
} from './records.js';
import type { Database } from './schema.js';
import { functionRefusal } from './store-sqlstates.js';
import type {
  ApprovalDecisionInput,
  ApprovalRecord,
  ApprovalState,
  AttemptRecord,
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
  Scope,
  SealedHeads,
  ShadowDispatchInput,
  ShadowVerdict,
  ShadowVerdictCount,
  Store,
  StoredAuthorityKey,
  StoreStats,
  UnsealedEvents,
} from './types.js';

export interface KyselyStoreOptions {
  readonly kind: 'postgres' | 'pglite';
  readonly db: Kysely<Database>;
  readonly counter: RoundTripCounter;
  /** How the hot path calls its two functions on this driver, and what it did (group-commit.ts). */
  readonly hot: GroupCommit;
  /** Runs after the database is closed (e.g. releases the PGlite directory lock). */
  readonly onClose?: () => void;
  /** The embedded store's directory on disk (`Store.dir`); absent for PostgreSQL and memory. */
  readonly dir?: string;
}

/**
 * The one Store implementation, for PostgreSQL and PGlite alike. The hot path (`decide`,
 * `recordOutcome`) is one `select eg_…(<input as JSON text>)` each, sent the cheapest way the
 * driver offers (hot-call.ts): the protocol itself is in SQL (src/store/functions/). Reads are
 * plain kysely queries.
 */
export class KyselyStore implements Store {
  readonly kind: 'postgres' | 'pglite';
  readonly dir: string | null;
  readonly #db: Kysely<Database>;
  readonly #counter: RoundTripCounter;
  readonly #hot: GroupCommit;
  readonly #onClose: (() => void) | undefined;
  #closed = false;

  constructor(options: KyselyStoreOptions) {
    this.kind = options.kind;
    this.dir = options.dir ?? null;
    this.#db = options.db;
    this.#counter = options.counter;
    this.#hot = options.hot;
    this.#onClose = options.onClose;
  }

  get stats(): StoreStats {
    return {
      roundTrips: this.#counter.count,
      backgroundRoundTrips: this.#counter.background,
      groupCommit: this.#hot.stats(),
    };
  }

  /** The underlying kysely instance, for maintenance commands and tests; not part of `Store`. */
  get db(): Kysely<Database> {
    return this.#db;
  }

  decide(input: DecideInput): Promise<DecideResult> {
    return this.#guard('decide', async () => decideAnswer(await this.#hot.call('eg_decide', input)));
  }

  recordOutcome(input: OutcomeInput): Promise<OutcomeAnswer> {
    return this.#guard('recordOutcome', async () =>
      outcomeAnswer(await this.#hot.call('eg_record_outcome', input)),
    );
  }

  getOperation(id: string): Promise<OperationRecord | null> {
    return this.#guard('getOperation', async () => {
      await projection.catchUpOperation(this.#db, id);
      const row = await this.#db.selectFrom('operations').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row) return null;
      const attempts = await this.#attemptsOf([id]);
      return toOperation(row, attempts.get(id) ?? []);
    });
  }

  listOperations(filter?: OperationFilter): Promise<OperationRecord[]> {
    return this.#guard('listOperations', async () => {
      await projection.catchUp(this.#db);
      let query = this.#db.selectFrom('operations').selectAll();
      if (filter?.state !== undefined) query = query.where('state', '=', filter.state);
      if (filter?.toolId !== undefined) query = query.where('tool_id', '=', filter.toolId);
      if (filter?.tenant !== undefined) query = query.where('tenant', '=', filter.tenant);
      if (filter?.since !== undefined) query = query.where('created_at', '>=', sinceDate(filter.since));
      if (filter?.supersedesOperationId !== undefined)
        query = query.where('supersedes_operation_id', '=', filter.supersedesOperationId);
      if (filter?.keyValues !== undefined)
        query = query.where(sql<boolean>`key_values = ${JSON.stringify(filter.keyValues)}::jsonb`);
      const rows = await query
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(filter?.limit ?? 100)
        .execute();
      if (rows.length === 0) return [];
      const attempts = await this.#attemptsOf(rows.map((r) => r.id));
      return rows.map((r) => toOperation(r, attempts.get(r.id) ?? []));
    });
  }

  countOperations(
    filter?: Omit<OperationFilter, 'state' | 'limit' | 'supersedesOperationId' | 'keyValues'>,
  ): Promise<Partial<Record<OperationState, number>>> {
    return this.#guard('countOperations', async () => {
      await projection.catchUp(this.#db);
      let query = this.#db
        .selectFrom('operations')
        .select(['state', (eb) => eb.fn.countAll<string | number>().as('n')])
        .groupBy('state');
      if (filter?.toolId !== undefined) query = query.where('tool_id', '=', filter.toolId);
      if (filter?.tenant !== undefined) query = query.where('tenant', '=', filter.tenant);
      if (filter?.since !== undefined) query = query.where('created_at', '>=', sinceDate(filter.since));
      const counts: Partial<Record<OperationState, number>> = {};
      for (const row of await query.execute()) counts[row.state as OperationState] = Number(row.n);
      return counts;
    });
  }

  countDuplicates(operationIds: readonly string[]): Promise<Readonly<Record<string, number>>> {
    return this.#guard('countDuplicates', async () => {
      if (operationIds.length === 0) return {};
      await projection.catchUp(this.#db);
      // decisions_operation_idx (operation_id, created_at) answers it, one index range per id.
      const rows = await this.#db
        .selectFrom('decisions')
        .select(['operation_id', (eb) => eb.fn.countAll<string | number>().as('n')])
        .where('verdict', '=', 'duplicate')
        .where('operation_id', 'in', [...operationIds])
        .groupBy('operation_id')
        .execute();
      // fromEntries defines own properties, so no id (even "__proto__") reaches a prototype.
      return Object.fromEntries(rows.map((r) => [r.operation_id as string, Number(r.n)]));
    });
  }

  listObservations(operationId: string): Promise<ObservationRecord[]> {
    return this.#guard('listObservations', async () => {
      const rows = await this.#db
        .selectFrom('observations')
        .selectAll()
        .where('operation_id', '=', operationId)
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      return rows.map(toObservation);
    });
  }

  listApprovals(filter?: {
    readonly state?: ApprovalState;
    readonly operationId?: string;
    readonly limit?: number;
  }): Promise<ApprovalRecord[]> {
    return this.#guard('listApprovals', async () => {
      let query = this.#db
        .selectFrom('approvals')
        .selectAll()
        .select(sql<boolean>`coalesce(expires_at <= now(), false)`.as('expired'));
      const state = filter?.state;
      if (state === 'expired') {
        query = query.where('state', '=', 'approved').where(sql<boolean>`expires_at <= now()`);
      } else if (state === 'approved') {
        query = query
          .where('state', '=', 'approved')
          .where(sql<boolean>`(expires_at is null or expires_at > now())`);
      } else if (state !== undefined) {
        query = query.where('state', '=', state);
      }
      if (filter?.operationId !== undefined) query = query.where('operation_id', '=', filter.operationId);
      const rows = await query
        .orderBy('requested_at', 'desc')
        .orderBy('id')
        .limit(filter?.limit ?? 100)
        .execute();
      return rows.map(toApproval);
    });
  }

  getApproval(id: string): Promise<ApprovalRecord | null> {
    return this.#guard('getApproval', async () => {
      const row = await this.#db
        .selectFrom('approvals')
        .selectAll()
        .select(sql<boolean>`coalesce(expires_at <= now(), false)`.as('expired'))
        .where('id', '=', id)
        .executeTakeFirst();
      return row ? toApproval(row) : null;
    });
  }

  decideApproval(input: ApprovalDecisionInput): Promise<ApprovalRecord> {
    return this.#guard('decideApproval', async () => {
      await this.#callFunction('eg_approval', { ...input, ttlMs: input.ttlMs ?? null });
      const approval = await this.getApproval(input.approvalId);
      if (approval === null) throw new EffectgateError('EG_ERR_NOT_FOUND', `no approval ${input.approvalId}`);
      return approval;
    });
  }

  createGrant(input: GrantInput): Promise<GrantRecord> {
    return this.#guard('createGrant', async () => {
      const grantId = crypto.randomUUID();
      // The store's own id and action, whatever the caller's object carries (the store socket
      // forwards it as given).
      await this.#grantCall({
        runId: input.runId,
        toolId: input.toolId,
        scope: input.scope,
        by: input.by,
        reason: input.reason,
        ttlMs: input.ttlMs,
        action: 'create',
        grantId,
      });
      return this.#grant(grantId);
    });
  }

  listGrants(filter?: Parameters<Store['listGrants']>[0]): Promise<GrantRecord[]> {
    return this.#guard('listGrants', async () => {
      let query = this.#grants();
      if (filter?.runId !== undefined) query = query.where('run_id', '=', filter.runId);
      if (filter?.grantId !== undefined) query = query.where('id', '=', filter.grantId);
      const rows = await query
        .orderBy('granted_at', 'desc')
        .orderBy('id')
        .limit(filter?.limit ?? 100)
        .execute();
      return rows.map(toGrant);
    });
  }

  revokeGrant(input: {
    readonly grantId: string;
    readonly by: string;
    readonly reason: string;
  }): Promise<GrantRecord> {
    return this.#guard('revokeGrant', async () => {
      await this.#grantCall({ action: 'revoke', grantId: input.grantId, by: input.by, reason: input.reason });
      return this.#grant(input.grantId);
    });
  }

  async #grantCall(input: Record<string, unknown>): Promise<void> {
    await this.#callFunction('eg_grant', input);
  }

  async #grant(id: string): Promise<GrantRecord> {
    const row = await this.#grants().where('id', '=', id).executeTakeFirst();
    if (row === undefined) throw new EffectgateError('EG_ERR_NOT_FOUND', `no grant ${id}`);
    return toGrant(row);
  }

  /** Grant rows with `expired` read from the database clock. */
  #grants() {
    return this.#db.selectFrom('grants').selectAll().select(sql<boolean>`expires_at <= now()`.as('expired'));
  }

  listRuns(filter?: Parameters<Store['listRuns']>[0]): Promise<RunRecord[]> {
    return this.#guard('listRuns', async () => {
      let query = this.#db.selectFrom('runs').selectAll();
      if (filter?.runId !== undefined) query = query.where('id', '=', filter.runId);
      if (filter?.halted === true) query = query.where('halted_at', 'is not', null);
      if (filter?.halted === false) query = query.where('halted_at', 'is', null);
      const rows = await query
        .orderBy(sql`halted_at desc nulls last`)
        .orderBy('created_at', 'desc')
        .orderBy('id')
        .limit(filter?.limit ?? 100)
        .execute();
      if (rows.length === 0) return [];
      const ids = [...new Set(rows.map((r) => r.id))];
      const [keys, releases] = await Promise.all([
        this.#db
          .selectFrom('run_key_skips')
          .selectAll()
          .where('run_id', 'in', ids)
          .orderBy('skips', 'desc')
          .orderBy('key_hash')
          .execute(),
        this.#db
          .selectFrom('run_releases')
          .selectAll()
          .where('run_id', 'in', ids)
          .orderBy('released_at')
          .orderBy('id')
          .execute(),
      ]);
      const sameRun =
        (r: { tenant: string; area: string; agent: string; id: string }) =>
        (x: { tenant: string; area: string; agent: string; run_id: string }): boolean =>
          x.run_id === r.id && x.tenant === r.tenant && x.area === r.area && x.agent === r.agent;
      return rows.map((r) => toRun(r, keys.filter(sameRun(r)), releases.filter(sameRun(r))));
    });
  }

  releaseRun(input: RunReleaseInput): Promise<RunRecord> {
    return this.#guard('releaseRun', async () => {
      const releaseId = crypto.randomUUID();
      // The store's own id, whatever the caller's object carries (the store socket forwards it).
      const scope = await this.#callFunction<Scope>('eg_release_run', {
        runId: input.runId,
        scope: input.scope,
        by: input.by,
        reason: input.reason,
        releaseId,
      });
      const runs = await this.listRuns({ runId: input.runId, limit: 1000 });
      const run = runs.find(
        (r) =>
          r.scope.tenant === scope.tenant && r.scope.area === scope.area && r.scope.agent === scope.agent,
      );
      if (run === undefined) throw new EffectgateError('EG_ERR_NOT_FOUND', `no run ${input.runId}`);
      return run;
    });
  }

  addObservation(input: ObservationInput): Promise<ObservationResult> {
    return this.#guard('addObservation', () =>
      this.#callFunction<ObservationResult>('eg_add_observation', input),
    );
  }

  findOperations(lookup: OperationLookup): Promise<OperationRecord[]> {
    return this.#guard('findOperations', async () => {
      await projection.catchUp(this.#db);
      // The idempotency key an attempt sent is recorded on it (migration 0013): the agent's own
      // when kept, a SHA-256 prefix under max_length; before 0013 it was the operation's id, for
      // tools that send one (attempts_idempotency_key_idx, migration 0017, serves the lookup). A
      // reference is the destination's word when an attempt's response carried it; only when none
      // did, one that evidence brought and settled the operation with (a note's reference, or a
      // claim that did not settle, must not make a webhook's lookup ambiguous).
      const ids =
        'idempotencyKey' in lookup
          ? sql<{ id: string }>`select id from operations
              where id = ${lookup.idempotencyKey} and idempotency_header is not null
                and not exists (select 1 from attempts where operation_id = operations.id and idempotency_key is not null)
              union select operation_id from attempts where idempotency_key = ${lookup.idempotencyKey}`
          : sql<{ id: string }>`with seen as (
                select operation_id as id from attempts where destination_ref = ${lookup.destinationRef})
              select id from seen
              union select operation_id from observations
                where facts ? 'destinationRef' and facts ->> 'destinationRef' = ${lookup.destinationRef}
                  and result in ('succeeded', 'failed', 'duplicate_effect_confirmed')
                  and not exists (select 1 from seen)`;
      const { rows } = await sql<{
        id: string;
      }>`select distinct id from (${ids}) found order by id limit 10`.execute(this.#db);
      if (rows.length === 0) return [];
      const ops = await this.#db
        .selectFrom('operations')
        .selectAll()
        .where(
          'id',
          'in',
          rows.map((r) => r.id),
        )
        .orderBy('created_at')
        .orderBy('id')
        .execute();
      const attempts = await this.#attemptsOf(ops.map((r) => r.id));
      return ops.map((r) => toOperation(r, attempts.get(r.id) ?? []));
    });
  }

  registerInstance(id: string): ReturnType<Store['registerInstance']> {
    return this.#guard('registerInstance', async () => {
      // One statement: the previous life's row as it was, then this life's start (started_at is
      // the boundary recovery uses between the two lives).
      const { rows } = await sql<{
        life: string;
        heartbeat_at: Date | null;
        stopped_at: Date | null;
        known: boolean;
      }>`
        with previous as (select heartbeat_at, stopped_at from gate_instances where id = ${id}),
        registered as (
          insert into gate_instances (id) values (${id})
          on conflict (id) do update set started_at = now(), heartbeat_at = now(), stopped_at = null
          returning started_at)
        select r.started_at::text as life, p.heartbeat_at, p.stopped_at, p.heartbeat_at is not null as known
        from registered r left join previous p on true`.execute(this.#db);
      const row = rows[0];
      if (row === undefined) throw new Error(`gate instance ${id} was not registered`);
      return {
        life: row.life,
        previous:
          !row.known || row.heartbeat_at === null
            ? null
            : {
                heartbeatAt: new Date(row.heartbeat_at).toISOString(),
                stoppedAt: row.stopped_at === null ? null : new Date(row.stopped_at).toISOString(),
              },
      };
    });
  }

  heartbeat(id: string, life?: string): Promise<void> {
    return this.#guard('heartbeat', async () => {
      await sql`update gate_instances set heartbeat_at = now()
        where id = ${id} and (${life ?? null}::timestamptz is null or started_at = ${life ?? null}::timestamptz)`.execute(
        this.#db,
      );
    });
  }

  stopInstance(id: string, life?: string): Promise<void> {
    return this.#guard('stopInstance', async () => {
      await sql`update gate_instances set stopped_at = now()
        where id = ${id} and (${life ?? null}::timestamptz is null or started_at = ${life ?? null}::timestamptz)`.execute(
        this.#db,
      );
    });
  }

  recover(input: RecoverInput): Promise<RecoveredAttempt[]> {
    return this.#guard('recover', async () => {
      // The candidates first, then one transaction per attempt (eg_recover.sql says why); the
      // candidates are read from the attempt rows, brought up to date first.
      await projection.catchUp(this.#db);
      const text = JSON.stringify(input);
      const { rows } = await sql<{ result: string[] | string }>`select eg_recover(${text}) as result`.execute(
        this.#db,
      );
      const ids = jsonResult<string[]>(rows[0]?.result ?? []);
      const recovered: RecoveredAttempt[] = [];
      for (const id of ids) {
        const one = await sql<{
          result: RecoveredAttempt | string | null;
        }>`select eg_recover_attempt(${text}, ${id}) as result`.execute(this.#db);
        const r = one.rows[0]?.result ?? null;
        if (r !== null) recovered.push(jsonResult<RecoveredAttempt>(r));
      }
      return recovered;
    });
  }

  storedAuthorityKey(): Promise<StoredAuthorityKey | null> {
    return this.#guard('storedAuthorityKey', async () => {
      await projection.catchUp(this.#db);
      const { rows } = await sql<{ value: string; keyed: boolean }>`select s.value,
          exists (select 1 from operations) as keyed
        from settings s where s.name = 'authority_key'`.execute(this.#db);
      const row = rows[0];
      return row === undefined ? null : { key: row.value, keyed: row.keyed === true };
    });
  }

  dropStoredAuthorityKey(key: string): Promise<void> {
    return this.#guard('dropStoredAuthorityKey', async () => {
      await this.#db
        .deleteFrom('settings')
        .where('name', '=', 'authority_key')
        .where('value', '=', key)
        .execute();
    });
  }

  getDecision(id: string): Promise<DecisionRecord | null> {
    return this.#guard('getDecision', async () => {
      await projection.catchUp(this.#db);
      const row = await this.#decisions().where('d.id', '=', id).executeTakeFirst();
      return row ? toDecision(row) : null;
    });
  }

  listDecisions(filter: {
    readonly runId?: string;
    readonly operationId?: string;
  }): Promise<DecisionRecord[]> {
    return this.#guard('listDecisions', async () => {
      await projection.catchUp(this.#db);
      let query = this.#decisions();
      if (filter.runId !== undefined) query = query.where('d.run_id', '=', filter.runId);
      if (filter.operationId !== undefined) query = query.where('d.operation_id', '=', filter.operationId);
      const rows = await query.orderBy('d.created_at').orderBy('d.id').execute();
      return rows.map(toDecision);
    });
  }

  countShadowVerdicts(filter?: { readonly since?: string }): Promise<readonly ShadowVerdictCount[]> {
    return this.#guard('countShadowVerdicts', async () => {
      await projection.catchUp(this.#db);
      // The predicate of decisions_would_idx (migration 0010), so only shadow rows are read.
      let query = this.#db
        .selectFrom('decisions')
        .select(['tool_id', 'verdict', (eb) => eb.fn.countAll<string | number>().as('n')])
        .where(sql<boolean>`verdict like 'would\_%'`)
        .groupBy(['tool_id', 'verdict'])
        .orderBy('tool_id')
        .orderBy('verdict');
      if (filter?.since !== undefined) query = query.where('created_at', '>=', sinceDate(filter.since));
      const rows = await query.execute();
      return rows.map((r) => ({
        toolId: r.tool_id,
        verdict: r.verdict as ShadowVerdict,
        count: Number(r.n),
      }));
    });
  }

  recordShadowDispatch(input: ShadowDispatchInput): Promise<boolean> {
    return this.#guard('recordShadowDispatch', async () => {
      const { rows } = await sql<{
        recorded: boolean;
      }>`select eg_shadow_dispatched(${JSON.stringify(input)}) as recorded`.execute(this.#db);
      return rows[0]?.recorded === true;
    });
  }

  /** Decisions with their shadow dispatch (migration 0010), as `toDecision` reads them. */
  #decisions() {
    return this.#db
      .selectFrom('decisions as d')
      .leftJoin('shadow_dispatches as s', 's.decision_id', 'd.id')
      .selectAll('d')
      .select([
        's.dispatch_state as shadow_dispatch_state',
        's.status as shadow_status',
        's.duration_ms as shadow_duration_ms',
        's.error as shadow_error',
        's.created_at as shadow_created_at',
      ]);
  }

  readEvents(after: EventPosition | 0, limit: number): Promise<ChainedEvent[]> {
    return this.#guard('readEvents', async () => {
      const from = after === 0 ? { chain: -1, seq: 0 } : after;
      const rows = await this.#db
        .selectFrom('events')
        .select(['pos', 'chain', 'seq', 'type', 'operation_id', 'payload', 'prev_hash', 'hash'])
        // As text: exact whatever the driver does with bigint.
        .select(sql<string>`recorded_at_us::text`.as('recorded_at_us'))
        // A row comparison the index of the chained events (events_chain_seq_idx, partial: `seq is
        // not null` lets the planner use it) answers directly.
        .where('seq', 'is not', null)
        .where((eb) => eb(eb.refTuple('chain', 'seq'), '>', eb.tuple(from.chain, from.seq)))
        .orderBy('chain')
        .orderBy('seq')
        .limit(limit)
        .execute();
      return rows.map(toChainedEvent);
    });
  }

  chainHeads(): Promise<ChainHead[]> {
    return this.#guard('chainHeads', async () => {
      const rows = await this.#db
        .selectFrom('chain_head')
        .select(['id', 'last_seq', 'last_hash', 'base_seq', 'base_hash'])
        .orderBy('id')
        .execute();
      return rows.map((r) => ({
        chain: r.id,
        lastSeq: Number(r.last_seq),
        lastHash: r.last_hash,
        baseSeq: Number(r.base_seq),
        baseHash: r.base_hash,
      }));
    });
  }

  projectEvents(options?: { readonly limit?: number; readonly wait?: boolean }): Promise<ProjectionRound> {
    return this.#guard('projectEvents', () =>
      projection.projectEvents(
        this.#db,
        options?.limit ?? projection.PROJECTION_LIMIT,
        options?.wait ?? false,
      ),
    );
  }

  retentionCuts(before: string): Promise<ChainCut[]> {
    return this.#guard('retentionCuts', async () => {
      // Retention never removes an event not projected yet (eg_prune_cut): catch up so it can cut.
      await projection.catchUp(this.#db);
      const { rows } = await chainChecked(
        'eg_prune_cut',
        sql<{
          result: ChainCut[] | string;
        }>`select eg_prune_cut(${sinceDate(before).toISOString()}::timestamptz) as result`.execute(this.#db),
      );
      return jsonResult<ChainCut[]>(rows[0]?.result ?? []).map((c) => ({
        chain: Number(c.chain),
        baseSeq: Number(c.baseSeq),
        baseHash: c.baseHash,
        cutSeq: Number(c.cutSeq),
        cutHash: c.cutHash,
      }));
    });
  }

  retentionCheckpoint(before: string): Promise<CheckpointRecord | null> {
    return this.#guard('retentionCheckpoint', async () => {
      // As retentionCuts: catch the projection up so it can cut where the sealer has.
      await projection.catchUp(this.#db);
      return auditLog.retentionCheckpoint(this.#db, sinceDate(before).toISOString());
    });
  }

  pruneChain(cut: ChainCut): Promise<number> {
    return this.#guard('pruneChain', async () => {
      const { rows } = await chainChecked(
        'eg_prune',
        sql<{
          result: { removed: number } | string;
        }>`select eg_prune(${JSON.stringify(cut)}) as result`.execute(this.#db),
      );
      return Number(jsonResult<{ removed: number }>(rows[0]!.result).removed);
    });
  }

  auditLogId(): Promise<string> {
    return this.#guard('auditLogId', () => auditLog.auditLogId(this.#db));
  }

  readEventRanges(ranges: readonly EventRange[]): Promise<ChainedEvent[]> {
    return this.#guard('readEventRanges', () => auditLog.readEventRanges(this.#db, ranges));
  }

  latestCheckpoint(): Promise<CheckpointRecord | null> {
    return this.#guard('latestCheckpoint', () => auditLog.latestCheckpoint(this.#db));
  }

  getCheckpoint(size: number): Promise<CheckpointRecord | null> {
    return this.#guard('getCheckpoint', () => auditLog.getCheckpoint(this.#db, size));
  }

  readCheckpoints(after: number | null, limit: number): Promise<CheckpointRecord[]> {
    return this.#guard('readCheckpoints', () => auditLog.readCheckpoints(this.#db, after, limit));
  }

  appendCheckpoint(after: number | null, checkpoint: CheckpointRecord): Promise<boolean> {
    return this.#guard('appendCheckpoint', () => auditLog.appendCheckpoint(this.#db, after, checkpoint));
  }

  readBatch(read: BatchRead): Promise<BatchEvents> {
    return this.#guard('readBatch', () => auditLog.readBatch(this.#db, read));
  }

  hasUnsealedLegacy(heads: SealedHeads): Promise<boolean> {
    return this.#guard('hasUnsealedLegacy', () => auditLog.hasUnsealedLegacy(this.#db, heads));
  }

  hasUnchainedEvents(): Promise<boolean> {
    return this.#guard('hasUnchainedEvents', () => auditLog.hasUnchainedEvents(this.#db));
  }

  unsealedEvents(latest: CheckpointRecord | null): Promise<UnsealedEvents> {
    return this.#guard('unsealedEvents', () => auditLog.unsealedEvents(this.#db, latest));
  }

  ping(): Promise<void> {
    return this.#guard('ping', async () => {
      await sql`select 1`.execute(this.#db);
    });
  }

  /** Applies pending migrations, then the functions; refuses a store a newer effectgate migrated. */
  migrate(): Promise<void> {
    return migrateStore(this.#db);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#db.destroy();
    } finally {
      this.#onClose?.();
    }
  }

  async #attemptsOf(operationIds: readonly string[]): Promise<Map<string, AttemptRecord[]>> {
    const rows = await this.#db
      .selectFrom('attempts')
      .selectAll()
      .where('operation_id', 'in', operationIds)
      .orderBy('operation_id')
      .orderBy('number')
      .execute();
    const byOperation = new Map<string, AttemptRecord[]>();
    for (const row of rows) {
      const list = byOperation.get(row.operation_id) ?? [];
      list.push(toAttempt(row));
      byOperation.set(row.operation_id, list);
    }
    return byOperation;
  }

  /**
   * `select <fn>(<input as JSON text>)`, one statement, for the operator-side functions. Their
   * refusals have SQLSTATEs of their own, each the typed error FUNCTION_REFUSALS says.
   */
  async #callFunction<T = unknown>(
    fn: 'eg_approval' | 'eg_grant' | 'eg_add_observation' | 'eg_release_run',
    input: unknown,
  ): Promise<T> {
    try {
      const { rows } = await sql<{
        result: T;
      }>`select ${sql.raw(fn)}(${JSON.stringify(input)}) as result`.execute(this.#db);
      return rows[0]!.result;
    } catch (err) {
      throw functionRefusal(fn, err) ?? err;
    }
  }

  // Stage boundary: callers see StoreError (EG_ERR_STORE_UNAVAILABLE) with the driver error as cause.
  async #guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new StoreError(`store.${what}: the store is closed`);
    try {
      return await fn();
    } catch (err) {
      if (err instanceof EffectgateError) throw err;
      throw new StoreError(`store.${what} failed: ${messageOf(err)}`, { cause: err });
    }
  }
}

/** `since` as a Date; the callers (CLI, admin API) validate it, this only refuses what is not a time. */
function sinceDate(since: string): Date {
  const date = new Date(since);
  if (Number.isNaN(date.getTime()))
    throw new EffectgateError('EG_ERR_CONFIG_INVALID', `not a time: ${since}`);
  return date;
}

/** A retention statement's refusal (EG422: the chain is not where it should be) as a broken chain. */
async function chainChecked<T>(fn: 'eg_prune_cut' | 'eg_prune', query: Promise<T>): Promise<T> {
  try {
    return await query;
  } catch (err) {
    throw functionRefusal(fn, err) ?? err;
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
