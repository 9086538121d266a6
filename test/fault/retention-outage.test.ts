/**
 * The store cut at the worst moment of `audit prune` (src/store/audit-retention.ts): a removal
 * step commits and its reply is lost, through a TCP relay in front of PostgreSQL. The prune stops
 * and says so; every event is still either in the store or in the archive, the store and the
 * archive both verify, and a second run with a new archive removes the rest. Counted against the
 * chains' own head rows, not against what the prune reported.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifySealedLog } from '../../src/store/audit-log-verify.js';
import { AuditSealer } from '../../src/store/audit-sealer.js';
import { archiveAndPrune, type Store, verifyAuditExportFile } from '../../src/store/index.js';
import { openKyselyStore } from '../../src/store/open-store.js';
import { verifyStoreChain } from '../../src/store/store-events.js';
import { testAuditKey } from '../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../helpers/store.js';
import { allows } from '../integration/store/audit-history.js';
import { type Allow, newKey, newRun, outcome, reserve } from '../integration/store/inputs.js';
import { startTcpRelay, type TcpRelay } from './tcp-relay.js';

const target = storeTargets().find((t) => t.kind === 'postgres');

describe.skipIf(target === undefined)(
  `audit prune cut mid-way (postgres${target === undefined ? ': skipped, needs the PostgreSQL relay' : ''})`,
  () => {
    let store: TestStore | undefined;
    let relay: TcpRelay | undefined;
    let relayed: Store | undefined;
    let dir = '';

    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'eg-retention-fault-'));
    });

    afterEach(async () => {
      relay?.up();
      await relayed?.close().catch(() => undefined);
      await relay?.close();
      await store?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('a removal step commits and its reply is lost: nothing is lost, both verify, a second run removes the rest', async () => {
      store = await openTestStore(target!);
      store.exemptFromTrailCheck('its events are pruned on purpose');
      for (let i = 0; i < 30; i++) {
        const key = newKey();
        const d = (await store.decide(reserve(newRun(), key))) as Allow;
        await store.recordOutcome(outcome(d, key, 'succeeded'));
      }
      await sleep(5);
      const before = new Date();
      relay = await startTcpRelay();
      relayed = await openKyselyStore({ url: relay.url(store.url), migrate: false });
      const total = (await store.chainHeads()).reduce((n, h) => n + h.lastSeq, 0);

      const trapped = relay.trigger({ pattern: 'eg_prune($1)', when: 'after-reply', action: 'down' });
      const first = archiveAndPrune(relayed, before, join(dir, 'first.jsonl'));
      await trapped;
      await expect(first).rejects.toMatchObject({ code: 'EG_ERR_AUDIT_CHAIN_BROKEN' });
      relay.up();

      // One step committed; the archive holds every event of every chain before the cut-off.
      const archive = await verifyAuditExportFile(join(dir, 'first.jsonl'));
      expect(archive).toMatchObject({ ok: true, broken: [] });
      const heads = await store.chainHeads();
      const removed = heads.reduce((n, h) => n + (h.baseSeq ?? 0), 0);
      expect(removed).toBeGreaterThan(0);
      expect(removed).toBeLessThan(archive.checked);
      const kept = Number((await store.query<{ n: string }>('select count(*) as n from events'))[0]!.n);
      expect(kept + removed).toBe(total);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });

      // Again, with a new archive: the rest goes, and nothing before the cut-off is left.
      const second = await archiveAndPrune(relayed, before, join(dir, 'second.jsonl'));
      expect(second.removed).toBe(second.archived);
      expect(removed + second.removed).toBe(archive.checked);
      expect(
        Number(
          (
            await store.query<{ n: string }>(
              `select count(*) as n from events where recorded_at < '${before.toISOString()}'`,
            )
          )[0]!.n,
        ),
      ).toBe(0);
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });

    it('a sealed log cut at a checkpoint, a removal step committed and its reply lost: the second run cuts the rest there, and the seal verifies throughout', async () => {
      store = await openTestStore(target!);
      store.exemptFromTrailCheck('its events are pruned on purpose');
      const { signer, verifier } = testAuditKey('effectgate-retention-fault');
      const sealer = new AuditSealer({ store, signer, maxEvents: 8 });
      await allows(store, 30);
      await sealer.seal();
      const cut = (await store.latestCheckpoint())!;
      await sleep(5);
      const before = new Date();
      await sleep(5);
      await allows(store, 3);
      await sealer.seal();
      relay = await startTcpRelay();
      relayed = await openKyselyStore({ url: relay.url(store.url), migrate: false });
      const total = (await store.chainHeads()).reduce((n, h) => n + h.lastSeq, 0);

      const trapped = relay.trigger({ pattern: 'eg_prune($1)', when: 'after-reply', action: 'down' });
      const first = archiveAndPrune(relayed, before, join(dir, 'first.jsonl'));
      await trapped;
      await expect(first).rejects.toMatchObject({ code: 'EG_ERR_AUDIT_CHAIN_BROKEN' });
      relay.up();

      // Some chains are cut at the checkpoint, the others not yet; nothing is lost, all verifies.
      expect(await verifyAuditExportFile(join(dir, 'first.jsonl'), { verifier })).toMatchObject({
        ok: true,
        checked: cut.size,
        seal: { latest: { size: cut.size } },
      });
      const removed = (await store.chainHeads()).reduce((n, h) => n + (h.baseSeq ?? 0), 0);
      expect(removed).toBeGreaterThan(0);
      expect(removed).toBeLessThan(cut.size);
      const count = async (): Promise<number> =>
        Number((await store!.query<{ n: string }>('select count(*) as n from events'))[0]!.n);
      expect((await count()) + removed).toBe(total);
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, problems: [] });
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });

      // Again: the same checkpoint, the rest of what it sealed, from a file that verifies alone.
      const second = await archiveAndPrune(relayed, before, join(dir, 'second.jsonl'));
      expect(second).toMatchObject({
        checkpoint: cut.size,
        archived: cut.size - removed,
        removed: cut.size - removed,
      });
      expect(await verifyAuditExportFile(join(dir, 'second.jsonl'), { verifier })).toMatchObject({
        ok: true,
      });
      for (const h of await store.chainHeads()) expect(h.baseSeq ?? 0).toBe(cut.heads[String(h.chain)] ?? 0);
      expect(await count()).toBe(total - cut.size);
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, problems: [] });
      expect(await verifyStoreChain(store)).toMatchObject({ ok: true, broken: [] });
    });
  },
);
