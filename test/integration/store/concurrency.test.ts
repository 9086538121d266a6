import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainOf, EVENT_CHAINS } from '../../../src/store/audit-chain.js';
import { storeEvents, verifyStoreChain } from '../../../src/store/store-events.js';
import type { DecideResult, Store } from '../../../src/store/types.js';
import { uuidv7 } from '../../../src/store/uuidv7.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const settled = promise.then(
    () => true,
    () => true,
  );
  return Promise.race([settled, sleep(ms).then(() => false)]);
}

/** An operation id whose events go to a chain other than `chain`. */
function idOffChain(chain: number): string {
  for (;;) {
    const id = uuidv7();
    if (chainOf(id) !== chain) return id;
  }
}

/*
 * Many contenders for one key at the same time. On PostgreSQL the contenders are split over two
 * separately opened stores (two pools, as two gate processes would have), so this proves the
 * protocol is correct across processes, not only inside one.
 */
for (const target of storeTargets()) {
  describe(`concurrent proposals on ${target.name}`, () => {
    let store: TestStore;
    let stores: Store[];

    beforeAll(async () => {
      store = await openTestStore(target);
      stores = target.kind === 'postgres' ? [store, await store.openSibling()] : [store];
    });

    afterAll(async () => {
      for (const s of stores?.slice(1) ?? []) await s.close();
      await store?.close();
    });

    function contend(key: ReturnType<typeof newKey>, n: number): Promise<DecideResult[]> {
      return Promise.all(
        Array.from({ length: n }, (_, i) =>
          stores[i % stores.length]!.decide(reserve(newRun(), key, { recordPending: i % 2 === 0 })),
        ),
      );
    }

    it('50 concurrent proposals of a fresh key: exactly one allow', async () => {
      const key = newKey();
      const results = await contend(key, 50);
      const allows = results.filter((r) => r.verdict === 'allow');
      expect(allows).toHaveLength(1);
      expect(results.filter((r) => r.verdict === 'pending')).toHaveLength(49);
      const owner = allows[0]!;
      expectVerdict(owner, 'allow');
      for (const r of results) if (r.verdict === 'pending') expect(r.operationId).toBe(owner.operationId);
      const op = await store.getOperation(owner.operationId);
      expect(op?.attempts).toHaveLength(1);
    });

    it('50 concurrent retries of a released key: exactly one takes it over, as attempt #2', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'failed', { status: 503 }));

      const results = await contend(key, 50);
      const allows = results.filter((r) => r.verdict === 'allow');
      expect(allows).toHaveLength(1);
      expect(allows[0]).toMatchObject({ operationId: first.operationId, attemptNumber: 2 });
      expect((await store.getOperation(first.operationId))?.attempts).toHaveLength(2);
    });

    it('50 concurrent proposals of a confirmed key: all duplicates, none reserved', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const results = await contend(key, 50);
      expect(results.every((r) => r.verdict === 'duplicate')).toBe(true);
    });

    it('concurrent allows of different operations spread over the chains, each on its own', async () => {
      const results = await Promise.all(
        Array.from({ length: 64 }, (_, i) => stores[i % stores.length]!.decide(reserve(newRun(), newKey()))),
      );
      const ops = new Set(results.map((r) => (r.verdict === 'allow' ? r.operationId : 'not allowed')));
      expect(ops.size).toBe(64);
      const chains = new Set<number>();
      for await (const e of storeEvents(store)) {
        if (e.operationId === null || !ops.has(e.operationId)) continue;
        expect(e.chain).toBe(chainOf(e.operationId));
        chains.add(e.chain);
      }
      expect(chains.size).toBeGreaterThan(EVENT_CHAINS / 4);
    });

    if (target.kind === 'postgres') {
      /** Holds a row lock in a transaction of its own connection, as a commit in progress would. */
      async function holding<T>(lockSql: string, params: unknown[], body: () => Promise<T>): Promise<T> {
        const client = new pg.Client({ connectionString: store.url });
        await client.connect();
        try {
          await client.query('begin');
          await client.query(lockSql, params);
          return await body();
        } finally {
          await client.query('rollback').catch(() => undefined);
          await client.end();
        }
      }

      it('an allow never waits for a writer holding another chain', async () => {
        const busy = uuidv7();
        const chain = chainOf(busy);
        let waiting: Promise<DecideResult> | undefined;
        await holding('select 1 from chain_head where id = $1 for update', [chain], async () => {
          // Same chain as the held lock: waits. Any other chain: commits meanwhile.
          waiting = stores[1]!.decide(reserve(newRun(), newKey(), { newOperationId: busy }));
          const free = stores[0]!.decide(reserve(newRun(), newKey(), { newOperationId: idOffChain(chain) }));
          expect(await settlesWithin(free, 5_000)).toBe(true);
          expectVerdict(await free, 'allow');
          expect(await settlesWithin(waiting, 300)).toBe(false);
        });
        expectVerdict(await waiting!, 'allow');
      });

      it('a duplicate, and the reconcile request for an unknown key, are answered without the key row lock', async () => {
        const confirmed = newKey();
        const first = await store.decide(reserve(newRun(), confirmed));
        expectVerdict(first, 'allow');
        await store.recordOutcome(outcome(first, confirmed, 'succeeded'));
        const unknown = newKey();
        const second = await store.decide(reserve(newRun(), unknown));
        expectVerdict(second, 'allow');
        await store.recordOutcome(outcome(second, unknown, 'unknown'));
        const lockKey = 'select 1 from dedupe_keys where key_hash = $1 for update';

        await holding(lockKey, [confirmed.hash], async () => {
          const dup = stores[1]!.decide(reserve(newRun(), confirmed));
          expect(await settlesWithin(dup, 5_000)).toBe(true);
          expectVerdict(await dup, 'duplicate');
        });
        await holding(lockKey, [unknown.hash], async () => {
          // Asking the gate to look first changes nothing, so it needs no lock; a hold does (it
          // opens an approval request) and is tested with the unknown-outcome rules.
          const look = stores[1]!.decide(reserve(newRun(), unknown, { unknownRule: 'reconcile' }));
          expect(await settlesWithin(look, 5_000)).toBe(true);
          expect(await look).toMatchObject({ verdict: 'reconcile', operationId: second.operationId });
        });
      });
    }

    it('the chain did not fork under concurrency', async () => {
      const report = await verifyStoreChain(store);
      expect(report).toMatchObject({ ok: true, broken: [] });
      const heads = await store.chainHeads();
      expect(report.checked).toBe(heads.reduce((n, h) => n + h.lastSeq, 0));
    });

    it('time never goes backwards along a chain, and recorded_at is recorded_at_us exactly', async () => {
      // eg_append_event reads the clock before it waits for the head row and records
      // greatest(clock, the chain's last time): a writer that waited behind a later reading
      // still appends after it in time.
      const rows = await store.query<{ backwards: number; inexact: number; events: number }>(
        `select count(*) filter (where recorded_at_us < prev_us)::int as backwards,
                count(*) filter (where recorded_at <> timestamptz 'epoch' + recorded_at_us * interval '1 microsecond'
                  or (extract(epoch from recorded_at) * 1000000)::bigint <> recorded_at_us)::int as inexact,
                count(*)::int as events
         from (select recorded_at, recorded_at_us,
                      lag(recorded_at_us) over (partition by chain order by seq) as prev_us from events) e`,
      );
      expect(rows[0]!.events).toBeGreaterThan(20);
      expect(rows[0]).toMatchObject({ backwards: 0, inexact: 0 });
    });
  });
}
