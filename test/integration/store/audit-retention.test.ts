/**
 * Retention of the event log (src/store/audit-retention.ts, eg_prune_cut.sql,
 * eg_prune.sql, migration 0006): the events sealed before a cut-off (recorded before it, in a log
 * never sealed) are archived as a verified segment and removed, and what is left still verifies
 * from each chain's recorded base and from the checkpoint the log was cut at. Asked of it, the
 * ways it could let the trail lie: an archive that is not whole, an event removed that no archive
 * holds, a removal outside retention, a prune racing another or the sealer, a second archive that
 * does not join the first.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySealedLog } from '../../../src/store/audit-log-verify.js';
import { AuditSealer } from '../../../src/store/audit-sealer.js';
import type { Store } from '../../../src/store/index.js';
import {
  archiveAndPrune,
  auditExportLines,
  verifyAuditExport,
  verifyAuditExportFile,
} from '../../../src/store/index.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { allows } from './audit-history.js';
import { type Allow, newKey, newRun, outcome, reserve, sleep } from './inputs.js';

const { signer, verifier } = testAuditKey('effectgate-retention');

/** A cut-off between what was written so far and what comes next. */
async function cutOff(): Promise<Date> {
  await sleep(5);
  const at = new Date();
  await sleep(5);
  return at;
}

