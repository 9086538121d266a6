import {
  checkpointBody,
  type NoteSigner,
  type NoteVerifier,
  openNote,
  parseCheckpointBody,
  signNote,
} from './signed-note.js';

/*
 * The signed note of one checkpoint of the sealed log: a C2SP tlog-checkpoint body (origin, tree
 * size, root hash) with one extension line saying when it was sealed, signed with the audit key.
 * Any tool that reads C2SP checkpoints reads it; a witness keeps it as it is.
 */

/** The origin line of a store's checkpoints: the log's identity, so one store's is never taken for another's. */
export function checkpointOrigin(logId: string): string {
  return `effectgate/audit/${logId}`;
}

const SEALED = 'sealed ';

/** The checkpoint's note text signed by `signer`. */
export function checkpointNote(
  signer: NoteSigner,
  logId: string,
  size: number,
  rootHex: string,
  sealedAt: string,
): string {
  return signNote(checkpointBody(checkpointOrigin(logId), size, rootHex, [`${SEALED}${sealedAt}`]), [signer]);
}

/** A checkpoint note read back: `verified` when one of `verifiers` signed it. */
export interface CheckpointNote {
  readonly origin: string;
  readonly size: number;
  readonly rootHex: string;
  /** The `sealed` extension line's time; null when the note has none. */
  readonly sealedAt: string | null;
  readonly verified: boolean;
  /** The names of the keys that signed it (verified or not). */
  readonly signers: readonly string[];
}

/** Reads a checkpoint note; a malformed note or body is SignedNoteError. */
export function readCheckpointNote(note: string, verifiers: readonly NoteVerifier[]): CheckpointNote {
  const opened = openNote(note, verifiers);
  const body = parseCheckpointBody(opened.text);
  const sealed = body.extensions.find((line) => line.startsWith(SEALED));
  return Object.freeze({
    origin: body.origin,
    size: body.size,
    rootHex: body.rootHashHex,
    sealedAt: sealed === undefined ? null : sealed.slice(SEALED.length),
    verified: opened.verifiedBy.length > 0,
    signers: Object.freeze(opened.signatures.map((s) => s.name)),
  });
}

/**
 * A checkpoint's note held to its log and key, as every verifier holds it (the store's and an
 * export's): the note read, unless malformed, and what is wrong with it: not of `origin`, or (given
 * a verifier) not signed by it. Its size and root are the caller's to compare.
 */
export function checkNoteOf(
  text: string,
  origin: string,
  verifier: NoteVerifier | null,
): { readonly note: CheckpointNote | null; readonly problems: readonly string[] } {
  let note: CheckpointNote;
  try {
    note = readCheckpointNote(text, verifier === null ? [] : [verifier]);
  } catch (err) {
    return { note: null, problems: [`its signed note is malformed (${(err as Error).message})`] };
  }
  const problems: string[] = [];
  if (note.origin !== origin) problems.push(`its note is of another log (${note.origin})`);
  if (verifier !== null && !note.verified) {
    problems.push(
      `not signed by the audit key ${verifier.name} (signed by ${note.signers.join(', ') || 'nobody'})`,
    );
  }
  return { note, problems };
}
