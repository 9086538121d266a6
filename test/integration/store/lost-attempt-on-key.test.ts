import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CHECKSUM_SETTING } from '../../../src/store/functions/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, recoverInput, reserve, sleep } from './inputs.js';

/*
 * A key row says whether its attempt was marked lost (dedupe_keys.lost_attempt_id, migration 0022):
 * an expiry or a crash recovery marks the attempt sent_no_response, and an expiry under
 * `on_expired: retry` with no budget left keeps the key pending, so an outcome that finds the key
 * pending and owned by its attempt is not always that attempt's first answer. What must hold: the
 * mark names the key's attempt exactly when that attempt was marked (every test store checks that
 * on close, test/helpers/trail-check.ts), whatever the key's state, and a store upgraded from
 * before the column gets the marks of the attempts marked before it.
 */
for (const target of storeTargets()) {
  describe(`the lost-attempt mark on a key on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterEach(async () => {
      // Recovery sweeps the whole store: leave no attempt of these tests for the next one's sweep.
      await store?.recover(recoverInput({ instanceId: null, exclusive: true }));
    });

    afterAll(async () => {
      await store?.close();
    });

    const keyRow = async (
      hash: string,
    ): Promise<{ state: string; attempt_id: string; lost_attempt_id: string | null }> => {
      const [row] = await store.query<{ state: string; attempt_id: string; lost_attempt_id: string | null }>(
        `select state, attempt_id, lost_attempt_id from dedupe_keys where key_hash = '${hash}'`,
      );
      return row!;
    };

    it('an expiry that keeps the key pending marks its attempt, and the late outcome is recorded as late', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const opts = { onExpired: 'retry' as const, retryBudget: 1 };
      const first = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(first, 'allow');
      expect((await keyRow(key.hash)).lost_attempt_id).toBeNull();
      await sleep(80); // no outcome before the reservation expired
      expectVerdict(await store.decide(reserve(newRun(), key, opts)), 'block'); // retry_budget_exhausted

      const marked = await keyRow(key.hash);
      expect(marked).toEqual({
        state: 'pending',
        attempt_id: first.attemptId,
        lost_attempt_id: first.attemptId,
      });

      // The gate was slow, not dead: its real answer comes now, and is late evidence.
      await store.recordOutcome(outcome(first, key, 'succeeded'));
      const [event] = await store.query<{ late: boolean }>(
        `select (payload::jsonb -> 'facts' ->> 'late')::boolean as late from events
         where operation_id = '${first.operationId}' and type = 'attempt.outcome'`,
      );
      expect(event?.late).toBe(true);
      expect(await keyRow(key.hash)).toEqual({
        state: 'confirmed',
        attempt_id: first.attemptId,
        lost_attempt_id: first.attemptId,
      });
    });

    it('an expiry that makes the key unknown marks it; a retry that takes the key is not marked', async () => {
      const lost = newKey({ pendingTtlMs: 50 });
      const first = await store.decide(reserve(newRun(), lost));
      expectVerdict(first, 'allow');
      await sleep(80);
      await store.decide(reserve(newRun(), lost)); // on_expired: unknown, answered by the unknown rules
      expect(await keyRow(lost.hash)).toMatchObject({ state: 'unknown', lost_attempt_id: first.attemptId });

      const retried = newKey({ pendingTtlMs: 50 });
      const opts = { onExpired: 'retry' as const, retryBudget: 3 };
      const one = await store.decide(reserve(newRun(), retried, opts));
      expectVerdict(one, 'allow');
      await sleep(80);
      const two = await store.decide(reserve(newRun(), retried, opts));
      expectVerdict(two, 'allow');
      const row = await keyRow(retried.hash);
      expect(row).toEqual({ state: 'pending', attempt_id: two.attemptId, lost_attempt_id: one.attemptId });
    });

    it('a recovery marks the attempt of the key it makes unknown', async () => {
      const key = newKey();
      await store.registerInstance('gate-lost-mark');
      const allow = await store.decide(
        reserve(newRun(), key, { gateInstance: 'gate-lost-mark', deadlineMs: 60_000 }),
      );
      expectVerdict(allow, 'allow');
      await store.stopInstance('gate-lost-mark');
      expect((await store.recover(recoverInput())).map((r) => r.attemptId)).toContain(allow.attemptId);
      expect(await keyRow(key.hash)).toEqual({
        state: 'unknown',
        attempt_id: allow.attemptId,
        lost_attempt_id: allow.attemptId,
      });
    });

    it('a recovery marks the attempt of a key that evidence settled first', async () => {
      // The gate died mid-dispatch; past the attempt's deadline an operator found the effect and
      // settled the operation (its attempt keeps no outcome: an attempt is never edited). Recovery
      // still marks that attempt, and the key, confirmed now, still names it.
      const key = newKey();
      await store.registerInstance('gate-settled-first');
      const allow = await store.decide(
        reserve(newRun(), key, { gateInstance: 'gate-settled-first', deadlineMs: 1 }),
      );
      expectVerdict(allow, 'allow');
      await sleep(20);
      await store.addObservation({
        operationId: allow.operationId,
        kind: 'operator_decision',
        by: 'alice@example.com',
        reason: 'the issue is there',
        settles: 'succeeded',
        status: null,
        destinationRef: 'https://github.com/acme/app/issues/7',
        refs: [],
        payloadFingerprint: null,
        source: 'cli',
      });
      await store.stopInstance('gate-settled-first');
      expect((await store.recover(recoverInput())).map((r) => r.attemptId)).toContain(allow.attemptId);
      expect(await keyRow(key.hash)).toEqual({
        state: 'confirmed',
        attempt_id: allow.attemptId,
        lost_attempt_id: allow.attemptId,
      });
    });

    it('an upgraded store marks the attempts marked before the column, and nothing else', async () => {
      const key = newKey({ pendingTtlMs: 50 });
      const opts = { onExpired: 'retry' as const, retryBudget: 1 };
      const first = await store.decide(reserve(newRun(), key, opts));
      expectVerdict(first, 'allow');
      await sleep(80);
      expectVerdict(await store.decide(reserve(newRun(), key, opts)), 'block');
      const fresh = newKey();
      const open = await store.decide(reserve(newRun(), fresh));
      expectVerdict(open, 'allow');
      await store.recordOutcome(outcome(open, fresh, 'succeeded'));

      // As the store looked before migration 0022.
      await store.query('alter table dedupe_keys drop column lost_attempt_id');
      await store.query(`delete from kysely_migration where name >= '0022-lost-attempt-on-key'`);
      await store.query(`delete from settings where name = '${CHECKSUM_SETTING}'`);
      await store.migrate();

      expect((await keyRow(key.hash)).lost_attempt_id).toBe(first.attemptId);
      expect((await keyRow(fresh.hash)).lost_attempt_id).toBeNull();
    });
  });
}
