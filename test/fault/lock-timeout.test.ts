/**
 * A lock held longer than the gate will wait (a migration's ALTER TABLE or CREATE INDEX on a big
 * store, a stuck transaction): the hot calls must fail and roll back inside the gate's read
 * timeout, not commit later behind its back. Before `lock_timeout` on the hot functions, a decide
 * the gate gave up on (503, nothing sent) still committed once the lock was free: a reservation
 * whose attempt never left, later taken for a lost one (sent_no_response, an unknown operation
 * held for approval): the trail would say "may have happened" of a call never made.
 *
 * PostgreSQL only: PGlite has one connection, so no other transaction can hold a lock on it.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { HOT_CALL_TIMEOUT_MS } from '../../src/store/hot-call.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from '../integration/store/inputs.js';
import { faultCase } from './fault-cases.js';
import {
  AgentClient,
  CaseRecorder,
  honors,
  type InProcessGate,
  openFaultStore,
  outcomeRecorded,
  poll,
  startInProcessGate,
} from './fault-harness.js';
import { type LedgerDestination, startLedgerDestination } from './ledger-destination.js';

const target = storeTargets().find((t) => t.kind === 'postgres');

/** `lock table … in access exclusive mode`, as ALTER TABLE takes it, from a connection of its own. */
async function holdTable(url: string, table: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('begin');
  await client.query(`lock table ${table} in access exclusive mode`);
  return client;
}

describe.skipIf(target === undefined)(
  `a lock held past the gate's patience (postgres${target === undefined ? ': skipped, needs a second PostgreSQL connection' : ''})`,
  { timeout: 60_000 },
  () => {
    let store: TestStore | undefined;
    let holder: pg.Client | undefined;

    afterEach(async () => {
      await holder?.query('rollback').catch(() => undefined);
      await holder?.end().catch(() => undefined);
      await store?.close();
    });

    it('decides (alone and batched) fail inside the read timeout, and none of them commits after the lock is freed', async () => {
      store = await openTestStore(target!);
      holder = await holdTable(store.url, 'dedupe_keys');
      const proposals = Array.from({ length: 6 }, () => reserve(newRun(), newKey()));
      const started = performance.now();
      const results = await Promise.allSettled(proposals.map((p) => store!.decide(p)));
      const elapsed = performance.now() - started;
      for (const r of results) {
        expect(r.status).toBe('rejected');
        const err = (r as PromiseRejectedResult).reason as { code?: string; cause?: { code?: string } };
        expect(err.code).toBe('EG_ERR_STORE_UNAVAILABLE');
        expect(err.cause?.code).toBe('55P03');
      }
      // Inside the gate's own read timeout: the gate hears the refusal, it does not give up first.
      expect(elapsed).toBeLessThan(HOT_CALL_TIMEOUT_MS);
      expect(store.stats.groupCommit.batches).toBeGreaterThan(0);

      await holder.query('rollback');
      // Whatever was waiting had its chance to commit now.
      await new Promise((r) => setTimeout(r, 500));
      const ids = proposals.map((p) => `'${p.newAttemptId}'`).join(',');
      expect(await store.query(`select id from attempts where id in (${ids})`)).toEqual([]);
      const keys = proposals.map((p) => `'${p.key!.hash}'`).join(',');
      expect(await store.query(`select key_hash from dedupe_keys where key_hash in (${keys})`)).toEqual([]);
      // The store works again: the same proposal is a fresh allow.
      expectVerdict(await store.decide({ ...proposals[0]!, decisionId: newRun() }), 'allow');
    });

    it("an outcome blocked by the lock fails (the gate's outbox writes it again), and lands once the lock is gone", async () => {
      store = await openTestStore(target!);
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      // The key row is the one row the outcome writes (the attempt's are made from its event).
      holder = await holdTable(store.url, 'dedupe_keys');
      const started = performance.now();
      await expect(store.recordOutcome(outcome(first, key, 'succeeded'))).rejects.toMatchObject({
        code: 'EG_ERR_STORE_UNAVAILABLE',
      });
      expect(performance.now() - started).toBeLessThan(HOT_CALL_TIMEOUT_MS);
      await holder.query('rollback');
      const again = await store.recordOutcome(outcome(first, key, 'succeeded'));
      expect(again.operationState).toBe('succeeded');
    });
  },
);

