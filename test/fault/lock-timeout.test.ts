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

const target = storeTargets().find((t) => t.kind === 'postgres');

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

    /** `lock table … in access exclusive mode`, as ALTER TABLE takes it, from a connection of its own. */
    async function holdTable(url: string, table: string): Promise<pg.Client> {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query('begin');
      await client.query(`lock table ${table} in access exclusive mode`);
      return client;
    }

    it('decides (alone and batched) fail inside the read timeout, and none of them commits after the lock is freed', async () => {
      store = await openTestStore(target!);
      holder = await holdTable(store.url, 'operations');
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
      holder = await holdTable(store.url, 'attempts');
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
