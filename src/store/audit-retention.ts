import { open, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { EffectgateError } from '../errors.js';
import { auditExportLines, verifyAuditExportFile } from './audit-export.js';
import type { AuditStore, ChainCut } from './types.js';

/**
 * Retention of the event log (`effectgate audit prune`): the events recorded before a cut-off are archived
 * as a verified segment and removed from the store, and every chain goes on verifying from its
 * recorded base.
 *
 * 1. `retentionCuts(before)`: per chain, its base (the last event removed so far) and its cut (the
 *    last event recorded before the cut-off). Events are in time order along a chain, so these
 *    are a prefix of it.
 * 2. The segment (base, cut] of every chain is written to `archive` as an `audit export` (version 2:
 *    each head says where its chain's segment starts and ends), fsynced, and verified back from
 *    the file: the archive must be whole before anything is removed.
 * 3. Chain by chain, one transaction each, `pruneChain` removes those events and makes the cut the
 *    chain's base (head row). A chain another prune moved meanwhile, or whose cut event is not the
 *    archived one, is refused and keeps its events.
 *
 * The archives of successive prunes chain up: each one's heads start at the previous one's ends
 * (`baseHash` = the last hash before), and the store's bases are the last one's ends, so the
 * whole history verifies from the first archive to the live log. What the store alone cannot
 * show is a base moved by hand (a superuser can delete events and move the base consistently):
 * keep the archives, or their heads, somewhere else and compare.
 *
 * @example
 *   const result = await archiveAndPrune(store, new Date('2026-11-01T00:00:00Z'), 'events-2026-10.jsonl');
 *   // { archived: 120000, removed: 120000, chains: 64, cuts: [...] }
 */
export async function archiveAndPrune(
  store: Pick<AuditStore, 'retentionCuts' | 'pruneChain' | 'readEvents' | 'chainHeads'>,
  before: Date,
  archive: string,
): Promise<RetentionResult> {
  if (Number.isNaN(before.getTime())) throw new EffectgateError('EG_ERR_CONFIG_INVALID', 'not a time');
  const cuts = await store.retentionCuts(before.toISOString());
  const archived = cuts.reduce((n, c) => n + (c.cutSeq - c.baseSeq), 0);
  await writeArchive(store, cuts, archive);
  const report = await verifyAuditExportFile(archive);
  if (!report.ok || report.checked !== archived) {
    throw new EffectgateError(
      'EG_ERR_AUDIT_CHAIN_BROKEN',
      `the archive ${archive} does not verify (${report.firstBad?.reason ?? `${report.checked} of ${archived} events`}): nothing was removed`,
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
  return { archived, removed, chains: pruned.length, cuts };
}

/** Events removed per transaction: appends to the chain wait for each step only (about 30 ms). */
export const PRUNE_STEP = 5_000;

/**
 * Removes a chain's segment in steps of PRUNE_STEP events, each its own transaction, so a gate
 * appending to that chain waits for one step at a time, not for the whole segment. Every step's
 * end is an archived event whose hash is read back from the store and checked by eg_prune.
 */
async function pruneInSteps(
  store: Pick<AuditStore, 'pruneChain' | 'readEvents'>,
  cut: ChainCut,
): Promise<number> {
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
  /** Chains that had events before the cut-off. */
  readonly chains: number;
  readonly cuts: readonly ChainCut[];
}

/**
 * The segment export (auditExportLines) in `path`: created exclusively (mode 0600), written,
 * fsynced with its directory, closed; removed if it could not be written whole.
 */
async function writeArchive(
  store: Pick<AuditStore, 'readEvents' | 'chainHeads'>,
  cuts: readonly ChainCut[],
  path: string,
): Promise<void> {
  const handle = await open(path, 'wx', 0o600);
  let done = false;
  try {
    // auditExportLines, written in chunks of 64 KiB straight to the handle, which stays open for
    // the fsync.
    let chunk = '';
    for await (const line of auditExportLines(store, { segment: cuts })) {
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
