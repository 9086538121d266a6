/**
 * Group commit on a real store (src/store/group-commit.ts, eg_batch.sql): calls
 * made together share one eg_batch round trip and one transaction, and each still gets exactly
 * the answer it would have had alone. Asked of every batch, the ways it could let an effect
 * happen twice or the trail lie:
 * - two proposals of one key in one batch: the first reserves it, the second waits (pending);
 * - one call that fails: the batch rolls back whole and every call is sent again alone, so the
 *   others commit once and the failing one fails alone;
 * - two batches (two gate processes) that take the same keys in opposite orders: PostgreSQL breaks
 *   the deadlock by failing one batch; its calls go again one by one; every key has exactly one
 *   allow;
 * - the events of a batch: one per call, hash-chained, verified, in chain order.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainOf, EVENT_CHAINS } from '../../../src/store/audit-chain.js';
import type { DecideResult, ReserveInput, Store } from '../../../src/store/index.js';
import { uuidv7 } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { untilLockWaiters } from '../../helpers/lock-waiters.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

for (const target of storeTargets()) {
  describe(`group commit on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    const count = async (sql: string): Promise<number> =>
      Number((await store.query<{ n: string }>(sql))[0]!.n);

    it('answers proposals made together in one round trip, one allow and one event each', async () => {
      const before = store.stats.groupCommit;
      const events0 = await count('select count(*) as n from events');
      const keys = Array.from({ length: 12 }, () => newKey());
      const proposals = keys.map((k) => reserve(newRun(), k));
      const decided = await Promise.all(proposals.map((p) => store.decide(p)));
      const allows = decided.map((d) => {
        expectVerdict(d, 'allow');
        return d as Allow;
      });
      expect(new Set(allows.map((a) => a.operationId)).size).toBe(12);
      // Each call's event holds the very input it sent, as a lone call's does.
      for (const [i, a] of allows.entries()) {
        const [event] = await store.query<{ payload: string }>(
          `select payload from events where operation_id = '${a.operationId}' and type = 'decision.allow'`,
        );
        expect(JSON.parse(event!.payload).input).toEqual(proposals[i]);
      }
      const settled = await Promise.all(
        allows.map((a, i) => store.recordOutcome(outcome(a, keys[i]!, 'succeeded'))),
      );
      expect(settled.map((s) => s.operationState)).toEqual(Array(12).fill('succeeded'));
      const after = store.stats.groupCommit;
      // 12 decides, then 12 outcomes, each set made in one tick: they went in batches.
      expect(after.batches - before.batches).toBeGreaterThanOrEqual(2);
      expect(after.batchedCalls - before.batchedCalls).toBeGreaterThanOrEqual(20);
      expect(after.fallbacks).toBe(before.fallbacks);
      expect(await count('select count(*) as n from events')).toBe(events0 + 24);
      for (const [i, a] of allows.entries()) {
        expect(
          await count(
            `select count(*) as n from attempts where operation_id = '${a.operationId}' and finished_at is not null`,
          ),
        ).toBe(1);
        expect(
          await count(
            `select count(*) as n from dedupe_keys where key_hash = '${keys[i]!.hash}' and state = 'confirmed'`,
          ),
        ).toBe(1);
      }
      // A repeat of every call, together again: duplicates, one round trip.
      const repeats = await Promise.all(keys.map((k) => store.decide(reserve(newRun(), k))));
      expect(repeats.map((r) => r.verdict)).toEqual(Array(12).fill('duplicate'));
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('of two proposals of one key in one batch, the first reserves it and the second is pending', async () => {
      const before = store.stats.groupCommit;
      const key = newKey();
      const [first, second] = await Promise.all([
        store.decide(reserve(newRun(), key)),
        store.decide(reserve(newRun(), key)),
      ]);
      expect(store.stats.groupCommit.batches).toBe(before.batches + 1);
      expectVerdict(first!, 'allow');
      expect(second).toMatchObject({ verdict: 'pending', operationId: (first as Allow).operationId });
      expect(await count(`select count(*) as n from operations where key_hash = '${key.hash}'`)).toBe(1);
    });

    it('carries outcomes and proposals in one batch, in call order: an outcome confirms a key, a proposal of that key after it in the batch is a duplicate', async () => {
      const key = newKey();
      const first = await store.decide(reserve(newRun(), key));
      expectVerdict(first, 'allow');
      const others = Array.from({ length: 4 }, () => newKey());
      const before = store.stats.groupCommit;
      const events0 = await count('select count(*) as n from events');
      // Made in one tick: they leave together, the outcome first, then the proposals.
      const [settled, repeat, ...fresh] = await Promise.all([
        store.recordOutcome(outcome(first as Allow, key, 'succeeded')),
        store.decide(reserve(newRun(), key)),
        ...others.map((k) => store.decide(reserve(newRun(), k))),
      ]);
      const after = store.stats.groupCommit;
      expect(after.batches).toBe(before.batches + 1);
      expect(after.batchedCalls - before.batchedCalls).toBe(6);
      expect(settled).toMatchObject({ operationState: 'succeeded' });
      expect(repeat).toMatchObject({ verdict: 'duplicate', operationId: (first as Allow).operationId });
      for (const f of fresh) expect(f).toMatchObject({ verdict: 'allow' });
      // One event per call, the chain intact.
      expect(await count('select count(*) as n from events')).toBe(events0 + 6);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('an outcome and a retry of its key in one batch: the retry needs the rows the outcome left to the projection, so the batch is resent call by call (EG425)', async () => {
      const key = newKey();
      const first = (await store.decide(reserve(newRun(), key))) as Allow;
      expectVerdict(first, 'allow');
      const before = store.stats.groupCommit;
      const events0 = await count('select count(*) as n from events');
      const [failed, retry] = await Promise.all([
        store.recordOutcome(outcome(first, key, 'failed')),
        store.decide(reserve(newRun(), key)),
      ]);
      const after = store.stats.groupCommit;
      expect(after.batches).toBe(before.batches + 1);
      expect(after.fallbacks).toBe(before.fallbacks + 1);
      expect(failed).toMatchObject({ operationState: 'failed' });
      // Sent alone (at once, so in either order on PostgreSQL): the next attempt of that operation,
      // the outcome's event projected first; or, had it gone first, pending behind attempt 1.
      expect(retry).toMatchObject({ operationId: first.operationId });
      const attempts: [number, string | null][] = [[1, 'response_received']];
      if (retry.verdict === 'allow') {
        expect(retry).toMatchObject({ attemptNumber: 2 });
        attempts.push([2, null]);
      } else {
        expect(retry).toMatchObject({ verdict: 'pending' });
      }
      expect(await count('select count(*) as n from events')).toBe(events0 + 2);
      const op = await store.getOperation(first.operationId);
      expect(op?.attempts.map((a) => [a.number, a.dispatchState])).toEqual(attempts);
    });

    it('one call that fails fails alone: the rest of its batch commits once', async () => {
      const before = store.stats.groupCommit;
      const events0 = await count('select count(*) as n from events');
      const keys = [newKey(), newKey(), newKey()];
      const allows = (await Promise.all(keys.map((k) => store.decide(reserve(newRun(), k))))) as Allow[];
      const nowhere = { ...allows[1]!, operationId: '01900000-0000-7000-8000-000000000000' };
      const results = await Promise.allSettled([
        store.recordOutcome(outcome(allows[0]!, keys[0]!, 'succeeded')),
        store.recordOutcome(outcome(nowhere, keys[1]!, 'succeeded')),
        store.recordOutcome(outcome(allows[2]!, keys[2]!, 'failed')),
      ]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
      expect((results[0] as PromiseFulfilledResult<{ operationState: string }>).value.operationState).toBe(
        'succeeded',
      );
      expect((results[2] as PromiseFulfilledResult<{ operationState: string }>).value.operationState).toBe(
        'failed',
      );
      expect(store.stats.groupCommit.fallbacks).toBe(before.fallbacks + 1);
      // Three decides and two outcomes: the rolled-back batch left nothing, its resent calls once each.
      expect(await count('select count(*) as n from events')).toBe(events0 + 5);
      expect(
        await count(
          `select count(*) as n from dedupe_keys where key_hash = '${keys[1]!.hash}' and state = 'pending'`,
        ),
      ).toBe(1);
      // The failed call's attempt is still open and takes its real outcome.
      const late = await store.recordOutcome(outcome(allows[1]!, keys[1]!, 'succeeded'));
      expect(late.operationState).toBe('succeeded');
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    if (target.kind === 'postgres') {
      /** Begins a transaction on `side` that reserves each key, uncommitted: a call of it waits. */
      async function holdKeys(side: pg.Client, hashes: readonly string[]): Promise<void> {
        await side.query('begin');
        for (const hash of new Set(hashes)) {
          await side.query(
            `insert into dedupe_keys (key_hash, tenant, area, agent, tool_id, state, operation_id, attempt_number)
             values ($1, 'acme', 'support', 'triage-bot', 'github.create_issue', 'pending', 'side', 1)`,
            [hash],
          );
        }
      }

      /**
       * Runs `a` on this store and `b` on a second store of the same database (a second gate
       * process), each as one batch of three decides, both paused at their second call: a side
       * connection keeps that call's key reserved, uncommitted, until both batches wait on it.
       * So each batch has done its first call before either goes on with its third.
       */
      async function crossedBatches(
        a: readonly [ReserveInput, ReserveInput, ReserveInput],
        b: readonly [ReserveInput, ReserveInput, ReserveInput],
      ): Promise<{ readonly a: DecideResult[]; readonly b: DecideResult[]; readonly fallbacks: number }> {
        const sibling: Store = await store.openSibling();
        const before = store.stats.groupCommit.fallbacks;
        const side = new pg.Client({ connectionString: store.url });
        await side.connect();
        try {
          await holdKeys(side, [a[1].key!.hash, b[1].key!.hash]);
          const batchA = Promise.all(a.map((input) => store.decide(input)));
          const batchB = Promise.all(b.map((input) => sibling.decide(input)));
          await untilLockWaiters(side, 2);
          await side.query('rollback');
          const [ra, rb] = await Promise.all([batchA, batchB]);
          return {
            a: ra,
            b: rb,
            fallbacks: store.stats.groupCommit.fallbacks - before + sibling.stats.groupCommit.fallbacks,
          };
        } finally {
          await side.query('rollback').catch(() => undefined);
          await side.end();
          await sibling.close();
        }
      }

      it('two batches that take the same keys in opposite orders: one is failed as a deadlock and resent call by call, and every key has exactly one allow', async () => {
        const [x, gate, y] = [newKey(), newKey(), newKey()];
        const r = await crossedBatches(
          [reserve(newRun(), x), reserve(newRun(), gate), reserve(newRun(), y)],
          [reserve(newRun(), y), reserve(newRun(), gate), reserve(newRun(), x)],
        );
        expect(r.fallbacks).toBe(1);
        const verdicts = (hash: string): string[] =>
          [
            ...r.a.filter((_, i) => [x, gate, y][i]!.hash === hash),
            ...r.b.filter((_, i) => [y, gate, x][i]!.hash === hash),
          ]
            .map((d) => d.verdict)
            .sort();
        for (const k of [x, gate, y]) {
          expect(verdicts(k.hash)).toEqual(['allow', 'pending']);
          expect(await count(`select count(*) as n from operations where key_hash = '${k.hash}'`)).toBe(1);
        }
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
      });

      it('two batches of the same keyless outcomes in opposite orders never deadlock: their operations’ locks are taken at once, in one order', async () => {
        // A keyless outcome brings its operation up to date under the operation's lock, held to
        // COMMIT (eg_project_operation.sql). Batch A has the first operation's outcome first and
        // the second's last, B the other way round, each paused between them at a decide whose key
        // a side connection holds: taken in call order, A would hold the first lock and wait for
        // the second, B the reverse. (The two operations are on two chains, as when the lock was
        // the chain's.)
        const allows: Allow[] = [];
        for (let i = 0; i < 50 && new Set(allows.map((a) => chainOf(a.operationId))).size < 2; i++) {
          allows.push((await store.decide(reserve(newRun(), null))) as Allow);
        }
        const first = allows[0]!;
        const second = allows.find((a) => chainOf(a.operationId) !== chainOf(first.operationId))!;
        const [k1, k2] = [newKey(), newKey()];
        const side = new pg.Client({ connectionString: store.url });
        const clients = [
          new pg.Client({ connectionString: store.url }),
          new pg.Client({ connectionString: store.url }),
        ];
        await Promise.all([side, ...clients].map((c) => c.connect()));
        try {
          await holdKeys(side, [k1.hash, k2.hash]);
          const fns = JSON.stringify(['eg_record_outcome', 'eg_decide', 'eg_record_outcome']);
          const batch = (client: pg.Client, calls: readonly unknown[]) =>
            client.query('select eg_batch($1, $2) as r', [fns, JSON.stringify(calls)]);
          const a = batch(clients[0]!, [
            outcome(first, null, 'succeeded'),
            reserve(newRun(), k1),
            outcome(second, null, 'succeeded'),
          ]);
          const b = batch(clients[1]!, [
            outcome(second, null, 'succeeded'),
            reserve(newRun(), k2),
            outcome(first, null, 'succeeded'),
          ]);
          await untilLockWaiters(side, 2);
          await side.query('rollback');
          // Neither is failed as a deadlock: one commits, then the other (its outcomes are then
          // written again, and answered as already recorded).
          const results = await Promise.allSettled([a, b]);
          expect(results.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual([
            'ok',
            'ok',
          ]);
        } finally {
          await side.query('rollback').catch(() => undefined);
          await Promise.all([side, ...clients].map((c) => c.end()));
        }
        expect((await store.getOperation(first.operationId))?.state).toBe('succeeded');
        expect((await store.getOperation(second.operationId))?.state).toBe('succeeded');
      });

      it('two batches whose events go to the same chains in opposite orders never deadlock: events are appended in chain order', async () => {
        // Batch A's first call writes to chain c1 and its last to c2; batch B's the other way
        // round. Appended as each call ends, A would hold c1's head and wait for c2's, B the
        // reverse; appended at the end in chain order, both take c1 then c2.
        const c1 = chainOf(uuidv7());
        const c2 = (c1 + 1) % EVENT_CHAINS;
        const onChain = (chain: number): string => {
          for (;;) {
            const id = uuidv7();
            if (chainOf(id) === chain) return id;
          }
        };
        const on = (chain: number) => reserve(newRun(), newKey(), { newOperationId: onChain(chain) });
        const r = await crossedBatches(
          [on(c1), reserve(newRun(), newKey()), on(c2)],
          [on(c2), reserve(newRun(), newKey()), on(c1)],
        );
        expect(r.fallbacks).toBe(0);
        expect([...r.a, ...r.b].map((d) => d.verdict)).toEqual(Array(6).fill('allow'));
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
      });
    }
  });
}