/** One backend running `eg_record_outcome` and waiting for a lock: its pid and when its call began. */
interface WaitingWrite {
  readonly pid: number;
  readonly since: string;
}

/**
 * The outcome writes of the database that wait for a lock now. `client` must be outside a
 * transaction: a backend reads pg_stat_activity once per transaction, so the lock holder's own
 * connection would keep seeing the first write waiting long after it gave up.
 */
async function waitingOutcomeWrites(client: pg.Client): Promise<WaitingWrite[]> {
  const r = await client.query<WaitingWrite>(
    `select pid, query_start::text as since from pg_stat_activity
     where datname = current_database() and pid <> pg_backend_pid()
       and wait_event_type = 'Lock' and query like '%eg_record_outcome%'`,
  );
  return r.rows;
}

describe.skipIf(target === undefined)(
  `a gate's outcome write meets lock_timeout (postgres${target === undefined ? `: skipped, ${faultCase('outcome-lock-timeout').notOn}` : ''})`,
  { timeout: 90_000 },
  () => {
    let dest: LedgerDestination | undefined;
    let store: TestStore | undefined;
    let gate: InProcessGate | undefined;
    let agent: AgentClient | undefined;
    let holder: pg.Client | undefined;
    let observer: pg.Client | undefined;

    afterEach(async () => {
      await holder?.query('rollback').catch(() => undefined);
      await holder?.end().catch(() => undefined);
      await observer?.end().catch(() => undefined);
      await agent?.close();
      await gate?.close().catch(() => undefined);
      await store?.close();
      await dest?.close();
    });

    it(`${faultCase('outcome-lock-timeout').fault}: ${faultCase('outcome-lock-timeout').promise}`, async () => {
      const rec = new CaseRecorder('outcome-lock-timeout', 'postgres');
      dest = await startLedgerDestination({ honors });
      store = await openFaultStore(target!);
      gate = await startInProcessGate({ store, instanceId: 'fault-outcome-lock-timeout' });
      agent = new AgentClient(gate.proxyUrl);
      const order = 'olt-held';
      dest.plan(order, { behaviour: 'hold' });
      const answer = agent.propose(dest.url, 'held', order, 'run-a');
      // Decided and at the destination: now a migration takes the table the outcome updates (the
      // key's; the attempt's row is made from the outcome's event).
      const arrival = await dest.arrival(order);
      holder = await holdTable(store.url, 'dedupe_keys');
      arrival.release();
      const a = rec.answered(await answer);
      rec.check(a.status === 201, `the agent got ${a.status}, not the destination's 201`);
      const o = new pg.Client({ connectionString: store.url });
      observer = o;
      await o.connect();
      const first = await poll(async () => (await waitingOutcomeWrites(o))[0], 15_000);
      rec.check(first !== undefined, 'the outcome write never waited for the lock');
      // The first write gives up at its lock_timeout (55P03); a write that waits again, begun
      // after it, is the outbox's retry. The lock is held until then: released earlier, the
      // first write would simply land.
      const retry = await poll(async () => {
        const now = await waitingOutcomeWrites(o);
        return now.find((w) => w.pid !== first?.pid || w.since !== first?.since);
      }, 20_000);
      rec.check(
        retry !== undefined,
        'no outcome write waited again after the first met lock_timeout: the outcome was not retried',
      );
      await holder.query('rollback');
      const recorded = await outcomeRecorded(store, a.operationId ?? '', 15_000);
      rec.check(
        recorded !== undefined,
        'the outcome was still not recorded 15 s after the lock was released',
      );
      rec.check(
        recorded === undefined ||
          (recorded.length === 1 && recorded[0]!.dispatchState === 'response_received'),
        `the operation's attempts are ${JSON.stringify(recorded?.map((x) => x.dispatchState))}, not one response_received`,
      );
      const next = rec.answered(await agent.propose(dest.url, 'held', order, 'run-b'));
      rec.check(
        next.status === 409 && next.verdict === 'duplicate',
        `the next proposal got ${next.status} ${next.verdict ?? ''}, not 409 duplicate`,
      );
      const report = await gate.close();
      rec.check(report.unwrittenOutcomes === 0, `${report.unwrittenOutcomes} outcome(s) unwritten at close`);
      await rec.finish({ dest, store, proposedKeys: 1, strictUnknown: true });
    });
  },
);
