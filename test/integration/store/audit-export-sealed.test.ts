/**
 * The export of a sealed log (src/store/audit-export.ts, audit-export-verify.ts): each checkpoint
 * after the events it sealed, in the order it sealed them, so a file alone proves what the store's
 * checkpoints signed. Asked of it, the ways a file could lie and still pass its chains: an event
 * edited and its chain rehashed, events reordered across chains, an event moved out of what a
 * checkpoint sealed, a checkpoint dropped from the end, a checkpoint not signed by the audit key
 * or of another log, a tree that is not its first checkpoint's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeEventHash, EVENT_CHAINS } from '../../../src/store/audit-chain.js';
import { type AuditExportHeader, auditExportLines } from '../../../src/store/audit-export.js';
import { verifyAuditExport } from '../../../src/store/audit-export-verify.js';
import { AuditSealer } from '../../../src/store/audit-sealer.js';
import { checkpointNote, readCheckpointNote } from '../../../src/store/checkpoint-note.js';
import { generateNoteKey, parseSignerKey } from '../../../src/store/signed-note.js';
import type { ChainedEvent } from '../../../src/store/types.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { allows, writeHistory } from './audit-history.js';

const { signer, verifier } = testAuditKey('effectgate-export-sealed');
const stranger = parseSignerKey(generateNoteKey('stranger').signerKey);

async function exportOf(store: TestStore): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of auditExportLines(store, { pageSize: 5 })) lines.push(line.slice(0, -1));
  return lines;
}

const isCheckpoint = (line: string): boolean => line.startsWith('{"checkpoint":');
const eventOf = (line: string): ChainedEvent => JSON.parse(line) as ChainedEvent;
const noteOf = (line: string): string => (JSON.parse(line) as { checkpoint: string }).checkpoint;
const headerOf = (lines: readonly string[]): AuditExportHeader => JSON.parse(lines[0]!) as AuditExportHeader;
/** The line numbers (0-based) of the checkpoint lines. */
const checkpointAt = (lines: readonly string[]): number[] =>
  lines.flatMap((l, i) => (i > 0 && isCheckpoint(l) ? [i] : []));

/** `lines` with chain `chain` rehashed and relinked from seq `from` on, and its head moved too. */
function rehashChain(lines: string[], chain: number, from: number): string[] {
  let prev: string | null = null;
  const out = lines.map((l, i) => {
    if (i === 0 || isCheckpoint(l)) return l;
    const e = eventOf(l);
    if (e.chain !== chain || e.seq < from) return l;
    const relinked = { ...e, prevHash: prev ?? e.prevHash };
    const rehashed = { ...relinked, hash: computeEventHash(relinked) };
    prev = rehashed.hash;
    return JSON.stringify(rehashed);
  });
  const header = headerOf(out);
  out[0] = JSON.stringify({
    ...header,
    heads: header.heads.map((h) => (h.chain === chain ? { ...h, lastHash: prev ?? h.lastHash } : h)),
  });
  return out;
}

