import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHECKSUM_SETTING } from '../../../src/store/functions/index.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { expectVerdict, newKey, newRun, outcome, reserve, unknownOperation } from './inputs.js';

/*
 * A key row carries its operation's state (dedupe_keys.operation_state, migration 0021), so a
 * duplicate answers from the key alone. What must hold: the copy is the operation's state after
 * every change (every test store checks that on close, test/helpers/trail-check.ts), and a store
 * upgraded from before the column answers its confirmed keys' duplicates with their operations'
 * states, not with a default, including keys the previous version's functions wrote while the
 * upgrade ran.
 */
for (const target of storeTargets()) {
  describe(`the operation's state on its key on ${target.name}`, () => {
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
    });

    afterAll(async () => {
      await store?.close();
    });

    const copies = async (): Promise<{ keys: number; equal: number }> => {
      const [r] = await store.query<{ keys: number; equal: number }>(
        `select count(*)::int as keys,
                count(*) filter (where k.operation_state is not distinct from o.state)::int as equal
         from dedupe_keys k join operations o on o.id = k.operation_id`,
      );
      return r!;
    };

    it('an upgraded store copies each key’s operation state, and a duplicate answers it', async () => {
      // One key per state a key's operation can be in when the upgrade runs.
      const succeeded = newKey();
      const first = await store.decide(reserve(newRun(), succeeded));
      expectVerdict(first, 'allow');
      await store.recordOutcome(outcome(first, succeeded, 'succeeded'));
      const failed = newKey();
      const second = await store.decide(reserve(newRun(), failed));
      expectVerdict(second, 'allow');
      await store.recordOutcome(outcome(second, failed, 'failed'));
      await unknownOperation(store, newKey());
      expectVerdict(await store.decide(reserve(newRun(), newKey())), 'allow');
      // A key confirmed by an operator who found the effect twice: the duplicate says so.
      const twice = newKey();
      const third = await unknownOperation(store, twice);
      await store.addObservation({
        operationId: third.operationId,
        kind: 'operator_decision',
        by: 'alice@example.com',
        reason: 'two issues at the destination',
        settles: 'duplicate_effect_confirmed',
        status: null,
        destinationRef: null,
        refs: ['https://github.com/acme/app/issues/8', 'https://github.com/acme/app/issues/9'],
        payloadFingerprint: null,
        source: 'cli',
      });

      // As the store looked before migration 0021.
      await store.query('alter table dedupe_keys drop column operation_state');
      await store.query(`delete from kysely_migration where name >= '0021-operation-state'`);
      await store.query(`delete from settings where name = '${CHECKSUM_SETTING}'`);
      await store.migrate();

      const after = await copies();
      expect(after.keys).toBeGreaterThanOrEqual(5);
      expect(after.equal).toBe(after.keys);
      const dup = await store.decide(reserve(newRun(), twice));
      expectVerdict(dup, 'duplicate');
      expect(dup.operationState).toBe('duplicate_effect_confirmed');
      const plain = await store.decide(reserve(newRun(), succeeded));
      expectVerdict(plain, 'duplicate');
      expect(plain.operationState).toBe('succeeded');
    });

    it('what the previous version’s functions wrote between the migration and the new functions is brought up to date', async () => {
      // The gates already running serve with the old definitions until the new ones commit: they
      // settle operations without touching the copy, and insert keys without one.
      const key = newKey();
      const allow = await store.decide(reserve(newRun(), key));
      expectVerdict(allow, 'allow');
      await store.recordOutcome(outcome(allow, key, 'succeeded'));
      await store.query(`update dedupe_keys set operation_state = 'open' where key_hash = '${key.hash}'`);
      const fresh = newKey();
      expectVerdict(await store.decide(reserve(newRun(), fresh)), 'allow');
      await store.query(`update dedupe_keys set operation_state = null where key_hash = '${fresh.hash}'`);
      expect((await copies()).equal).toBe((await copies()).keys - 2);

      await store.query(`delete from settings where name = '${CHECKSUM_SETTING}'`);
      await store.migrate();

      const after = await copies();
      expect(after.equal).toBe(after.keys);
      const dup = await store.decide(reserve(newRun(), key));
      expectVerdict(dup, 'duplicate');
      expect(dup.operationState).toBe('succeeded');
    });
  });
}
