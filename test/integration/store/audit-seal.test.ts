import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chainOf } from '../../../src/store/audit-chain.js';
import { verifySealedLog } from '../../../src/store/audit-log-verify.js';
import { archiveAndPrune } from '../../../src/store/audit-retention.js';
import { AuditSealer } from '../../../src/store/audit-sealer.js';
import { checkpointOrigin, readCheckpointNote } from '../../../src/store/checkpoint-note.js';
import { CHECKSUM_SETTING } from '../../../src/store/functions/index.js';
import { generateNoteKey, parseSignerKey } from '../../../src/store/signed-note.js';
import { checkWitnessed } from '../../../src/store/witness-check.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { writeHistory } from './audit-history.js';
import { newKey, newRun, outcome, reserve, sleep } from './inputs.js';

/*
 * The sealed log over the real store: what a sealer writes, what verification finds when someone
 * with the database's superuser rights edits, deletes, truncates or rewrites behind the gate's
 * back, and what a witness's kept checkpoint still proves.
 */
const { signer, verifier } = testAuditKey('effectgate-audit-test');
const other = parseSignerKey(generateNoteKey('effectgate-audit-other').signerKey);

async function events(store: TestStore): Promise<number> {
  const [row] = await store.query<{ n: string }>('select count(*)::text as n from events');
  return Number(row!.n);
}

