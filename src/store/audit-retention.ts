import { open, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { EffectgateError } from '../errors.js';
import { GENESIS_HASH } from './audit-chain.js';
import { type AuditExportStore, auditExportLines } from './audit-export.js';
import { verifyAuditExportFile } from './audit-export-verify.js';
import type { AuditStore, ChainCut, CheckpointRecord } from './types.js';

/**
 * Retention of the event log (`effectgate audit prune`): the events sealed before a cut-off are
 * archived as a verified segment of the sealed log and removed from the store, which goes on
 * verifying from where they end.
 *
 * 1. The cut: the latest checkpoint sealed before the cut-off (`retentionCheckpoint`). Every
 *    chain is cut at its seq in that checkpoint: exactly the events it and the checkpoints before
 *    it sealed, a prefix of every chain. A log no gate ever sealed (no audit key) is cut by time
 *    instead, chain by chain (`retentionCuts`), and its archive holds chains only.
 * 2. The segment is written to `archive` as an `audit export` (audit-export.ts: from the first
 *    checkpoint the store still holds every event after, to the cut's checkpoint, each
 *    checkpoint's events before its line), fsynced, and verified back from the file: the archive
 *    must be whole, and end at the cut's checkpoint, before anything is removed.
 * 3. Chain by chain, in steps of PRUNE_STEP events, each its own transaction, `pruneChain` removes
 *    those events and makes the cut the chain's base (head row). A chain another prune moved
 *    meanwhile, or whose cut event is not the archived one, is refused and keeps its events.
 *
 * The archives of successive prunes join up: each one starts at the checkpoint the one before
 * ended at (its line, and the header's tree, its frontier), so the whole history verifies from the
 * first archive to the live log's export, root by root and signature by signature; and `audit
 * verify` goes on from that checkpoint's stored frontier.
 *
 * @example
 *   const result = await archiveAndPrune(store, new Date('2026-11-01T00:00:00Z'), 'events-2026-10.jsonl');
 *   // { archived: 120000, removed: 120000, chains: 64, checkpoint: 119872, cuts: [...] }
 */
export async function archiveAndPrune(
  store: RetentionStore,
  before: Date,
  archive: string,
): Promise<RetentionResult> {
  if (Number.isNaN(before.getTime())) throw new EffectgateError('EG_ERR_CONFIG_INVALID', 'not a time');
  let until: CheckpointRecord | null = null;
  let cuts: readonly ChainCut[];
  if ((await store.latestCheckpoint()) === null) cuts = await store.retentionCuts(before.toISOString());
  else {
    until = await store.retentionCheckpoint(before.toISOString());
    if (until === null) return { archived: 0, removed: 0, chains: 0, checkpoint: null, cuts: [] };
    cuts = await cutsAt(store, until);
  }
  const archived = cuts.reduce((n, c) => n + (c.cutSeq - c.baseSeq), 0);
  await writeArchive(store, { until, cuts }, archive);
  const report = await verifyAuditExportFile(archive);
  const ends = until === null || report.seal?.latest?.size === until.size;
  if (!report.ok || report.checked !== archived || !ends) {
    const why = report.firstBad?.reason ?? report.seal?.problems[0]?.reason;
    throw new EffectgateError(
      'EG_ERR_AUDIT_CHAIN_BROKEN',
      `the archive ${archive} does not verify (${why ?? `${report.checked} of ${archived} events`}): nothing was removed`,
    );
  }
  let removed = 0;
  const pruned: number[] = [];
  for (const cut of cuts) {
    if (cut.cutSeq <= cut.baseSeq) continue;
    try {
      removed += await pruneInSteps(store, cut);
    } catch (err) {
      // Nothing is lost (the archive holds every event removed), but the store is pruned in part.
      const done = pruned.length === 0 ? 'no chain was pruned' : `chains ${pruned.join(', ')} were pruned`;
      throw new EffectgateError(
        'EG_ERR_AUDIT_CHAIN_BROKEN',
        `audit prune stopped at chain ${cut.chain} after removing ${removed} event(s): ${done}, and ${archive} holds every event removed; run it again with a new archive file (${err instanceof Error ? err.message : String(err)})`,
        { cause: err },
      );
    }
    pruned.push(cut.chain);
  }
  return { archived, removed, chains: pruned.length, checkpoint: until?.size ?? null, cuts };
}

export type RetentionStore = AuditExportStore &
  Pick<AuditStore, 'retentionCheckpoint' | 'retentionCuts' | 'pruneChain'>;

/** Every chain cut at its seq in `until`: from its base, with the hash of its cut event. */
async function cutsAt(store: RetentionStore, until: CheckpointRecord): Promise<ChainCut[]> {
  const heads = await store.chainHeads();
  const seqOf = (chain: number): number => until.heads[String(chain)] ?? 0;
  const moved = heads.filter((h) => seqOf(h.chain) > (h.baseSeq ?? 0));
  const events = await store.readEventRanges(
    moved.map((h) => ({ chain: h.chain, after: seqOf(h.chain) - 1, upTo: seqOf(h.chain) })),
  );
  const hashOf = new Map(events.map((e) => [`${e.chain}:${e.seq}`, e.hash]));
  return heads.map((h): ChainCut => {
    const base = { seq: h.baseSeq ?? 0, hash: h.baseHash ?? GENESIS_HASH };
    const cutSeq = Math.max(base.seq, seqOf(h.chain));
    const cutHash = cutSeq === base.seq ? base.hash : hashOf.get(`${h.chain}:${cutSeq}`);
    if (cutHash === undefined) {
      throw new EffectgateError('EG_ERR_AUDIT_CHAIN_BROKEN', `chain ${h.chain} has no event ${cutSeq}`);
    }
    return { chain: h.chain, baseSeq: base.seq, baseHash: base.hash, cutSeq, cutHash };
  });
}

/** Events removed per transaction: appends to the chain wait for each step only (about 30 ms). */
export const PRUNE_STEP = 5_000;

/**
 * Removes a chain's segment in steps of PRUNE_STEP events, each its own transaction, so a gate
 * appending to that chain waits for one step at a time, not for the whole segment. Every step's
 * end is an archived event whose hash is read back from the store and checked by eg_prune.
 */
async function pruneInSteps(store: RetentionStore, cut: ChainCut): Promise<number> {
  let base = { seq: cut.baseSeq, hash: cut.baseHash };
  let removed = 0;
  while (base.seq < cut.cutSeq) {
    const next = Math.min(base.seq + PRUNE_STEP, cut.cutSeq);
    let hash = cut.cutHash;
    if (next < cut.cutSeq) {
      const [event] = await store.readEvents({ chain: cut.chain, seq: next - 1 }, 1);
      if (event === undefined || event.chain !== cut.chain || event.seq !== next) {
        throw new EffectgateError('EG_ERR_AUDIT_CHAIN_BROKEN', `chain ${cut.chain} has no event ${next}`);
      }
      hash = event.hash;
    }
    removed += await store.pruneChain({
      chain: cut.chain,
      baseSeq: base.seq,
      baseHash: base.hash,
      cutSeq: next,
      cutHash: hash,
    });
    base = { seq: next, hash };
  }
  return removed;
}

export interface RetentionResult {
  /** Events written to the archive. */
  readonly archived: number;
  /** Events removed from the store (equal to `archived` unless a chain was refused). */
  readonly removed: number;
  /** Chains that had events to remove. */
  readonly chains: number;
  /**
   * The size of the checkpoint the log was cut at (the archive's last); null when nothing was
   * sealed before the cut-off (nothing removed, no archive written) or the log was never sealed.
   */
  readonly checkpoint: number | null;
  readonly cuts: readonly ChainCut[];
}

/**
 * The segment export (auditExportLines) in `path`: created exclusively (mode 0600), written,
 * fsynced with its directory, closed; removed if it could not be written whole.
 */
async function writeArchive(
  store: AuditExportStore,
  segment: { readonly until: CheckpointRecord | null; readonly cuts: readonly ChainCut[] },
  path: string,
): Promise<void> {
  const handle = await open(path, 'wx', 0o600);
  let done = false;
  try {
    // auditExportLines, written in chunks of 64 KiB straight to the handle, which stays open for
    // the fsync.
    let chunk = '';
    for await (const line of auditExportLines(store, { segment })) {
      chunk += line;
      if (chunk.length >= 1 << 16) {
        await handle.write(chunk);
        chunk = '';
      }
    }
    if (chunk !== '') await handle.write(chunk);
    await handle.sync();
    done = true;
  } finally {
    await handle.close();
    if (!done) await unlink(path).catch(() => undefined);
  }
  // The file's directory entry too: the events leave the store only once a crash cannot lose it.
  const dir = await open(dirname(path), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
