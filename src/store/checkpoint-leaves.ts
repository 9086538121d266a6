import { type BatchStart, nextBatch } from './next-batch.js';
import type {
  AuditStore,
  CheckpointBatch,
  CheckpointRecord,
  EventRange,
  EventRecord,
  SealedHeads,
} from './types.js';

/*
 * The events a checkpoint added to the tree after the one before it, in the order it added them:
 * what `audit verify` rehashes and what `audit export` writes before the checkpoint's line.
 */

export type LeavesStore = Pick<AuditStore, 'readEventRanges' | 'readBatch'>;

/** The ranges a checkpoint added after `prev`, by chain, or a reason its heads cannot be. */
export function addedRanges(prev: SealedHeads, next: SealedHeads): EventRange[] | string {
  const ranges: EventRange[] = [];
  const chains = new Set([...Object.keys(prev), ...Object.keys(next)]);
  for (const chain of [...chains].sort((a, b) => Number(a) - Number(b))) {
    const from = prev[chain] ?? 0;
    const upTo = next[chain] ?? 0;
    if (upTo < from) return `chain ${chain} went back from ${from} to ${upTo}`;
    if (upTo > from) ranges.push({ chain: Number(chain), after: from, upTo });
  }
  return ranges;
}

/**
 * The leaves `cp` added after `prev`, in the order it sealed them: its batch's events in `pos`
 * order, or (old form) its chain ranges' in (chain, seq) order. `added` is how many it sealed (its
 * size less prev's). A reason when its batch cannot follow `prev`'s, or holds more events than it
 * sealed. Fewer events than `added` is for the caller to find (each range's seqs, or the root).
 */
export async function readLeaves(
  store: LeavesStore,
  prev: CheckpointRecord,
  cp: CheckpointRecord,
  ranges: readonly EventRange[],
  added: number,
): Promise<readonly EventRecord[] | string> {
  const b = cp.batch;
  if (b === null) {
    if (prev.batch !== null) return 'a checkpoint of the old form after one by snapshot: moved by hand';
    return store.readEventRanges(ranges);
  }
  const read = batchAfter(prev.batch, b);
  if (typeof read === 'string') return `its batch ${read}: moved by hand`;
  // One more than it sealed, to find one slipped in; bounded by where it ended, so reading an old
  // batch again costs that batch, not every event written since.
  const upTo = b.through ?? 'end';
  const got = await store.readBatch({ ...read, upTo, limit: added + 1, sealed: prev.heads });
  const through = b.through;
  const leaves = through === null ? got.events : got.events.filter((_, i) => got.positions[i]! <= through);
  if (leaves.length > added)
    return `its batch holds more events than the ${added} it sealed: an event was inserted`;
  return leaves;
}

/** Where a checkpoint's batch starts: where the previous one left off (nextBatch); a reason if not. */
function batchAfter(prev: CheckpointBatch | null, b: CheckpointBatch): BatchStart | string {
  const start = nextBatch(prev);
  if (b.after !== start.after) return 'does not start where the previous one ended';
  if (start.target === null) return { ...start, target: b.target };
  if (b.target !== start.target) return "is not the previous one's, which it left unfinished";
  if (b.through !== null && b.through <= start.from) return 'goes back';
  return start;
}