for (const target of storeTargets()) {
  describe(`the sealed log on ${target.name}`, () => {
    let store: TestStore;
    let chain: number;

    beforeAll(async () => {
      store = await openTestStore(target);
      store.exemptFromTrailCheck('its events are edited, deleted and reordered on purpose');
      const { retried } = await writeHistory(store);
      chain = chainOf(retried.operationId);
    });

    afterAll(async () => {
      await store?.close();
    });

    it('seals every committed event into signed checkpoints that verify, and says when none is left unsealed', async () => {
      // Past a hundred events, so checkpoint sizes pass from two digits to three.
      for (let i = 0; i < 100; i++) await store.decide(reserve(newRun(), newKey()));
      const before = await verifySealedLog(store, verifier);
      expect(before).toMatchObject({ ok: true, checkpoints: 0, latest: null });
      expect(before.unsealed.count).toBe(await events(store));
      expect(before.unsealed.oldestAt).not.toBeNull();

      const sealer = new AuditSealer({ store, signer, maxEvents: 8 });
      // Eight events per checkpoint at most: the history takes several, after the size-0 one, and
      // their sizes pass from two digits to three (checkpoints are ordered as numbers).
      expect(await sealer.seal()).toBeGreaterThan(2);
      const sizes = (await store.readCheckpoints(null, 1000)).map((c) => c.size);
      expect(sizes).toEqual([...sizes].sort((a, b) => a - b));
      expect(sizes.some((n) => n > 0 && n < 100) && sizes.some((n) => n >= 100)).toBe(true);
      expect((await store.latestCheckpoint())!.size).toBe(sizes[sizes.length - 1]);
      const report = await verifySealedLog(store, verifier);
      expect(report).toMatchObject({
        ok: true,
        signatures: 'checked',
        problems: [],
        unsealed: { count: 0, oldestAt: null },
      });
      expect(report.latest!.size).toBe(await events(store));
      expect(report.rehashed).toBe(await events(store));
      const note = readCheckpointNote((await store.latestCheckpoint())!.note, [verifier]);
      expect(note).toMatchObject({
        origin: checkpointOrigin(await store.auditLogId()),
        size: report.latest!.size,
        rootHex: report.latest!.root,
        verified: true,
      });
      expect(await sealer.sealOnce()).toBe('idle');
    });

    it('seals new events in a later checkpoint, and reports them unsealed until then', async () => {
      const k = newKey();
      const allowed = await store.decide(reserve(newRun(), k));
      const pending = await verifySealedLog(store, verifier);
      expect(pending.ok).toBe(true);
      expect(pending.unsealed.count).toBe(1);
      if (allowed.verdict === 'allow') await store.recordOutcome(outcome(allowed, k, 'succeeded'));
      await new AuditSealer({ store, signer }).seal();
      const sealed = await verifySealedLog(store, verifier);
      expect(sealed).toMatchObject({ ok: true, unsealed: { count: 0 } });
      expect(sealed.latest!.size).toBe(await events(store));
    });

    it('keeps one line of checkpoints when two sealers race (two gates on one database)', async () => {
      const sibling = target.kind === 'postgres' ? await store.openSibling() : store;
      try {
        for (let i = 0; i < 6; i++) await store.decide(reserve(newRun(), newKey()));
        const results = await Promise.all([
          new AuditSealer({ store, signer, maxEvents: 8 }).seal(),
          new AuditSealer({ store: sibling, signer, maxEvents: 8 }).seal(),
        ]);
        expect(results.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
        expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, unsealed: { count: 0 } });
      } finally {
        if (sibling !== store) await sibling.close();
      }
    });

    it("checks a witness's kept checkpoint: the same size and root, signed by the audit key", async () => {
      const kept = (await store.latestCheckpoint())!.note;
      expect(await checkWitnessed(store, kept, verifier)).toEqual({
        ok: true,
        size: expect.any(Number),
        reason: null,
      });
      const forged = kept.replace(
        /\n([A-Za-z0-9+/=]{44})\n/,
        `\n${Buffer.alloc(32, 7).toString('base64')}\n`,
      );
      expect(forged).not.toBe(kept);
      // Its signature no longer checks; read without the key, its root is not the store's.
      expect((await checkWitnessed(store, forged, verifier)).reason).toContain('not signed by the audit key');
      expect((await checkWitnessed(store, forged, null)).reason).toContain('another root');
      const ahead = kept.replace(/\n(\d+)\n/, (_m, n: string) => `\n${Number(n) + 1000}\n`);
      expect((await checkWitnessed(store, ahead, null)).reason).toContain('ends before size');
    });

    it('refuses to seal a log that does not verify, and seals it again once it does', async () => {
      const fresh = await store.decide(reserve(newRun(), newKey()));
      if (fresh.verdict !== 'allow') throw new Error(`expected allow, got ${fresh.verdict}`);
      const where = `(chain, seq) = (select id, last_seq from chain_head where id = ${chainOf(fresh.operationId)})`;
      await store.query('alter table events disable trigger all');
      try {
        await store.query(`update events set payload = payload || ' ' where ${where}`);
        const errors: string[] = [];
        const sealer = new AuditSealer({
          store,
          signer,
          logger: { warn: () => undefined, error: (fields) => errors.push(String(fields['reason'])) },
        });
        const latest = (await store.latestCheckpoint())!.size;
        expect(await sealer.sealOnce()).toBe('refused');
        expect(errors).toEqual([expect.stringContaining('was edited')]);
        expect((await store.latestCheckpoint())!.size).toBe(latest);
        await store.query(`update events set payload = left(payload, -1) where ${where}`);
        expect(await sealer.sealOnce()).toBe('sealed');
      } finally {
        await store.query('alter table events enable trigger all');
      }
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true });
    });

    it('refuses every change to a checkpoint row', async () => {
      await expect(store.query("update audit_checkpoints set root = repeat('0', 64)")).rejects.toThrow(
        /append-only/,
      );
      await expect(store.query('delete from audit_checkpoints')).rejects.toThrow(/append-only/);
      await expect(store.query('truncate audit_checkpoints')).rejects.toThrow(/append-only/);
    });

    describe('what a superuser does behind the gate (triggers disabled)', () => {
      beforeAll(async () => {
        await store.query('create table events_backup as select * from events');
        await store.query('create table chain_head_backup as select * from chain_head');
        await store.query('create table checkpoints_backup as select * from audit_checkpoints');
        await store.query('alter table events disable trigger all');
        await store.query('alter table audit_checkpoints disable trigger all');
      });

      afterEach(async () => {
        await store.query('delete from events');
        await store.query('insert into events select * from events_backup');
        await store.query('delete from chain_head');
        await store.query('insert into chain_head select * from chain_head_backup');
        await store.query('delete from audit_checkpoints');
        await store.query('insert into audit_checkpoints select * from checkpoints_backup');
        expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true });
      });

      afterAll(async () => {
        await store.query('alter table events enable trigger all');
        await store.query('alter table audit_checkpoints enable trigger all');
        await store.query('drop table events_backup');
        await store.query('drop table chain_head_backup');
        await store.query('drop table checkpoints_backup');
      });

      async function reasons(): Promise<string[]> {
        const report = await verifySealedLog(store, verifier);
        expect(report.ok).toBe(false);
        return report.problems.map((p) => p.reason);
      }

      it('an edited sealed event, its chain hashes rewritten to match', async () => {
        // The chain alone would not show it: every hash after it recomputed, the head moved along.
        await store.query(`update events set payload = payload || ' ' where chain = ${chain} and seq = 2`);
        const rows = await store.query<{ seq: string }>(
          `select seq::text as seq from events where chain = ${chain} and seq >= 2 order by seq`,
        );
        for (const { seq } of rows) {
          await store.query(`update events e set prev_hash = coalesce((select hash from events p where p.chain = e.chain and p.seq = e.seq - 1), repeat('0', 64))
            where chain = ${chain} and seq = ${seq}`);
          await store.query(`update events set hash = encode(sha256(convert_to(prev_hash || E'\\n' || chain::text || E'\\n' || seq::text || E'\\n' || type || E'\\n' ||
            coalesce(operation_id, '') || E'\\n' || recorded_at_us::text || E'\\n' || payload, 'UTF8')), 'hex') where chain = ${chain} and seq = ${seq}`);
        }
        await store.query(
          `update chain_head set last_hash = (select hash from events where chain = ${chain} order by seq desc limit 1) where id = ${chain}`,
        );
        expect(await reasons()).toContainEqual(expect.stringContaining('an event was edited or reordered'));
      });

      it('a deleted sealed event', async () => {
        await store.query(`delete from events where chain = ${chain} and seq = 3`);
        expect(await reasons()).toContainEqual(
          expect.stringContaining(`event 3 of chain ${chain} was deleted`),
        );
      });

      it('a truncated tail, the head row moved back with it', async () => {
        const [head] = await store.query<{ last_seq: string }>(
          `select last_seq::text as last_seq from chain_head where id = ${chain}`,
        );
        const last = Number(head!.last_seq);
        await store.query(`delete from events where chain = ${chain} and seq = ${last}`);
        await store.query(
          `update chain_head set last_seq = ${last - 1}, last_hash = (select hash from events where chain = ${chain} and seq = ${last - 1}) where id = ${chain}`,
        );
        expect(await reasons()).toContainEqual(expect.stringContaining('tail truncated'));
      });

      it('a checkpoint re-signed by another key', async () => {
        const latest = (await store.latestCheckpoint())!;
        const body = latest.note.slice(0, latest.note.lastIndexOf('\n\n') + 1);
        const { signNote } = await import('../../../src/store/signed-note.js');
        await store.query(
          `update audit_checkpoints set note = '${signNote(body, [other])}' where size = ${latest.size}`,
        );
        expect(await reasons()).toEqual([expect.stringContaining('not signed by the audit key')]);
        // Without the key, only the roots are checked, and they still match.
        expect(await verifySealedLog(store, null)).toMatchObject({ ok: true, signatures: 'unchecked' });
      });

      it('checkpoints rewritten by hand: heads, a removed one', async () => {
        const latest = (await store.latestCheckpoint())!;
        await store.query(`update audit_checkpoints set heads = '{}' where size = ${latest.size}`);
        expect(await reasons()).toContainEqual(expect.stringContaining('moved by hand'));
        await store.query('delete from audit_checkpoints');
        await store.query('insert into audit_checkpoints select * from checkpoints_backup');
        await store.query('delete from audit_checkpoints where size = 0');
        expect(await reasons()).toContainEqual(expect.stringContaining('no first checkpoint'));
      });
    });

    it('upgrades a store with a past trail in place: that trail verifies, then is sealed into the first checkpoints', async () => {
      const old = await openTestStore(target);
      try {
        await writeHistory(old);
        // As the store looked before migration 0018.
        await old.rawQuery('drop table audit_checkpoints');
        await old.rawQuery('drop function eg_audit_checkpoints_append_only');
        await old.rawQuery(`delete from settings where name in ('audit_log_id', '${CHECKSUM_SETTING}')`);
        // 0019 (the decisions' projection) comes after it and runs again: its table goes too.
        await old.rawQuery('drop table event_projection');
        await old.rawQuery(`delete from kysely_migration where name >= '0018-audit-checkpoints'`);
        await old.migrate();
        expect(await verifySealedLog(old, verifier)).toMatchObject({ ok: true, checkpoints: 0 });
        await new AuditSealer({ store: old, signer }).seal();
        const report = await verifySealedLog(old, verifier);
        expect(report).toMatchObject({ ok: true, unsealed: { count: 0 } });
        expect(report.latest!.size).toBe(await events(old));
      } finally {
        await old.close();
      }
    });

    it('retention removes only sealed events, and the log still verifies from a checkpoint after them', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'eg-seal-retention-'));
      await sleep(5);
      await new AuditSealer({ store, signer }).seal();
      // Recorded after the last checkpoint: not sealed, so not removed even though they are older
      // than the cut-off.
      await store.decide(reserve(newRun(), newKey()));
      await sleep(5);
      const unsealed = (await verifySealedLog(store, verifier)).unsealed.count;
      expect(unsealed).toBeGreaterThan(0);
      const result = await archiveAndPrune(store, new Date(), join(dir, 'archive.jsonl'));
      expect(result.removed).toBeGreaterThan(0);
      const report = await verifySealedLog(store, verifier);
      expect(report).toMatchObject({ ok: true, problems: [] });
      expect(report.unsealed.count).toBe(unsealed);
      await new AuditSealer({ store, signer }).seal();
      expect(await verifySealedLog(store, verifier)).toMatchObject({ ok: true, unsealed: { count: 0 } });
    });
  });
}
