import { checkNoteCharacters, decodeBase64, SignedNoteError } from './note-text.js';

/**
 * Checkpoint bodies of https://c2sp.org/tlog-checkpoint: the note text a transparency log signs
 * for its tree head (origin, size, root hash), in the form every tlog tool reads.
 */

/** A tlog-checkpoint body: `origin\nsize\nbase64(root)\n`, then one line per extension. */
export function checkpointBody(
  origin: string,
  size: number,
  rootHashHex: string,
  extensions: readonly string[] = [],
): string {
  if (origin === '' || origin.includes('\n')) {
    throw new SignedNoteError('A checkpoint origin is one non-empty line.');
  }
  if (!Number.isSafeInteger(size) || size < 0) {
    throw new SignedNoteError(`A checkpoint size is a non-negative integer, not ${size}.`);
  }
  if (!/^[0-9a-f]{64}$/.test(rootHashHex)) {
    throw new SignedNoteError('A checkpoint root hash is 64 lowercase hex digits (SHA-256).');
  }
  for (const line of extensions) {
    if (line === '' || line.includes('\n'))
      throw new SignedNoteError('A checkpoint extension is one non-empty line.');
  }
  const body = [origin, String(size), Buffer.from(rootHashHex, 'hex').toString('base64'), ...extensions]
    .map((line) => `${line}\n`)
    .join('');
  checkNoteCharacters(body, 'A checkpoint');
  return body;
}

/** The parts of a tlog-checkpoint body, read strictly (the text `openNote` returned). */
export function parseCheckpointBody(text: string): {
  readonly origin: string;
  readonly size: number;
  readonly rootHashHex: string;
  readonly extensions: readonly string[];
} {
  checkNoteCharacters(text, 'A checkpoint');
  if (!text.endsWith('\n')) throw new SignedNoteError('A checkpoint ends with a newline.');
  const lines = text.slice(0, -1).split('\n');
  const [origin, sizeLine, rootLine, ...extensions] = lines;
  if (origin === undefined || sizeLine === undefined || rootLine === undefined) {
    throw new SignedNoteError('A checkpoint has at least three lines: origin, size, root hash.');
  }
  if (lines.some((line) => line === '')) throw new SignedNoteError('A checkpoint has no empty line.');
  const size = Number(sizeLine);
  if (!/^(0|[1-9][0-9]*)$/.test(sizeLine) || !Number.isSafeInteger(size)) {
    throw new SignedNoteError(
      `A checkpoint's size line is a decimal without leading zeros, not ${JSON.stringify(sizeLine)}.`,
    );
  }
  const root = decodeBase64(rootLine);
  if (root === null || root.length !== 32) {
    throw new SignedNoteError("A checkpoint's root hash line is the base64 of 32 bytes.");
  }
  return Object.freeze({
    origin,
    size,
    rootHashHex: root.toString('hex'),
    extensions: Object.freeze(extensions),
  });
}
