/**
 * The order the store gives every event (migration 0024): the writer's transaction id (`tx`) and
 * a number taken as the row is inserted (`pos`). The sealer and the projection are to read the log
 * in batches by snapshot and, within a batch, by `pos`, instead of behind a chain head locked
 * through each commit. What that needs of these columns, asked here against the real functions:
 * - every event has both; the events of one transaction share `tx`; `pos` grows along every
 *   chain and along every operation's history;
 * - an event written after waiting for another transaction's lock has a larger `pos` than that
 *   transaction's events, even when its own transaction id is older: so `pos`, not `tx`, is the
 *   order writers saw each other in, and a snapshot can see the younger transaction's event and
 *   not the older one's (why batches go by snapshot, not by `tx`).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { untilLockWaiters } from '../../helpers/lock-waiters.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

interface Ordered {
  readonly chain: number;
  readonly seq: string;
  readonly type: string;
  readonly operation_id: string | null;
  readonly tx: string | null;
  readonly pos: string | null;
}

const ORDERED = 'select chain, seq::text, type, operation_id, tx::text, pos::text from events';

for (const target of storeTargets()) {
  describe(`the store's order of events on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('gives every event a transaction and a position: one transaction per batch, positions growing along each chain and each operation', async () => {
      const keys = Array.from({ length: 8 }, () => newKey());
      // Made together: they go in batches (group-commit.ts), whose events share one transaction.
      const allows = (await Promise.all(keys.map((k) => store.decide(reserve(newRun(), k))))).map((d) => {
        expectVerdict(d, 'allow');
        return d as Allow;
      });
      await Promise.all(allows.map((a, i) => store.recordOutcome(outcome(a, keys[i]!, 'succeeded'))));
      const events = await store.query<Ordered>(`${ORDERED} order by chain, seq`);
      expect(events.length).toBeGreaterThanOrEqual(16);
      for (const e of events) {
        expect(e.tx).toMatch(/^\d+$/);
        expect(e.pos).toMatch(/^\d+$/);
      }
      expect(new Set(events.map((e) => e.pos)).size).toBe(events.length);
      for (let i = 1; i < events.length; i++) {
        if (events[i]!.chain !== events[i - 1]!.chain) continue;
        expect(BigInt(events[i]!.pos!)).toBeGreaterThan(BigInt(events[i - 1]!.pos!));
      }
      for (const a of allows) {
        const own = events.filter((e) => e.operation_id === a.operationId);
        expect(own.map((e) => e.type)).toEqual(['decision.allow', 'attempt.outcome']);
        expect(BigInt(own[1]!.pos!)).toBeGreaterThan(BigInt(own[0]!.pos!));
      }
      // The decides shared transactions (at least one batch held two), as the outcomes did.
      const decideTxs = new Set(events.filter((e) => e.type === 'decision.allow').map((e) => e.tx));
      expect(decideTxs.size).toBeLessThan(allows.length);
    });

    if (target.kind === 'postgres') {
      it('an event written after waiting for a younger transaction comes after its event by position, not by transaction id, and a snapshot can see the younger one alone', async () => {
        const key = newKey();
        const [older, younger, side] = [0, 1, 2].map(() => new pg.Client({ connectionString: store.url }));
        await Promise.all([older, younger, side].map((c) => c!.connect()));
        try {
          // The older transaction takes its id first, as a batch does at its first call's write.
          await older!.query('begin');
          const olderTx = (await older!.query<{ tx: string }>('select pg_current_xact_id()::text as tx'))
            .rows[0]!.tx;
          // The younger one reserves the key and appends its event, uncommitted.
          await younger!.query('begin');
          const allowed = await younger!.query<{ r: { verdict: string } }>('select eg_decide($1) as r', [
            JSON.stringify(reserve(newRun(), key)),
          ]);
          expect(allowed.rows[0]!.r.verdict).toBe('allow');
          // The older one proposes the same key: it waits for the younger one's reservation.
          const pending = older!.query<{ r: { verdict: string } }>('select eg_decide($1) as r', [
            JSON.stringify(reserve(newRun(), key)),
          ]);
          await untilLockWaiters(side!, 1);
          await younger!.query('commit');
          expect((await pending).rows[0]!.r.verdict).toBe('pending');
          // Between the two commits: a snapshot that sees the younger event and not the older one.
          const snapshot = (await side!.query<{ s: string }>('select pg_current_snapshot()::text as s'))
            .rows[0]!.s;
          await older!.query('commit');

          const events = await store.query<Ordered & { seen: boolean }>(
            `select e.* , pg_visible_in_snapshot(e.tx::xid8, '${snapshot}'::pg_snapshot) as seen
             from (${ORDERED} where tx in ('${olderTx}'::xid8, (select tx from events where type = 'decision.allow'
               and payload::jsonb -> 'input' -> 'key' ->> 'hash' = '${key.hash}'))) e`,
          );
          const first = events.find((e) => e.type === 'decision.allow')!;
          const second = events.find((e) => e.type === 'decision.pending')!;
          expect(second.tx).toBe(olderTx);
          expect(BigInt(second.tx!)).toBeLessThan(BigInt(first.tx!));
          expect(BigInt(second.pos!)).toBeGreaterThan(BigInt(first.pos!));
          expect(first.seen).toBe(true);
          expect(second.seen).toBe(false);
        } finally {
          await Promise.all([older, younger].map((c) => c!.query('rollback').catch(() => undefined)));
          await Promise.all([older, younger, side].map((c) => c!.end()));
        }
      });
    }
  });
}
