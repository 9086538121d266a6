import { type CheckpointNote, checkpointOrigin, readCheckpointNote } from './checkpoint-note.js';
import type { NoteVerifier } from './signed-note.js';
import type { AuditStore } from './types.js';

/** What a witness's checkpoint says about the store. */
export interface WitnessCheck {
  readonly ok: boolean;
  readonly size: number | null;
  readonly reason: string | null;
}

/**
 * Checks a checkpoint a witness kept (`effectgate audit checkpoint`) against the store: the store
 * must hold a checkpoint of the same size with the same root. With a verifier, the witness's copy
 * must be signed by it.
 */
export async function checkWitnessed(
  store: Pick<AuditStore, 'auditLogId' | 'getCheckpoint' | 'latestCheckpoint'>,
  note: string,
  verifier: NoteVerifier | null,
): Promise<WitnessCheck> {
  let kept: CheckpointNote;
  try {
    kept = readCheckpointNote(note, verifier === null ? [] : [verifier]);
  } catch (err) {
    return { ok: false, size: null, reason: `not a checkpoint note: ${(err as Error).message}` };
  }
  const fail = (reason: string): WitnessCheck => ({ ok: false, size: kept.size, reason });
  if (verifier !== null && !kept.verified) return fail(`not signed by the audit key ${verifier.name}`);
  const origin = checkpointOrigin(await store.auditLogId());
  if (kept.origin !== origin)
    return fail(`a checkpoint of another log (${kept.origin}), not of this store (${origin})`);
  const held = await store.getCheckpoint(kept.size);
  if (held === null) {
    const latest = await store.latestCheckpoint();
    return fail(
      latest === null || latest.size < kept.size
        ? `the store's log ends before size ${kept.size} (latest ${latest?.size ?? 'none'}): truncated or rewritten`
        : `the store has no checkpoint of size ${kept.size}: checkpoints were rewritten`,
    );
  }
  if (held.root !== kept.rootHex)
    return fail(`the store's checkpoint of size ${kept.size} has another root: rewritten`);
  return { ok: true, size: kept.size, reason: null };
}
