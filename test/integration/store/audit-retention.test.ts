/**
 * Retention of the event log (src/store/audit-retention.ts, eg_prune_cut.sql,
 * eg_prune.sql, migration 0006): the events recorded before a cut-off are archived as a verified
 * segment and removed, and what is left still verifies from each chain's recorded base. Asked of
 * it, the ways it could let the trail lie: an archive that is not whole, an event removed that no
 * archive holds, a removal outside retention, a prune racing another, a second archive that does
 * not join the first.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../../src/store/index.js';
import { archiveAndPrune, verifyAuditExportFile } from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { type Allow, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

for (const target of storeTargets()) {
  describe(`event log retention on ${target.name}`, () => {
    let store: TestStore;
    let dir: string;
    beforeAll(async () => {
      store = await openTestStore(target);
      store.exemptFromTrailCheck('its events are pruned on purpose: the trail before the cut is gone');
      dir = mkdtempSync(join(tmpdir(), 'eg-retention-'));
    });
    afterAll(async () => {
      await store?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    const count = async (sql: string): Promise<number> =>
      Number((await store.query<{ n: string }>(sql))[0]!.n);
    /** `n` allows with their outcomes: two events each. */
    const allows = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const key = newKey();
        const d = (await store.decide(reserve(newRun(), key))) as Allow;
        await store.recordOutcome(outcome(d, key, 'succeeded'));
      }
    };
    /** A cut-off between what was written so far and what comes next. */
    const cutOff = async (): Promise<Date> => {
      await sleep(5);
      const at = new Date();
      await sleep(5);
      return at;
    };

    it('archives the events before the cut-off, removes them, and the rest verifies from each base', async () => {
      await allows(20);
      const before = await cutOff();
      await allows(10);
      const total = await count('select count(*) as n from events');
      const result = await archiveAndPrune(store, before, join(dir, 'first.jsonl'));
      expect(result.archived).toBe(40);
      expect(result.removed).toBe(40);
      expect(await count('select count(*) as n from events')).toBe(total - 40);
      expect(
        await count(`select count(*) as n from events where recorded_at < '${before.toISOString()}'`),
      ).toBe(0);
      // The archive verifies offline, alone, and holds exactly what was removed.
      const archive = await verifyAuditExportFile(join(dir, 'first.jsonl'));
      expect(archive).toMatchObject({ ok: true, checked: 40, broken: [] });
      // The store verifies from its new bases, and each base is where its archived segment ends.
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
      const heads = await store.chainHeads();
      for (const cut of result.cuts) {
        const head = heads.find((h) => h.chain === cut.chain)!;
        expect({ baseSeq: head.baseSeq, baseHash: head.baseHash }).toEqual({
          baseSeq: cut.cutSeq,
          baseHash: cut.cutHash,
        });
      }
      // The gate goes on: new events append after the kept ones, and everything still verifies.
      await allows(3);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('a second archive starts exactly where the first ended, so the whole history joins up', async () => {
      const first = await store.chainHeads();
      const before = await cutOff();
      await allows(2);
      const result = await archiveAndPrune(store, before, join(dir, 'second.jsonl'));
      expect(result.archived).toBeGreaterThan(0);
      for (const cut of result.cuts) {
        const was = first.find((h) => h.chain === cut.chain)!;
        expect({ seq: cut.baseSeq, hash: cut.baseHash }).toEqual({ seq: was.baseSeq, hash: was.baseHash });
      }
      expect(await verifyAuditExportFile(join(dir, 'second.jsonl'))).toMatchObject({ ok: true });
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('refuses every removal outside retention: a kept event, and a pruned one without the base moved', async () => {
      const kept = (
        await store.query<{ chain: number; seq: string }>(
          'select chain, seq from events order by seq desc limit 1',
        )
      )[0]!;
      await expect(
        store.query(`delete from events where chain = ${kept.chain} and seq = ${kept.seq}`),
      ).rejects.toThrow(/append-only/);
      // Even with the setting retention uses: only events at or below the chain's base may go.
      await expect(
        store.query(
          `select set_config('eg.pruning', 'on', false); delete from events where chain = ${kept.chain} and seq = ${kept.seq}`,
        ),
      ).rejects.toThrow(/append-only/);
      await store.query(`select set_config('eg.pruning', 'off', false)`);
      await expect(store.query('update events set type = type')).rejects.toThrow(/append-only/);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
      // A base moved by hand (to hide what precedes it) no longer links to the first kept event.
      const moved = (await store.chainHeads()).find((h) => h.lastSeq > (h.baseSeq ?? 0))!;
      await store.query(`update chain_head set base_seq = base_seq + 1 where id = ${moved.chain}`);
      try {
        expect((await verifyStoreChain(store)).broken).toMatchObject([{ chain: moved.chain }]);
      } finally {
        await store.query(`update chain_head set base_seq = base_seq - 1 where id = ${moved.chain}`);
      }
    });

    it('a prune whose chain moved meanwhile, or whose archive ends with another event, removes nothing', async () => {
      await allows(4);
      const cuts = await store.retentionCuts(new Date(Date.now() + 60_000).toISOString());
      const cut = cuts.find((c) => c.cutSeq > c.baseSeq)!;
      const events = await count('select count(*) as n from events');
      await expect(store.pruneChain({ ...cut, cutHash: '0'.repeat(64) })).rejects.toMatchObject({
        code: 'EG_ERR_AUDIT_CHAIN_BROKEN',
      });
      await expect(store.pruneChain({ ...cut, baseSeq: cut.baseSeq + 1 })).rejects.toMatchObject({
        code: 'EG_ERR_AUDIT_CHAIN_BROKEN',
      });
      expect(await count('select count(*) as n from events')).toBe(events);
      // The real one goes, once: a second try finds the chain already moved.
      expect(await store.pruneChain(cut)).toBe(cut.cutSeq - cut.baseSeq);
      await expect(store.pruneChain(cut)).rejects.toMatchObject({ code: 'EG_ERR_AUDIT_CHAIN_BROKEN' });
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('never overwrites an archive, and removes nothing when it cannot write one', async () => {
      const events = await count('select count(*) as n from events');
      await expect(archiveAndPrune(store, new Date(), join(dir, 'first.jsonl'))).rejects.toMatchObject({
        code: 'EEXIST',
      });
      await expect(
        archiveAndPrune(store, new Date(), join(dir, 'no-such-dir', 'x.jsonl')),
      ).rejects.toMatchObject({
        code: 'ENOENT',
      });
      expect(await count('select count(*) as n from events')).toBe(events);
    });

    it('a verify that read the heads before a prune moved a base walks again and finds the store intact', async () => {
      await allows(4);
      const stale = await store.chainHeads();
      await archiveAndPrune(store, new Date(Date.now() + 60_000), join(dir, 'racing.jsonl'));
      // The heads of before the prune, once: as if the prune committed between heads and events.
      let first = true;
      const racing = {
        readEvents: store.readEvents.bind(store),
        chainHeads: async () => {
          if (!first) return store.chainHeads();
          first = false;
          return stale;
        },
      };
      expect(await verifyStoreChain(racing)).toMatchObject({ ok: true, broken: [] });
    });

    if (target.kind === 'postgres') {
      it('prunes while two other gate processes append: every event is archived or kept, never lost', async () => {
        const s1 = await store.openSibling();
        const s2 = await store.openSibling();
        let stop = false;
        const writer = async (s: Store): Promise<void> => {
          while (!stop) {
            const key = newKey();
            const d = (await s.decide(reserve(newRun(), key))) as Allow;
            await s.recordOutcome(outcome(d, key, 'succeeded'));
          }
        };
        const writers = [writer(s1), writer(s2), writer(s1), writer(s2)];
        const baseBefore = (await store.chainHeads()).reduce((n, h) => n + (h.baseSeq ?? 0), 0);
        let archived = 0;
        try {
          for (let i = 0; i < 4; i++) {
            await sleep(150);
            const r = await archiveAndPrune(store, new Date(Date.now() - 20), join(dir, `live-${i}.jsonl`));
            expect(r.removed).toBe(r.archived);
            archived += r.archived;
            expect(await verifyAuditExportFile(join(dir, `live-${i}.jsonl`))).toMatchObject({ ok: true });
          }
        } finally {
          stop = true;
          await Promise.all(writers);
          await s1.close();
          await s2.close();
        }
        const heads = await store.chainHeads();
        const baseAfter = heads.reduce((n, h) => n + (h.baseSeq ?? 0), 0);
        expect(baseAfter - baseBefore).toBe(archived);
        expect(await count('select count(*) as n from events')).toBe(
          heads.reduce((n, h) => n + h.lastSeq - (h.baseSeq ?? 0), 0),
        );
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
      }, 60_000);

      it('two prunes at once: one may be refused, nothing is lost, the store verifies', async () => {
        await allows(10);
        const sibling = await store.openSibling();
        try {
          await Promise.allSettled([
            archiveAndPrune(store, new Date(Date.now() + 60_000), join(dir, 'race-a.jsonl')),
            archiveAndPrune(sibling, new Date(Date.now() + 60_000), join(dir, 'race-b.jsonl')),
          ]);
        } finally {
          await sibling.close();
        }
        const heads = await store.chainHeads();
        expect(await count('select count(*) as n from events')).toBe(
          heads.reduce((n, h) => n + h.lastSeq - (h.baseSeq ?? 0), 0),
        );
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
      }, 60_000);
    }
  });
}
