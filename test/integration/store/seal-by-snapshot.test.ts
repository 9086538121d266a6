/**
 * The sealer reads the log in batches by snapshot (migration 0026), as the projection does: a
 * checkpoint seals the events its batch's target snapshot sees and the previous batch's did not,
 * in `pos` order, and names that batch so `audit verify` finds its events again. What that must
 * hold, against the real store:
 * - a long batch goes over several checkpoints, each of which verifies, and the next batch starts
 *   where the last one ended; a transaction's events may be split between two of them;
 * - an event whose transaction commits after the sealer's snapshot is sealed by a later
 *   checkpoint, never passed over, even when its transaction id is older than events already sealed;
 *   and a chain whose events' transaction ids run against their order is sealed in that order;
 * - a store upgraded with events written before they had an order (no `tx`) seals those by chain
 *   first, then by snapshot, sealing no event twice; an earlier version's sealer can no longer
 *   extend the log;
 * - an event moved out of its batch (its `tx` rewritten) or slipped into a sealed one is found.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainOf } from '../../../src/store/audit-chain.js';
import { verifySealedLog } from '../../../src/store/audit-log-verify.js';
import { AuditSealer } from '../../../src/store/audit-sealer.js';
import type { CheckpointRecord } from '../../../src/store/types.js';
import { uuidv7 } from '../../../src/store/uuidv7.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { newKey, newRun, reserve } from './inputs.js';
import { decideMany, expectAllSealed, tamperEachTestAlone } from './sealing.js';

const { signer, verifier } = testAuditKey('effectgate-seal-by-snapshot');

async function eventCount(store: TestStore): Promise<number> {
  const [row] = await store.query<{ n: string }>('select count(*)::text as n from events');
  return Number(row!.n);
}

async function checkpoints(store: TestStore): Promise<CheckpointRecord[]> {
  return store.readCheckpoints(null, 1000);
}

for (const target of storeTargets()) {
  describe(`sealing by snapshot on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('seals a long batch over several checkpoints that each verify, and starts the next batch where it ended', async () => {
      // A short log is sealed by snapshot from the first batch on (a long one by chain first).
      await decideMany(store, 2);
      expect(await new AuditSealer({ store, signer, maxEvents: 8 }).seal()).toBe(2);
      const [empty, start] = await checkpoints(store);
      expect(empty).toMatchObject({ size: 0, batch: null });
      expect(start).toMatchObject({ size: 2, batch: { after: null, through: null } });
      const target0 = start!.batch!.target;

      await decideMany(store, 30);
      expect(await new AuditSealer({ store, signer, maxEvents: 8 }).seal()).toBe(4);
      const batches = (await checkpoints(store)).slice(2);
      expect(batches.map((c) => c.size)).toEqual([10, 18, 26, 32]);
      // One batch, taken eight events at a time: the same snapshots, `through` growing, the last
      // checkpoint taking the rest of it.
      const target1 = batches[0]!.batch!.target;
      for (const [i, c] of batches.entries()) {
        expect(c.batch).toMatchObject({ after: target0, target: target1 });
        if (i < batches.length - 1)
          expect(c.batch!.through).toBeGreaterThan(i === 0 ? 0 : batches[i - 1]!.batch!.through!);
      }
      expect(batches[3]!.batch!.through).toBeNull();

      await decideMany(store, 3);
      await new AuditSealer({ store, signer }).seal();
      const latest = (await store.latestCheckpoint())!;
      expect(latest.size).toBe(35);
      expect(latest.batch).toMatchObject({ after: target1, through: null });
      expect(await verifySealedLog(store, verifier)).toMatchObject({
        ok: true,
        problems: [],
        rehashed: 35,
        unsealed: { count: 0 },
      });

      // A batch sealed in part: the rest of it, and what came after its snapshot, are unsealed.
      await decideMany(store, 10);
      const partial = new AuditSealer({ store, signer, maxEvents: 4 });
      expect(await partial.sealOnce()).toBe('sealed');
      await decideMany(store, 1);
      expect((await store.latestCheckpoint())!).toMatchObject({
        size: 39,
        batch: { after: latest.batch!.target },
      });
      expect((await store.latestCheckpoint())!.batch!.through).not.toBeNull();
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, unsealed: { count: 7 } });
      await partial.seal();
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, unsealed: { count: 0 } });

      // Calls made together share a transaction (group-commit.ts): its events may be split over
      // checkpoints by `pos`, and each still verifies.
      const before = (await store.latestCheckpoint())!.size;
      const [last] = await store.query<{ pos: string }>('select max(pos)::text as pos from events');
      await Promise.all(Array.from({ length: 6 }, () => store.decide(reserve(newRun(), newKey()))));
      const [shared] = await store.query<{ n: string }>(
        `select count(*)::text as n from events where pos > ${last!.pos} group by tx order by count(*) desc limit 1`,
      );
      expect(Number(shared!.n)).toBeGreaterThan(1);
      await new AuditSealer({ store, signer, maxEvents: 1 }).seal();
      const sizes = (await checkpoints(store)).map((c) => c.size).filter((n) => n > before);
      expect(sizes).toEqual([1, 2, 3, 4, 5, 6].map((n) => before + n));
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, unsealed: { count: 0 } });
    });

    if (target.kind === 'postgres') {
      it('seals in a later checkpoint an event whose transaction commits after the sealer looked, though its id is older than events sealed before it', async () => {
        // The log sealed by snapshot already (whichever tests ran before).
        await decideMany(store, 1);
        await new AuditSealer({ store, signer }).seal();
        expect((await store.latestCheckpoint())!.batch).not.toBeNull();
        const older = new pg.Client({ connectionString: store.url });
        await older.connect();
        try {
          // Its transaction id taken first, as a batch does at its first write; its event later.
          await older.query('begin');
          const olderTx = (await older.query<{ tx: string }>('select pg_current_xact_id()::text as tx'))
            .rows[0]!.tx;
          await decideMany(store, 2);
          // One event per checkpoint: the batch goes on over two, its snapshot listing the older
          // transaction as running.
          const sealer = new AuditSealer({ store, signer, maxEvents: 1 });
          expect(await sealer.seal()).toBe(2);
          await older.query('select eg_decide($1)', [JSON.stringify(reserve(newRun(), newKey()))]);
          await older.query('commit');

          const [late] = await store.query<{ younger: string }>(
            `select count(*)::text as younger from events where tx > '${olderTx}'::xid8`,
          );
          expect(Number(late!.younger)).toBeGreaterThanOrEqual(2);
          const before = await verifySealedLog(store, verifier);
          expect(before).toMatchObject({ ok: true, unsealed: { count: 1 } });
          expect(await sealer.seal()).toBe(1);
          const after = await verifySealedLog(store, verifier);
          expect(after).toMatchObject({ ok: true, unsealed: { count: 0 } });
          expect(after.latest!.size).toBe(await eventCount(store));
        } finally {
          await older.query('rollback').catch(() => undefined);
          await older.end();
        }
      });
    }

    if (target.kind === 'postgres') {
      it('seals, one event at a time, two events of one chain whose transactions committed in the other order than their ids', async () => {
        await decideMany(store, 1);
        await new AuditSealer({ store, signer }).seal();
        const chain = 7;
        const onChain = (): string => {
          for (;;) {
            const id = uuidv7();
            if (chainOf(id) === chain) return id;
          }
        };
        const proposal = (): string =>
          JSON.stringify(
            reserve(newRun(), newKey(), {
              decisionId: onChain(),
              newOperationId: onChain(),
              newAttemptId: onChain(),
            }),
          );
        const [first, second] = [0, 1].map(() => new pg.Client({ connectionString: store.url }));
        await Promise.all([first!.connect(), second!.connect()]);
        try {
          // The second takes its id first; the first appends its event on the chain and commits;
          // then the second appends the chain's next one: seq order and id order differ.
          await second!.query('begin');
          await second!.query('select pg_current_xact_id()');
          await first!.query('select eg_decide($1)', [proposal()]);
          await second!.query('select eg_decide($1)', [proposal()]);
          await second!.query('commit');
          const [last, previous] = await store.query<{ tx: string }>(
            `select tx::text as tx from events where chain = ${chain} order by seq desc limit 2`,
          );
          expect(BigInt(last!.tx)).toBeLessThan(BigInt(previous!.tx));

          const refusals: string[] = [];
          const sealer = new AuditSealer({
            store,
            signer,
            maxEvents: 1,
            logger: { warn: () => undefined, error: (fields) => refusals.push(String(fields['reason'])) },
          });
          expect(await sealer.seal()).toBe(2);
          expect(refusals).toEqual([]);
          expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, unsealed: { count: 0 } });
        } finally {
          await second!.query('rollback').catch(() => undefined);
          await Promise.all([first!.end(), second!.end()]);
        }
      });
    }

    describe('what a superuser does to sealed batches (triggers disabled)', () => {
      tamperEachTestAlone(
        () => store,
        verifier,
        async () => {
          await decideMany(store, 4);
          await new AuditSealer({ store, signer }).seal();
        },
      );

      it('an event moved out of its batch: its transaction id rewritten to one no snapshot has seen', async () => {
        await store.query(
          `update events set tx = '4000000000'::xid8 where pos = (select max(pos) from events)`,
        );
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems.map((p) => p.reason)).toContainEqual(expect.stringContaining('was deleted'));
      });

      it('an event slipped into a sealed batch, on a chain of its own', async () => {
        const [free] = await store.query<{ id: number }>(
          'select id from chain_head where last_seq = 0 order by id limit 1',
        );
        await store.query(`insert into events (chain, seq, type, operation_id, payload, prev_hash, hash, recorded_at, recorded_at_us, tx, pos)
          select ${free!.id}, 1, type, operation_id, payload, repeat('0', 64), hash, recorded_at, recorded_at_us, tx, nextval('events_pos')
          from events where pos = (select max(pos) from events)`);
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems.map((p) => p.reason)).toContainEqual(expect.stringContaining('was inserted'));
      });
    });

    it('an event slipped into the end of a batch sealed over several checkpoints is found by its last one, which reads the batch again from where the one before it ended', async () => {
      const s = await openTestStore(target);
      try {
        await decideMany(s, 2);
        await new AuditSealer({ store: s, signer }).seal();
        await decideMany(s, 10);
        await new AuditSealer({ store: s, signer, maxEvents: 4 }).seal();
        const batch = (await checkpoints(s)).slice(2);
        expect(batch.map((c) => [c.size, c.batch!.through === null])).toEqual([
          [6, false],
          [10, false],
          [12, true],
        ]);
        expect(await verifySealedLog(s, verifier)).toMatchObject({ ok: true, rehashed: 12 });
        await s.query('alter table events disable trigger all');
        await s.query(`insert into events (chain, seq, type, operation_id, payload, prev_hash, hash, recorded_at,
            recorded_at_us, tx)
          select chain, seq + 1000, type, operation_id, payload, prev_hash, hash, recorded_at, recorded_at_us, tx
          from events where pos = (select max(pos) from events)`);
        await s.query('alter table events enable trigger all');
        const report = await verifySealedLog(s, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems).toContainEqual({
          size: 12,
          reason: expect.stringContaining('holds more events than the 2 it sealed'),
        });
      } finally {
        await s.close();
      }
    });

    it('seals a long log by chain first, then by snapshot', async () => {
      const long = await openTestStore(target);
      try {
        await decideMany(long, 20);
        await new AuditSealer({ store: long, signer, maxEvents: 8 }).seal();
        const all = await checkpoints(long);
        const byChain = all.filter((c) => c.batch === null);
        // A round by chain takes a share of every chain's backlog (here one event each): more than
        // one batch's worth at once, until what is left fits one batch.
        expect(byChain[0]!.size).toBe(0);
        expect(byChain[1]!.size).toBeGreaterThan(8);
        expect(all.slice(0, byChain.length)).toEqual(byChain);
        await expectAllSealed(long, verifier, 20);
      } finally {
        await long.close();
      }
    });

    it('upgrades a store whose events had no order: seals those by chain, then by snapshot, none twice; an earlier sealer can no longer extend it', async () => {
      const old = await openTestStore(target);
      try {
        await decideMany(old, 12);
        // As events from before migration 0024 look once migration 0027 has numbered them: no
        // transaction id, a position below every other.
        await old.query('alter table events disable trigger all');
        await old.query('update events set tx = null, pos = pos - 1000000');
        await old.query('alter table events enable trigger all');
        // Written after the upgrade, before its first seal: sealed by chain with the rest.
        await decideMany(old, 3);
        const sealer = new AuditSealer({ store: old, signer });
        await sealer.seal();
        await decideMany(old, 2);
        await sealer.seal();
        const all = await checkpoints(old);
        expect(all.map((c) => [c.size, c.batch === null])).toEqual([
          [0, true],
          [15, true],
          [17, false],
        ]);
        expect(all[2]!.batch).toMatchObject({ after: null });
        await expectAllSealed(old, verifier, 17);
        const latest = all[2]!;
        await decideMany(old, 1);
        await expect(
          old.appendCheckpoint(latest.size, { ...latest, size: latest.size + 1, batch: null }),
        ).rejects.toThrow(/sealed by snapshot/);
      } finally {
        await old.close();
      }
    });
  });
}