/** The notes of an export file's checkpoint lines, in order. */
function checkpointNotes(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{"checkpoint":'))
    .map((l) => (JSON.parse(l) as { checkpoint: string }).checkpoint);
}

for (const target of storeTargets()) {
  describe(`retention of a sealed log on ${target.name}: cut at a checkpoint`, () => {
    let store: TestStore;
    let dir: string;
    let sealer: AuditSealer;
    beforeAll(async () => {
      store = await openTestStore(target);
      store.exemptFromTrailCheck('its events are pruned on purpose: the trail before the cut is gone');
      dir = mkdtempSync(join(tmpdir(), 'eg-retention-sealed-'));
      sealer = new AuditSealer({ store, signer, maxEvents: 8 });
    });
    afterAll(async () => {
      await store?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('archives what the last checkpoint sealed before the cut-off, removes it, and the store verifies on from that checkpoint', async () => {
      await allows(store, 10);
      await sealer.seal();
      const cut = (await store.latestCheckpoint())!;
      const before = await cutOff();
      await allows(store, 5);
      await sealer.seal();
      const total = Number((await store.query<{ n: string }>('select count(*) as n from events'))[0]!.n);
      const file = join(dir, 'first.jsonl');
      const result = await archiveAndPrune(store, before, file);
      expect(result).toMatchObject({ checkpoint: cut.size, archived: cut.size, removed: cut.size });
      // Every chain's base is its seq in that checkpoint: exactly what it and those before sealed.
      for (const h of await store.chainHeads()) expect(h.baseSeq ?? 0).toBe(cut.heads[String(h.chain)] ?? 0);
      expect(Number((await store.query<{ n: string }>('select count(*) as n from events'))[0]!.n)).toBe(
        total - cut.size,
      );
      const archive = await verifyAuditExportFile(file, { verifier, witnesses: [cut.note] });
      expect(archive).toMatchObject({
        ok: true,
        checked: cut.size,
        seal: { sealed: cut.size, unsealed: 0, problems: [], latest: { size: cut.size } },
      });
      expect(checkpointNotes(file).at(-1)).toBe(cut.note);
      // Again with the same cut-off: cut there already, so nothing to do and no archive.
      const again = join(dir, 'again.jsonl');
      expect(await archiveAndPrune(store, before, again)).toMatchObject({
        archived: 0,
        checkpoint: null,
        cuts: [],
      });
      expect(() => readFileSync(again)).toThrow(/ENOENT/);
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, problems: [] });
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('the next archive starts at the checkpoint the last one ended at, and the live export at its end', async () => {
      const first = checkpointNotes(join(dir, 'first.jsonl')).at(-1)!;
      await sealer.seal();
      // An archive is never written over: refused before anything is removed.
      const heads = await store.chainHeads();
      await expect(archiveAndPrune(store, new Date(), join(dir, 'first.jsonl'))).rejects.toMatchObject({
        code: 'EEXIST',
      });
      expect(await store.chainHeads()).toEqual(heads);
      const before = await cutOff();
      await allows(store, 3);
      const file = join(dir, 'second.jsonl');
      const result = await archiveAndPrune(store, before, file);
      expect(result.archived).toBeGreaterThan(0);
      const notes = checkpointNotes(file);
      expect(notes[0]).toBe(first);
      expect(await verifyAuditExportFile(file, { verifier })).toMatchObject({
        ok: true,
        seal: { before: 0 },
      });
      await sealer.seal();
      const live: string[] = [];
      for await (const line of auditExportLines(store)) live.push(line.slice(0, -1));
      expect((JSON.parse(live[1]!) as { checkpoint?: string }).checkpoint).toBe(notes.at(-1));
      expect(await verifyAuditExport(live, { verifier })).toMatchObject({ ok: true, seal: { before: 0 } });
    });

    it('nothing sealed before the cut-off past the last cut: nothing removed, no archive written', async () => {
      const file = join(dir, 'none.jsonl');
      const heads = await store.chainHeads();
      expect(await archiveAndPrune(store, new Date(0), file)).toEqual({
        archived: 0,
        removed: 0,
        chains: 0,
        checkpoint: null,
        cuts: [],
      });
      expect(() => readFileSync(file)).toThrow(/ENOENT/);
      expect(await store.chainHeads()).toEqual(heads);
    });

    if (target.kind === 'postgres') {
      it('prunes while two other gate processes append and the sealer seals: every archive joins the next, nothing is lost', async () => {
        const s1 = await store.openSibling();
        const s2 = await store.openSibling();
        let stop = false;
        const writer = async (s: Store): Promise<void> => {
          while (!stop) await allows(s, 1);
        };
        const sealing = async (): Promise<void> => {
          while (!stop) {
            await sealer.seal();
            await sleep(20);
          }
        };
        const running = [writer(s1), writer(s2), writer(s1), sealing()];
        const files: string[] = [];
        try {
          // Until three archives (a prune finds nothing new when no checkpoint was sealed since).
          for (let i = 0; i < 20 && files.length < 3; i++) {
            await sleep(150);
            const file = join(dir, `sealed-${i}.jsonl`);
            const r = await archiveAndPrune(store, new Date(Date.now() - 20), file);
            expect(r.removed).toBe(r.archived);
            if (r.checkpoint === null) continue;
            files.push(file);
            expect(await verifyAuditExportFile(file, { verifier })).toMatchObject({ ok: true });
          }
        } finally {
          stop = true;
          await Promise.all(running);
          await s1.close();
          await s2.close();
        }
        expect(files.length).toBeGreaterThan(1);
        for (let i = 1; i < files.length; i++) {
          expect(checkpointNotes(files[i]!)[0]).toBe(checkpointNotes(files[i - 1]!).at(-1));
        }
        const heads = await store.chainHeads();
        expect(Number((await store.query<{ n: string }>('select count(*) as n from events'))[0]!.n)).toBe(
          heads.reduce((n, h) => n + h.lastSeq - (h.baseSeq ?? 0), 0),
        );
        expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, problems: [] });
        expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
      }, 60_000);
    }
  });

  describe(`retention of a log never sealed on ${target.name}: cut by time`, () => {
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

    it('archives the events before the cut-off, removes them, and the rest verifies from each base', async () => {
      await allows(store, 20);
      const before = await cutOff();
      await allows(store, 10);
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
      await allows(store, 3);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('a second archive starts exactly where the first ended, so the whole history joins up', async () => {
      const first = await store.chainHeads();
      const before = await cutOff();
      await allows(store, 2);
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
      await allows(store, 4);
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
      await allows(store, 4);
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
        await allows(store, 10);
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
