import type { BatchRead, CheckpointBatch } from './types.js';

/** Where the events after a checkpoint's batch are: its batch's rest, or the next batch. */
export type BatchStart = Pick<BatchRead, 'after' | 'target' | 'from'>;

/**
 * Where the sealer goes on after the batch `sealed` (a checkpoint's; null: one of the old form):
 * the rest of that batch past its `through`, else the next batch, after its target, up to a
 * target not taken yet (null: the store's current snapshot). The sealer reads from here; verify
 * requires every checkpoint's batch to start here.
 */
export function nextBatch(sealed: CheckpointBatch | null): BatchStart {
  if (sealed === null) return { after: null, target: null, from: 0 };
  if (sealed.through !== null) return { after: sealed.after, target: sealed.target, from: sealed.through };
  return { after: sealed.target, target: null, from: 0 };
}
