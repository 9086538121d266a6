import { type CheckpointNote, checkpointOrigin, readCheckpointNote } from './checkpoint-note.js';
import type { NoteVerifier } from './signed-note.js';
import type { AuditStore } from './types.js';

/** What a witness's checkpoint says about the store. */
export interface WitnessCheck {
  readonly ok: boolean;
  readonly size: number | null;
  readonly reason: string | null;
}

/** A witness's note read, its signature checked against `verifier`; or why it is not one. */
export function readWitnessNote(note: string, verifier: NoteVerifier | null): CheckpointNote | WitnessCheck {
  try {
    return readCheckpointNote(note, verifier === null ? [] : [verifier]);
  } catch (err) {
    return { ok: false, size: null, reason: `not a checkpoint note: ${(err as Error).message}` };
  }
}

/** The log a witness's checkpoint is held to: a store, or an export file. */
export interface WitnessedLog {
  readonly holder: 'store' | 'file';
  readonly origin: string;
  /** The root of its checkpoint of the witness's size; null when it has none. */
  readonly rootAtSize: string | null;
  /** The size of its latest checkpoint (read when `rootAtSize` is null); null when it has none. */
  readonly latestSize: number | null;
}

/**
 * Whether `log` holds the witness's checkpoint: of its origin, of the same size with the same root,
 * and (with a verifier) the witness's copy signed by it. The one judgement of both verifiers.
 */
export function judgeWitness(
  kept: CheckpointNote,
  verifier: NoteVerifier | null,
  log: WitnessedLog,
): WitnessCheck {
  const fail = (reason: string): WitnessCheck => ({ ok: false, size: kept.size, reason });
  if (verifier !== null && !kept.verified) return fail(`not signed by the audit key ${verifier.name}`);
  if (kept.origin !== log.origin)
    return fail(`a checkpoint of another log (${kept.origin}), not of this ${log.holder} (${log.origin})`);
  if (log.rootAtSize === null) {
    return fail(
      log.latestSize === null || log.latestSize < kept.size
        ? `the ${log.holder}'s log ends before size ${kept.size} (latest ${log.latestSize ?? 'none'}): truncated or rewritten`
        : `the ${log.holder} holds no checkpoint of size ${kept.size}: checkpoints were rewritten`,
    );
  }
  if (log.rootAtSize !== kept.rootHex)
    return fail(`the ${log.holder}'s checkpoint of size ${kept.size} has another root: rewritten`);
  return { ok: true, size: kept.size, reason: null };
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
  const kept = readWitnessNote(note, verifier);
  if (!('rootHex' in kept)) return kept;
  const held = await store.getCheckpoint(kept.size);
  return judgeWitness(kept, verifier, {
    holder: 'store',
    origin: checkpointOrigin(await store.auditLogId()),
    rootAtSize: held?.root ?? null,
    latestSize: held === null ? ((await store.latestCheckpoint())?.size ?? null) : null,
  });
}
