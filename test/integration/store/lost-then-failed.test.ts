/**
 * A definite failure of a retry that was made over an attempt that may have done the effect keeps
 * the operation unknown: every retry decision but previous_attempt_failed
 * (honored, approved, curator_accepted_risk after a lost reservation) leaves the earlier attempt
 * sent_no_response, and a destination often refuses a retry BECAUSE the first one worked. Neither
 * the 4xx nor the not_sent of an abandoned decide may settle it `failed` and free the key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

for (const target of storeTargets()) {
  describe(`a lost attempt, then a curator_accepted_risk retry that fails, on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('keeps the operation unknown (attempt 1 may have done the effect) and does not free the key', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const first = await store.decide(reserve(newRun(), key, { onExpired: 'retry' }));
      expectVerdict(first, 'allow');
      await sleep(80); // the first gate lost track: no outcome, reservation expired
      const second = await store.decide(
        reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { onExpired: 'retry' }),
      );
      expectVerdict(second, 'allow');
      expect(second.retryDecision).toBe('curator_accepted_risk');
      // The destination refuses the retry: 422 "already exists" -- because attempt 1 worked.
      const settled = await store.recordOutcome(outcome(second, key, 'failed'));
      const [op] = await store.query<{ state: string }>(
        `select state from operations where id = '${first.operationId}'`,
      );
      const [k] = await store.query<{ state: string }>(
        `select state from dedupe_keys where key_hash = '${key.hash}'`,
      );
      const third = await store.decide(
        reserve(newRun(), { ...key, pendingTtlMs: 60_000 }, { onExpired: 'retry' }),
      );
      expect(
        { settled: settled.operationState, op: op!.state, key: k!.state },
        `attempt 1 is sent_no_response; a 4xx of the risk-accepted retry proves nothing about it (third proposal: ${third.verdict} ${'retryDecision' in third ? third.retryDecision : ''})`,
      ).toEqual({ settled: 'unknown', op: 'unknown', key: 'unknown' });
    });
  });
}
