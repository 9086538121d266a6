/**
 * Races that HELD UP (kept as regression checks): many processes finding the same expired
 * reservation at once, and a late outcome of the lost attempt racing the decide that expires it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DecideResult, Store } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

const target = storeTargets().find((t) => t.kind === 'postgres');

describe.skipIf(!target)('expired-reservation races across processes (PostgreSQL)', () => {
  let store: TestStore;
  const gates: Store[] = [];

  beforeAll(async () => {
    store = await openTestStore(target!);
    for (let i = 0; i < 4; i++) gates.push(await store.openSibling());
  });

  afterAll(async () => {
    for (const g of gates) await g.close();
    await store?.close();
  });

  for (const rule of ['hold', 'honored'] as const) {
    for (const onExpired of ['unknown', 'retry'] as const) {
      it(`${rule}/${onExpired}: 16 concurrent decides on one expired key: at most one attempt, one outcome_lost`, async () => {
        for (let round = 0; round < 10; round++) {
          const key = newKey({ pendingTtlMs: 30 });
          const first = await store.decide(reserve(newRun(), key, { unknownRule: rule, onExpired }));
          expectVerdict(first, 'allow');
          await sleep(50);
          const results = await Promise.allSettled(
            Array.from({ length: 16 }, (_, i) =>
              gates[i % gates.length]!.decide(
                reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { unknownRule: rule, onExpired }),
              ),
            ),
          );
          const errors = results
            .filter((r) => r.status === 'rejected')
            .map((r) => String((r as PromiseRejectedResult).reason));
          expect(errors).toEqual([]);
          const verdicts = results.map((r) => (r as PromiseFulfilledResult<DecideResult>).value.verdict);
          const allows = verdicts.filter((v) => v === 'allow').length;
          expect(allows, verdicts.join(',')).toBe(rule === 'hold' && onExpired === 'unknown' ? 0 : 1);
          const obs = await store.query<{ n: number }>(
            `select count(*)::int as n from observations where operation_id = '${first.operationId}' and kind = 'outcome_lost'`,
          );
          expect(obs[0]!.n).toBe(1);
          const att = await store.query<{ n: number }>(
            `select count(*)::int as n from attempts where operation_id = '${first.operationId}'`,
          );
          expect(att[0]!.n).toBe(1 + allows);
        }
      });
    }
  }

  it('late outcome of the lost attempt racing the expiring decide: one outcome event, state follows events', async () => {
    for (let round = 0; round < 20; round++) {
      const key = newKey({ pendingTtlMs: 30 });
      const first = await store.decide(reserve(newRun(), key, { unknownRule: 'honored' }));
      expectVerdict(first, 'allow');
      await sleep(45);
      const [late, next] = await Promise.allSettled([
        gates[0]!.recordOutcome(outcome(first, key, round % 2 === 0 ? 'succeeded' : 'failed')),
        gates[1]!.decide(reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { unknownRule: 'honored' })),
      ]);
      expect(late.status, String((late as PromiseRejectedResult).reason)).toBe('fulfilled');
      expect(next.status, String((next as PromiseRejectedResult).reason)).toBe('fulfilled');
      const ev = await store.query<{ n: number }>(
        `select count(*)::int as n from events where operation_id = '${first.operationId}' and type = 'attempt.outcome'`,
      );
      expect(ev[0]!.n).toBe(1);
      const v = (next as PromiseFulfilledResult<DecideResult>).value.verdict;
      const [op] = await store.query<{ state: string }>(
        `select state from operations where id = '${first.operationId}'`,
      );
      const [k] = await store.query<{ state: string }>(
        `select state from dedupe_keys where key_hash = '${key.hash}'`,
      );
      // Either the outcome came first (duplicate after success / retry after failure) or the decide
      // expired it first and retried under honored idempotency (the late outcome is superseded).
      if (v === 'duplicate') expect([op!.state, k!.state]).toEqual(['succeeded', 'confirmed']);
      else expect(v).toBe('allow');
    }
    expect((await verifyStoreChain(store)).ok).toBe(true);
  });
});
