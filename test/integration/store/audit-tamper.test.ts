import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chainOf, computeEventHash, EVENT_CHAINS } from '../../../src/store/audit-chain.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { allEvents, writeHistory } from './audit-history.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

/*
 * What a superuser can do to the event log behind the gate's back (triggers disabled): every
 * drill is detected, on the chain it was done to, and the other chains still verify.
 */
for (const target of storeTargets()) {
  describe(`tampering with the event log inside the database on ${target.name}`, () => {
    let store: TestStore;
    /** The chain of the operation retried twice: the drills are done on it. */
    let chain: number;

    beforeAll(async () => {
      store = await openTestStore(target);
      const { retried } = await writeHistory(store);
      chain = chainOf(retried.operationId);
    });

    afterAll(async () => {
      await store?.close();
    });

    describe('triggers disabled by a superuser', () => {
      beforeAll(async () => {
        await store.query('create table events_backup as select * from events');
        await store.query('create table chain_head_backup as select * from chain_head');
        await store.query('alter table events disable trigger all');
      });

      afterEach(async () => {
        await store.query('delete from events');
        await store.query('insert into events select * from events_backup');
        await store.query('delete from chain_head');
        await store.query('insert into chain_head select * from chain_head_backup');
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
      });

      afterAll(async () => {
        await store.query('alter table events enable trigger all');
        await store.query('drop table events_backup');
        await store.query('drop table chain_head_backup');
      });

      async function brokenChains(): Promise<unknown> {
        return (await verifyStoreChain(store)).broken;
      }

      it('an edited payload', async () => {
        await store.query(`update events set payload = payload || ' ' where chain = ${chain} and seq = 3`);
        expect(await brokenChains()).toEqual([{ chain, seq: 3, reason: expect.stringContaining('edited') }]);
      });

      it('a deleted row', async () => {
        await store.query(`delete from events where chain = ${chain} and seq = 4`);
        expect(await brokenChains()).toEqual([{ chain, seq: 5, reason: expect.stringContaining('missing') }]);
      });

      it('an inserted row (later rows renumbered, forged hash linked to its predecessor)', async () => {
        const third = (await allEvents(store)).find((e) => e.chain === chain && e.seq === 3)!;
        await store.query(`update events set seq = -seq where chain = ${chain} and seq >= 4`);
        await store.query(`update events set seq = 1 - seq where chain = ${chain} and seq < 0`);
        const forged = { ...third, seq: 4, payload: '{"forged": true}', prevHash: third.hash };
        await store.query(
          `insert into events (chain, seq, type, operation_id, recorded_at, recorded_at_us, payload, prev_hash, hash)
           values (${chain}, 4, '${forged.type}', ${forged.operationId === null ? 'null' : `'${forged.operationId}'`}, now(), ${forged.recordedAtUs},
                   '${forged.payload}', '${forged.prevHash}', '${computeEventHash(forged)}')`,
        );
        await store.query(`update chain_head set last_seq = last_seq + 1 where id = ${chain}`);
        expect(await brokenChains()).toEqual([{ chain, seq: 5, reason: expect.stringContaining('edited') }]);
      });

      it('reordered rows', async () => {
        await store.query(`update events set seq = -seq where chain = ${chain} and seq in (5, 6)`);
        await store.query(
          `update events set seq = case seq when -5 then 6 else 5 end where chain = ${chain} and seq < 0`,
        );
        expect(await brokenChains()).toEqual([expect.objectContaining({ chain, seq: 5 })]);
      });

      it('a truncated tail', async () => {
        await store.query(`delete from events where chain = ${chain} and seq > 4`);
        expect(await brokenChains()).toEqual([
          { chain, seq: 5, reason: expect.stringContaining('truncated') },
        ]);
      });

      it('a missing head row, and an extra one', async () => {
        await store.query(`delete from chain_head where id = ${chain}`);
        expect(await brokenChains()).toEqual([{ chain, seq: 0, reason: expect.stringContaining('missing') }]);
        await store.query('alter table chain_head drop constraint chain_head_id_check');
        try {
          await store.query(`insert into chain_head select ${chain}, last_seq, last_hash from chain_head_backup
            where id = ${chain}`);
          await store.query(`insert into chain_head values (${EVENT_CHAINS}, 0, repeat('0', 64))`);
          expect(await brokenChains()).toEqual([
            expect.objectContaining({ chain: EVENT_CHAINS, reason: expect.stringContaining('extra row') }),
          ]);
        } finally {
          await store.query(`delete from chain_head where id = ${EVENT_CHAINS}`);
          await store.query(
            `alter table chain_head add constraint chain_head_id_check check (id >= 0 and id < ${EVENT_CHAINS})`,
          );
        }
      });

      it('a tail event moved to another chain, every hash and head recomputed', async () => {
        const events = await allEvents(store);
        const heads = await store.chainHeads();
        const from = events.filter((e) => e.chain === chain).at(-1)!;
        const to = (chain + 1) % EVENT_CHAINS;
        const target = heads[to]!;
        const moved = { ...from, chain: to, seq: target.lastSeq + 1, prevHash: target.lastHash };
        const hash = computeEventHash(moved);
        await store.query(`update events set chain = ${to}, seq = ${moved.seq}, prev_hash = '${moved.prevHash}',
          hash = '${hash}' where chain = ${chain} and seq = ${from.seq}`);
        await store.query(
          `update chain_head set last_seq = ${moved.seq}, last_hash = '${hash}' where id = ${to}`,
        );
        await store.query(`update chain_head set last_seq = ${from.seq - 1}, last_hash = '${from.prevHash}'
          where id = ${chain}`);
        expect(await brokenChains()).toEqual([
          { chain: to, seq: moved.seq, reason: expect.stringContaining(`belongs on chain ${chain}`) },
        ]);
      });
    });

    it('appends continue the intact chains after the tampering drills', async () => {
      const key = newKey();
      const a = await store.decide(reserve(newRun(), key));
      expectVerdict(a, 'allow');
      await store.recordOutcome(outcome(a, key, 'succeeded'));
      await expect(store.query('delete from events where seq = 1')).rejects.toThrow(/append-only/);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true });
    });
  });
}
