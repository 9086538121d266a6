/**
 * Events without a chain (migration 0027 allows them): the append is to stop writing a chain, so
 * that no head row is locked from an append to its commit. Before any version writes them, every
 * reader a running gate has takes them, so gates of this version keep sealing and verifying while a
 * later one writes them beside them:
 * - the sealer seals them by snapshot in position order, each under a leaf of its own form, in the
 *   first batch after the old form too;
 * - `audit verify` rebuilds their leaves, counts them as unsealed until they are sealed, and finds
 *   one edited, deleted, moved out of its batch or slipped into it once sealed;
 * - this version's export refuses them, naming the version to use.
 * They are written here as that append writes them: a plain INSERT of the event's fields, its
 * position and transaction given by the column defaults.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditExportLines } from '../../../src/store/audit-export.js';
import { verifySealedLog } from '../../../src/store/audit-log-verify.js';
import { AuditSealer } from '../../../src/store/audit-sealer.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { decideMany, expectAllSealed, tamperEachTestAlone } from './sealing.js';

const { signer, verifier } = testAuditKey('effectgate-unchained-events');

/** `n` events without a chain, in one transaction, as an append that writes no chain does. */
async function appendUnchained(store: TestStore, n: number): Promise<void> {
  await store.query(`insert into events (type, operation_id, recorded_at, recorded_at_us, payload)
    select 'grant.created', null, clock_timestamp(), (extract(epoch from clock_timestamp()) * 1000000)::bigint,
      json_build_object('input', json_build_object('n', g))::text
    from generate_series(1, ${n}) g`);
}

/** Reads a whole export, to what it ends or fails with. */
async function exportAll(store: TestStore): Promise<void> {
  for await (const _ of auditExportLines(store, {})) {
    // read through
  }
}

async function unchainedCount(store: TestStore): Promise<number> {
  const [row] = await store.query<{ n: string }>('select count(*)::text as n from events where seq is null');
  return Number(row!.n);
}

for (const target of storeTargets()) {
  describe(`events without a chain on ${target.name}`, () => {
    let store: TestStore;
    beforeAll(async () => {
      store = await openTestStore(target);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('seals them beside chained events, counts them unsealed until then, and verifies them', async () => {
      await decideMany(store, 2);
      await appendUnchained(store, 3);
      // Nothing sealed yet: every event is unsealed, with or without a chain.
      expect((await store.unsealedEvents(await store.latestCheckpoint())).count).toBe(5);
      const sealer = new AuditSealer({ store, signer, maxEvents: 4 });
      // The empty first checkpoint, then the first batch cut after 4 of its 5 events.
      expect([await sealer.sealOnce(), await sealer.sealOnce()]).toEqual(['sealed', 'sealed']);
      expect(await store.latestCheckpoint()).toMatchObject({ size: 4, batch: { after: null } });
      expect((await store.unsealedEvents(await store.latestCheckpoint())).count).toBe(1);
      await sealer.seal();
      await expectAllSealed(store, verifier, 5);
      await appendUnchained(store, 2);
      await decideMany(store, 1);
      expect((await store.unsealedEvents(await store.latestCheckpoint())).count).toBe(3);
      await sealer.seal();
      await expectAllSealed(store, verifier, 8);
      expect((await store.latestCheckpoint())?.size).toBe(8);
      expect(await unchainedCount(store)).toBe(5);
    });

    it('takes them in the first batch after a log sealed by chain', async () => {
      const old = await openTestStore(target);
      try {
        // A backlog longer than a round is sealed by chain (the old form), then by snapshot.
        await decideMany(old, 12);
        await appendUnchained(old, 3);
        const sealer = new AuditSealer({ store: old, signer, maxEvents: 4 });
        await sealer.seal();
        const all = await old.readCheckpoints(null, 1000);
        expect(all.some((c) => c.batch === null && c.size > 0)).toBe(true);
        expect(all.at(-1)?.batch).toMatchObject({ after: null });
        await expectAllSealed(old, verifier, 15);
      } finally {
        await old.close();
      }
    });

    it('a chained event whose chain fields were cleared by hand is not sealed as one without a chain', async () => {
      const s = await openTestStore(target);
      try {
        await decideMany(s, 3);
        const sealer = new AuditSealer({ store: s, signer });
        await sealer.seal();
        const sealed = (await s.latestCheckpoint())!.size;
        await decideMany(s, 1);
        await s.query('alter table events disable trigger all');
        await s.query(`update events set chain = null, seq = null, prev_hash = null, hash = null
            where pos = (select max(pos) from events)`);
        await s.query('alter table events enable trigger all');
        expect(await sealer.seal()).toBe(0);
        expect((await s.latestCheckpoint())!.size).toBe(sealed);
        expect((await verifySealedLog(s, verifier)).unsealed.count).toBeGreaterThan(0);
      } finally {
        await s.close();
      }
    });

    it("this version's export refuses an unsealed one too, rather than leave it out", async () => {
      const s = await openTestStore(target);
      try {
        await decideMany(s, 2);
        await appendUnchained(s, 1);
        await expect(exportAll(s)).rejects.toMatchObject({ code: 'EG_ERR_STORE_SCHEMA_NEWER' });
      } finally {
        await s.close();
      }
    });

    it("this version's export refuses them, naming the version to use", async () => {
      await expect(exportAll(store)).rejects.toMatchObject({ code: 'EG_ERR_STORE_SCHEMA_NEWER' });
    });

    describe('what a superuser does to them once sealed (triggers disabled)', () => {
      tamperEachTestAlone(
        () => store,
        verifier,
        async () => {
          await appendUnchained(store, 4);
          await new AuditSealer({ store, signer }).seal();
          expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, unsealed: { count: 0 } });
        },
      );

      const lastUnchained = '(select max(pos) from events where seq is null)';

      it('one edited', async () => {
        await store.query(`update events set payload = '{"input":{"n":99}}' where pos = ${lastUnchained}`);
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems.map((p) => p.reason)).toContainEqual(
          expect.stringContaining('do not give its root'),
        );
      });

      it('one renumbered: its position is in its leaf', async () => {
        await store.query(`update events set pos = pos + 1000000 where pos = ${lastUnchained}`);
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems.map((p) => p.reason)).toContainEqual(
          expect.stringContaining('do not give its root'),
        );
      });

      it('one deleted', async () => {
        await store.query(`delete from events where pos = ${lastUnchained}`);
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems.map((p) => p.reason)).toContainEqual(
          expect.stringContaining('deleted or moved out'),
        );
      });

      it('one moved out of its batch: its transaction id rewritten to one no snapshot has seen', async () => {
        await store.query(`update events set tx = '4000000000'::xid8 where pos = ${lastUnchained}`);
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems.map((p) => p.reason)).toContainEqual(
          expect.stringContaining('deleted or moved out'),
        );
      });

      it('a chained event made to look half unchained (its hash cleared) is reported by the chain walk, which does not fail', async () => {
        await store.query(
          'update events set hash = null where pos = (select max(pos) from events where seq is not null)',
        );
        const report = await verifyStoreChain(store);
        expect(report.ok).toBe(false);
        expect(report.firstBad?.reason).toMatch(/hash/);
      });

      it('one slipped into a sealed batch', async () => {
        await store.query(`insert into events (type, operation_id, recorded_at, recorded_at_us, payload, tx)
          select type, operation_id, recorded_at, recorded_at_us, payload, tx from events where pos = ${lastUnchained}`);
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        expect(report.problems.map((p) => p.reason)).toContainEqual(expect.stringContaining('was inserted'));
      });
    });
  });
}
