/**
 * Migration 0027: an event is known by its position. A store whose oldest events were written
 * before migration 0024 gave events a position has them numbered below every other, in each
 * chain's order, and every reader that follows (the projection keyed by position, the sealer, the
 * chain walk of `audit verify`) still finds them where they were.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySealedLog } from '../../../src/store/audit-log-verify.js';
import { AuditSealer } from '../../../src/store/audit-sealer.js';
import { CHECKSUM_SETTING } from '../../../src/store/functions/index.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

const { signer, verifier } = testAuditKey('effectgate-events-by-position');

interface Numbered {
  readonly chain: number;
  readonly seq: string;
  readonly pos: string;
  readonly tx: string | null;
}

async function allowAndSettle(store: TestStore, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const key = newKey();
    const allow = (await store.decide(reserve(newRun(), key))) as Allow;
    expectVerdict(allow, 'allow');
    await store.recordOutcome(outcome(allow, key, 'succeeded'));
    ids.push(allow.operationId);
  }
  return ids;
}

for (const target of storeTargets()) {
  describe(`events by position (migration 0027) on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('numbers the events from before positions below every other, in each chain order, and the log still projects, seals and verifies', async () => {
      const before = await allowAndSettle(store, 6);
      // As the store was before migration 0027, its events written before migration 0024: no
      // transaction id, no position, known by (chain, seq); the projection had not reached them.
      await store.rawQuery('alter table events disable trigger all');
      await store.rawQuery('alter table events drop constraint events_pkey');
      await store.rawQuery('drop index events_chain_seq_idx');
      await store.rawQuery('alter table events alter column pos drop not null');
      await store.rawQuery('alter table events add primary key (chain, seq)');
      await store.rawQuery('update events set tx = null, pos = null');
      await store.rawQuery('alter table events enable trigger all');
      await store.rawQuery('delete from attempts');
      await store.rawQuery('delete from decisions');
      await store.rawQuery('delete from operations');
      await store.rawQuery(
        'update log_projection set after_snapshot = null, target_snapshot = null, through_pos = 0',
      );
      await store.rawQuery(`delete from kysely_migration where name >= '0027-events-by-position'`);
      await store.rawQuery(`delete from settings where name = '${CHECKSUM_SETTING}'`);
      await store.migrate();

      const old = await store.rawQuery<Numbered>(
        'select e.chain, e.seq::text, e.pos::text, e.tx::text from events e order by e.pos',
      );
      expect(old.length).toBe(12);
      // Negative, distinct, the last one just below every position the sequence gives.
      expect(old.map((e) => Number(e.pos))).toEqual(Array.from({ length: 12 }, (_, i) => i - 12));
      for (const chain of new Set(old.map((e) => e.chain))) {
        const seqs = old.filter((e) => e.chain === chain).map((e) => Number(e.seq));
        expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      }

      const after = await allowAndSettle(store, 2);
      const [newest] = await store.rawQuery<{ min: string }>(
        'select min(pos)::text as min from events where tx is not null',
      );
      expect(Number(newest!.min)).toBeGreaterThan(0);
      // Every operation, before and after, projected from its events (the test store also
      // rebuilds every row from the events as it closes and compares).
      for (const id of [...before, ...after]) {
        expect((await store.getOperation(id))?.state).toBe('succeeded');
      }
      await new AuditSealer({ store, signer }).seal();
      expect(await verifySealedLog(store, verifier)).toMatchObject({
        ok: true,
        rehashed: 16,
        unsealed: { count: 0 },
      });
    });

    it('refuses a second event at a position, whoever writes it', async () => {
      await allowAndSettle(store, 1);
      await expect(
        store.rawQuery(`insert into events (chain, seq, type, operation_id, payload, prev_hash, hash,
            recorded_at, recorded_at_us, pos)
          select chain, seq + 1000, type, operation_id, payload, prev_hash, hash, recorded_at, recorded_at_us, pos
          from events where pos = (select max(pos) from events)`),
      ).rejects.toThrow(/events_pkey|duplicate key/);
    });
  });
}