for (const target of storeTargets()) {
  describe(`the export of a sealed log on ${target.name}`, () => {
    let store: TestStore;
    let exported: string[];
    let logId: string;

    beforeAll(async () => {
      store = await openTestStore(target);
      logId = await store.auditLogId();
      // Small checkpoints, so there are many, each sealing events of several chains.
      const sealer = new AuditSealer({ store, signer, maxEvents: 8 });
      await writeHistory(store);
      await sealer.seal();
      await allows(store, 6);
      await sealer.seal();
      await allows(store, 2);
      exported = await exportOf(store);
    });
    afterAll(async () => {
      await store?.close();
    });

    it('writes every checkpoint after the events it sealed, then the events not sealed yet, and verifies', async () => {
      const checkpoints = await store.readCheckpoints(null, 1000);
      const latest = checkpoints.at(-1)!;
      expect(checkpoints.length).toBeGreaterThan(3);
      const header = headerOf(exported);
      expect(header.tree).toEqual({ size: 0, hashes: [] });
      expect(header.origin).toBe(`effectgate/audit/${logId}`);
      const at = checkpointAt(exported);
      expect(at.map((i) => noteOf(exported[i]!))).toEqual(checkpoints.map((c) => c.note));
      // Between two checkpoint lines, as many events as the second sealed.
      for (let k = 1; k < at.length; k++) {
        expect(at[k]! - at[k - 1]! - 1).toBe(checkpoints[k]!.size - checkpoints[k - 1]!.size);
      }
      const unsealed = (await store.unsealedEvents(latest)).count;
      expect(unsealed).toBeGreaterThan(0);
      expect(exported.length - 1 - at.at(-1)!).toBe(unsealed);
      const report = await verifyAuditExport(exported, { verifier, witnesses: [latest.note] });
      expect(report).toMatchObject({
        ok: true,
        broken: [],
        chains: EVENT_CHAINS,
        checked: latest.size + unsealed,
        version: 3,
        seal: {
          checkpoints: checkpoints.length,
          sealed: latest.size,
          before: 0,
          unsealed,
          first: { size: 0, root: checkpoints[0]!.root },
          latest: {
            size: latest.size,
            root: latest.root,
            sealedAt: readCheckpointNote(latest.note, []).sealedAt,
          },
          signatures: 'checked',
          problems: [],
          witnessed: [{ ok: true, size: latest.size, reason: null }],
        },
      });
    });

    it('an event edited, its chain rehashed and relinked so every chain verifies, is found by the checkpoint that sealed it', async () => {
      const at = checkpointAt(exported);
      const i = at[2]! - 1;
      const e = eventOf(exported[i]!);
      const lines = [...exported];
      lines[i] = JSON.stringify({ ...e, payload: e.payload.replace('{', '{"forged":true,') });
      const forged = rehashChain(lines, e.chain, e.seq);
      const report = await verifyAuditExport(forged, { verifier });
      expect(report.broken).toEqual([]);
      expect(report.ok).toBe(false);
      expect(report.seal!.problems).toEqual([
        { size: noteSize(exported[at[2]!]!), reason: expect.stringContaining('do not give its root') },
      ]);
    });

    it('two sealed events of two chains swapped: every chain verifies, the root does not', async () => {
      const at = checkpointAt(exported);
      const i = exported.findIndex(
        (l, n) =>
          n > at[0]! &&
          n + 1 < at.at(-1)! &&
          !isCheckpoint(l) &&
          !isCheckpoint(exported[n + 1]!) &&
          eventOf(l).chain !== eventOf(exported[n + 1]!).chain,
      );
      expect(i).toBeGreaterThan(0);
      const lines = [...exported];
      [lines[i], lines[i + 1]] = [lines[i + 1]!, lines[i]!];
      const report = await verifyAuditExport(lines, { verifier });
      expect(report.broken).toEqual([]);
      expect(report.seal!.problems).toEqual([
        { size: expect.any(Number), reason: expect.stringContaining('do not give its root') },
      ]);
    });

    it('an event moved past the last checkpoint: that checkpoint finds fewer events than it sealed', async () => {
      const last = checkpointAt(exported).at(-1)!;
      const lines = [...exported];
      const [moved] = lines.splice(last - 1, 1);
      lines.push(moved!);
      const report = await verifyAuditExport(lines, { verifier });
      expect(report.ok).toBe(false);
      expect(report.seal!.problems).toEqual([
        {
          size: noteSize(exported[last]!),
          reason: expect.stringContaining('events were inserted or deleted'),
        },
      ]);
    });

    it('the last checkpoint dropped: the header says the file was cut short; its header rewritten too, a witness of that checkpoint refutes it', async () => {
      const at = checkpointAt(exported);
      const lines = exported.filter((_, i) => i !== at.at(-1));
      const latest = noteOf(exported[at.at(-1)!]!);
      const earlier = (await store.getCheckpoint(noteSize(exported[at.at(-2)!]!)))!;
      expect((await verifyAuditExport(lines, { verifier })).seal!.problems).toEqual([
        { size: noteSize(exported[at.at(-1)!]!), reason: expect.stringContaining('cut short') },
      ]);
      lines[0] = JSON.stringify({ ...headerOf(lines), latest: { size: earlier.size, root: earlier.root } });
      const alone = await verifyAuditExport(lines, { verifier });
      expect(alone).toMatchObject({ ok: true, seal: { latest: { size: earlier.size } } });
      const witnessed = await verifyAuditExport(lines, { verifier, witnesses: [latest] });
      expect(witnessed.ok).toBe(false);
      expect(witnessed.seal!.witnessed).toEqual([
        {
          ok: false,
          size: noteSize(exported[at.at(-1)!]!),
          reason: expect.stringContaining('ends before size'),
        },
      ]);
    });

    it('a file whose first checkpoints were dropped says where it starts, and a witness of an earlier one refutes it', async () => {
      const at = checkpointAt(exported);
      const start = (await store.getCheckpoint(noteSize(exported[at[2]!]!)))!;
      const early = noteOf(exported[at[1]!]!);
      const lines = [
        JSON.stringify({ ...headerOf(exported), tree: JSON.parse(start.frontier) }),
        ...exported.slice(1).filter((_, n) => !at.slice(0, 2).includes(n + 1)),
      ];
      const report = await verifyAuditExport(lines, { verifier, witnesses: [early] });
      // Its first events read as sealed before it, checked by their chains only: the report says so.
      expect(report.broken).toEqual([]);
      expect(report.seal).toMatchObject({ first: { size: start.size }, before: start.size, problems: [] });
      expect(report.ok).toBe(false);
      expect(report.seal!.witnessed).toEqual([
        {
          ok: false,
          size: noteSize(exported[at[1]!]!),
          reason: expect.stringContaining('holds no checkpoint'),
        },
      ]);
    });

    it('a checkpoint signed by another key, or of another log, is reported; unchecked without the key', async () => {
      const at = checkpointAt(exported);
      const i = at[1]!;
      const cp = (await store.getCheckpoint(noteSize(exported[i]!)))!;
      const resigned = [...exported];
      resigned[i] = JSON.stringify({
        checkpoint: checkpointNote(stranger, logId, cp.size, cp.root, cp.sealedAt),
      });
      expect((await verifyAuditExport(resigned, { verifier })).seal!.problems).toEqual([
        { size: cp.size, reason: expect.stringContaining(`not signed by the audit key ${verifier.name}`) },
      ]);
      expect(await verifyAuditExport(resigned)).toMatchObject({
        ok: true,
        seal: { signatures: 'unchecked', problems: [] },
      });
      const foreign = [...exported];
      foreign[i] = JSON.stringify({
        checkpoint: checkpointNote(signer, 'another-log', cp.size, cp.root, cp.sealedAt),
      });
      expect((await verifyAuditExport(foreign, { verifier })).seal!.problems).toEqual([
        { size: cp.size, reason: expect.stringContaining('another log') },
      ]);
    });

    it('a checkpoint line repeated is reported', async () => {
      const i = checkpointAt(exported)[2]!;
      const lines = [...exported];
      lines.splice(i + 1, 0, exported[i]!);
      expect((await verifyAuditExport(lines, { verifier })).seal!.problems).toEqual([
        { size: noteSize(exported[i]!), reason: expect.stringContaining('reordered or repeated') },
      ]);
    });

    it("a header whose tree is not its first checkpoint's, or a checkpoint where the header says none", async () => {
      const header = headerOf(exported);
      // A tree already as big as a tree can be: the first event after the checkpoint is refused.
      const full = {
        size: Number.MAX_SAFE_INTEGER,
        hashes: Array.from({ length: 53 }, () => 'ab'.repeat(32)),
      };
      const at = checkpointAt(exported);
      await expect(
        verifyAuditExport([JSON.stringify({ ...header, tree: full }), ...exported.slice(1)]),
      ).rejects.toMatchObject({ code: 'EG_ERR_AUDIT_EXPORT_INVALID', line: at[0]! + 2 });
      const grown = [
        JSON.stringify({ ...header, tree: { size: 1, hashes: ['ab'.repeat(32)] } }),
        ...exported.slice(1),
      ];
      expect((await verifyAuditExport(grown)).seal!.problems).toEqual([
        { size: 0, reason: expect.stringContaining("the header's tree is not its first checkpoint's") },
      ]);
      const none = [JSON.stringify({ ...header, tree: null, latest: null }), ...exported.slice(1)];
      await expect(verifyAuditExport(none)).rejects.toMatchObject({
        code: 'EG_ERR_AUDIT_EXPORT_INVALID',
        line: checkpointAt(exported)[0]! + 1,
      });
      const { origin: _o, tree: _t, latest: _l, ...v2 } = header;
      await expect(
        verifyAuditExport([JSON.stringify({ ...v2, version: 2 })], { verifier }),
      ).rejects.toMatchObject({ line: 1, detail: expect.stringContaining('holds no checkpoints') });
    });

    it('a store pruned by time after it was sealed (an earlier version) starts at the first checkpoint past its cuts', async () => {
      const fresh = await openTestStore(target);
      fresh.exemptFromTrailCheck('its events are pruned on purpose');
      try {
        const sealer = new AuditSealer({ store: fresh, signer, maxEvents: 8 });
        await allows(fresh, 6);
        await sealer.seal();
        const checkpoints = await fresh.readCheckpoints(null, 1000);
        // One chain cut where the third checkpoint left it, every other chain kept whole: cuts
        // at no checkpoint, as pruning by time left them.
        const [second, third] = [checkpoints[1]!, checkpoints[2]!];
        const chain = Number(
          Object.keys(third.heads).find((c) => (third.heads[c] ?? 0) > (second.heads[c] ?? 0))!,
        );
        const cutSeq = third.heads[String(chain)]!;
        const [cut] = await fresh.readEventRanges([{ chain, after: cutSeq - 1, upTo: cutSeq }]);
        // Retention never removes an event the projection has not passed.
        expect((await fresh.projectEvents({ wait: true })).more).toBe(false);
        await fresh.pruneChain({ chain, baseSeq: 0, baseHash: '0'.repeat(64), cutSeq, cutHash: cut!.hash });
        const lines = await exportOf(fresh);
        expect(noteOf(lines[checkpointAt(lines)[0]!]!)).toBe(
          (await fresh.readCheckpoints(null, 1000)).find((c) => (c.heads[String(chain)] ?? 0) >= cutSeq)!
            .note,
        );
        const report = await verifyAuditExport(lines, { verifier });
        expect(report).toMatchObject({ ok: true, broken: [], seal: { problems: [] } });
        expect(report.seal!.before).toBeGreaterThan(0);
        expect(report.checked).toBe(report.seal!.before + report.seal!.sealed + report.seal!.unsealed);
      } finally {
        await fresh.close();
      }
    });
  });
}

function noteSize(line: string): number {
  return Number(noteOf(line).split('\n')[1]);
}
