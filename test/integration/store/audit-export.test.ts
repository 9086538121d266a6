import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { finished } from 'node:stream/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chainOf, computeEventHash, EVENT_CHAINS } from '../../../src/store/audit-chain.js';
import {
  type AuditExportHeader,
  type AuditExportStore,
  auditExportLines,
  writeAuditExport,
} from '../../../src/store/audit-export.js';
import { verifyAuditExport, verifyAuditExportFile } from '../../../src/store/audit-export-verify.js';
import { verifyStoreChain } from '../../../src/store/store-events.js';
import type { ChainedEvent } from '../../../src/store/types.js';
import { testAuditKey } from '../../helpers/audit-keys.js';
import { openTestStore, storeTargets, type TestStore } from '../../helpers/store.js';
import { allEvents, eventCount, writeHistory } from './audit-history.js';
import { expectVerdict, newKey, newRun, outcome, reserve } from './inputs.js';

const EVENT_FIELDS = ['chain', 'seq', 'type', 'operationId', 'recordedAtUs', 'payload', 'prevHash', 'hash'];
const NOW = new Date('2025-06-01T12:00:00.000Z');

const dir = mkdtempSync(join(tmpdir(), 'effectgate-audit-export-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The export's lines, without their line ends (each must have exactly one, at its end). */
async function exportLines(store: AuditExportStore, pageSize = 7): Promise<string[]> {
  const lines: string[] = [];
  for await (const line of auditExportLines(store, { pageSize, now: NOW })) {
    expect(line.indexOf('\n')).toBe(line.length - 1);
    lines.push(line.slice(0, -1));
  }
  return lines;
}

const eventOf = (line: string): ChainedEvent => JSON.parse(line) as ChainedEvent;
const lineOf = (e: ChainedEvent): string => JSON.stringify(e);
const headerOf = (lines: readonly string[]): AuditExportHeader => JSON.parse(lines[0]!) as AuditExportHeader;
/** The header as version 2 wrote it: no origin, no tree. */
const v2HeaderOf = (lines: readonly string[]): Record<string, unknown> => {
  const { origin: _origin, tree: _tree, latest: _latest, ...rest } = headerOf(lines);
  return { ...rest, version: 2 };
};

for (const target of storeTargets()) {
  describe(`audit export and offline verification on ${target.name}`, () => {
    let store: TestStore;
    /** The chain of the operation retried twice (six events): the drills are done on it. */
    let chain: number;
    let exported: string[];

    beforeAll(async () => {
      store = await openTestStore(target);
      const { retried } = await writeHistory(store);
      chain = chainOf(retried.operationId);
      exported = await exportLines(store);
    });

    afterAll(async () => {
      await store?.close();
    });

    /** The index in `lines` of the event (chain, seq). */
    function at(lines: readonly string[], c: number, seq: number): number {
      const i = lines.findIndex((l, n) => n > 0 && eventOf(l).chain === c && eventOf(l).seq === seq);
      expect(i, `event ${c}/${seq}`).toBeGreaterThan(0);
      return i;
    }

    async function brokenOf(lines: readonly string[]): Promise<unknown> {
      return (await verifyAuditExport(lines)).broken;
    }

    it('still verifies a version 1 export (heads without a base: every chain from seq 1)', async () => {
      const header = headerOf(exported);
      const v1 = {
        ...v2HeaderOf(exported),
        version: 1,
        heads: header.heads.map((h) => ({ chain: h.chain, lastSeq: h.lastSeq, lastHash: h.lastHash })),
      };
      expect(await verifyAuditExport([JSON.stringify(v1), ...exported.slice(1)])).toMatchObject({
        ok: true,
        broken: [],
        seal: null,
      });
    });

    it('still verifies a version 2 export (chains only), and finds an event edited in it', async () => {
      const v2 = [JSON.stringify(v2HeaderOf(exported)), ...exported.slice(1)];
      expect(await verifyAuditExport(v2)).toMatchObject({ ok: true, version: 2, seal: null });
      const i = at(v2, chain, 3);
      v2[i] = lineOf({ ...eventOf(v2[i]!), type: 'edited' });
      expect((await verifyAuditExport(v2)).broken).toEqual([
        { chain, seq: 3, reason: expect.stringContaining('edited') },
      ]);
    });

    it('a log never sealed: the header (heads taken from the store, no tree), then every event exactly as stored in (chain, seq) order', async () => {
      const header = headerOf(exported);
      expect(Object.keys(header)).toEqual([
        'format',
        'version',
        'exported_at',
        'chains',
        'heads',
        'origin',
        'tree',
        'latest',
      ]);
      expect(header).toEqual({
        format: 'effectgate-audit',
        version: 3,
        exported_at: NOW.toISOString(),
        chains: EVENT_CHAINS,
        heads: await store.chainHeads(),
        origin: `effectgate/audit/${await store.auditLogId()}`,
        tree: null,
        latest: null,
      });
      const events = exported.slice(1).map(eventOf);
      for (const line of exported.slice(1)) expect(Object.keys(JSON.parse(line))).toEqual(EVENT_FIELDS);
      // Every field as stored, but the position, which this format does not carry.
      expect(events).toEqual((await allEvents(store)).map(({ pos: _, ...e }) => e));
      expect(events.length).toBe(await eventCount(store));
      for (const e of events) {
        expect(typeof e.recordedAtUs).toBe('string');
        expect(typeof e.payload).toBe('string');
        expect(computeEventHash(e)).toBe(e.hash);
      }
      // The retried operation's six events, and maybe others that hash to the same chain.
      expect(events.filter((e) => e.chain === chain).length).toBeGreaterThanOrEqual(6);
    });

    it('verifies an intact export offline as the store verifier does', async () => {
      const fromStore = await verifyStoreChain(store);
      const report = await verifyAuditExport(exported);
      expect(report).toEqual({
        ...fromStore,
        exportedAt: NOW.toISOString(),
        version: 3,
        seal: {
          checkpoints: 0,
          sealed: 0,
          before: 0,
          unsealed: exported.length - 1,
          first: null,
          latest: null,
          signatures: 'unchecked',
          problems: [],
          witnessed: [],
        },
      });
      expect(report).toMatchObject({ ok: true, checked: exported.length - 1, chains: EVENT_CHAINS });
    });

    it('asked to check signatures, a file with no checkpoint is reported: nothing in it is signed', async () => {
      const { verifier } = testAuditKey('effectgate-export-unsealed');
      const report = await verifyAuditExport(exported, { verifier });
      expect(report.broken).toEqual([]);
      expect(report.ok).toBe(false);
      expect(report.seal!.problems).toEqual([
        { size: 0, reason: expect.stringContaining('nothing in it is signed by the audit key') },
      ]);
    });

    it('verifies an export file read line by line (LF or CRLF line ends)', async () => {
      const file = join(dir, `${target.kind}-intact.jsonl`);
      const handle = await open(file, 'wx', 0o600);
      const stream = handle.createWriteStream();
      expect(await writeAuditExport(store, stream, { pageSize: 5 })).toEqual({
        events: exported.length - 1,
        checkpoints: 0,
      });
      stream.end();
      await finished(stream);
      expect(await verifyAuditExportFile(file)).toMatchObject({ ok: true, checked: exported.length - 1 });
      const crlf = join(dir, `${target.kind}-crlf.jsonl`);
      writeFileSync(crlf, `${exported.join('\r\n')}\r\n`);
      expect(await verifyAuditExportFile(crlf)).toMatchObject({ ok: true, checked: exported.length - 1 });
    });

    it('an empty log exports as a header alone, and verifies', async () => {
      const empty = await openTestStore(target);
      try {
        const lines = await exportLines(empty);
        expect(lines).toHaveLength(1);
        expect(headerOf(lines).heads).toHaveLength(EVENT_CHAINS);
        expect(await verifyAuditExport(lines)).toMatchObject({ ok: true, checked: 0, chains: EVENT_CHAINS });
      } finally {
        await empty.close();
      }
    });

    it('leaves out events appended while it runs: the export ends at the heads it took first', async () => {
      const before = await eventCount(store);
      const lines: string[] = [];
      const it = auditExportLines(store, { pageSize: 3, now: NOW });
      lines.push((await it.next()).value!.slice(0, -1));
      // A gate goes on appending after the heads were read, on every chain it happens to hit.
      for (let i = 0; i < 5; i++) {
        const key = newKey();
        const a = await store.decide(reserve(newRun(), key));
        expectVerdict(a, 'allow');
        await store.recordOutcome(outcome(a, key, 'succeeded'));
      }
      for await (const line of it) lines.push(line.slice(0, -1));
      expect(await eventCount(store)).toBeGreaterThan(before);
      expect(lines.length - 1).toBe(before);
      expect(headerOf(lines).heads.reduce((n, h) => n + h.lastSeq, 0)).toBe(before);
      expect(await verifyAuditExport(lines)).toMatchObject({ ok: true, checked: before });
      // The next export has them all.
      exported = await exportLines(store);
      expect(await verifyAuditExport(exported)).toMatchObject({ ok: true, checked: await eventCount(store) });
    });

    describe('a tampered export is caught on the chain and event it was done to', () => {
      it('an edited payload', async () => {
        const lines = [...exported];
        const i = at(lines, chain, 3);
        const e = eventOf(lines[i]!);
        lines[i] = lineOf({ ...e, payload: `${e.payload} ` });
        expect(await brokenOf(lines)).toEqual([{ chain, seq: 3, reason: expect.stringContaining('edited') }]);
      });

      it('an edited field outside the payload (the time it was recorded)', async () => {
        const lines = [...exported];
        const i = at(lines, chain, 2);
        const e = eventOf(lines[i]!);
        lines[i] = lineOf({ ...e, recordedAtUs: String(BigInt(e.recordedAtUs) - 1n) });
        expect(await brokenOf(lines)).toEqual([{ chain, seq: 2, reason: expect.stringContaining('edited') }]);
      });

      it('a deleted line', async () => {
        const lines = [...exported];
        lines.splice(at(lines, chain, 4), 1);
        expect(await brokenOf(lines)).toEqual([
          { chain, seq: 5, reason: expect.stringContaining('missing') },
        ]);
      });

      it('two lines swapped', async () => {
        const lines = [...exported];
        const i = at(lines, chain, 5);
        [lines[i], lines[i + 1]] = [lines[i + 1]!, lines[i]!];
        expect(await brokenOf(lines)).toEqual([
          { chain, seq: 6, reason: expect.stringContaining('expected seq 5 but found 6') },
        ]);
      });

      it('two events reordered, their seqs renumbered to look in order', async () => {
        const lines = [...exported];
        const i = at(lines, chain, 5);
        const [fifth, sixth] = [eventOf(lines[i]!), eventOf(lines[i + 1]!)];
        lines[i] = lineOf({ ...sixth, seq: 5 });
        lines[i + 1] = lineOf({ ...fifth, seq: 6 });
        expect(await brokenOf(lines)).toEqual([{ chain, seq: 5, reason: expect.stringContaining('edited') }]);
      });

      it('an inserted line (a copy of an event)', async () => {
        const lines = [...exported];
        const i = at(lines, chain, 3);
        lines.splice(i + 1, 0, lines[i]!);
        expect(await brokenOf(lines)).toEqual([
          { chain, seq: 3, reason: expect.stringContaining('out of order') },
        ]);
      });

      it('an inserted event, hashed and linked, later events renumbered and the head moved on', async () => {
        const lines = [...exported];
        const i = at(lines, chain, 3);
        const third = eventOf(lines[i]!);
        const forged = { ...third, seq: 4, payload: '{"forged": true}', prevHash: third.hash };
        const later = lines.splice(i + 1).map((l) => {
          const e = eventOf(l);
          return e.chain === chain ? lineOf({ ...e, seq: e.seq + 1 }) : l;
        });
        lines.push(lineOf({ ...forged, hash: computeEventHash(forged) }), ...later);
        const header = headerOf(lines);
        lines[0] = JSON.stringify({
          ...header,
          heads: header.heads.map((h) => (h.chain === chain ? { ...h, lastSeq: h.lastSeq + 1 } : h)),
        });
        expect(await brokenOf(lines)).toEqual([{ chain, seq: 5, reason: expect.stringContaining('edited') }]);
      });

      it("another chain's event appended to this chain, hashed and linked", async () => {
        const lines = [...exported];
        const other = eventOf(exported.slice(1).find((l) => eventOf(l).chain !== chain)!);
        const last = eventOf(lines[at(lines, chain, headerOf(lines).heads[chain]!.lastSeq)]!);
        const moved = { ...other, chain, seq: last.seq + 1, prevHash: last.hash };
        lines.splice(at(lines, chain, last.seq) + 1, 0, lineOf({ ...moved, hash: computeEventHash(moved) }));
        expect(await brokenOf(lines)).toEqual([
          { chain, seq: last.seq + 1, reason: expect.stringContaining(`belongs on chain ${other.chain}`) },
        ]);
      });

      it('a truncated tail: the last line of the file, and the last events of one chain', async () => {
        const lastEvent = eventOf(exported.at(-1)!);
        expect(await brokenOf(exported.slice(0, -1))).toEqual([
          { chain: lastEvent.chain, seq: lastEvent.seq, reason: expect.stringContaining('truncated') },
        ]);
        const lines = exported.filter(
          (l, n) => n === 0 || !(eventOf(l).chain === chain && eventOf(l).seq > 4),
        );
        expect(await brokenOf(lines)).toEqual([
          { chain, seq: 5, reason: expect.stringContaining('truncated') },
        ]);
      });

      it('a header head changed: its seq, its hash, or the head left out', async () => {
        const header = headerOf(exported);
        const last = header.heads[chain]!.lastSeq;
        const withHeads = (heads: AuditExportHeader['heads']): string[] => [
          JSON.stringify({ ...header, heads }),
          ...exported.slice(1),
        ];
        const back = header.heads.map((h) => (h.chain === chain ? { ...h, lastSeq: h.lastSeq - 1 } : h));
        expect(await brokenOf(withHeads(back))).toEqual([
          { chain, seq: last, reason: expect.stringContaining('continues past its head row') },
        ]);
        const rehashed = header.heads.map((h) =>
          h.chain === chain ? { ...h, lastHash: 'f'.repeat(64) } : h,
        );
        expect(await brokenOf(withHeads(rehashed))).toEqual([
          { chain, seq: last, reason: expect.stringContaining('tail replaced') },
        ]);
        const ahead = header.heads.map((h) => (h.chain === chain ? { ...h, lastSeq: h.lastSeq + 2 } : h));
        expect(await brokenOf(withHeads(ahead))).toEqual([
          { chain, seq: last + 1, reason: expect.stringContaining('truncated') },
        ]);
        const without = header.heads.filter((h) => h.chain !== chain);
        expect(await brokenOf(withHeads(without))).toEqual([
          { chain, seq: 0, reason: expect.stringContaining('missing') },
        ]);
      });

      it('two chains tampered: the first bad event of each', async () => {
        const lines = [...exported];
        const other = eventOf(exported.slice(1).find((l) => eventOf(l).chain !== chain)!);
        lines.splice(at(lines, chain, 4), 1);
        const i = at(lines, other.chain, other.seq);
        lines[i] = lineOf({ ...other, type: `${other.type}.x` });
        const report = await verifyAuditExport(lines);
        expect(report.ok).toBe(false);
        expect(report.broken).toEqual(
          [
            { chain, seq: 5, reason: expect.stringContaining('missing') },
            { chain: other.chain, seq: other.seq, reason: expect.stringContaining('edited') },
          ].sort((a, b) => a.chain - b.chain),
        );
        expect(report.firstBad).toEqual(report.broken[0]);
      });
    });

    describe('a line that is not an export line names its line number', () => {
      async function rejection(lines: readonly string[]): Promise<unknown> {
        return verifyAuditExport(lines).then(
          () => 'verified',
          (err: unknown) => err,
        );
      }

      it('in the header', async () => {
        const header = headerOf(exported);
        const cases: [string[], RegExp][] = [
          [[], /empty file/],
          [['not json', ...exported.slice(1)], /not JSON/],
          [[exported[1]!, ...exported.slice(1)], /not an effectgate audit export/],
          [[JSON.stringify({ ...header, version: 4 }), ...exported.slice(1)], /unsupported export version 4/],
          [[JSON.stringify({ ...header, tree: { size: 1, hashes: [] } })], /"tree" is not a Merkle frontier/],
          [[JSON.stringify({ ...header, origin: 7 })], /"origin" must be one line/],
          [
            [JSON.stringify(v2HeaderOf(exported)).replace('"heads"', '"tree":null,"heads"')],
            /unexpected header field "tree"/,
          ],
          [[JSON.stringify({ ...header, chains: 32 }), ...exported.slice(1)], /32 chains/],
          [[JSON.stringify({ ...header, heads: [{ chain: 0 }] })], /heads\[0\] field "baseSeq" is missing/],
          [
            [JSON.stringify({ ...v2HeaderOf(exported), version: 1, heads: [{ chain: 0, lastSeq: 0 }] })],
            /heads\[0\] field "lastHash" is missing/,
          ],
          [
            [JSON.stringify({ ...v2HeaderOf(exported), version: 1 }), ...exported.slice(1)],
            /unexpected heads\[0\] field "baseSeq"/,
          ],
          [[JSON.stringify({ ...header, extra: 1 })], /unexpected header field "extra"/],
        ];
        for (const [lines, message] of cases) {
          expect(await rejection(lines)).toMatchObject({
            name: 'AuditExportError',
            code: 'EG_ERR_AUDIT_EXPORT_INVALID',
            line: 1,
            detail: expect.stringMatching(message),
          });
        }
      });

      it('in an event', async () => {
        const e = eventOf(exported[3]!);
        const { hash: _hash, ...noHash } = e;
        const cases: [string, RegExp][] = [
          ['', /empty line/],
          ['{"chain": 1', /not JSON/],
          ['[1, 2]', /a JSON object/],
          [JSON.stringify(noHash), /event field "hash" is missing/],
          [JSON.stringify({ ...e, note: 'unhashed' }), /unexpected event field "note"/],
          [JSON.stringify({ ...e, seq: String(e.seq) }), /"seq" must be an integer/],
          [JSON.stringify({ ...e, payload: JSON.parse(e.payload) }), /"payload" must be a string/],
          [JSON.stringify({ ...e, operationId: 7 }), /"operationId" must be a string or null/],
        ];
        for (const [text, message] of cases) {
          const lines = [...exported];
          lines[3] = text;
          expect(await rejection(lines)).toMatchObject({ line: 4, detail: expect.stringMatching(message) });
        }
      });

      it('a file cut in the middle of its last line', async () => {
        const lines = [...exported];
        lines[lines.length - 1] = lines.at(-1)!.slice(0, 40);
        expect(await rejection(lines)).toMatchObject({
          line: lines.length,
          detail: expect.stringContaining('not JSON'),
        });
      });
    });
  });

  describe(`a long log exported page by page on ${target.name}`, () => {
    const EVENTS = 5000;
    const PAGE = 100;
    let store: TestStore;

    beforeAll(async () => {
      store = await openTestStore(target);
      // Appended by the store's own SQL function, as the gate does: hashes computed by the database.
      await store.query(`do $$ begin
        for i in 1..${EVENTS} loop
          perform eg_append_event('op-bulk-' || i, 'test.bulk', 'op-bulk-' || i, '{"n": ' || i || '}');
        end loop;
      end $$`);
    }, 120_000);

    afterAll(async () => {
      await store?.close();
    });

    it('reads one bounded page at a time, lazily, and the export verifies', async () => {
      expect(await eventCount(store)).toBe(EVENTS);
      const limits: number[] = [];
      const spy: AuditExportStore = {
        auditLogId: () => store.auditLogId(),
        latestCheckpoint: () => store.latestCheckpoint(),
        readCheckpoints: (after, limit) => store.readCheckpoints(after, limit),
        readEventRanges: (ranges) => store.readEventRanges(ranges),
        readBatch: (read) => store.readBatch(read),
        hasUnchainedEvents: () => store.hasUnchainedEvents(),
        chainHeads: () => store.chainHeads(),
        readEvents: (after, limit) => {
          limits.push(limit);
          return store.readEvents(after, limit);
        },
      };
      const lines = auditExportLines(spy, { pageSize: PAGE });
      await lines.next();
      await lines.next();
      expect(limits).toHaveLength(1);
      let count = 0;
      for await (const _ of lines) count += 1;
      expect(count).toBe(EVENTS - 1);
      // Chain by chain, no page past a chain's last event: at most one short page per chain.
      for (const limit of limits) expect(limit).toBeLessThanOrEqual(PAGE);
      expect(limits.length).toBeLessThanOrEqual(Math.ceil(EVENTS / PAGE) + EVENT_CHAINS);
      expect(limits.reduce((n, l) => n + l, 0)).toBe(EVENTS);

      const file = join(dir, `${target.kind}-long.jsonl`);
      const handle = await open(file, 'wx', 0o600);
      const stream = handle.createWriteStream();
      expect(await writeAuditExport(store, stream, { pageSize: PAGE })).toEqual({
        events: EVENTS,
        checkpoints: 0,
      });
      stream.end();
      await finished(stream);
      expect(await verifyAuditExportFile(file)).toMatchObject({
        ok: true,
        checked: EVENTS,
        chains: EVENT_CHAINS,
      });
    }, 120_000);
  });
}
